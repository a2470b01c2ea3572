// pg-boss on Debian's PostgreSQL, started by the bench in a fresh cluster on a free 127.0.0.1 port
// with PostgreSQL's default durability (fsync on, synchronous_commit on: a job is answered after
// its commit reached the disk, as Quayside's are).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { consumeLoops, depRequire, depVersion, freePort, makeTmpDir, preloadInBatches, removeTmpDir, sleep, startProc, waitForPort, type Proc, type Sample } from '../lib';
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

async function waitUntil(timeoutMs: number, ok: () => boolean, output: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within ${timeoutMs} ms; output:\n${output().slice(-2000)}`);
    await sleep(50);
  }
}

export class PgBossTarget implements QueueTarget {
  readonly id = 'pgboss';
  readonly label = 'pg-boss / PostgreSQL';
  readonly durability = 'PostgreSQL defaults: fsync on, synchronous_commit on (answered after the commit is on disk)';
  readonly versions: Record<string, string> = { 'pg-boss': depVersion('pg-boss') ?? '?', pg: depVersion('pg') ?? '?', postgresql: postgresVersion() ?? '?' };
  readonly batch = true;
  readonly consumeNote = 'fetch(batchSize 10) then one complete() of the ids';
  private pg: Proc | null = null;
  private dir: string | null = null;
  private boss: any = null;

  static available(): string | null {
    if (!depVersion('pg-boss')) return 'pg-boss not installed in .bench-deps (run bench/setup.sh)';
    if (!pgBinDir()) return "Debian's postgresql not installed (run bench/setup.sh as root)";
    if (process.getuid?.() === 0 && !runAs()) return 'running as root and there is no postgres user to run PostgreSQL as';
    return null;
  }

  async start(): Promise<void> {
    const bin = pgBinDir()!;
    const user = runAs();
    this.dir = makeTmpDir('pgboss');
    if (user) fs.chownSync(this.dir, user.uid, user.gid);
    const data = path.join(this.dir, 'data');
    execFileSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-instructions'], {
      stdio: 'ignore',
      ...(user ?? {}),
    });
    const port = await freePort();
    // No TCP but 127.0.0.1; the unix socket in the bench's own temp dir, not /var/run.
    this.pg = startProc(path.join(bin, 'postgres'), ['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', this.dir, '-c', 'max_connections=64'], {
      cwd: this.dir,
      ...(user ?? {}),
    });
    await waitForPort(port, 30_000, this.pg.child);
    // Listening comes before accepting: wait until the server says it takes connections.
    await waitUntil(30_000, () => isReady(bin, port), () => this.pg?.output() ?? '');
    const mod = depRequire('pg-boss');
    const PgBoss = mod.default ?? mod.PgBoss ?? mod;
    // Pool of 20: the 16-in-flight and 16-consumer scenarios each keep 16 statements going.
    // No cron, no monitoring: the bench measures the queue, not pg-boss's housekeeping.
    this.boss = new PgBoss({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', max: 20, schedule: false, supervise: false });
    this.boss.on('error', () => {});
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
