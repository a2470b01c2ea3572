import assert from 'node:assert/strict';
import { createEnv, type Env } from '../../../emulator/clients/env';
import { QuaysideError } from '../../../emulator/errors';
import { DAY, fresh, HOUR, httpCall, assertReached, rng, SEED_BASE, startTestEmulator } from '../support';

// A seeded random walk over the env dialect (the HTTP data API and env.queue), checked step by
// step against a small reference model written from DESIGN.md's message model, seeds/001 and
// docs/dialects.md: every answer, both peeks (the live messages and the failed area) and the
// queue's counts must match what the model says. Each walk makes its own queue with settings of
// its own (retries, capacity, retention, lease), and lands clock advances exactly on, and one
// millisecond either side of, the next lease end, delay end, dedup window end and retention end.
// Leases are sometimes asked for so that they end in the very millisecond the retention does, or
// another lease does. The push consumer (runConsumer) is not walked here: its handlers settle over
// real I/O and, at maxConcurrency > 1, race each other, so it stays with env.test.ts.

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

const DEFAULT_RETRIES = 3; // DESIGN: maxRetries 3 → 4 deliveries
const DEFAULT_VISIBILITY = 30_000;
const DEFAULT_RETENTION = 14 * DAY;
const DEDUP_WINDOW = HOUR;
const MAX_LEASE = 12 * HOUR; // the most a receive or extend takes
const SEEDS = 36;
const STEPS = 150;

interface Settings {
  slug: string;
  maxRetries: number;
  maxDepth: number | null;
  maxBytes: number | null;
  retentionMs: number;
  visibilityMs: number;
}

interface SendItem {
  body: unknown;
  delaySeconds?: number;
  dedupId?: string;
}

interface ModelMessage {
  id: string;
  body: unknown;
  bytes: number;
  /** When it was sent; retry-failed keeps it. */
  timestamp: number;
  attempts: number;
  /** When it is (or became) ready; kept while it is leased, as the peek shows it. */
  visibleAt: number;
  /** Its place: a new one each time it waits again (back of the queue), and when it fails. */
  seq: number;
  leaseId: string | null;
  leaseUntil: number | null;
  failed: boolean;
  failedAt: number | null;
  reason: 'timeout' | 'retry' | null;
  /** Its retention end: counted from when it was sent (or retried from the failed area) while live, from when it failed once failed. */
  expiresAt: number;
}

/** What a send must do: refused for capacity, or each item's answer (a live dedupId's owner, or the n-th new message). */
type SendPlan = { full: true } | { full: false; slots: ({ owner: string } | { fresh: number })[]; fresh: SendItem[] };

/** The message model of DESIGN.md for one env queue, with its settings. */
class Model {
  readonly msgs = new Map<string, ModelMessage>();
  readonly dedup = new Map<string, { id: string; until: number }>();
  private seq = 0;
  /** What the walks went through, so that walks that never reach an edge fail instead of passing. */
  static readonly seen = {
    queueFull: 0, deduped: 0, dedupedInBatch: 0, dedupWindowEnded: 0, acked: 0, retried: 0, stale: 0, extended: 0, extendStale: 0,
    failedTimeout: 0, failedRetry: 0, failedSameMsOutOfIdOrderTimeout: 0, failedSameMsOutOfIdOrderRetry: 0, retriedFailed: 0, retriedFailedSome: 0,
    purgedLive: 0, purgedFailed: 0, purgeRefused: 0, droppedLive: 0, droppedFailed: 0, droppedAtLastLeaseEnd: 0,
  };

  constructor(public now: number, readonly q: Settings) {}

  static num(id: string): number {
    return Number(id.slice(2));
  }

  static size(body: unknown): number {
    return Buffer.byteLength(JSON.stringify(body), 'utf8');
  }

  get maxDeliveries(): number {
    return this.q.maxRetries + 1;
  }

  state(m: ModelMessage): 'failed' | 'leased' | 'ready' | 'delayed' {
    if (m.failed) return 'failed';
    if (m.leaseId !== null) return 'leased';
    return m.visibleAt <= this.now ? 'ready' : 'delayed';
  }

  live(): ModelMessage[] {
    return [...this.msgs.values()].filter((m) => !m.failed);
  }

