import assert from 'node:assert/strict';
import type { DlqEntry, SyncMessage, SyncQueue } from '../../../emulator/clients/sync-face';
import { fresh, HOUR, MINUTE, rejects, assertReached, rng, SEED_BASE } from '../support';
import { variants, type Harness } from './harness';

// A seeded random walk over the sync dialect, checked step by step against a small reference model
// written from DESIGN.md's message model, seeds/002 and docs/dialects.md (sync): every answer, the
// queue's stats and its whole DLQ must match what the model says, in quayside/sync (the emulator)
// and quayside/sync/memory alike. Limits are small (2–3 deliveries, leases of tens of ms, ages of
// seconds, or hours in some walks) so that walks reach them, and the walk lands clock advances exactly on, and one
// millisecond either side of, the next lease end, delay end, age limit, DLQ retention end and
// idempotency window end, where off-by-one slips hide. Some advances hold a recv({ wait: true })
// over them, a few of those longer than the server's 20-minute hold.

const SEEDS = 80;
const STEPS = 150;
/** A held recv's wait also ends after timeoutMs of real time, so none is shorter than this. */
const MIN_WAIT = 500;
/** The server holds a pull at most this long (docs/dialects.md, "Long waits keep one deadline"). */
const HOLD = 20 * MINUTE;

interface Config {
  maxDeliveries: number;
  defaultLeaseMs: number;
  maxMessageAgeMs: number;
  dlqRetentionMs: number;
  idempotencyTtlMs: number;
  maxNackDelayMs: number;
}

interface ModelMessage {
  id: string;
  data: unknown;
  /** Send order: messages that reach their age limit in one millisecond were sent in one (see applyDue). */
  sent: number;
  enqueuedAt: number;
  attempts: number;
  state: 'queued' | 'leased' | 'dead';
  /** When it is (or becomes) ready; meaningless unless queued. */
  visibleAt: number;
  /** Its place in the queue: a new one each time it waits again (back of the queue), and when it dies. */
  seq: number;
  leaseUntil: number | null;
  movedAt: number | null;
  reason: string | null;
  lastError: string | null;
}

/** One delivery as the model hands it out; the message's `leaseUntil` must follow it. */
interface ModelDelivery {
  id: string;
  attempt: number;
  data: unknown;
  enqueuedAt: number;
  /** The lease it was received with: what touch() without leaseMs extends by. */
  leaseMs: number;
  leaseUntil: number;
}

const EDGES = [
  'deadMaxDeliveries', 'deadNackReason', 'deadNackDefault', 'expiredQueued', 'expiredNeverReceived', 'expiredLeased', 'expiredAtLastLeaseEnd',
  'sameMsDeaths', 'sameMsNotBySend', 'retentionEnded', 'deduped', 'keyReopened', 'justVisible',
  'staleAck', 'staleNack', 'staleTouch', 'staleRedelivered', 'touchedLeaseMs', 'touchedOwnLease', 'nackTooLong',
  'dlqRemoved', 'dlqRemoveMissed', 'heldAtOnce', 'heldWoken', 'heldWokenAfterOneHold', 'heldTimedOut',
] as const;
type Seen = Record<(typeof EDGES)[number], number>;

/** The message model of DESIGN.md for one sync queue, with the walk's settings. */
class Model {
  readonly msgs = new Map<string, ModelMessage>();
  private readonly keys = new Map<string, { id: string; until: number }>();
  private seq = 0;
  private sent = 0;

  /** `seen`: what the walks went through, so that walks that never reach an edge fail instead of passing. */
  constructor(readonly cfg: Config, public now: number, private readonly seen: Seen) {}

  /** The id a live idempotency key already owns, if any: the window runs from the first send, never extended. */
  owner(key: string): string | null {
    const k = this.keys.get(key);
    if (k && k.until > this.now) {
      this.seen.deduped++;
      return k.id;
    }
    if (k) this.seen.keyReopened++;
    return null;
  }

