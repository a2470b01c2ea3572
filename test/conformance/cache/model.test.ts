import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCache, type Cache, type CacheMessage, type CacheQueue } from '../../../emulator/clients/cache';
import type { Connection } from '../../../emulator/clients/connection';
import { admin, DAY, fresh, HOUR, assertReached, rng, SEED_BASE, startTestEmulator } from '../support';

// A seeded random walk over the cache dialect, checked step by step against a small reference
// model written from DESIGN.md's message model and seeds/000: the emulator's whole queue (every
// message in every state, read with `peek`) and every answer must match what the model says.
// The walk lands clock advances exactly on, and one millisecond either side of, the next lease
// end, delay end, dedupe window end and dead-letter retention end, where off-by-one slips hide.

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

const MAX_DELIVERIES = 5; // seeds/000: "After 5 deliveries …"
const DEFAULT_LEASE = 30_000;
const DEDUPE_WINDOW = HOUR;
const DEAD_RETENTION = 14 * DAY;
const SEEDS = 30;
const RESTART_SEEDS = 12;
const STEPS = 120;
const TOKEN = 'qs_rw_model-walk-token';

interface ModelMessage {
  id: string;
  body: unknown;
  enqueuedAt: number;
  dedupeKey: string | null;
  attempts: number;
  dead: boolean;
  /** When it is (or becomes) ready; meaningless while leased or dead. */
  visibleAt: number;
  /** Its place in the queue: a new one each time it waits again (back of the queue), and when it dies. */
  seq: number;
  receipt: string | null;
  leaseUntil: number | null;
  deadAt: number | null;
  deadReason: string | null;
}

/** The message model of DESIGN.md for one cache queue, with its defaults. */
class Model {
  readonly msgs = new Map<string, ModelMessage>();
  private readonly dedupe = new Map<string, { id: string; until: number }>();
  private seq = 0;
  /** What the walks went through, so that walks that never reach an edge fail instead of passing. */
  static readonly seen = { deadTimeout: 0, deadNack: 0, replayed: 0, replayedBehind: 0, purged: 0, retentionEnded: 0, deduped: 0, stale: 0 };

  constructor(public now: number) {}

  static num(id: string): number {
    return Number(id.slice(2));
  }

  state(m: ModelMessage): 'dead' | 'leased' | 'ready' | 'delayed' {
    if (m.dead) return 'dead';
    if (m.receipt !== null) return 'leased';
    return m.visibleAt <= this.now ? 'ready' : 'delayed';
  }

  /** The id a live dedupe key already owns, if any. */
  owner(key: string): string | null {
    const d = this.dedupe.get(key);
    const id = d && d.until > this.now ? d.id : null;
    if (id !== null) Model.seen.deduped++;
    return id;
  }

  push(id: string, body: unknown, delayMs: number, dedupeKey: string | null): void {
    this.msgs.set(id, {
      id, body, enqueuedAt: this.now, dedupeKey, attempts: 0, dead: false, visibleAt: this.now + delayMs,
      seq: ++this.seq, receipt: null, leaseUntil: null, deadAt: null, deadReason: null,
    });
    if (dedupeKey !== null) this.dedupe.set(dedupeKey, { id, until: this.now + DEDUPE_WINDOW });
  }

  /** What a pull of `max` must lease, in order. */
  nextReady(max: number): ModelMessage[] {
    return [...this.msgs.values()]
      .filter((m) => this.state(m) === 'ready')
      .sort((a, b) => a.visibleAt - b.visibleAt || a.seq - b.seq)
      .slice(0, max);
  }

  lease(m: ModelMessage, receipt: string, leaseMs: number): void {
    m.attempts += 1;
    m.receipt = receipt;
    m.leaseUntil = this.now + leaseMs;
  }

  /** The message a receipt settles: its own delivery, while the lease lasts. */
  private live(receipt: string): ModelMessage | undefined {
    for (const m of this.msgs.values()) if (m.receipt === receipt && m.leaseUntil! > this.now) return m;
    Model.seen.stale++;
    return undefined;
  }

  ack(receipt: string): boolean {
    const m = this.live(receipt);
    if (m) this.msgs.delete(m.id);
    return !!m;
  }

  nack(receipt: string): boolean {
    const m = this.live(receipt);
    if (m) this.release(m, this.now, 'nack');
    return !!m;
  }