  /** The failed area in the order messages failed, oldest first (also within one millisecond). */
  failedOldestFirst(): ModelMessage[] {
    return [...this.msgs.values()].filter((m) => m.failed).sort((a, b) => a.failedAt! - b.failedAt! || a.seq - b.seq);
  }

  plan(items: SendItem[]): SendPlan {
    const slots: ({ owner: string } | { fresh: number })[] = [];
    const freshItems: SendItem[] = [];
    const inBatch = new Map<string, number>();
    for (const it of items) {
      if (it.dedupId !== undefined) {
        const d = this.dedup.get(it.dedupId);
        if (d && d.until > this.now) {
          slots.push({ owner: d.id });
          Model.seen.deduped++;
          continue;
        }
        if (d && d.until === this.now) Model.seen.dedupWindowEnded++;
        // A key twice in one batch: the second is the first's message.
        const k = inBatch.get(it.dedupId);
        if (k !== undefined) {
          slots.push({ fresh: k });
          Model.seen.dedupedInBatch++;
          continue;
        }
        inBatch.set(it.dedupId, freshItems.length);
      }
      slots.push({ fresh: freshItems.length });
      freshItems.push(it);
    }
    // Capacity counts live messages; a send that enqueues nothing is never full.
    const live = this.live();
    const bytes = live.reduce((a, m) => a + m.bytes, 0) + freshItems.reduce((a, it) => a + Model.size(it.body), 0);
    if (freshItems.length > 0 && ((this.q.maxDepth !== null && live.length + freshItems.length > this.q.maxDepth) || (this.q.maxBytes !== null && bytes > this.q.maxBytes))) {
      Model.seen.queueFull++;
      return { full: true };
    }
    return { full: false, slots, fresh: freshItems };
  }

  commit(items: SendItem[], ids: string[]): void {
    items.forEach((it, i) => {
      const delayMs = (it.delaySeconds ?? 0) * 1000;
      this.msgs.set(ids[i], {
        id: ids[i], body: it.body, bytes: Model.size(it.body), timestamp: this.now, attempts: 0, visibleAt: this.now + delayMs, seq: ++this.seq,
        leaseId: null, leaseUntil: null, failed: false, failedAt: null, reason: null, expiresAt: this.now + this.q.retentionMs,
      });
      if (it.dedupId !== undefined) this.dedup.set(it.dedupId, { id: ids[i], until: this.now + DEDUP_WINDOW });
    });
  }

  /** What a receive of `max` must lease, in order. */
  nextReady(max: number): ModelMessage[] {
    return [...this.msgs.values()]
      .filter((m) => this.state(m) === 'ready')
      .sort((a, b) => a.visibleAt - b.visibleAt || a.seq - b.seq)
      .slice(0, max);
  }

  lease(m: ModelMessage, leaseId: string, leaseMs: number): void {
    m.attempts += 1;
    m.leaseId = leaseId;
    m.leaseUntil = this.now + leaseMs;
  }

  /** The message a lease settles: its own delivery, while the lease lasts. */
  private held(leaseId: string): ModelMessage | undefined {
    for (const m of this.msgs.values()) if (m.leaseId === leaseId && m.leaseUntil! > this.now) return m;
    return undefined;
  }

  /** One POST …/ack: acks first, then retries; a lease named again (or not live) is stale. */
  ack(acks: string[], retries: { leaseId: string; delaySeconds?: number }[]): { acked: number; retried: number; stale: number } {
    let acked = 0;
    let retried = 0;
    for (const l of acks) {
      const m = this.held(l);
      if (m) {
        this.msgs.delete(m.id);
        acked++;
      }
    }
    for (const r of retries) {
      const m = this.held(r.leaseId);
      if (m) {
        this.release(m, (r.delaySeconds ?? 0) * 1000, 'retry');
        retried++;
      }
    }
    const stale = acks.length + retries.length - acked - retried;
    Model.seen.acked += acked;
    Model.seen.retried += retried;
    Model.seen.stale += stale;
    return { acked, retried, stale };
  }

  extend(leaseId: string, leaseMs: number): number | null {
    const m = this.held(leaseId);
    if (!m) {
      Model.seen.extendStale++;
      return null;
    }
    Model.seen.extended++;
    m.leaseUntil = this.now + leaseMs;
    return m.leaseUntil;
  }