  send(id: string, data: unknown, delayMs: number, key: string | undefined, ttlMs: number | undefined): void {
    this.msgs.set(id, {
      id, data, sent: ++this.sent, enqueuedAt: this.now, attempts: 0, state: 'queued', visibleAt: this.now + delayMs,
      seq: ++this.seq, leaseUntil: null, movedAt: null, reason: null, lastError: null,
    });
    if (key !== undefined) this.keys.set(key, { id, until: this.now + (ttlMs ?? this.cfg.idempotencyTtlMs) });
  }

  /** The instant a message reaches its age limit. */
  ageEnd(m: ModelMessage): number {
    return m.enqueuedAt + this.cfg.maxMessageAgeMs;
  }

  /** What a recv may take, in FIFO order (visible_at, then place in the queue). */
  ready(): ModelMessage[] {
    return [...this.msgs.values()]
      .filter((m) => m.state === 'queued' && m.visibleAt <= this.now)
      .sort((a, b) => a.visibleAt - b.visibleAt || a.seq - b.seq);
  }

  recv(leaseMs: number | undefined): ModelDelivery | null {
    const [m] = this.ready();
    if (!m) return null;
    if (m.visibleAt === this.now) this.seen.justVisible++;
    const lease = leaseMs ?? this.cfg.defaultLeaseMs;
    m.attempts += 1;
    m.state = 'leased';
    m.leaseUntil = this.now + lease;
    return { id: m.id, attempt: m.attempts, data: m.data, enqueuedAt: m.enqueuedAt, leaseMs: lease, leaseUntil: m.leaseUntil };
  }

  /** The message a delivery settles: its own, while the lease lasts (receipts are strict). */
  private current(d: ModelDelivery, op: 'Ack' | 'Nack' | 'Touch'): ModelMessage | undefined {
    const m = this.msgs.get(d.id);
    if (m?.state === 'leased' && m.attempts === d.attempt && m.leaseUntil! > this.now) return m;
    this.seen[`stale${op}`]++;
    if (m?.state === 'leased') this.seen.staleRedelivered++;
    return undefined;
  }

  ack(d: ModelDelivery): boolean {
    const m = this.current(d, 'Ack');
    if (m) this.msgs.delete(m.id);
    return !!m;
  }

  nack(d: ModelDelivery, o: { delayMs?: number; reason?: string; error?: unknown }): boolean {
    const m = this.current(d, 'Nack');
    if (!m) return false;
    if (o.error !== undefined) m.lastError = o.error instanceof Error ? o.error.message : String(o.error);
    m.leaseUntil = null;
    if (m.attempts >= this.cfg.maxDeliveries) {
      this.seen[o.reason === undefined ? 'deadNackDefault' : 'deadNackReason']++;
      this.kill(m, o.reason ?? 'max_deliveries_exceeded', this.now);
    } else {
      m.state = 'queued';
      m.visibleAt = this.now + (o.delayMs ?? 0);
      m.seq = ++this.seq;
    }
    return true;
  }

  touch(d: ModelDelivery, leaseMs: number | undefined): boolean {
    const m = this.current(d, 'Touch');
    if (!m) return false;
    this.seen[leaseMs === undefined ? 'touchedOwnLease' : 'touchedLeaseMs']++;
    m.leaseUntil = d.leaseUntil = this.now + (leaseMs ?? d.leaseMs);
    return true;
  }

  /** Oldest first, and within one millisecond in the order they died. */
  dead(): ModelMessage[] {
    return [...this.msgs.values()].filter((m) => m.state === 'dead').sort((a, b) => a.movedAt! - b.movedAt! || a.seq - b.seq);
  }

  dlq(limit = 100): DlqEntry[] {
    return this.dead().slice(0, limit).map((m) => ({
      messageId: m.id, data: m.data, attempts: m.attempts, movedAt: m.movedAt!, reason: m.reason!,
      ...(m.lastError === null ? {} : { lastError: m.lastError }),
    }));
  }

  dlqRemove(id: string): boolean {
    const m = this.msgs.get(id);
    const dead = m?.state === 'dead';
    if (dead) this.msgs.delete(id);
    this.seen[dead ? 'dlqRemoved' : 'dlqRemoveMissed']++;
    return dead;
  }