  /** A delivery that ended without an ack: back of the queue, or dead once out of deliveries. */
  private release(m: ModelMessage, at: number, reason: 'nack' | 'timeout'): void {
    m.receipt = null;
    m.leaseUntil = null;
    if (m.attempts >= MAX_DELIVERIES) {
      m.dead = true;
      m.deadAt = at;
      m.deadReason = reason;
      m.seq = ++this.seq; // dead letters list in the order they died
      Model.seen[reason === 'nack' ? 'deadNack' : 'deadTimeout']++;
    } else {
      m.visibleAt = at;
      m.seq = ++this.seq;
    }
  }

  deadOldestFirst(): ModelMessage[] {
    return [...this.msgs.values()].filter((m) => m.dead).sort((a, b) => a.deadAt! - b.deadAt! || a.seq - b.seq);
  }

  replay(ids: string[] | null): number {
    const chosen = ids === null ? this.deadOldestFirst().slice(0, 100) : ids.map((id) => this.msgs.get(id)).filter((m): m is ModelMessage => !!m?.dead);
    if (chosen.length && this.nextReady(1).length) Model.seen.replayedBehind++;
    Model.seen.replayed += chosen.length;
    for (const m of chosen) {
      Object.assign(m, { dead: false, deadAt: null, deadReason: null, attempts: 0, visibleAt: this.now, seq: ++this.seq });
    }
    return chosen.length;
  }

  purgeDead(ids: string[] | null): number {
    const chosen = ids === null ? this.deadOldestFirst() : ids.map((id) => this.msgs.get(id)).filter((m): m is ModelMessage => !!m?.dead);
    for (const m of chosen) this.msgs.delete(m.id);
    Model.seen.purged += chosen.length;
    return chosen.length;
  }

  /** The instants at which something is due, after now (lease ends, delays, dedupe and retention ends). */
  dueTimes(): number[] {
    const out: number[] = [];
    for (const m of this.msgs.values()) {
      if (m.dead) out.push(m.deadAt! + DEAD_RETENTION);
      else if (m.receipt !== null) out.push(m.leaseUntil!);
      else if (m.visibleAt > this.now) out.push(m.visibleAt);
    }
    for (const d of this.dedupe.values()) out.push(d.until);
    return out.filter((t) => t > this.now);
  }

  /** Moves time on, applying each due lease end and retention end at its own instant, in order. */
  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      const leases = [...this.msgs.values()].filter((m) => m.receipt !== null && m.leaseUntil! <= end);
      const expired = [...this.msgs.values()].filter((m) => m.dead && m.deadAt! + DEAD_RETENTION <= end);
      const next = Math.min(...leases.map((m) => m.leaseUntil!), ...expired.map((m) => m.deadAt! + DEAD_RETENTION));
      if (!Number.isFinite(next)) break;
      this.now = next;
      // Leases that end at the same instant come back in queue order.
      for (const m of leases.filter((x) => x.leaseUntil === next).sort((a, b) => a.seq - b.seq)) this.release(m, next, 'timeout');
      for (const m of expired.filter((x) => x.deadAt! + DEAD_RETENTION === next)) {
        this.msgs.delete(m.id);
        Model.seen.retentionEnded++;
      }
    }
    this.now = end;
  }
}