  /** A delivery that ended without an ack: back of the queue, or the failed area after its last retry. */
  private release(m: ModelMessage, delayMs: number, reason: 'timeout' | 'retry'): void {
    m.leaseId = null;
    m.leaseUntil = null;
    m.seq = ++this.seq;
    if (m.attempts < this.maxDeliveries) {
      m.visibleAt = this.now + delayMs;
      return;
    }
    // Failing after one with a higher id in the same millisecond: the order they failed is not the ids' order.
    if (this.failedOldestFirst().some((f) => f.failedAt === this.now && Model.num(f.id) > Model.num(m.id))) {
      Model.seen[reason === 'retry' ? 'failedSameMsOutOfIdOrderRetry' : 'failedSameMsOutOfIdOrderTimeout']++;
    }
    Object.assign(m, { failed: true, failedAt: this.now, reason, expiresAt: this.now + this.q.retentionMs });
    Model.seen[reason === 'retry' ? 'failedRetry' : 'failedTimeout']++;
  }

  retryFailed(max: number): number {
    const chosen = this.failedOldestFirst();
    if (chosen.length > max) Model.seen.retriedFailedSome++;
    for (const m of chosen.slice(0, max)) {
      // Fresh attempts and a fresh retention; past capacity too, since the queue already held it.
      Object.assign(m, { failed: false, failedAt: null, reason: null, attempts: 0, visibleAt: this.now, seq: ++this.seq, expiresAt: this.now + this.q.retentionMs });
      Model.seen.retriedFailed++;
    }
    return Math.min(max, chosen.length);
  }

  purge(failed: boolean): number {
    const chosen = failed ? this.failedOldestFirst() : this.live();
    for (const m of chosen) this.msgs.delete(m.id);
    Model.seen[failed ? 'purgedFailed' : 'purgedLive'] += chosen.length;
    return chosen.length;
  }

  /** The instants at which something is due, after now (retention, delay and lease ends, dedup windows). */
  dueTimes(): number[] {
    const out: number[] = [];
    for (const m of this.msgs.values()) {
      out.push(m.expiresAt);
      if (m.leaseId !== null) out.push(m.leaseUntil!);
      else if (!m.failed) out.push(m.visibleAt);
    }
    for (const d of this.dedup.values()) out.push(d.until);
    return [...new Set(out.filter((t) => t > this.now))].sort((a, b) => a - b);
  }

  /** Moves time on, applying each retention end and lease end at its own instant, in order. */
  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      const all = [...this.msgs.values()];
      const next = Math.min(...all.map((m) => m.expiresAt), ...all.filter((m) => m.leaseId !== null).map((m) => m.leaseUntil!));
      if (!(next <= end)) break;
      this.now = next;
      // The age limit first: a last delivery whose lease ends as its retention does is dropped, not failed.
      for (const m of all.filter((x) => x.expiresAt === next)) {
        if (m.leaseUntil === next && m.attempts >= this.maxDeliveries) Model.seen.droppedAtLastLeaseEnd++;
        Model.seen[m.failed ? 'droppedFailed' : 'droppedLive']++;
        this.msgs.delete(m.id);
      }
      // Leases that end at the same instant come back (or fail) in queue order.
      const ending = all.filter((m) => this.msgs.has(m.id) && m.leaseUntil === next).sort((a, b) => a.seq - b.seq);
      for (const m of ending) this.release(m, 0, 'timeout');
    }
    this.now = end;
  }
}