  stats(): { ready: number; delayed: number; inFlight: number; dlq: number } {
    const all = [...this.msgs.values()];
    const queued = all.filter((m) => m.state === 'queued');
    const ready = queued.filter((m) => m.visibleAt <= this.now).length;
    return { ready, delayed: queued.length - ready, inFlight: all.filter((m) => m.state === 'leased').length, dlq: all.filter((m) => m.state === 'dead').length };
  }

  private kill(m: ModelMessage, reason: string, at: number): void {
    const sameMs = this.dead().filter((x) => x.movedAt === at);
    if (sameMs.length) this.seen.sameMsDeaths++;
    if (sameMs.some((x) => x.sent > m.sent)) this.seen.sameMsNotBySend++; // where listing by id would be wrong
    Object.assign(m, { state: 'dead', reason, movedAt: at, leaseUntil: null, seq: ++this.seq });
  }

  /** Everything due at `t`: age limits first, then lease ends, then DLQ retention (DESIGN.md, docs/dialects.md). */
  private applyDue(t: number): void {
    // Messages that reach the age limit together die in send order. The docs say only "in the order
    // they died", so this pins the order both variants use; a change to it should be a decision.
    const live = [...this.msgs.values()].filter((m) => m.state !== 'dead');
    for (const m of live.filter((x) => this.ageEnd(x) <= t).sort((a, b) => a.sent - b.sent)) {
      if (m.state === 'leased') {
        this.seen.expiredLeased++;
        // A last lease that ends in the very millisecond the age is reached dies expired.
        if (m.leaseUntil === t && m.attempts >= this.cfg.maxDeliveries) this.seen.expiredAtLastLeaseEnd++;
      } else this.seen[m.attempts ? 'expiredQueued' : 'expiredNeverReceived']++;
      this.kill(m, 'expired', t);
    }
    // Leases that end at the same instant come back (or die) in queue order.
    const ended = [...this.msgs.values()].filter((m) => m.state === 'leased' && m.leaseUntil! <= t);
    for (const m of ended.sort((a, b) => a.leaseUntil! - b.leaseUntil! || a.seq - b.seq)) {
      if (m.attempts >= this.cfg.maxDeliveries) {
        this.seen.deadMaxDeliveries++;
        this.kill(m, 'max_deliveries_exceeded', t);
      } else {
        Object.assign(m, { state: 'queued', visibleAt: t, leaseUntil: null, seq: ++this.seq });
      }
    }
    for (const m of this.dead().filter((x) => x.movedAt! + this.cfg.dlqRetentionMs <= t)) {
      this.msgs.delete(m.id);
      this.seen.retentionEnded++;
    }
  }

  /** The instants, after now, at which state changes (and, for a waiting recv, a delay ends). */
  private instants(withDelays: boolean): number[] {
    const out: number[] = [];
    for (const m of this.msgs.values()) {
      if (m.state === 'dead') out.push(m.movedAt! + this.cfg.dlqRetentionMs);
      else out.push(this.ageEnd(m));
      if (m.state === 'leased') out.push(m.leaseUntil!);
      if (withDelays && m.state === 'queued') out.push(m.visibleAt);
    }
    return out.filter((t) => t > this.now);
  }

  /** When something next becomes ready (a delay or a lease that ends with deliveries left), if nothing is now. */
  nextReadyAt(): number {
    if (this.ready().length) return this.now;
    const out: number[] = [];
    for (const m of this.msgs.values()) {
      if (m.state === 'queued' && m.visibleAt < this.ageEnd(m)) out.push(m.visibleAt);
      if (m.state === 'leased' && m.attempts < this.cfg.maxDeliveries && m.leaseUntil! < this.ageEnd(m)) out.push(m.leaseUntil!);
    }
    return Math.min(...out);
  }

  /** Every instant something is due after now, idempotency window ends included: where the walk lands advances. */
  dueTimes(): number[] {
    return [...this.instants(true), ...[...this.keys.values()].map((k) => k.until).filter((t) => t > this.now)];
  }