describe('conformance: cache, a random walk against the message model', function () {
  this.timeout(240_000);
  let emu: Emu;
  let adm: Connection;
  /** Where the restarting walks keep their data (null: in memory, never restarted). */
  let dataDir: string | null = null;
  let cache: Cache;
  let restartsDone = 0;

  async function start(): Promise<void> {
    emu = await startTestEmulator(dataDir ? { memory: false, dataDir, token: TOKEN } : {});
    adm = admin(emu);
  }
  async function stop(): Promise<void> {
    await cache?.close();
    await adm.close();
    await emu.close();
  }
  /** A restart on the same data directory: the model does not change, so neither may the queue. */
  async function restart(ns: string): Promise<CacheQueue> {
    await stop();
    await start();
    restartsDone++;
    cache = createCache({ url: emu.url, token: emu.token, namespace: ns });
    return cache.queue('jobs');
  }

  afterEach(async () => {
    await stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    dataDir = null;
  });

  /** Every message of the queue, in every state, as the emulator holds it. */
  async function snapshot(ns: string, name: string) {
    const r = await adm.request('peek', { namespace: ns, queue: name, states: ['ready', 'delayed', 'leased', 'dead'], limit: 1000 });
    assert.equal(r.next, null, 'the walk keeps queues under one page');
    return r.messages;
  }

  async function compare(model: Model, ns: string, q: CacheQueue, where: string): Promise<void> {
    assert.equal(emu.clock.now(), model.now, `${where}: clock`);
    const got = await snapshot(ns, q.name).catch((e) => (e.code === 'not_found' ? [] : Promise.reject(e)));
    const want = [...model.msgs.values()].sort((a, b) => Model.num(a.id) - Model.num(b.id));
    assert.deepEqual(
      got.map((m) => ({ id: m.id, state: m.state, attempts: m.attempts, enqueuedAt: m.enqueuedAt, dedupeKey: m.dedupeKey, body: m.body,
        visibleAt: m.state === 'ready' || m.state === 'delayed' ? m.visibleAt : null, leaseUntil: m.state === 'leased' ? m.leaseUntil : null,
        deadAt: m.deadAt, deadReason: m.deadReason })),
      want.map((m) => ({ id: m.id, state: model.state(m), attempts: m.attempts, enqueuedAt: m.enqueuedAt, dedupeKey: m.dedupeKey, body: m.body,
        visibleAt: m.dead || m.receipt !== null ? null : m.visibleAt, leaseUntil: m.leaseUntil, deadAt: m.deadAt, deadReason: m.deadReason })),
      `${where}: the queue's messages`,
    );
    const stats = await q.stats();
    const live = want.filter((m) => !m.dead && m.receipt === null);
    const ready = live.filter((m) => m.visibleAt <= model.now);
    assert.deepEqual(
      { depth: stats.depth, ready: stats.ready, delayed: stats.delayed, inFlight: stats.inFlight, dead: stats.dead, oldestReadyAgeMs: stats.oldestReadyAgeMs },
      {
        depth: live.length, ready: ready.length, delayed: live.length - ready.length, inFlight: want.filter((m) => m.receipt !== null).length,
        dead: want.filter((m) => m.dead).length, oldestReadyAgeMs: ready.length ? model.now - Math.min(...ready.map((m) => m.visibleAt)) : 0,
      },
      `${where}: stats`,
    );
  }

  async function walk(seed: number, restarts: boolean): Promise<void> {
    const rand = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
    const ns = fresh('model');
    cache = createCache({ url: emu.url, token: emu.token, namespace: ns });
    let q = cache.queue('jobs');
    const model = new Model(emu.clock.now());
    const receipts: string[] = [];
    const keys = ['k1', 'k2', 'k3'];
    const trace: string[] = [];
    /** Mostly a receipt whose lease is live, else one of the last few given out (perhaps stale). */
    const someReceipt = (): string => {
      const live = [...model.msgs.values()].filter((m) => m.receipt !== null).map((m) => m.receipt!);
      return live.length && rand() < 0.7 ? pick(live) : pick(receipts.slice(-8));
    };

    for (let step = 0; step < STEPS; step++) {
      const at = `seed ${seed} step ${step}`;
      const r = rand();
      let op: string;
      if (restarts && rand() < 0.06) {
        op = 'restart';
        q = await restart(ns);
      } else if (r < 0.15) {
        const delaySeconds = pick([0, 0, 0, 1, 2, 30]);
        const dedupeKey = rand() < 0.3 ? pick(keys) : null;
        const body = { seed, step, n: Math.floor(rand() * 1000) };
        op = `push delay=${delaySeconds}s key=${dedupeKey}`;
        const owner = dedupeKey === null ? null : model.owner(dedupeKey);
        const res = await q.push(body, { ...(delaySeconds ? { delaySeconds } : {}), ...(dedupeKey ? { dedupeKey } : {}) });
        if (owner !== null) assert.deepEqual(res, { id: owner, deduped: true }, `${at}: ${op}`);
        else {
          assert.equal(res.deduped, false, `${at}: ${op}`);
          assert.ok(!model.msgs.has(res.id), `${at}: a new id`);
          model.push(res.id, body, delaySeconds * 1000, dedupeKey);
        }
      } else if (r < 0.4) {
        const max = pick([1, 1, 2, 3, 10]);
        const visibilitySeconds = pick([undefined, 1, 1, 2, 5]);
        op = `pull max=${max} vis=${visibilitySeconds}`;
        const want = model.nextReady(max);
        const got: CacheMessage[] = await q.pull({ max, ...(visibilitySeconds ? { visibilitySeconds } : {}) });
        assert.deepEqual(got.map((m) => m.id), want.map((m) => m.id), `${at}: ${op} leases the head of the queue`);
        const leaseMs = visibilitySeconds ? visibilitySeconds * 1000 : DEFAULT_LEASE;
        got.forEach((m, i) => {
          model.lease(want[i], m.receipt, leaseMs);
          assert.deepEqual(
            { attempts: m.attempts, leaseUntil: m.leaseUntil, visibleUntil: m.visibleUntil, enqueuedAt: m.enqueuedAt, body: m.body, dedupeKey: m.dedupeKey },
            { attempts: want[i].attempts, leaseUntil: model.now + leaseMs, visibleUntil: model.now + leaseMs, enqueuedAt: want[i].enqueuedAt, body: want[i].body, dedupeKey: want[i].dedupeKey },
            `${at}: ${op}, delivery of ${m.id}`,
          );
          assert.ok(!receipts.includes(m.receipt), `${at}: a fresh receipt per delivery`);
          receipts.push(m.receipt);
        });
      } else if (r < 0.47 && receipts.length) {
        const receipt = someReceipt();
        op = `ack ${receipt}`;
        assert.equal(await q.ack(receipt), model.ack(receipt), `${at}: ${op}`);
      } else if (r < 0.65 && receipts.length) {
        const receipt = someReceipt();
        op = `nack ${receipt}`;
        assert.equal(await q.nack(receipt), model.nack(receipt), `${at}: ${op}`);
      } else if (r < 0.85) {
        // Mostly land on (or next to) the next thing due, sometimes jump far.
        const due = model.dueTimes();
        let ms: number;
        if (due.length && rand() < 0.75) ms = Math.max(0, Math.min(...due) + pick([-1, 0, 0, 1]) - model.now);
        else ms = pick([0, 1, 999, 1000, 30_000, HOUR, DAY, 15 * DAY]);
        op = `advance ${ms}`;
        await emu.clock.advance(ms);
        model.advance(ms);
      } else if (r < 0.93) {
        const dead = model.deadOldestFirst();
        op = 'deadLetters';
        const page = await q.deadLetters({ limit: 1000 });
        assert.equal(page.total, dead.length, `${at}: dead total`);
        assert.deepEqual(
          page.messages.map((m) => ({ id: m.id, reason: m.reason, attempts: m.attempts, deadAt: m.deadAt, body: m.body, enqueuedAt: m.enqueuedAt })),
          dead.map((m) => ({ id: m.id, reason: m.deadReason, attempts: m.attempts, deadAt: m.deadAt, body: m.body, enqueuedAt: m.enqueuedAt })),
          `${at}: dead letters, oldest first`,
        );
        if (dead.length && rand() < 0.5) {
          // Some of the dead, plus an id that is live or gone: skipped, not an error.
          const ids = [...new Set([pick(dead).id, pick(dead).id, pick([...model.msgs.keys()]), 'm_999999'])];
          op = `replay ${ids.join(',')}`;
          const want = model.replay(ids);
          assert.deepEqual(await q.replay({ ids }), { replayed: want }, `${at}: ${op}`);
        }
      } else if (r < 0.97) {
        op = 'replay()';
        const want = model.replay(null);
        assert.deepEqual(await q.replay(), { replayed: want }, `${at}: ${op}`);
      } else {
        const dead = model.deadOldestFirst();
        const ids = dead.length && rand() < 0.6 ? [pick(dead).id] : null;
        op = `purgeDead ${ids ?? 'all'}`;
        const want = model.purgeDead(ids);
        assert.deepEqual(await q.purgeDead(ids ? { ids } : undefined), { purged: want }, `${at}: ${op}`);
      }
      trace.push(op);
      await compare(model, ns, q, `${at} after ${trace.slice(-4).join(' → ')}`);
    }
    await cache.close();
  }

  function reachedEveryEdge(): void {
    console.log(`      went through: ${JSON.stringify(Model.seen)}`);
    assertReached(Model.seen);
  }

  // Each test counts its own edges, even when the one before it failed part-way.
  beforeEach(() => {
    for (const k of Object.keys(Model.seen) as (keyof typeof Model.seen)[]) Model.seen[k] = 0;
  });

  it(`${SEEDS} seeded walks of ${STEPS} steps: every answer and the whole queue match the model after each step`, async () => {
    await start();
    for (let seed = 1; seed <= SEEDS; seed++) await walk(SEED_BASE + seed, false);
    reachedEveryEdge();
  });

  it(`${RESTART_SEEDS} walks on a data directory, restarting the emulator now and then: nothing answered changes across a restart`, async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-model-'));
    await start();
    for (let seed = 1001; seed < 1001 + RESTART_SEEDS; seed++) await walk(SEED_BASE + seed, true);
    reachedEveryEdge();
    assert.ok(restartsDone >= 20, `only ${restartsDone} restarts`);
  });
});