describe('conformance: env, a random walk against the message model', function () {
  this.timeout(240_000);
  let emu: Emu;

  before(async () => {
    emu = await startTestEmulator();
  });
  after(async () => {
    await emu.close();
  });

  const api = (method: string, path: string, body?: unknown) => httpCall(emu, method, path, body);

  /** Both peeks and the counts, against the model. */
  async function compare(model: Model, qId: string, where: string): Promise<void> {
    assert.equal(emu.clock.now(), model.now, `${where}: clock`);
    const live = await api('GET', `/v1/queues/${qId}/messages`);
    assert.deepEqual(
      live.body.messages.map((m: any) => ({ id: m.id, body: m.body, state: m.state, attempts: m.attempts, timestamp: m.timestamp, visibleAt: m.visibleAt, leaseExpiresAt: m.leaseExpiresAt })),
      model.live().sort((a, b) => Model.num(a.id) - Model.num(b.id)).map((m) => ({
        id: m.id, body: m.body, state: model.state(m), attempts: m.attempts, timestamp: m.timestamp, visibleAt: m.visibleAt, leaseExpiresAt: m.leaseUntil,
      })),
      `${where}: the live messages, in the order they were sent`,
    );
    const failed = await api('GET', `/v1/queues/${qId}/messages?failed=1`);
    assert.deepEqual(
      failed.body.messages.map((m: any) => ({ id: m.id, body: m.body, state: m.state, attempts: m.attempts, timestamp: m.timestamp, failedAt: m.failedAt, reason: m.reason })),
      model.failedOldestFirst().map((m) => ({ id: m.id, body: m.body, state: 'failed', attempts: m.attempts, timestamp: m.timestamp, failedAt: m.failedAt, reason: m.reason })),
      `${where}: the failed area, in the order they failed`,
    );
    const c = (await api('GET', `/v1/queues/${qId}`)).body.counts;
    const states = [...model.msgs.values()].map((m) => model.state(m));
    const n = (s: string) => states.filter((x) => x === s).length;
    assert.deepEqual(
      { ready: c.ready, delayed: c.delayed, leased: c.leased, failed: c.failed, depth: c.depth, inFlight: c.inFlight, bytes: c.bytes },
      {
        ready: n('ready'), delayed: n('delayed'), leased: n('leased'), failed: n('failed'), depth: n('ready') + n('delayed'), inFlight: n('leased'),
        bytes: model.live().reduce((a, m) => a + m.bytes, 0),
      },
      `${where}: counts`,
    );
  }

  async function walk(seed: number): Promise<void> {
    const rand = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
    const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
    const project = fresh('model');
    const environment = 'dev';
    const env: Env = createEnv({ url: emu.url, token: emu.token, project, environment });

    // Settings of its own per walk; left out, the queue's defaults.
    const given: Record<string, number> = {};
    const opt = <T extends number>(key: string, choices: readonly (T | undefined)[]): T | undefined => {
      const v = pick(choices);
      if (v !== undefined) given[key] = v;
      return v;
    };
    const maxRetries = opt('maxRetries', [0, 0, 1, 2, undefined]);
    const maxDepth = opt('maxDepth', [undefined, 3, 6, 10]);
    const maxBytes = opt('maxBytes', [undefined, undefined, 80, 250]);
    const retentionSeconds = opt('retentionSeconds', [60, 60, 90, undefined]);
    const visibilityMs = opt('visibilityMs', [undefined, 1000, 2500]);
    const slug = 'jobs';
    const created = await api('POST', '/v1/queues', { project, environment, slug, ...given });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const qId: string = created.body.id;
    const model = new Model(emu.clock.now(), {
      slug, maxRetries: maxRetries ?? DEFAULT_RETRIES, maxDepth: maxDepth ?? null, maxBytes: maxBytes ?? null,
      retentionMs: retentionSeconds !== undefined ? retentionSeconds * 1000 : DEFAULT_RETENTION, visibilityMs: visibilityMs ?? DEFAULT_VISIBILITY,
    });
    const leases: string[] = [];
    const ids = new Set<string>();
    const trace: string[] = [`queue ${JSON.stringify(given)}`];
    let n = 0;
    const item = (): SendItem => {
      const it: SendItem = { body: rand() < 0.5 ? { n: ++n } : { n: ++n, pad: 'x'.repeat(int(0, 30)) } };
      if (rand() < 0.3) it.delaySeconds = int(0, 3);
      if (rand() < 0.3) it.dedupId = `d${int(1, 4)}`;
      return it;
    };
    /** Mostly a lease that is live, else one of the last few given out (perhaps stale), or none ever given. */
    const someLease = (): string => {
      const live = [...model.msgs.values()].filter((m) => m.leaseId !== null && m.leaseUntil! > model.now).map((m) => m.leaseId!);
      if (live.length && rand() < 0.85) return pick(live);
      return leases.length && rand() < 0.85 ? pick(leases.slice(-6)) : pick(['r_999999_1', 'not-a-lease']);
    };
    /** A lease length that ends on `at`'s millisecond or next to it, when a receive or extend may ask for it. */
    const endingNear = (at: number): number | undefined => {
      const ms = at - model.now + pick([0, 0, -1, 1]);
      return ms >= 1 && ms <= MAX_LEASE ? ms : undefined;
    };
    /** Sometimes a lease to end with `m`'s retention, or with another lease, where ties are decided. */
    const aim = (m: ModelMessage | undefined): number | undefined => {
      const held = [...model.msgs.values()].filter((x) => x !== m && x.leaseId !== null).map((x) => x.leaseUntil!);
      const k = rand();
      if (m && k < 0.3) return endingNear(m.expiresAt);
      if (held.length && k < 0.6) return endingNear(pick(held));
      return undefined;
    };

    for (let step = 0; step < STEPS; step++) {
      const at = `seed ${seed} step ${step}`;
      const r = rand();
      let op: string;
      if (r < 0.3) {
        // One message or a batch, over HTTP or through env.queue.
        const batch = r >= 0.22;
        const items = batch ? Array.from({ length: int(1, 4) }, item) : [item()];
        const viaEnv = rand() < 0.5;
        op = `${viaEnv ? 'env' : 'http'} ${batch ? 'sendBatch' : 'send'} ${JSON.stringify(items)}`;
        const plan = model.plan(items);
        let got: { ids: string[] } | { error: string; status?: number };
        if (viaEnv) {
          try {
            if (batch) got = await env.queue.sendBatch(slug, items);
            else {
              const { body, ...o } = items[0];
              got = { ids: [(await env.queue.send(slug, body, o)).id] };
            }
          } catch (e) {
            if (!(e instanceof QuaysideError)) throw e;
            got = { error: e.code };
          }
        } else {
          const res = await api('POST', `/v1/queues/${qId}/messages`, batch ? { messages: items } : items[0]);
          got = res.status === 201 ? { ids: batch ? res.body.ids : [res.body.id] } : { error: res.body?.error?.code, status: res.status };
        }
        if (plan.full) assert.deepEqual(got, viaEnv ? { error: 'queue_full' } : { error: 'queue_full', status: 507 }, `${at}: ${op} is refused, queue full`);
        else {
          assert.ok('ids' in got, `${at}: ${op} answered ${JSON.stringify(got)}`);
          // The new messages take the ids the emulator gave them; a dedupId answers its first message's id.
          const freshIds: string[] = [];
          const want = plan.slots.map((s, i) => ('owner' in s ? s.owner : (freshIds[s.fresh] ??= got.ids[i])));
          assert.deepEqual(got.ids, want, `${at}: ${op}, the ids`);
          for (const id of freshIds) {
            assert.ok(!ids.has(id), `${at}: ${id} is a new id`);
            ids.add(id);
          }
          model.commit(plan.fresh, freshIds);
        }
      } else if (r < 0.45) {
        const body: { max?: number; visibilityMs?: number } = {};
        if (rand() < 0.7) body.max = int(1, 4);
        const head = model.nextReady(1)[0];
        const aimed = aim(head);
        if (aimed !== undefined) body.visibilityMs = aimed;
        else if (rand() < 0.6) body.visibilityMs = pick([300, 1000, 2000, 2500]);
        op = `receive ${JSON.stringify(body)}`;
        const want = model.nextReady(body.max ?? 10);
        const res = await api('POST', `/v1/queues/${qId}/receive`, body);
        assert.equal(res.status, 200, `${at}: ${op}: ${JSON.stringify(res.body)}`);
        assert.deepEqual(res.body.messages.map((m: any) => m.id), want.map((m) => m.id), `${at}: ${op} leases the head of the queue`);
        const leaseMs = body.visibilityMs ?? model.q.visibilityMs;
        res.body.messages.forEach((m: any, i: number) => {
          model.lease(want[i], m.leaseId, leaseMs);
          assert.deepEqual(
            { body: m.body, attempts: m.attempts, timestamp: m.timestamp, leaseExpiresAt: m.leaseExpiresAt },
            { body: want[i].body, attempts: want[i].attempts, timestamp: want[i].timestamp, leaseExpiresAt: model.now + leaseMs },
            `${at}: ${op}, delivery of ${m.id}`,
          );
          assert.ok(!leases.includes(m.leaseId), `${at}: a fresh lease per delivery`);
          leases.push(m.leaseId);
        });
      } else if (r < 0.58) {
        const acks = Array.from({ length: int(0, 1) }, someLease);
        const retries = Array.from({ length: int(0, 3) }, () => (rand() < 0.5 ? { leaseId: someLease(), delaySeconds: int(0, 3) } : { leaseId: someLease() }));
        const body: { acks?: string[]; retries?: typeof retries } = {};
        if (acks.length || rand() < 0.5) body.acks = acks;
        if (retries.length || rand() < 0.5) body.retries = retries;
        op = `ack ${JSON.stringify(body)}`;
        const res = await api('POST', `/v1/queues/${qId}/ack`, body);
        assert.deepEqual(res, { status: 200, body: model.ack(acks, retries) }, `${at}: ${op}`);
      } else if (r < 0.64) {
        const leaseId = someLease();
        const m = [...model.msgs.values()].find((x) => x.leaseId === leaseId);
        const aimed = aim(m);
        // visibilityMs is required (DESIGN's table); the queue's own is one of the choices.
        const body: { leaseId: string; visibilityMs: number } = { leaseId, visibilityMs: model.q.visibilityMs };
        if (aimed !== undefined) body.visibilityMs = aimed;
        else if (rand() < 0.7) body.visibilityMs = pick([1, 500, 1000, 3000]);
        op = `extend ${JSON.stringify(body)}`;
        const res = await api('POST', `/v1/queues/${qId}/extend`, body);
        const until = model.extend(leaseId, body.visibilityMs);
        if (until === null) assert.deepEqual({ status: res.status, code: res.body?.error?.code }, { status: 409, code: 'conflict' }, `${at}: ${op} is stale`);
        else assert.deepEqual(res, { status: 200, body: { leaseExpiresAt: until } }, `${at}: ${op}`);
      } else if (r < 0.86) {
        // Mostly land on (or next to) something due, sometimes a dedup window's end, sometimes a plain step.
        const due = model.dueTimes();
        const k = rand();
        let ms: number;
        if (due.length && k < 0.6) ms = (rand() < 0.7 ? due[0] : pick(due.slice(0, 4))) - model.now + pick([0, 0, 0, -1, 1]);
        else if (model.dedup.size && k < 0.7) ms = pick([...model.dedup.values()]).until - model.now + pick([0, -1, 1]);
        else ms = pick([0, 1, 250, 500, 999, 1000, 3000]);
        ms = Math.max(0, ms);
        op = `advance ${ms}`;
        await emu.clock.advance(ms);
        model.advance(ms);
      } else if (r < 0.955) {
        // The failed area's two actions (the console's Retry and Discard): retry-failed, or purge it.
        if (rand() < 0.7) {
          const body = rand() < 0.5 ? { max: int(1, 2) } : {};
          op = `retry-failed ${JSON.stringify(body)}`;
          const res = await api('POST', `/v1/queues/${qId}/retry-failed`, body);
          assert.deepEqual(res, { status: 200, body: { retried: model.retryFailed(body.max ?? 100) } }, `${at}: ${op}`);
        } else {
          const body = { confirm: slug, failed: true };
          op = `purge ${JSON.stringify(body)}`;
          const res = await api('POST', `/v1/queues/${qId}/purge`, body);
          assert.deepEqual(res, { status: 200, body: { purged: model.purge(true) } }, `${at}: ${op}`);
        }
      } else {
        const body: { confirm: string; failed?: boolean } = { confirm: rand() < 0.8 ? slug : 'job' };
        if (rand() < 0.5) body.failed = rand() < 0.5;
        op = `purge ${JSON.stringify(body)}`;
        const res = await api('POST', `/v1/queues/${qId}/purge`, body);
        if (body.confirm !== slug) {
          // A wrong confirm purges nothing (the comparison below checks that too).
          Model.seen.purgeRefused++;
          assert.deepEqual({ status: res.status, code: res.body?.error?.code }, { status: 400, code: 'invalid_argument' }, `${at}: ${op}`);
        } else assert.deepEqual(res, { status: 200, body: { purged: model.purge(body.failed === true) } }, `${at}: ${op}`);
      }
      trace.push(op);
      await compare(model, qId, `${at} after ${trace.slice(-4).join(' → ')}`);
    }
    await env.close();
    assert.equal((await api('DELETE', `/v1/queues/${qId}`)).status, 200);
  }

  it(`${SEEDS} seeded walks of ${STEPS} steps over the data API and env.queue: every answer, both peeks and the counts match the model after each step`, async () => {
    for (let seed = 1; seed <= SEEDS; seed++) await walk(SEED_BASE + seed);
    console.log(`      went through: ${JSON.stringify(Model.seen)}`);
    assertReached(Model.seen);
  });
});