  /**
   * Moves time on, applying what is due at each instant in order. With `wait`, a recv({ wait: true })
   * is held over the advance: it takes what is ready at once, else the first message ready at an
   * instant up to its deadline, at that instant.
   */
  advance(ms: number, wait?: { timeoutMs: number; leaseMs?: number }): ModelDelivery | null {
    const start = this.now;
    const end = start + ms;
    const deadline = wait ? start + wait.timeoutMs : -1;
    let got: ModelDelivery | null = null;
    if (wait) {
      got = this.recv(wait.leaseMs);
      if (got) this.seen.heldAtOnce++;
    }
    for (;;) {
      const next = Math.min(...this.instants(!!wait && !got && this.now < deadline));
      if (!(next <= end)) break;
      this.now = next;
      this.applyDue(next);
      if (wait && !got && next <= deadline) {
        got = this.recv(wait.leaseMs);
        // Past the server's 20-minute hold: the wait is still one hold on the clock.
        if (got) this.seen[next - start > HOLD ? 'heldWokenAfterOneHold' : 'heldWoken']++;
      }
    }
    if (wait && !got) this.seen.heldTimedOut++;
    this.now = end;
    return got;
  }
}

/** A walk's settings: small, so that deliveries, ages and retention run out within a few steps. */
function config(rand: () => number): Config {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  return {
    maxDeliveries: pick([2, 3]),
    defaultLeaseMs: pick([50, 100, 250]),
    // Some walks keep messages for hours, so that one may come due past a long wait's first hold.
    maxMessageAgeMs: rand() < 0.3 ? 2 * HOUR : pick([400, 1000, 3000, 20_000]),
    dlqRetentionMs: pick([300, 1000, 5000]),
    idempotencyTtlMs: pick([200, 800]),
    maxNackDelayMs: 300,
  };
}

async function compare(h: Harness, q: SyncQueue, model: Model, where: string): Promise<void> {
  assert.equal(h.now(), model.now, `${where}: clock`);
  assert.deepEqual(await q.stats(), model.stats(), `${where}: stats`);
  assert.ok(model.stats().dlq < 100, 'the walk keeps the DLQ under one dlq() call');
  assert.deepEqual(await q.dlq(), model.dlq(), `${where}: the DLQ, oldest first`);
}

