// pg-boss on Debian's PostgreSQL, started by the bench in a fresh cluster on a free 127.0.0.1 port,
// in two durabilities: PostgreSQL's defaults (every commit fsynced: survives power loss, as
// Quayside's `--durability full` does), and fsync off (a commit reaches the OS before it is
// answered but is never fsynced: it survives a kill of the server, not of the machine, which is
// what Quayside's default, WAL with synchronous=NORMAL, promises).
// Lives in the bench's own temp dir; under /tmp when root, which the postgres user can reach.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { consumeLoops, depRequire, depVersion, freePort, log, makeTmpDir, preloadInBatches, removeTmpDir, sleep, startProc, type Proc, type Sample } from '../lib';
import type { QueueClient, QueueTarget } from './types';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** The newest Debian PostgreSQL's bin directory, or null. */
function pgBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  try {
    const versions = fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres')));
    versions.sort((a, b) => Number(b) - Number(a));
    return versions.length ? path.join(root, versions[0], 'bin') : null;
  } catch {
    return null;
  }
}

/** PostgreSQL refuses to run as root: as root, the cluster runs as Debian's `postgres` user. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : null;
  } catch {
    return null;
  }
}

function postgresVersion(): string | null {
  const bin = pgBinDir();
  if (!bin) return null;
  try {
    return /(\d+(\.\d+)*)/.exec(execFileSync(path.join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }))?.[1] ?? null;
  } catch {
    return null;
  }
}

function isReady(bin: string, port: number): boolean {
  try {
    execFileSync(path.join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function waitUntilReady(bin: string, port: number, pg: Proc, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!isReady(bin, port)) {
    if (pg.child.exitCode !== null) throw new Error(`PostgreSQL exited (${pg.child.exitCode}) before accepting connections; output:\n${pg.output().slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within ${timeoutMs} ms; output:\n${pg.output().slice(-2000)}`);
    await sleep(50);
  }
}

/** initdb, with what it said in the error when it fails (a locale, a directory it cannot reach). */
function initdb(bin: string, data: string, user: { uid: number; gid: number } | null): void {
  try {
    // --no-locale: the cluster does not depend on the machine's LANG (a locale not generated
    // there fails initdb), and runs the same everywhere.
    execFileSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-instructions'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
      ...(user ?? {}),
    });
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    throw new Error(`initdb failed: ${err.stderr?.toString().trim() || err.message}`);
  }
}

type Mode = 'fsync' | 'no-fsync';

export class PgBossTarget implements QueueTarget {
  readonly id: string;
  readonly label: string;
  readonly durability: string;
  readonly processTree = true;
  readonly versions: Record<string, string> = { 'pg-boss': depVersion('pg-boss') ?? '?', pg: depVersion('pg') ?? '?', postgresql: postgresVersion() ?? '?' };
  readonly batch = true;
  readonly consumeNote = 'fetch(batchSize 10) then one complete() of the ids';
  private pg: Proc | null = null;
  private dir: string | null = null;
  private boss: any = null;

  constructor(readonly mode: Mode) {
    this.id = mode === 'fsync' ? 'pgboss' : 'pgboss-nofsync';
    this.label = mode === 'fsync' ? 'pg-boss / PostgreSQL' : 'pg-boss / PostgreSQL fsync off';
    this.durability =
      mode === 'fsync'
        ? "PostgreSQL's defaults: every commit fsynced before the answer (survives power loss, like Quayside's --durability full)"
        : 'fsync off: a commit reaches the OS before the answer, never fsynced (survives a kill of the server, not of the machine: the promise of Quayside as shipped)';
  }

  static available(): string | null {
    if (!depVersion('pg-boss')) return 'pg-boss not installed in .bench-deps (run bench/setup.sh)';
    if (!pgBinDir()) return "Debian's postgresql not installed (run bench/setup.sh as root)";
    if (process.getuid?.() === 0 && !runAs()) return 'running as root and there is no postgres user to run PostgreSQL as';
    return null;
  }

  async start(): Promise<void> {
    const bin = pgBinDir()!;
    const user = runAs();
    // As root the cluster runs as postgres, who must reach its directory: /tmp, not a TMPDIR that
    // may sit under root's own home.
    this.dir = makeTmpDir(this.id, user ? '/tmp' : undefined);
    if (user) fs.chownSync(this.dir, user.uid, user.gid);
    const data = path.join(this.dir, 'data');
    initdb(bin, data, user);
    const port = await freePort();
    // No TCP but 127.0.0.1; the unix socket in the bench's own temp dir, not /var/run.
    const args = ['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', this.dir, '-c', 'max_connections=64'];
    if (this.mode === 'no-fsync') args.push('-c', 'fsync=off');
    this.pg = startProc(path.join(bin, 'postgres'), args, { cwd: this.dir, ...(user ?? {}) });
    // pg_isready, not a port probe: PostgreSQL listens before it accepts connections.
    await waitUntilReady(bin, port, this.pg, 30_000);
    const mod = depRequire('pg-boss');
    const PgBoss = mod.default ?? mod.PgBoss ?? mod;
    // Pool of 20: the 16-in-flight and 16-consumer scenarios each keep 16 statements going.
    // No cron, no monitoring: the bench measures the queue, not pg-boss's housekeeping.
    this.boss = new PgBoss({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', max: 20, schedule: false, supervise: false });
    this.boss.on('error', (e: Error) => log(`  ${this.id}: pg-boss error: ${e.message}`));
    await this.boss.start();
  }

  async queue(name: string, fresh = true): Promise<QueueClient> {
    if (fresh) await this.boss.deleteQueue(name).catch(() => {});
    if (!(await this.boss.getQueue(name))) await this.boss.createQueue(name);
    return new PgBossQueue(this.boss, name);
  }

  serverPid(): number | null {
    return this.pg?.pid ?? null;
  }

  async stop(): Promise<void> {
    // Its pool's idle connections report the server's shutdown as errors: expected from here on.
    this.boss?.removeAllListeners('error').on('error', () => {});
    await this.boss?.stop({ graceful: false, wait: true }).catch(() => {});
    this.boss = null;
    // SIGINT is PostgreSQL's fast shutdown (SIGTERM waits for every client to leave).
    await this.pg?.stop('SIGINT', 15_000);
    this.pg = null;
    if (this.dir) removeTmpDir(this.dir);
    this.dir = null;
  }
}

class PgBossQueue implements QueueClient {
  constructor(private readonly boss: any, private readonly name: string) {}

  async push(body: unknown): Promise<void> {
    await this.boss.send(this.name, body);
  }

  async pushBatch(bodies: unknown[]): Promise<void> {
    await this.boss.insert(bodies.map((data) => ({ name: this.name, data })));
  }

  async preload(n: number, from = 0): Promise<void> {
    await preloadInBatches(n, from, (bodies) => this.pushBatch(bodies));
  }

  async consume(n: number, consumers: number): Promise<Sample> {
    return consumeLoops(
      'pg-boss',
      n,
      consumers,
      (max) => this.boss.fetch(this.name, { batchSize: max }) as Promise<{ id: string }[]>,
      (jobs) => this.boss.complete(this.name, jobs.map((j) => j.id)),
    );
  }

  async depth(): Promise<number> {
    return Number(await this.boss.getQueueSize(this.name));
  }

  async drop(): Promise<void> {
    await this.boss.deleteQueue(this.name).catch(() => {});
  }
}
