// BullMQ on Debian's redis-server, started by the bench on a free 127.0.0.1 port, in two
// durabilities: in memory (no RDB, no AOF) and AOF with `appendfsync everysec`.
import { execFileSync } from 'node:child_process';
import { depRequire, depVersion, freePort, makeTmpDir, now, preloadInBatches, removeTmpDir, startProc, waitForPort, type Proc, type Sample } from '../lib';
import type { QueueClient, QueueTarget } from './types';

type Mode = 'memory' | 'aof-everysec';

/* eslint-disable @typescript-eslint/no-explicit-any */
interface BullMQ {
  Queue: new (name: string, opts: any) => any;
  Worker: new (name: string, processor: (job: any) => Promise<unknown>, opts: any) => any;
}

const JOB_OPTS = { removeOnComplete: true, removeOnFail: true };

export function redisServerVersion(): string | null {
  try {
    return /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? null;
  } catch {
    return null;
  }
}

export class BullMQTarget implements QueueTarget {
  readonly id: string;
  readonly label: string;
  readonly durability: string;
  readonly versions: Record<string, string>;
  readonly batch = true;
  readonly consumeNote = 'a Worker with concurrency 1 or 16; BullMQ fetches the next job as it completes one (no pull-10)';
  private redis: Proc | null = null;
  private dir: string | null = null;
  private port = 0;
  private bull!: BullMQ;
  private IORedis!: any;
  private conn: any = null;
  private queues = new Set<BullQueueClient>();

  constructor(readonly mode: Mode) {
    this.id = mode === 'memory' ? 'bullmq-mem' : 'bullmq-aof';
    this.label = mode === 'memory' ? 'BullMQ / Redis in memory' : 'BullMQ / Redis AOF everysec';
    this.durability = mode === 'memory' ? 'none: Redis with no RDB and no AOF (a restart loses everything)' : 'AOF, appendfsync everysec (a crash can lose about the last second)';
    this.versions = { bullmq: depVersion('bullmq') ?? '?', ioredis: depVersion('ioredis') ?? '?', 'redis-server': redisServerVersion() ?? '?' };
  }

  static available(): string | null {
    if (!depVersion('bullmq') || !depVersion('ioredis')) return 'bullmq/ioredis not installed in .bench-deps (run bench/setup.sh)';
    if (!redisServerVersion()) return 'redis-server not installed (run bench/setup.sh as root)';
    return null;
  }

  async start(): Promise<void> {
    this.bull = depRequire('bullmq') as BullMQ;
    const io = depRequire('ioredis');
    this.IORedis = io.default ?? io.Redis ?? io;
    this.port = await freePort();
    this.dir = makeTmpDir('redis');
    const persist =
      this.mode === 'memory'
        ? ['--save', '', '--appendonly', 'no']
        : ['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--appenddirname', 'aof'];
    this.redis = startProc('redis-server', [
      '--bind', '127.0.0.1', '--port', String(this.port), '--dir', this.dir, '--daemonize', 'no',
      '--protected-mode', 'yes', '--maxmemory-policy', 'noeviction', '--loglevel', 'warning', ...persist,
    ]);
    await waitForPort(this.port, 10_000, this.redis.child);
    this.conn = this.newConnection();
    await this.conn.ping();
  }

  newConnection(): any {
    // BullMQ wants maxRetriesPerRequest null on connections that block (workers).
    return new this.IORedis({ host: '127.0.0.1', port: this.port, maxRetriesPerRequest: null, enableOfflineQueue: true });
  }

  async queue(name: string, fresh = true): Promise<QueueClient> {
    const q = new BullQueueClient(this, this.bull, name);
    if (fresh) await q.q.obliterate({ force: true }).catch(() => {});
    this.queues.add(q);
    return q;
  }

  get connection(): any {
    return this.conn;
  }

  serverPid(): number | null {
    return this.redis?.pid ?? null;
  }

  async stop(): Promise<void> {
    for (const q of this.queues) await q.q.close().catch(() => {});
    this.queues.clear();
    if (this.conn) {
      this.conn.disconnect();
      this.conn = null;
    }
    await this.redis?.stop('SIGTERM', 10_000);
    this.redis = null;
    if (this.dir) removeTmpDir(this.dir);
    this.dir = null;
  }
}

class BullQueueClient implements QueueClient {
  readonly q: any;
  constructor(private readonly t: BullMQTarget, private readonly bull: BullMQ, readonly name: string) {
    this.q = new bull.Queue(name, { connection: t.connection });
  }

  async push(body: unknown): Promise<void> {
    await this.q.add('m', body, JOB_OPTS);
  }

  async pushBatch(bodies: unknown[]): Promise<void> {
    await this.q.addBulk(bodies.map((data) => ({ name: 'm', data, opts: JOB_OPTS })));
  }

  async preload(n: number, from = 0): Promise<void> {
    await preloadInBatches(n, from, (bodies) => this.pushBatch(bodies));
  }

  async consume(n: number, consumers: number): Promise<Sample> {
    const conn = this.t.newConnection();
    let done = 0;
    let t0 = 0;
    let resolveDone!: (s: number) => void;
    const finished = new Promise<number>((r) => (resolveDone = r));
    const worker = new this.bull.Worker(this.name, async () => undefined, {
      connection: conn,
      concurrency: consumers,
      autorun: false,
      removeOnComplete: { count: 0 },
      removeOnFail: { count: 0 },
      drainDelay: 1,
    });
    worker.on('completed', () => {
      if (++done === n) resolveDone(now());
    });
    worker.on('error', () => {});
    await worker.waitUntilReady();
    t0 = now();
    void worker.run();
    const t1 = await finished;
    await worker.close();
    conn.disconnect();
    const seconds = (t1 - t0) / 1000;
    return { rate: n / seconds, count: n, seconds };
  }

  async depth(): Promise<number> {
    const c = await this.q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(c as Record<string, number>).reduce((a, b) => a + b, 0);
  }

  async drop(): Promise<void> {
    await this.q.obliterate({ force: true }).catch(() => {});
  }
}