async function walk(h: Harness, seed: number, seen: Seen): Promise<void> {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  const cfg = config(rand);
  const { maxDeliveries, defaultLeaseMs, ...limits } = cfg;
  const q = h.queue({ id: fresh('model'), tenantId: fresh('tenant'), delivery: { maxDeliveries, defaultLeaseMs }, limits });
  await q.stats(); // set up (its settings written) before the model's clock starts
  const model = new Model(cfg, h.now(), seen);
  const deliveries: { md: ModelDelivery; msg: SyncMessage }[] = [];
  const receipts = new Set<string>();
  const sentIds: string[] = [];
  const trace: string[] = [];
  /** Mostly one of the last two deliveries (often still current), else any (most of them stale). */
  const someDelivery = () => deliveries[rand() < 0.6 ? deliveries.length - 1 - Math.floor(rand() * Math.min(2, deliveries.length)) : Math.floor(rand() * deliveries.length)];
  /** Sometimes a lease that ends exactly when its message reaches the age limit, the tie of docs/dialects.md. */
  const toAgeEnd = (id: string | undefined) => {
    const m = id === undefined ? undefined : model.msgs.get(id);
    const ms = m ? model.ageEnd(m) - model.now : 0;
    return ms >= 1 ? ms : undefined;
  };
  const checkDelivery = (msg: SyncMessage | null, md: ModelDelivery | null, where: string) => {
    assert.equal(msg === null, md === null, `${where}: ${md ? 'a delivery' : 'nothing'} expected`);
    if (!msg || !md) return;
    assert.deepEqual(
      { messageId: msg.messageId, attempt: msg.attempt, data: msg.data, leaseUntil: msg.leaseUntil, enqueuedAt: msg.enqueuedAt },
      { messageId: md.id, attempt: md.attempt, data: md.data, leaseUntil: md.leaseUntil, enqueuedAt: md.enqueuedAt },
      `${where}: the head of the queue`,
    );
    assert.ok(!receipts.has(msg.deliveryId), `${where}: a fresh delivery id`);
    receipts.add(msg.deliveryId);
    deliveries.push({ md, msg });
  };

  /**
   * A recv held over an advance of `ms`. A message ready exactly at the wait's deadline may or may
   * not be taken (the docs leave it open), so the deadline avoids every due instant.
   */
  const hold = async (where: string, ms: number, timeoutMs: number, due: number[]): Promise<string> => {
    const busy = new Set(due);
    while (busy.has(model.now + timeoutMs)) timeoutMs--;
    const leaseMs = rand() < 0.5 ? pick([1, 30, 100]) : undefined;
    if (timeoutMs < MIN_WAIT) {
      await h.advance(ms);
      model.advance(ms);
      return `advance ${ms}`;
    }
    const op = `advance ${ms} holding recv timeout=${timeoutMs} lease=${leaseMs}`;
    const p = q.recv({ wait: true, timeoutMs, ...(leaseMs !== undefined ? { leaseMs } : {}) });
    await h.advance(ms);
    checkDelivery(await p, model.advance(ms, { timeoutMs, leaseMs }), `${where}: ${op}`);
    return op;
  };

  for (let step = 0; step < STEPS; step++) {
    const at = `seed ${seed} step ${step}`;
    const r = rand();
    const comeBack = model.nextReadyAt() - model.now;
    const longHold = Number.isFinite(comeBack) && comeBack > HOLD && rand() < 0.6;
    let op: string;
    if (longHold) {
      // Nothing comes back within one server hold: wait over the instant something does.
      const ms = comeBack + pick([0, 1, MINUTE]);
      op = await hold(at, ms, ms, model.dueTimes());
    } else if (r < 0.18) {
      const data = { seed, step, n: Math.floor(rand() * 1000) };
      const delayMs = rand() < 0.3 ? pick([0, 1, 50, 100, 300, 1000, 25 * MINUTE]) : undefined;
      const key = rand() < 0.35 ? pick(['k0', 'k1', 'k2']) : undefined;
      const ttl = key !== undefined && rand() < 0.3 ? pick([1, 100, 500]) : undefined;
      op = `send delay=${delayMs} key=${key} ttl=${ttl}`;
      const owner = key === undefined ? null : model.owner(key);
      const res = await q.send({ data, ...(delayMs !== undefined ? { delayMs } : {}), ...(key ? { idempotencyKey: key } : {}), ...(ttl ? { idempotencyTtlMs: ttl } : {}) });
      if (owner !== null) assert.deepEqual(res, { messageId: owner }, `${at}: ${op} answers the first send's id`);
      else {
        assert.ok(!sentIds.includes(res.messageId), `${at}: ${op} makes a new id`);
        model.send(res.messageId, data, delayMs ?? 0, key, ttl);
        sentIds.push(res.messageId);
      }
    } else if (r < 0.4) {
      const y = rand();
      const leaseMs = y < 0.1 ? toAgeEnd(model.ready()[0]?.id) : y < 0.55 ? pick([1, 30, 100, 300, 25 * MINUTE]) : undefined;
      op = `recv lease=${leaseMs}`;
      const md = model.recv(leaseMs);
      checkDelivery(await q.recv({ wait: false, ...(leaseMs !== undefined ? { leaseMs } : {}) }), md, `${at}: ${op}`);
    } else if (r < 0.47 && deliveries.length) {
      const d = someDelivery();
      op = `ack ${d.md.id}#${d.md.attempt}`;
      assert.equal(await d.msg.ack(), model.ack(d.md), `${at}: ${op}`);
    } else if (r < 0.57 && deliveries.length) {
      const d = someDelivery();
      const delayMs = rand() < 0.6 ? pick([0, 10, 100, 300, 301]) : undefined;
      const reason = rand() < 0.4 ? pick(['handler_error', 'bad']) : undefined;
      const error = rand() < 0.4 ? pick<unknown>(['boom', new Error('x')]) : undefined;
      const o = { ...(delayMs !== undefined ? { delayMs } : {}), ...(reason ? { reason } : {}), ...(error !== undefined ? { error } : {}) };
      op = `nack ${d.md.id}#${d.md.attempt} delay=${delayMs} reason=${reason} error=${error !== undefined}`;
      if (delayMs !== undefined && delayMs > cfg.maxNackDelayMs) {
        // Over maxNackDelayMs it throws and settles nothing, current delivery or not.
        assert.equal((await rejects(d.msg.nack(o))).code, 'invalid_argument', `${at}: ${op}`);
        seen.nackTooLong++;
      } else assert.equal(await d.msg.nack(Object.keys(o).length ? o : undefined), model.nack(d.md, o), `${at}: ${op}`);
    } else if (r < 0.65 && deliveries.length) {
      const d = someDelivery();
      const y = rand();
      const leaseMs = y < 0.15 ? toAgeEnd(d.md.id) : y < 0.55 ? pick([1, 50, 200, 25 * MINUTE]) : undefined;
      op = `touch ${d.md.id}#${d.md.attempt} lease=${leaseMs}`;
      const want = model.touch(d.md, leaseMs);
      assert.equal(await d.msg.touch(leaseMs !== undefined ? { leaseMs } : undefined), want, `${at}: ${op}`);
      assert.equal(d.msg.leaseUntil, d.md.leaseUntil, `${at}: ${op} moves msg.leaseUntil only when it extends`);
    } else if (r < 0.88) {
      // Mostly land on (or next to) the next thing due, sometimes a short or a long step.
      const due = model.dueTimes();
      const y = rand();
      let ms: number;
      if (due.length && y < 0.55) ms = Math.max(0, Math.min(...due) + pick([0, 0, 0, -1, 1]) - model.now);
      else if (y < 0.65) ms = pick([0, 1]);
      else if (y < 0.9) ms = 1 + Math.floor(rand() * 300);
      else ms = pick([1000, 3000]);
      if (rand() < 0.3) {
        let timeoutMs: number;
        if (rand() < 0.1) {
          ms = pick([21, 30, 60]) * MINUTE;
          timeoutMs = Math.min(ms, pick([ms, HOLD + 1, 30 * MINUTE]));
        } else {
          ms = Math.max(ms, MIN_WAIT);
          timeoutMs = Math.max(MIN_WAIT, Math.min(ms, pick([MIN_WAIT, ms, ms - 1, Math.floor((MIN_WAIT + ms) / 2)])));
        }
        op = await hold(at, ms, timeoutMs, due);
      } else {
        op = `advance ${ms}`;
        await h.advance(ms);
        model.advance(ms);
      }
    } else if (r < 0.94) {
      const limit = pick([undefined, 1, 2, 100]);
      op = `dlq limit=${limit}`;
      assert.deepEqual(await q.dlq(limit !== undefined ? { limit } : undefined), model.dlq(limit), `${at}: ${op}`);
    } else {
      // Mostly a dead message, else any id sent (live or gone), else one that names nothing.
      const dead = model.dead();
      const y = rand();
      const id = dead.length && y < 0.5 ? pick(dead).id : sentIds.length && y < 0.9 ? pick(sentIds) : 'm_99999999';
      op = `dlqRemove ${id}`;
      assert.equal(await q.dlqRemove({ messageId: id }), model.dlqRemove(id), `${at}: ${op}`);
    }
    trace.push(op);
    await compare(h, q, model, `${at} after ${trace.slice(-4).join(' → ')}`);
  }
  await q.close();
}

for (const variant of variants) {
  describe(`conformance: sync, a random walk against the message model — ${variant.name}`, function () {
    this.timeout(240_000);
    let h: Harness;
    before(async () => {
      h = await variant.make();
    });
    after(() => h.close());

    it(`${SEEDS} seeded walks of ${STEPS} steps: every answer, the stats and the DLQ match the model after each step`, async () => {
      const seen = Object.fromEntries(EDGES.map((e) => [e, 0])) as Seen;
      for (let seed = 1; seed <= SEEDS; seed++) await walk(h, SEED_BASE + seed, seen);
      console.log(`      went through: ${JSON.stringify(seen)}`);
      assertReached(seen);
    });
  });
}
