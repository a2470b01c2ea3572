// Quayside as it ships: the `quayside start` CLI (compiled from this working tree into
// bench/.build) in its own process, on a data directory, durability `normal` (the default:
// WAL + synchronous=NORMAL, group commit; an acknowledged write survives kill -9).
// The bench talks to it over the raw protocol connection from emulator/clients/connection.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BUILD, ROOT, consumeLoops, log, makeTmpDir, now, preloadInBatches, removeTmpDir, startProc, type Proc, type Sample } from '../lib';
import type { QueueClient, QueueTarget } from './types';

type ConnectionMod = typeof import('../../emulator/clients/connection');
type Connection = InstanceType<ConnectionMod['Connection']>;

export const NS = 'bench';

export function cliPath(): string {
  return path.join(BUILD, 'emulator', 'cli.js');
}

/** Compiles the emulator from this working tree into bench/.build (tsc, about 3 s). */
export function buildQuayside(): void {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  fs.rmSync(path.join(BUILD, 'emulator'), { recursive: true, force: true });
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', BUILD, '--sourceMap', 'false', '--declaration', 'false'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    // Type errors still emit JS; only a missing CLI is fatal.
    const out = String((e as { stdout?: Buffer }).stdout ?? '') + String((e as { stderr?: Buffer }).stderr ?? '');
    log(`tsc reported problems (emitted anyway):\n${out.split('\n').slice(0, 10).join('\n')}`);
  }
  if (!fs.existsSync(cliPath())) throw new Error(`building the emulator did not produce ${cliPath()}`);
}

export function loadBuilt<T>(rel: string): T {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(path.join(BUILD, rel)) as T;
}

export interface StartedCli {
  proc: Proc;
  url: string;
  token: string;
  /** ms from spawn to the `listening` line. */
  startMs: number;
}

/**
 * Runs `quayside start` and waits for its JSON `listening` event. Node runs with the flags the
 * emulator ships with (`npm start` and the extension pass the same), then
 * `nodeArgs` (a profiler's, say).
 */
export async function startCli(opts: { dataDir?: string; memory?: boolean; extraArgs?: string[]; nodeArgs?: string[] }): Promise<StartedCli> {
  const shipped = loadBuilt<typeof import('../../emulator/node-flags')>('emulator/node-flags.js').EMULATOR_NODE_FLAGS;
  const args = [...shipped, ...(opts.nodeArgs ?? []), cliPath(), 'start', '--port', '0', '--json', ...(opts.memory ? ['--memory'] : ['--data', opts.dataDir!]), ...(opts.extraArgs ?? [])];
  const t0 = now();
  const proc = startProc(process.execPath, args, { cwd: opts.dataDir ?? ROOT });
  const line = await proc.waitForLine(/"event":"(listening|error)"/, 120_000);
  const startMs = now() - t0;
  const ev = JSON.parse(line) as { event: string; url: string; token: string; message?: string };
  if (ev.event !== 'listening') throw new Error(`quayside start failed: ${ev.message}`);
  return { proc, url: ev.url, token: ev.token, startMs };
}

export class QuaysideTarget implements QueueTarget {
  readonly id = 'quayside';
  readonly label = 'Quayside';
  readonly durability = 'as shipped: data directory, durability normal (WAL, synchronous=NORMAL, group commit; survives kill -9)';
  readonly versions: Record<string, string>;
  readonly batch = true;
  readonly consumeNote = 'pull max 10 (lease 30 s), then one ack.batch of the receipts';
  private srv: StartedCli | null = null;
  private dir: string | null = null;
  conn: Connection | null = null;
  /** Keep the data directory at stop (for the start-time probe); the caller removes it. */
  keepData = false;

  constructor(private readonly opts: { dataDir?: string; nodeArgs?: string[] } = {}) {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    this.versions = { quayside: `${pkg.version} (working tree)` };
  }

  get dataDir(): string | null {
    return this.dir;
  }

  get url(): string {
    return this.srv!.url;
  }

  get token(): string {
    return this.srv!.token;
  }

  async start(): Promise<void> {
    this.dir = this.opts.dataDir ?? makeTmpDir('quayside');
    this.srv = await startCli({ dataDir: this.dir, nodeArgs: this.opts.nodeArgs });
    this.conn = await this.connect();
  }

  async connect(): Promise<Connection> {
    const { Connection } = loadBuilt<ConnectionMod>('emulator/clients/connection.js');
    const c = new Connection({ url: this.srv!.url, token: this.srv!.token, client: 'quayside-bench' });
    await c.open();
    return c;
  }

  async queue(name: string, fresh = true): Promise<QueueClient> {
    if (fresh) await this.conn!.request('queue.delete', { namespace: NS, queue: name }).catch(() => {});
    await this.conn!.request('queue.create', { namespace: NS, queue: name, dialect: 'cache', ifNotExists: true });
    return new QuaysideQueue(this.conn!, name);
  }

  serverPid(): number | null {
    return this.srv?.proc.pid ?? null;
  }

  async stop(): Promise<void> {
    await this.conn?.close().catch(() => {});
    this.conn = null;
    // SIGTERM: the CLI closes the engine and the database cleanly.
    await this.srv?.proc.stop('SIGTERM', 15_000);
    this.srv = null;
    if (this.dir && !this.keepData && !this.opts.dataDir) removeTmpDir(this.dir);
    if (!this.keepData) this.dir = null;
  }
}

export class QuaysideQueue implements QueueClient {
  constructor(private readonly c: Connection, readonly name: string) {}

  async push(body: unknown): Promise<void> {
    await this.c.request('push', { namespace: NS, queue: this.name, body, create: 'cache' });
  }

  async pushBatch(bodies: unknown[]): Promise<void> {
    await this.c.request('push.batch', { namespace: NS, queue: this.name, messages: bodies.map((body) => ({ body })), create: 'cache' });
  }

  async preload(n: number, from = 0): Promise<void> {
    await preloadInBatches(n, from, (bodies) => this.pushBatch(bodies));
  }

  async consume(n: number, consumers: number): Promise<Sample> {
    return consumeLoops(
      'quayside',
      n,
      consumers,
      async (max) => (await this.c.request('pull', { namespace: NS, queue: this.name, max, leaseMs: 30_000 })).messages,
      (messages) => this.c.request('ack.batch', { receipts: messages.map((m) => m.receipt) }),
    );
  }

  async depth(): Promise<number> {
    const q = await this.c.request('queue.get', { namespace: NS, queue: this.name });
    return q.counts.depth + q.counts.leased;
  }

  async drop(): Promise<void> {
    await this.c.request('queue.delete', { namespace: NS, queue: this.name }).catch(() => {});
  }
}
