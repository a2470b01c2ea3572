import crypto from 'node:crypto';
import { QuaysideError, conflict, invalid, notFound } from '../errors';
import type {
  Access, AuditEntry, ChangeEvent, ConsumerSettings, Delivery, Dialect, LagStep, MessageState, MessageView,
  PushInput, PushResult, QueueCounts, QueueInfo, QueuePolicy,
} from '../protocol';
import { LIMITS, isBase64Text, isBinaryContentType, isDialect, syncEnvelopeBytes, toWellFormed } from '../protocol';
import { DEAD, LEASED, WAITING, countWithin, type DueRow, type MessageRow, type NewMessage, type QueueRow, type QueueStore } from '../store/boundary';
import type { Clock } from './clock';
import { VirtualClock } from './clock';
import { ConsumerHub, type Attachment, type DroppedConsumers } from './consumers';
import { coalesce, type PendingEvent } from './events';
import { GroupCommit } from './group-commit';
import { SYSTEM_ACTOR, TokenBook, type Actor } from './tokens';
import { LagHistory } from './lag-history';
import { PRESETS, TIME, consumerSettings, mergePolicy } from './presets';
import * as v from './validate';
import { messageId, parseMessageId, parseReceipt, toDelivery, toView, type Extra } from './views';
import { Waiters, type Waiter } from './waiters';
import { clearTimeout, realNow, setImmediate, setTimeout } from '../real-time';

export type ChangeBody = Omit<ChangeEvent, 'event' | 'subscription'>;

export interface EngineOptions {
  store: QueueStore;
  clock: Clock;
  /** Daily message quota per namespace for `cache` queues (the free tier); null = off. */
  dailyQuota?: number | null;
}

/**
 * `meta` key: a virtual clock's time, saved at start, at each instant an advance visits, and at
 * close. A virtual clock started on the same data directory starts no earlier (startEmulator), so
 * stored times never run backwards: a message made ready by an advance stays ready after a restart.
 */
export const CLOCK_META = 'clock_now';

export { SYSTEM_ACTOR, tokenId, type Actor } from './tokens';

/** Far above any receipt the engine hands out (`r_<id>_<token>`); longer is not a receipt. */
const MAX_RECEIPT_CHARS = 200;
/**
 * How long advance() waits for calls on their way in to arrive (see advance): turns of the event
 * loop, about a millisecond each, so that a process stalled meanwhile (a long GC pause, a busy
 * neighbour) does not spend the wait; and a cap in real time, for turns that run slow.
 */
const ARRIVALS_WAIT_TURNS = 50;
const ARRIVALS_WAIT_MAX_MS = 1000;
/**
 * How long, in real time, an advance waits for a lease it handed out to be settled before it moves
 * the clock on, counted from the last one settled (see awaitHolders).
 */
const HOLDERS_QUIET_MS = 50;
/** Turns of about a millisecond with nothing claimed or settled, once every lease was answered. */
const HOLDERS_SETTLED_TURNS = 3;

/** Only what cannot be a receipt at all is refused; any other string is a receipt, maybe a stale one. */
function checkReceipt(receipt: unknown): void {
  if (typeof receipt !== 'string' || receipt.length === 0) throw invalid('receipt must be a non-empty string');
  if (receipt.length > MAX_RECEIPT_CHARS) throw invalid(`a receipt is at most ${MAX_RECEIPT_CHARS} characters`);
}
/** An optional dialect argument: absent, or one of the dialects. */
function dialectArg(d: unknown): Dialect | undefined {
  if (d === undefined || d === null) return undefined;
  if (!isDialect(d)) throw invalid(`dialect must be one of cache, env, sync; got ${v.describe(d)}`);
  return d;
}

/** A caller that sees only `want`'s queues (when it names one: dialectArg) does not see `q` of another. */
function hiddenFrom(q: QueueRow, want: Dialect | undefined): boolean {
  return want !== undefined && q.dialect !== want;
}
/** The largest epoch ms a Date can hold. */
const MAX_TIME = LIMITS.maxEpochMs;
const SWEEP_BATCH = 500;
/** Expired dedupe keys deleted at one step change: at most 10 batches of 1,000. */
const DEDUPE_SWEEP_ROWS = 1000;
const DEDUPE_SWEEP_BATCHES = 10;
const ALL_STATES: MessageState[] = ['ready', 'delayed', 'leased', 'dead'];

interface Ref {
  namespace: string;
  queue: string;
  /**
   * The queue's public id, when the caller found it by id first (the env HTTP routes): the
   * operation then acts only on that very queue, not on one made under its name since.
   */
  queueId?: unknown;
  /**
   * The dialect the caller sees (a face names its own): a queue of another dialect is then not
   * found, with the same error as a missing one.
   */
  dialect?: unknown;
}

/**
 * The queue engine: every transition of DESIGN.md's message model, over a QueueStore (store/boundary.ts), on a Clock.
 * It knows nothing of sockets: callers get promises that settle after commit, and events.
 */
export class Engine {
  readonly store: QueueStore;
  readonly clock: Clock;
  private readonly gc: GroupCommit;
  private readonly waiters = new Waiters();
  private readonly consumers = new ConsumerHub();
  private readonly listeners = new Set<(e: ChangeBody) => void>();
  private readonly policies = new Map<number, { policy: QueuePolicy; consumer: ConsumerSettings | null }>();
  /** Earliest future visible_at per queue (delayed → ready is an event, not a write). */
  private readonly delayedAt = new Map<number, number>();
  /** The last dedupe sweep stopped at its bound with expired keys left (see sweepDedupe). */
  private dedupeBacklog = false;
  /** The latest date given to a death in this process (see deathDate). */
  private lastDeathAt = -Infinity;
  /** The changes of the open transaction (queue, kind, ids), for events once it commits. */
  private jobEvents: PendingEvent[] = [];
  private touched = new Set<number>();
  private readonly lag: LagHistory;
  private readonly tokens: TokenBook;
  private dailyQuota: number | null;
  /** Some namespace has its own quota (set by namespace.configure, now or in an earlier run). */
  private quotasInUse: boolean;
  private timer: NodeJS.Timeout | null = null;
  private timerAt: number | null = null;
  private closed = false;
  private advancing: Promise<number> | null = null;
  /** Leases handed out while an advance runs (row id, token), until their holders answered. */
  private handedOut: { id: number; token: number }[] | null = null;
  private claimsInAdvance = 0;

  constructor(opts: EngineOptions) {
    this.store = opts.store;
    this.clock = opts.clock;
    this.dailyQuota = opts.dailyQuota ?? null;
    this.quotasInUse = this.store.anyQuota();
    this.gc = new GroupCommit(this.store);
    this.lag = new LagHistory(this.store, this.clock);
    this.tokens = new TokenBook(this.store, this.clock);
    this.gc.afterBegin = () => {
      if (this.lag.roll(this.touched) || this.dedupeBacklog) this.sweepDedupe();
    };
    this.gc.beforeCommit = () => this.lag.record(this.touched);
    this.gc.afterCommit = (ok) => this.afterCommit(ok);
    for (const q of this.store.listQueues()) this.refreshDelayed(q.id, this.clock.now());
    // Work that fell due while the emulator was down is applied now.
    void this.gc.run(() => this.applyDue());
  }

  // ------------------------------------------------------------------ plumbing

  /** Set by a host that knows whether anyone subscribed; counting is skipped when no one did. */
  eventsWanted: () => boolean = () => true;
  /**
   * A count of what has arrived from clients still getting going (set by whoever serves the engine,
   * see QuaysideServer): advance() waits until it stops moving, so a call that is still on its way
   * in is applied before the jump.
   */
  arrivals: () => number = () => 0;

  private readonly clockListeners = new Set<(now: number) => void>();

  /** Called after a virtual clock moved (and its due work was applied). */
  onClock(listener: (now: number) => void): () => void {
    this.clockListeners.add(listener);
    return () => this.clockListeners.delete(listener);
  }

  onChange(listener: (e: ChangeBody) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  now(): number {
    return this.clock.now();
  }

  /**
   * Runs `fn` as one operation in the next group commit; its events are kept only if it succeeds.
   * A failed one's savepoint is rolled back, so the policies it cached go too: a queue it created
   * and lost may have left its policy under a row id the next queue gets.
   */
  private op<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new QuaysideError('unavailable', 'the emulator is shutting down'));
    return this.gc.run(() => {
      const mark = this.jobEvents.length;
      try {
        return fn();
      } catch (e) {
        this.jobEvents.length = mark;
        this.policies.clear();
        throw e;
      }
    });
  }

  private note(q: QueueRow, kind: ChangeBody['kind'], ids: string[]): void {
    this.jobEvents.push({ queueId: q.id, kind, ids, ns: q.ns, name: q.name });
    this.touched.add(q.id);
  }

  private afterCommit(ok: boolean): void {
    this.lag.settle(ok);
    // Consumers of queues deleted in this commit are told once it stands; if it failed, the
    // queues are still there and their consumers are put back.
    const dropped = this.droppedConsumers;
    this.droppedConsumers = [];
    for (const d of dropped) {
      if (!ok) this.consumers.restore(d);
      else for (const a of d.state.attachments) tellDropped(a);
    }
    const events = this.jobEvents;
    this.jobEvents = [];
    const touched = this.touched;
    this.touched = new Set();
    if (!ok) {
      // The transaction did not commit: cached policies may be ahead of the file. A backlog sweep
      // that cannot commit (a full disk) is left to the next step, so reads need no write meanwhile.
      this.policies.clear();
      this.dedupeBacklog = false;
      return;
    }
    this.emitEvents(events);
    for (const id of touched) this.kick(id);
    this.arm();
    this.scheduleCheckpoint();
  }

  private checkpointTimer: NodeJS.Timeout | null = null;

  /** A quarter second with no commit: a good moment to checkpoint the WAL. */
  private scheduleCheckpoint(): void {
    if (this.closed || !this.store.file) return;
    if (this.checkpointTimer) this.checkpointTimer.refresh();
    else {
      this.checkpointTimer = setTimeout(() => {
        this.checkpointTimer = null;
        if (this.closed) return;
        if (this.gc.pending > 0) return this.scheduleCheckpoint();
        try {
          this.lag.flush();
          this.store.checkpointIdle();
        } catch {
          // A checkpoint that cannot run now (disk full) runs at the next idle moment.
        }
      }, 250);
      this.checkpointTimer.unref?.();
    }
  }

  /** A committed transaction's changes, to subscribers (merged only when someone listens). */
  private emitEvents(changes: PendingEvent[]): void {
    if (changes.length === 0 || this.listeners.size === 0 || !this.eventsWanted()) return;
    const pending = coalesce(changes);
    const now = this.clock.now();
    const counts = new Map<number, QueueCounts | null>();
    for (const e of pending) {
      if (!counts.has(e.queueId)) {
        const q = this.store.queueById(e.queueId);
        counts.set(e.queueId, q ? this.countsOf(q, now) : null);
      }
      // A queue deleted and made again in one commit may reuse its row id: the deleted one has no counts.
      const body: ChangeBody = { namespace: e.ns, queue: e.name, kind: e.kind, ids: e.ids, counts: e.kind === 'queue_deleted' ? null : counts.get(e.queueId) ?? null, at: now };
      for (const l of this.listeners) l(body);
    }
  }

  /** After a commit touched a queue: wake held pulls and push consumers that can now get work. */
  private kick(queueId: number): void {
    if (this.waiters.has(queueId)) void this.serveWaiters(queueId);
    if (this.consumers.has(queueId)) void this.serveConsumers(queueId);
  }

  private queueRow(ref: Ref, actor?: Actor): QueueRow {
    const ns = v.name(ref.namespace, 'namespace');
    const name = v.name(ref.queue, 'queue');
    const pinned = v.optStr(ref.queueId, 'queueId', LIMITS.maxNameChars);
    if (actor && actor.namespace !== null && actor.namespace !== ns) throw new QuaysideError('forbidden', `this token is for namespace "${actor.namespace}", not "${ns}"`);
    const want = dialectArg(ref.dialect);
    const q = this.store.queueByName(ns, name);
    if (!q || (pinned !== undefined && q.pub_id !== pinned) || hiddenFrom(q, want)) throw notFound(`queue "${name}" not found in namespace "${ns}"`);
    return q;
  }

  private settings(q: QueueRow): { policy: QueuePolicy; consumer: ConsumerSettings | null } {
    let s = this.policies.get(q.id);
    if (!s) {
      const raw = this.store.queueSettings(q.id);
      if (!raw) throw notFound(`queue "${q.name}" not found in namespace "${q.ns}"`);
      s = { policy: JSON.parse(raw.policy) as QueuePolicy, consumer: raw.consumer ? (JSON.parse(raw.consumer) as ConsumerSettings) : null };
      this.policies.set(q.id, s);
    }
    return s;
  }

  private policyOf(q: QueueRow): QueuePolicy {
    return this.settings(q).policy;
  }

  countsOf(q: QueueRow, now: number): QueueCounts {
    const delayed = q.n_waiting > 0 && this.delayedAt.has(q.id) ? this.store.countDelayed(q.id, now) : 0;
    const oldest = q.n_waiting > delayed ? this.store.oldestReadyAt(q.id, now) : null;
    return {
      ready: q.n_waiting - delayed,
      delayed,
      leased: q.n_leased,
      dead: q.n_dead,
      depth: q.n_waiting,
      bytes: q.live_bytes,
      oldestReadyAgeMs: oldest === null ? 0 : Math.max(0, now - oldest),
    };
  }

  private info(q: QueueRow, now: number): QueueInfo {
    const s = this.settings(q);
    return {
      id: q.pub_id,
      namespace: q.ns,
      name: q.name,
      dialect: q.dialect as Dialect,
      policy: s.policy,
      consumer: s.consumer,
      createdAt: q.created_at,
      counts: this.countsOf(q, now),
    };
  }

  // ------------------------------------------------------------------ queues

  createQueue(args: Ref & { dialect: unknown; policy?: unknown; ifNotExists?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<QueueInfo> {
    return this.op(() => this.createQueueNow(args, actor).info);
  }

  private createQueueNow(args: Ref & { dialect: unknown; policy?: unknown; ifNotExists?: unknown }, actor: Actor): { info: QueueInfo; row: QueueRow } {
    const ns = v.name(args.namespace, 'namespace');
    const name = v.name(args.queue, 'queue');
    if (actor.namespace !== null && actor.namespace !== ns) throw new QuaysideError('forbidden', `this token is for namespace "${actor.namespace}", not "${ns}"`);
    if (!isDialect(args.dialect)) throw invalid(`dialect must be one of cache, env, sync; got ${v.describe(args.dialect)}`);
    const policy = mergePolicy(PRESETS[args.dialect], args.policy);
    const ifNotExists = v.bool(args.ifNotExists, 'ifNotExists');
    const now = this.clock.now();
    const existing = this.store.queueByName(ns, name);
    if (existing) {
      if (ifNotExists && existing.dialect === args.dialect) return { info: this.info(existing, now), row: existing };
      throw conflict(existing.dialect === args.dialect ? `queue "${name}" already exists in namespace "${ns}"` : `queue "${name}" in namespace "${ns}" is ${existing.dialect === 'env' ? 'an' : 'a'} ${existing.dialect} queue, not ${args.dialect}`);
    }
    const row = this.store.createQueue(`q_${crypto.randomBytes(6).toString('hex')}`, ns, name, args.dialect, JSON.stringify(policy), null, now);
    this.note(row, 'queue_created', []);
    return { info: this.info(row, now), row };
  }

  configureQueue(args: Ref & { policy: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<QueueInfo> {
    return this.op(() => {
      // Checked before the queue is looked up: a configure without a policy is a bad request.
      if (args.policy === undefined || args.policy === null) throw invalid('policy is required: the settings to change, such as { leaseMs: 60000 }');
      const changes = v.obj(args.policy, 'policy');
      const q = this.queueRow(args, actor);
      const before = this.policyOf(q);
      const policy = mergePolicy(before, changes);
      this.store.setPolicy(q.id, JSON.stringify(policy));
      this.policies.delete(q.id);
      // Age limits are the queue's current settings, for the messages already in it too; what a
      // shorter limit makes overdue goes now, in this transaction, so the answer shows it gone.
      if (policy.maxMessageAgeMs !== before.maxMessageAgeMs || policy.deadRetentionMs !== before.deadRetentionMs) {
        this.store.reExpire(q.id, { from: before.maxMessageAgeMs, to: policy.maxMessageAgeMs }, policy.deadRetentionMs - before.deadRetentionMs);
        this.applyDue(this.clock.now());
        // Messages a shorter limit deleted (not those it only dead-lettered) were deleted by this
        // call, as a purge deletes them: the audit log says who did it and how many.
        const after = this.store.queueById(q.id)!;
        const dropped = q.n_waiting + q.n_leased + q.n_dead - (after.n_waiting + after.n_leased + after.n_dead);
        if (dropped > 0) this.audit(actor, q, 'expire', dropped, retentionChange(before, policy));
      }
      this.note(q, 'queue_updated', []);
      return this.info(this.store.queueById(q.id)!, this.clock.now());
    });
  }

  deleteQueue(args: Ref, actor: Actor = SYSTEM_ACTOR): Promise<{ deleted: boolean }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      this.store.deleteQueue(q.id);
      this.audit(actor, q, 'delete_queue', q.n_waiting + q.n_leased + q.n_dead, null);
      this.policies.delete(q.id);
      this.delayedAt.delete(q.id);
      this.lag.queueDeleted(q);
      this.waiters.dropQueue(q.id);
      const dropped = this.consumers.dropQueue(q.id);
      if (dropped) this.droppedConsumers.push(dropped);
      this.note(q, 'queue_deleted', []);
      return { deleted: true };
    });
  }

  getQueue(args: Ref | { id: string }, actor: Actor = SYSTEM_ACTOR): Promise<QueueInfo> {
    return this.op(() => this.info(this.lookup(args, actor), this.clock.now()));
  }

  /** By (namespace, name) or by the queue's public id. */
  private lookup(args: Ref | { id: string }, actor: Actor): QueueRow {
    if ('id' in args && args.id !== undefined) {
      if (typeof args.id !== 'string' || args.id.length === 0) throw invalid(`id must be a queue id (a non-empty string); got ${v.describe(args.id)}`);
      const q = this.store.queueByPubId(args.id);
      const want = dialectArg((args as { dialect?: unknown }).dialect);
      if (!q || (actor.namespace !== null && actor.namespace !== q.ns) || hiddenFrom(q, want)) throw notFound(`queue ${v.describe(args.id)} not found`);
      return q;
    }
    return this.queueRow(args as Ref, actor);
  }

  listQueues(args: { namespace?: unknown; dialect?: unknown } = {}, actor: Actor = SYSTEM_ACTOR): Promise<{ queues: QueueInfo[] }> {
    return this.op(() => {
      let ns = args.namespace === undefined || args.namespace === null ? undefined : v.name(args.namespace, 'namespace');
      if (args.dialect !== undefined && !isDialect(args.dialect)) throw invalid('dialect must be one of cache, env, sync');
      if (actor.namespace !== null) {
        if (ns !== undefined && ns !== actor.namespace) return { queues: [] };
        ns = actor.namespace;
      }
      const now = this.clock.now();
      return { queues: this.store.listQueues(ns).filter((q) => !args.dialect || q.dialect === args.dialect).map((q) => this.info(q, now)) };
    });
  }

  listNamespaces(actor: Actor = SYSTEM_ACTOR): Promise<{ namespaces: { namespace: string; queues: number; dead: number }[] }> {
    return this.op(() => {
      const by = new Map<string, { namespace: string; queues: number; dead: number }>();
      for (const q of this.store.listQueues(actor.namespace ?? undefined)) {
        const n = by.get(q.ns) ?? { namespace: q.ns, queues: 0, dead: 0 };
        n.queues++;
        n.dead += q.n_dead;
        by.set(q.ns, n);
      }
      return { namespaces: [...by.values()] };
    });
  }

  configureNamespace(args: { namespace: unknown; dailyQuota: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ namespace: string; dailyQuota: number | null }> {
    return this.op(() => {
      const ns = v.name(args.namespace, 'namespace');
      // A namespace's daily quota is its plan's limit, set by whoever runs the emulator: an app's token
      // for that namespace could otherwise lift the limit its own tests are meant to meet.
      if (actor.namespace !== null) throw new QuaysideError('forbidden', `a namespace's daily quota is set with a token for every namespace; this token is for namespace "${actor.namespace}" only`);
      const quota = args.dailyQuota === null ? null : v.int(args.dailyQuota, 'dailyQuota', 0, 1e12);
      this.store.setQuota(ns, quota);
      if (quota !== null) this.quotasInUse = true;
      return { namespace: ns, dailyQuota: quota };
    });
  }

  /** The free tier for every cache namespace without its own quota. */
  setDefaultDailyQuota(quota: number | null): void {
    this.dailyQuota = quota;
  }

  // ------------------------------------------------------------------ push

  push(args: Ref & PushInput & { create?: unknown; dialect?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<PushResult> {
    const { namespace, queue, queueId, create, dialect, ...input } = args;
    return this.op(() => this.pushNow({ namespace, queue, queueId, create, dialect }, [input], actor)[0]);
  }

  pushBatch(args: Ref & { messages: unknown; create?: unknown; dialect?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ results: PushResult[] }> {
    return this.op(() => {
      if (!Array.isArray(args.messages)) throw invalid('messages must be an array');
      if (args.messages.length === 0) throw invalid('messages must not be empty');
      if (args.messages.length > LIMITS.maxBatchMessages) throw invalid(`a batch holds at most ${LIMITS.maxBatchMessages} messages`);
      return { results: this.pushNow(args, args.messages as PushInput[], actor) };
    });
  }

  /** All or nothing: every item is checked before anything is written. */
  private pushNow(ref: Ref & { create?: unknown; dialect?: unknown }, items: PushInput[], actor: Actor): PushResult[] {
    // Checked whether or not the queue exists: a bad create is a bad request either way.
    if (ref.create !== undefined && ref.create !== null && !isDialect(ref.create)) throw invalid(`create must be one of cache, env, sync; got ${v.describe(ref.create)}`);
    const create = ref.create ?? undefined;
    const want = dialectArg(ref.dialect);
    // Creating a queue of one dialect while seeing only another's could never succeed.
    if (want !== undefined && create !== undefined && create !== want) throw invalid(`create (${v.describe(create)}) and dialect ("${want}") must name the same dialect`);
    let q: QueueRow;
    try {
      q = this.queueRow(ref, actor);
    } catch (e) {
      // Only a queue that is missing is created; one of another dialect stays not found.
      // Nor is one made when the caller pinned a queue (queueId) that is gone.
      if (!(e instanceof QuaysideError) || e.code !== 'not_found' || create === undefined || ref.queueId != null || this.store.queueByName(ref.namespace, ref.queue)) throw e;
      q = this.createQueueNow({ namespace: ref.namespace, queue: ref.queue, dialect: create, ifNotExists: true }, actor).row;
    }
    const policy = this.policyOf(q);
    const now = this.clock.now();
    const results: PushResult[] = [];
    const fresh: NewMessage[] = [];
    /** results index → index in `fresh` of the message that answers it. */
    const answers: [number, number][] = [];
    const seenKeys = new Map<string, number>();
    let bytes = 0;
    items.forEach((raw, i) => {
      const at = items.length > 1 ? `messages[${i}].` : '';
      const m = v.obj(raw, items.length > 1 ? `messages[${i}]` : 'message');
      const body = v.serialise(m.body, `${at}body`);
      const meta = m.meta === undefined || m.meta === null ? undefined : v.serialise(m.meta, `${at}meta`);
      const contentType = v.optStr(m.contentType, `${at}contentType`, 200);
      // A bytes body travels as base64 text: what counts is the bytes the sender gave.
      const binary = isBinaryContentType(contentType);
      if (binary && !isBase64Text(m.body)) throw invalid(`${at}body must be base64 text with contentType "${contentType}"`);
      const size = binary ? Buffer.byteLength(m.body as string, 'base64') : Buffer.byteLength(body, 'utf8');
      const metaBytes = meta === undefined ? undefined : Buffer.byteLength(meta, 'utf8');
      const orderingKey = v.optStr(m.orderingKey, `${at}orderingKey`, LIMITS.maxKeyChars);
      const measured = q.dialect === 'sync' ? syncEnvelopeBytes(size, metaBytes, orderingKey, now) : size + (metaBytes ?? 0);
      if (measured > policy.maxPayloadBytes) {
        const what = q.dialect === 'sync' ? `${at}body as stored (the envelope of data, attempt, orderingKey, meta and enqueuedAt)` : `${at}body`;
        throw new QuaysideError('payload_too_large', `${what} is ${measured} bytes; the limit of queue "${q.name}" is ${policy.maxPayloadBytes} bytes`, { details: { size: measured, limit: policy.maxPayloadBytes } });
      }
      const delay = v.optInt(m.delayMs, `${at}delayMs`, 0, policy.maxDelayMs) ?? 0;
      const dedupeKey = v.optStr(m.dedupeKey, `${at}dedupeKey`, LIMITS.maxKeyChars);
      const ttl = v.optInt(m.dedupeTtlMs, `${at}dedupeTtlMs`, 1, 365 * TIME.DAY) ?? policy.dedupeTtlMs;
      const attributes = v.optRecord(m.attributes, `${at}attributes`);
      if (attributes) v.serialise(attributes, `${at}attributes`);
      if (dedupeKey !== undefined) {
        const owner = this.store.dedupeOwner(q.id, dedupeKey, now);
        if (owner !== null) {
          results.push({ id: messageId(owner), deduped: true });
          return;
        }
        const inBatch = seenKeys.get(dedupeKey);
        if (inBatch !== undefined) {
          answers.push([results.length, inBatch]);
          results.push({ id: '', deduped: true });
          return;
        }
        seenKeys.set(dedupeKey, fresh.length);
      }
      const extra: Extra = {};
      if (dedupeKey !== undefined) extra.dedupeKey = dedupeKey;
      if (attributes) extra.attributes = attributes;
      if (contentType) extra.contentType = contentType;
      if (orderingKey) extra.orderingKey = orderingKey;
      if (meta !== undefined) extra.meta = m.meta;
      fresh.push({
        body,
        size,
        visibleAt: now + delay,
        expiresAt: policy.maxMessageAgeMs === null ? null : now + policy.maxMessageAgeMs,
        extra: Object.keys(extra).length ? JSON.stringify(extra) : null,
        dedupeKey: dedupeKey ?? null,
        dedupeUntil: now + ttl,
      });
      answers.push([results.length, fresh.length - 1]);
      results.push({ id: '', deduped: false });
      bytes += size;
    });
    if (fresh.length === 0) return results;
    const live = q.n_waiting + q.n_leased;
    if (policy.maxDepth !== null && live + fresh.length > policy.maxDepth) {
      throw new QuaysideError('queue_full', `queue "${q.name}" is full: ${live} of ${policy.maxDepth} messages (maxDepth)`);
    }
    if (policy.maxBytes !== null && q.live_bytes + bytes > policy.maxBytes) {
      throw new QuaysideError('queue_full', `queue "${q.name}" is full: ${q.live_bytes} + ${bytes} bytes is over ${policy.maxBytes} (maxBytes)`);
    }
    this.takeQuota(q, fresh.length, now);
    const ids = this.store.enqueue(q.id, fresh, now).map(messageId);
    for (const [r, f] of answers) results[r].id = ids[f];
    for (const m of fresh) if (m.visibleAt > now) this.noteDelayed(q.id, m.visibleAt);
    this.note(q, 'pushed', ids);
    return results;
  }

  private takeQuota(q: QueueRow, n: number, now: number): void {
    // No quota anywhere (the default): skip the look-up on the push path.
    if (!this.quotasInUse && (q.dialect !== 'cache' || this.dailyQuota === null)) return;
    const row = this.store.namespace(q.ns);
    const quota = row?.daily_quota ?? (q.dialect === 'cache' ? this.dailyQuota : null);
    if (quota === null || quota === undefined) return;
    const day = Math.floor(now / TIME.DAY);
    const used = row && row.day === day ? row.used : 0;
    if (used + n > quota) {
      const resetAt = (day + 1) * TIME.DAY;
      // A batch that would pass the quota is refused whole, while some of the day's allowance may be left.
      const what = used >= quota ? `has used its ${quota} messages for today` : `has ${quota - used} of its ${quota} messages left for today, fewer than the ${n} in this batch`;
      const when = resetAt <= MAX_TIME ? new Date(resetAt).toISOString() : 'the next UTC day (past the last instant a date can hold)';
      throw new QuaysideError('quota_exceeded', `namespace "${q.ns}" ${what}; it accepts more at ${when}`, { resetAt, details: { quota, used, resetAt } });
    }
    this.store.useQuota(q.ns, day, n);
  }

  private noteDelayed(queueId: number, at: number): void {
    const cur = this.delayedAt.get(queueId);
    if (cur === undefined || at < cur) this.delayedAt.set(queueId, at);
  }

  private refreshDelayed(queueId: number, now: number): void {
    const t = this.store.nextDelayed(queueId, now);
    if (t === null) this.delayedAt.delete(queueId);
    else this.delayedAt.set(queueId, t);
  }

  // ------------------------------------------------------------------ lease and settle

  /** `leaseMs` in the answer: the lease its messages got (the one asked for, else the queue's default). */
  pull(args: Ref & { max?: unknown; leaseMs?: unknown; waitMs?: unknown; waitUntil?: unknown; consumerId?: unknown }, actor: Actor = SYSTEM_ACTOR, signal?: AbortSignal): Promise<{ messages: Delivery[]; leaseMs: number }> {
    return new Promise((resolve, reject) => {
      this.op(() => {
        // Not used, but a bad one is still a bad request.
        v.optStr(args.consumerId, 'consumerId', 1000);
        const q = this.queueRow(args, actor);
        const s = this.settings(q);
        if (s.consumer) throw conflict(`queue "${q.name}" has a consumer app (${s.consumer.appId}); it delivers by push and refuses pulls`);
        const max = v.optInt(args.max, 'max', 1, LIMITS.maxPullMessages) ?? 1;
        const leaseMs = v.optInt(args.leaseMs, 'leaseMs', 1, 12 * TIME.HOUR) ?? s.policy.leaseMs;
        const waitMs = v.optInt(args.waitMs, 'waitMs', 0, LIMITS.maxWaitMs) ?? 0;
        const until = v.optInt(args.waitUntil, 'waitUntil', 0, MAX_TIME);
        // A wait whose end has passed (a client's next hold arriving after an advance) takes nothing.
        if (until !== undefined && until <= this.clock.now()) return { q, got: [], max, leaseMs, waitMs: 0, until };
        // Cancelled before its turn came: it takes nothing either.
        if (signal?.aborted) return { q, got: [], max, leaseMs, waitMs: 0, until };
        const got = this.claimNow(q, max, leaseMs);
        return { q, got, max, leaseMs, waitMs, until };
      }).then(({ q, got, max, leaseMs, waitMs, until }) => {
        // Cancelled while its claim committed: nobody will read the answer, so the leases are undone first.
        if (got.length > 0 && signal?.aborted) {
          const done = () => resolve({ messages: [], leaseMs });
          return void this.unclaim(got.map((m) => m.receipt)).then(done, done);
        }
        if (got.length > 0 || waitMs === 0 || signal?.aborted) return resolve({ messages: got, leaseMs });
        this.hold(q.id, max, leaseMs, waitMs, until, signal, (messages) => resolve({ messages, leaseMs }));
      }, reject);
    });
  }

  private hold(queueId: number, max: number, leaseMs: number, waitMs: number, until: number | undefined, signal: AbortSignal | undefined, resolve: (m: Delivery[]) => void): void {
    const now = this.clock.now();
    // On the engine's clock the wait runs to `until` when the client keeps one deadline over several
    // holds: a hold that ended at now + waitMs would leave a gap until the next one arrives, and an
    // advance would run through it, missing what became ready there. `waitMs` still bounds the hold
    // in real time.
    const deadline = until ?? now + waitMs;
    // The clock may have passed `until` since the claim (an advance in between): the wait is over.
    if (deadline <= now) return resolve([]);
    const timer = setTimeout(() => this.waiters.finish(w, []), Math.min(waitMs, deadline - now));
    timer.unref?.();
    const onAbort = () => this.waiters.finish(w, []);
    const w: Waiter = {
      queueId, max, leaseMs, resolve, done: false,
      deadline,
      cleanup: () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      },
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    this.waiters.add(w);
    this.arm();
    // A message may have become ready between the claim and now.
    void this.serveWaiters(queueId);
  }

  private serving = new Set<number>();

  /** Queues whose waiters were kicked while a serve was running: served again once it ends. */
  private serveAgain = new Set<number>();

  private async serveWaiters(queueId: number): Promise<void> {
    if (this.serving.has(queueId)) {
      // A commit made messages ready while a serve was in flight (its claim may have run before
      // them): serve again afterwards, or the wake-up would be lost.
      this.serveAgain.add(queueId);
      return;
    }
    this.serving.add(queueId);
    try {
      const served = await this.gc.run(() => {
        const out: [Waiter, Delivery[]][] = [];
        const q = this.store.queueById(queueId);
        if (!q) return out;
        for (const w of this.waiters.waiting(queueId)) {
          if (w.done) continue;
          const got = this.claimNow(q, w.max, w.leaseMs);
          if (got.length === 0) break;
          out.push([w, got]);
        }
        return out;
      });
      // Answered only now that the leases are committed. A waiter that ended meanwhile (cancelled,
      // timed out) will read nothing: its leases are undone rather than left to expire.
      const unread: string[] = [];
      for (const [w, got] of served) {
        if (w.done) unread.push(...got.map((m) => m.receipt));
        else this.waiters.finish(w, got);
      }
      if (unread.length > 0) await this.unclaim(unread);
    } catch {
      // A failed commit leaves the waiters waiting; the next commit wakes them again.
    } finally {
      this.serving.delete(queueId);
      if (this.serveAgain.delete(queueId) && this.waiters.has(queueId)) void this.serveWaiters(queueId);
    }
  }

  private claimNow(q: QueueRow, max: number, leaseMs: number): Delivery[] {
    const now = this.clock.now();
    const token = crypto.randomInt(1, 2 ** 47);
    const rows = this.store.claim(q.id, max, now, now + leaseMs, token, LIMITS.maxAnswerBodyBytes);
    if (rows.length === 0) return [];
    if (this.handedOut) {
      this.claimsInAdvance++;
      for (const r of rows) this.handedOut.push({ id: r.id, token });
    }
    // The first row claimed is the oldest ready one: its wait is the lag at this instant.
    this.lag.point(q.id, q.n_waiting, now - rows[0].visible_at);
    const out = rows.map((r) => toDelivery(q, r, now, token));
    this.note(q, 'leased', out.map((m) => m.id));
    return out;
  }

  /**
   * Gives back leases nobody received (a held pull cancelled, or its connection gone, before its
   * answer went out): each message is waiting again in its old place and the attempt is not counted.
   * A receipt that no longer names its lease (settled, expired) is left alone. Resolves to how many.
   */
  unclaim(receipts: readonly string[]): Promise<number> {
    return this.op(() => {
      let n = 0;
      for (const receipt of receipts) {
        const hit = this.leasedBy(receipt, SYSTEM_ACTOR);
        if (!hit) continue;
        this.store.unclaim(hit.row);
        this.note(hit.q, 'requeued', [messageId(hit.row.id)]);
        n++;
      }
      return n;
    });
  }

  /** The leased row a receipt names, if the receipt is still good (strict: its lease has not ended). */
  private leasedBy(receipt: unknown, actor: Actor, scope: QueueRow | null = null): { row: DueRow; q: QueueRow } | null {
    checkReceipt(receipt);
    // Receipts are opaque to whoever holds them: a string that names no live lease is stale (false),
    // whatever its shape, as with the hosted products; only what cannot be a receipt at all throws.
    const r = parseReceipt(receipt);
    if (!r) return null;
    const row = this.store.leased(r.id, r.token, this.clock.now());
    if (!row) return null;
    // Settling through one queue never reaches another's message: that receipt is stale here.
    if (scope && row.queue_id !== scope.id) return null;
    const q = this.store.queueById(row.queue_id)!;
    if (actor.namespace !== null && actor.namespace !== q.ns) return null;
    return { row, q };
  }

  /**
   * The queue a settle names, if it names one (see leasedBy's scope). Its receipt is checked first:
   * what cannot be a receipt at all is invalid_argument, on a queue that does not exist too.
   */
  private scopeOf(args: { receipt?: unknown; namespace?: unknown; queue?: unknown }, actor: Actor): QueueRow | null {
    if ('receipt' in args) checkReceipt(args.receipt);
    // Any of the queue's keys names it (queueId or dialect alone too: then namespace and queue are needed).
    const a = args as { namespace?: unknown; queue?: unknown; queueId?: unknown; dialect?: unknown };
    if (a.namespace == null && a.queue == null && a.queueId == null && a.dialect == null) return null;
    return this.queueRow(args as Ref, actor);
  }

  ack(args: { receipt: unknown; namespace?: unknown; queue?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ ok: boolean }> {
    return this.op(() => ({ ok: this.ackNow([args.receipt], actor, this.scopeOf(args, actor)) === 1 }));
  }

  ackBatch(args: { receipts: unknown; namespace?: unknown; queue?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ acked: number; stale: number }> {
    return this.op(() => {
      if (!Array.isArray(args.receipts)) throw invalid('receipts must be an array');
      if (args.receipts.length > LIMITS.maxBatchMessages) throw invalid(`at most ${LIMITS.maxBatchMessages} receipts at once`);
      for (const r of args.receipts) checkReceipt(r);
      const acked = this.ackNow(args.receipts, actor, this.scopeOf(args, actor));
      return { acked, stale: args.receipts.length - acked };
    });
  }

  /** Acks what the receipts name (all checked first); a receipt given twice acks once. Returns how many. */
  private ackNow(receipts: unknown[], actor: Actor, scope: QueueRow | null): number {
    const hits = receipts.map((r) => this.leasedBy(r, actor, scope));
    const good: NonNullable<(typeof hits)[number]>[] = [];
    const seen = new Set<number>();
    for (const h of hits) {
      if (!h || seen.has(h.row.id)) continue;
      seen.add(h.row.id);
      good.push(h);
    }
    this.store.ack(good.map((h) => h.row));
    for (const hit of good) this.note(hit.q, 'acked', [messageId(hit.row.id)]);
    return good.length;
  }

  nack(args: { receipt: unknown; delayMs?: unknown; reason?: unknown; error?: unknown; dead?: unknown; namespace?: unknown; queue?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ ok: boolean }> {
    return this.op(() => ({ ok: this.nackNow(args, actor, this.scopeOf(args, actor), '') }));
  }

  /** One nack; its arguments are checked before anything moves, so a bad nack settles nothing. */
  private nackNow(args: { receipt: unknown; delayMs?: unknown; reason?: unknown; error?: unknown; dead?: unknown }, actor: Actor, scope: QueueRow | null, at: string): boolean {
    const reason = v.optStr(args.reason, `${at}reason`, 200);
    const error = args.error === undefined || args.error === null ? null : toWellFormed(v.anyText(args.error, `${at}error`, 1 << 20).slice(0, 8192));
    const toDead = v.bool(args.dead, `${at}dead`) ?? false;
    const hit = this.leasedBy(args.receipt, actor, scope);
    // A stale receipt's delay is held to the named queue's limit too: an over-long delay is a bad
    // request whether or not the lease is still there (no lease and no queue named: a year).
    const limitOf = hit?.q ?? scope;
    const maxDelay = limitOf ? this.policyOf(limitOf).maxNackDelayMs : 365 * TIME.DAY;
    const delay = v.optInt(args.delayMs, `${at}delayMs`, 0, maxDelay) ?? 0;
    if (!hit) return false;
    this.release(hit.q, hit.row, { delay, reason: reason ?? null, error, toDead });
    return true;
  }

  /**
   * Acks and nacks of one queue as one transition (the env dialect's POST …/ack): a bad receipt or
   * delay anywhere refuses the whole request and settles nothing; a receipt of another queue, or one
   * already settled earlier in the same request, is stale.
   */
  settleBatch(args: Ref & { acks?: unknown; nacks?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ acked: number; nacked: number; stale: number }> {
    return this.op(() => {
      const scope = this.queueRow(args, actor);
      const acks = args.acks ?? [];
      const nacks = args.nacks ?? [];
      if (!Array.isArray(acks)) throw invalid('acks must be an array of receipts');
      if (!Array.isArray(nacks)) throw invalid('nacks must be an array of { receipt, delayMs? }');
      if (acks.length + nacks.length > LIMITS.maxBatchMessages) throw invalid(`at most ${LIMITS.maxBatchMessages} receipts at once`);
      const acked = this.ackNow(acks, actor, scope);
      let nacked = 0;
      nacks.forEach((n, i) => {
        const one = v.obj(n, `nacks[${i}]`);
        if (this.nackNow({ receipt: one.receipt, delayMs: one.delayMs }, actor, scope, `nacks[${i}].`)) nacked++;
      });
      return { acked, nacked, stale: acks.length + nacks.length - acked - nacked };
    });
  }

  private release(q: QueueRow, row: DueRow, o: { delay: number; reason: string | null; error: string | null; toDead: boolean; timeout?: boolean }): void {
    const policy = this.policyOf(q);
    const now = this.clock.now();
    const id = messageId(row.id);
    // A lease that ran out was released when it ended, which is long before now when the emulator
    // was stopped meanwhile (a start on a data directory catches up).
    const releasedAt = o.timeout && row.lease_until !== null ? row.lease_until : now;
    if (o.toDead || row.attempts >= policy.maxDeliveries) {
      const reason = o.timeout ? policy.reasons.timeout : policy.recordNackReason && o.reason ? o.reason : policy.reasons.nack;
      const deadAt = this.deathDate(releasedAt);
      this.store.kill({ ...row, state: LEASED }, deadAt, reason, o.error, deadAt + policy.deadRetentionMs);
      this.note(q, 'dead', [id]);
      return;
    }
    // Back of the queue: visible from the moment it was released (or its delay ends).
    const at = releasedAt + o.delay;
    this.store.requeue(row, at, o.error);
    if (at > now) this.noteDelayed(q.id, at);
    this.note(q, 'requeued', [id]);
  }

  extend(args: { receipt: unknown; leaseMs?: unknown; namespace?: unknown; queue?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ ok: boolean; leaseUntil: number | null }> {
    return this.op(() => {
      const leaseMsArg = v.optInt(args.leaseMs, 'leaseMs', 1, 12 * TIME.HOUR);
      const hit = this.leasedBy(args.receipt, actor, this.scopeOf(args, actor));
      if (!hit) return { ok: false, leaseUntil: null };
      const leaseUntil = this.clock.now() + (leaseMsArg ?? this.policyOf(hit.q).leaseMs);
      this.store.extend(hit.row.id, leaseUntil);
      this.note(hit.q, 'extended', [messageId(hit.row.id)]);
      return { ok: true, leaseUntil };
    });
  }

  // ------------------------------------------------------------------ reads

  peek(args: Ref & { states?: unknown; limit?: unknown; cursor?: unknown; search?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ messages: MessageView[]; next: string | null; total: number }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      const states = this.statesArg(args.states);
      const limit = v.optInt(args.limit, 'limit', 1, LIMITS.maxPageSize) ?? 50;
      const after = args.cursor === undefined || args.cursor === null ? 0 : parseMessageId(args.cursor) ?? badCursor(args.cursor);
      const search = v.optStr(args.search, 'search', 1000) ?? null;
      const now = this.clock.now();
      const rows = this.store.peek(q.id, states, now, after, limit + 1, search);
      const page = rows.slice(0, countWithin(rows, limit, LIMITS.maxAnswerBodyBytes));
      const more = rows.length > page.length;
      return {
        messages: page.map((r) => toView(q, r, now)),
        next: more ? messageId(page[page.length - 1].id) : null,
        total: this.store.peekCount(q.id, states, now, search),
      };
    });
  }

  private statesArg(s: unknown): MessageState[] {
    if (s === undefined || s === null) return ['ready', 'delayed', 'leased'];
    if (!Array.isArray(s) || s.length === 0) throw invalid('states must be a non-empty array of ready, delayed, leased, dead');
    for (const x of s) if (!ALL_STATES.includes(x as MessageState)) throw invalid(`unknown state ${v.describe(x)}; states are ready, delayed, leased, dead`);
    return s as MessageState[];
  }

  getMessage(args: Ref & { id: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<MessageView> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      if (typeof args.id !== 'string' || args.id.length === 0 || args.id.length > 64) throw invalid(`id must be a message id (a non-empty string); got ${v.describe(args.id)}`);
      const id = parseMessageId(args.id);
      const row = id === null ? undefined : this.store.message(q.id, id);
      if (!row) throw notFound(`message ${v.describe(args.id)} not found in queue "${q.name}"`);
      return toView(q, row, this.clock.now());
    });
  }

  deadList(args: Ref & { limit?: unknown; cursor?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ messages: MessageView[]; total: number; next: string | null }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      const limit = v.optInt(args.limit, 'limit', 1, LIMITS.maxPageSize) ?? 100;
      // The cursor is the last row's place in the order they died: `d_<deadAt>_<seq>`.
      let afterAt = -1;
      let afterSeq = 0;
      if (args.cursor !== undefined && args.cursor !== null) {
        const m = typeof args.cursor === 'string' ? /^d_(\d+)_(\d+)$/.exec(args.cursor) : null;
        if (!m) badCursor(args.cursor);
        afterAt = Number(m![1]);
        afterSeq = Number(m![2]);
      }
      const now = this.clock.now();
      const rows = this.store.deadPage(q.id, afterAt, afterSeq, limit + 1);
      const page = rows.slice(0, countWithin(rows, limit, LIMITS.maxAnswerBodyBytes));
      const last = page[page.length - 1];
      return {
        messages: page.map((r) => toView(q, r, now)),
        total: q.n_dead,
        next: rows.length > page.length ? `d_${last.dead_at}_${last.seq}` : null,
      };
    });
  }

  stats(args: Ref, actor: Actor = SYSTEM_ACTOR): Promise<{ counts: QueueCounts; lagHistory: LagStep[]; now: number }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      const now = this.clock.now();
      const counts = this.countsOf(q, now);
      return { counts, lagHistory: this.lag.history(q, now, counts), now };
    });
  }

  auditList(args: { namespace?: unknown; queue?: unknown; limit?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ entries: AuditEntry[] }> {
    return this.op(() => {
      let ns = args.namespace === undefined || args.namespace === null ? null : v.name(args.namespace, 'namespace');
      const queue = args.queue === undefined || args.queue === null ? null : v.name(args.queue, 'queue');
      const limit = v.optInt(args.limit, 'limit', 1, LIMITS.maxAuditEntries) ?? 100;
      if (actor.namespace !== null) {
        if (ns !== null && ns !== actor.namespace) return { entries: [] };
        ns = actor.namespace;
      }
      return {
        entries: this.store.auditList(ns, queue, limit).map((r) => ({
          id: r.id, at: r.at, token: r.token, tokenId: r.token_id, namespace: r.ns, queue: r.queue, action: r.action as AuditEntry['action'], count: r.count, detail: r.detail,
        })),
      };
    });
  }

  /** One audit record, in the caller's transaction: when, which token, which queue, how many. */
  private audit(actor: Actor, q: QueueRow, action: AuditEntry['action'], count: number, detail: string | null): void {
    this.store.audit(this.clock.now(), actor.name, actor.tokenId, q.ns, q.name, action, count, detail);
  }

  // ------------------------------------------------------------------ dead letters and purge

  private idsArg(ids: unknown): number[] | null {
    if (ids === undefined || ids === null) return null;
    if (!Array.isArray(ids)) throw invalid('ids must be an array of message ids');
    if (ids.length > 10000) throw invalid('at most 10000 ids at once');
    const out: number[] = [];
    for (const id of ids) {
      if (typeof id !== 'string' || id.length === 0 || id.length > 64) throw invalid(`ids must hold message ids (non-empty strings); got ${v.describe(id)}`);
      // Ids are opaque to callers: one that names no message (of this emulator's form or not)
      // matches nothing, as an unknown m_… does, the way a made-up receipt settles nothing.
      const n = parseMessageId(id);
      if (n !== null) out.push(n);
    }
    return [...new Set(out)];
  }

  replay(args: Ref & { ids?: unknown; max?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ replayed: number }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      const ids = this.idsArg(args.ids);
      const max = v.optInt(args.max, 'max', 1, LIMITS.maxReplay) ?? 100;
      const policy = this.policyOf(q);
      const now = this.clock.now();
      const done = this.store.replay(q.id, ids, max, now, policy.maxMessageAgeMs === null ? null : now + policy.maxMessageAgeMs);
      this.audit(actor, q, 'replay', done.length, ids ? `ids: ${done.map(messageId).join(', ').slice(0, 2000)}` : `oldest ${max}`);
      // Audited even when it matched nothing; an event only when a message changed state.
      if (done.length > 0) this.note(q, 'replayed', done.map(messageId));
      return { replayed: done.length };
    });
  }

  purgeDead(args: Ref & { ids?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ purged: number }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      const ids = this.idsArg(args.ids);
      const gone = this.store.purgeDead(q.id, ids);
      this.audit(actor, q, 'purge_dead', gone.length, ids ? `ids: ${gone.map(messageId).join(', ').slice(0, 2000)}` : 'all');
      if (gone.length > 0) this.note(q, 'purged', gone.map(messageId));
      return { purged: gone.length };
    });
  }

  purge(args: Ref & { confirm: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<{ purged: number }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      if (args.confirm !== q.name) throw invalid(`confirm must be the queue's name ("${q.name}") to purge it`);
      this.lag.beforeLeaving(q, this.clock.now());
      const n = this.store.purgeLive(q.id);
      this.delayedAt.delete(q.id);
      this.audit(actor, q, 'purge', n, 'live messages');
      if (n > 0) this.note(q, 'purged', []);
      return { purged: n };
    });
  }

  // ------------------------------------------------------------------ env push consumers

  setConsumer(args: Ref & { consumer: unknown; dialect?: unknown }, actor: Actor = SYSTEM_ACTOR): Promise<QueueInfo> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      if (q.dialect !== 'env') throw conflict(`queue "${q.name}" is a ${q.dialect} queue; only env queues have consumer apps`);
      const next = args.consumer === null ? null : consumerSettings(v.obj(args.consumer, 'consumer'), this.policyOf(q).leaseMs);
      this.store.setConsumer(q.id, next ? JSON.stringify(next) : null);
      this.policies.delete(q.id);
      this.note(q, 'queue_updated', []);
      return this.info(this.store.queueById(q.id)!, this.clock.now());
    });
  }

  /**
   * Makes `deliver` receive the queue's batches (only while `appId`, if given, is the queue's
   * consumer app, as a platform calls only the app set as consumer); the queue must have one set.
   */
  attachConsumer(args: Ref & { dialect?: unknown; appId?: unknown }, deliver: (batch: string, messages: Delivery[]) => void, actor: Actor = SYSTEM_ACTOR, dropped?: (consumer: string) => void): Promise<{ consumer: string; settings: ConsumerSettings }> {
    return this.op(() => {
      const q = this.queueRow(args, actor);
      const appId = v.optStr(args.appId, 'appId', 200) ?? null;
      const settings = this.settings(q).consumer;
      if (!settings) throw conflict(`queue "${q.name}" has no consumer app; set one first (consumer.set)`);
      const a = this.consumers.attach(q.id, appId, deliver, dropped);
      this.touched.add(q.id);
      return { consumer: a.id, settings };
    });
  }

  consumerDone(args: { consumer: unknown; batch: unknown }): Promise<{ ok: boolean }> {
    return this.op(() => {
      const c = v.str(args.consumer, 'consumer');
      const b = v.str(args.batch, 'batch');
      const queueId = this.consumers.done(c, b);
      if (queueId !== null) this.touched.add(queueId);
      return { ok: queueId !== null };
    });
  }

  /** `keepInFlight`: the run stops but finishes its batches in hand (see ConsumerHub.detach). */
  detachConsumer(args: { consumer: unknown }, keepInFlight = true): Promise<{ ok: boolean }> {
    return this.op(() => {
      const queueId = this.consumers.detach(v.str(args.consumer, 'consumer'), keepInFlight);
      if (queueId !== null && !keepInFlight) this.touched.add(queueId); // slots freed: serve the others
      return { ok: queueId !== null };
    });
  }

  private consumerBusy = new Set<number>();

  /** Consumers let go by a queue.delete in the running transaction (see afterCommit). */
  private droppedConsumers: DroppedConsumers[] = [];

  /** Forms batches: full ones at once, partial ones when the oldest has waited maxBatchTimeoutMs. */
  private consumerAgain = new Set<number>();

  private async serveConsumers(queueId: number): Promise<void> {
    if (this.consumerBusy.has(queueId)) {
      this.consumerAgain.add(queueId);
      return;
    }
    this.consumerBusy.add(queueId);
    const sends: (() => void)[] = [];
    try {
      await this.gc.run(() => {
        const q = this.store.queueById(queueId);
        if (!q) return;
        const s = this.settings(q).consumer;
        if (!s) return;
        const now = this.clock.now();
        let due: number | null = null;
        for (let free = this.consumers.freeSlots(q.id, s); free > 0; free--) {
          const ready = this.store.readyAtMost(q.id, now, s.maxBatchSize);
          if (ready === 0) break;
          if (ready < s.maxBatchSize) {
            const oldest = this.store.oldestReadyAt(q.id, now)!;
            if (now - oldest < s.maxBatchTimeoutMs) {
              due = oldest + s.maxBatchTimeoutMs;
              break;
            }
          }
          const started = this.consumers.start(q.id, s.appId, now + s.visibilityMs);
          if (!started) break;
          const got = this.claimNow(this.store.queueById(q.id)!, s.maxBatchSize, s.visibilityMs);
          sends.push(() => started.attachment.deliver(started.batch, got));
        }
        this.consumers.setBatchDue(q.id, due);
      });
      for (const send of sends) send();
    } catch {
      // The commit failed: nothing was leased; the next commit or due time tries again.
    } finally {
      this.consumerBusy.delete(queueId);
      if (this.consumerAgain.delete(queueId) && this.consumers.has(queueId)) void this.serveConsumers(queueId);
      this.arm();
    }
  }

  // ------------------------------------------------------------------ due work and the clock

  /**
   * Applies every piece of work due now: lease expiries, age limits, dead retention, delayed → ready.
   * `diesFrom`: deaths are dated when they fell due (a start after a stop catches up on them), but
   * not before this. A configure that shortens the age limit passes now: a message past a limit it
   * never had before dies now, and is kept its dead retention from now.
   */
  private applyDue(diesFrom = -Infinity): void {
    const now = this.clock.now();
    const leaving = new Set<number>();
    // One due instant at a time, in time order: a sweep may catch up many instants (a start on a
    // data directory, a process that was stopped), and a lease that ended before a message's age
    // limit must end first. Within one instant, age limits apply before lease ends: a message whose
    // last lease ends just as its age is reached is too old (dropped, or dead as expired), not a
    // failure to be kept a further retention.
    // Each turn moves on to a later instant, so a row that cannot be settled (or one made due again
    // at this instant, as a death with no retention is) waits for the next sweep instead of
    // spinning this loop.
    for (let at = this.store.nextDue(), last = -Infinity; at !== null && at <= now && at > last; last = at, at = this.store.nextDue()) {
      this.expireDue(at, now, leaving, diesFrom);
      this.endLeases(at);
    }
    for (const [queueId, at] of [...this.delayedAt]) {
      if (at > now) continue;
      const q = this.store.queueById(queueId);
      if (!q) {
        this.delayedAt.delete(queueId);
        continue;
      }
      this.refreshDelayed(queueId, now);
      // The instant kept is a lower bound: the message it came from may have gone since (expired
      // while delayed, purged), and then nothing became ready and there is nothing to announce.
      if (this.store.readyAtMost(queueId, now, 1) > 0) this.note(q, 'ready', []);
    }
    this.waiters.expire(now);
    for (const queueId of this.consumers.expire(now)) this.touched.add(queueId);
    for (const queueId of this.consumers.queues()) this.touched.add(queueId);
  }

  /**
   * Age limits and dead retention due at or before `at` (when they fell due); `now` is when they
   * are noticed. A message dies no earlier than `diesFrom`.
   */
  private expireDue(at: number, now: number, leaving: Set<number>, diesFrom: number): void {
    for (;;) {
      const rows = this.store.dueExpiries(at, SWEEP_BATCH);
      for (const row of rows) {
        const q = this.store.queueById(row.queue_id);
        if (!q) continue;
        if (row.state === WAITING && !leaving.has(q.id)) {
          leaving.add(q.id);
          this.lag.beforeLeaving(q, now);
        }
        const policy = this.policyOf(q);
        if (row.state === DEAD || policy.onMaxAge === 'drop') {
          this.store.drop(row);
          this.note(q, row.state === DEAD ? 'purged' : 'dropped', [messageId(row.id)]);
        } else {
          const deadAt = this.deathDate(Math.max(at, diesFrom));
          this.store.kill(row, deadAt, policy.reasons.expired, null, deadAt + policy.deadRetentionMs);
          this.note(q, 'dead', [messageId(row.id)]);
        }
      }
      if (rows.length < SWEEP_BATCH) break;
    }
  }

  /**
   * When a message that died of due work (`dueAt`) is dated: then, but never before a death this
   * process has already dated. Dead letters list by date, so a timer that ran late must not slip
   * one in behind a page a client already read.
   */
  private deathDate(dueAt: number): number {
    // Never after now, though: a system clock set back must not date deaths in the future.
    this.lastDeathAt = Math.max(dueAt, Math.min(this.lastDeathAt, this.clock.now()));
    return this.lastDeathAt;
  }

  /** Leases that ended at or before `at`: back to the queue, or dead once out of deliveries. */
  private endLeases(at: number): void {
    for (;;) {
      const rows = this.store.dueLeases(at, SWEEP_BATCH);
      for (const row of rows) {
        const q = this.store.queueById(row.queue_id);
        if (q) this.release(q, row, { delay: 0, reason: null, error: null, toDead: false, timeout: true });
      }
      if (rows.length < SWEEP_BATCH) break;
    }
  }

  /**
   * Expired dedupe keys are already ignored at look-up; this keeps the table from growing. Run when
   * a half-hour step begins, bounded, because every operation waits for it. What that leaves (keys
   * expiring faster than 10,000 a step, a data directory from before the sweep) goes a batch at the
   * start of each transaction until none is left, so it cannot pile up under steady work.
   */
  private sweepDedupe(): void {
    const now = this.clock.now();
    // A transaction may write many keys (batches in one group commit): each backlog sweep takes
    // more than came in since the last, so the backlog shrinks whatever the load.
    const written = this.store.takeDedupeWritten();
    if (this.dedupeBacklog) {
      const max = DEDUPE_SWEEP_ROWS + written;
      this.dedupeBacklog = this.store.sweepDedupe(now, max) === max;
      return;
    }
    let full = true;
    for (let i = 0; i < DEDUPE_SWEEP_BATCHES && full; i++) full = this.store.sweepDedupe(now, DEDUPE_SWEEP_ROWS) === DEDUPE_SWEEP_ROWS;
    this.dedupeBacklog = full;
  }

  /** The next instant at which any due work exists, or null. */
  private nextDueAt(): number | null {
    let t = this.store.nextDue();
    const consider = (x: number | null) => {
      if (x !== null && (t === null || x < t)) t = x;
    };
    for (const at of this.delayedAt.values()) consider(at);
    consider(this.waiters.nextDeadline());
    consider(this.consumers.nextDue());
    // Steps of the lag history roll over for queues that hold messages.
    if (this.store.anyWaiting()) consider(this.lag.nextStepAt());
    return t;
  }

  /** One timer, armed for the next due instant (system clock only; a virtual clock moves by advance). */
  private arm(): void {
    if (this.closed || this.clock.mode === 'virtual') return;
    const at = this.nextDueAt();
    if (at === null) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.timerAt = null;
      return;
    }
    if (this.timer && this.timerAt === at) return;
    if (this.timer) clearTimeout(this.timer);
    const delay = Math.min(Math.max(0, at - this.clock.now()), 2 ** 31 - 1);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = null;
      this.gc.run(() => this.applyDue()).catch(() => this.arm());
    }, delay);
    // Due work alone must not keep a process alive (an in-process engine in a script or a test).
    this.timer.unref?.();
  }

  /**
   * Moves a virtual clock forward by `ms`, applying due work in time order on the way; resolves
   * once all of it has committed and its events have gone out.
   */
  advance(ms: unknown): Promise<number> {
    if (this.closed) return Promise.reject(new QuaysideError('unavailable', 'the emulator is shut down; the clock cannot move'));
    if (!(this.clock instanceof VirtualClock)) return Promise.reject(conflict("the clock is not virtual; start the emulator with one: quayside start --clock virtual, startEmulator({ clock: 'virtual' }), or the quayside.clock setting in VS Code"));
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return Promise.reject(invalid(`ms must be a finite number of milliseconds ≥ 0, got ${v.describe(ms)}`));
    // Past the last instant a Date can hold, times lose their precision (and the lag history's steps stop moving).
    if (this.clock.now() + ms > MAX_TIME) return Promise.reject(invalid(`ms would move the clock past ${new Date(MAX_TIME).toISOString()}, the last instant a date can hold; got ${v.describe(ms)}`));
    const run = async (): Promise<number> => {
      const clock = this.clock as VirtualClock;
      // Let requests already on their way in (a recv sent just before this call, from a client in
      // the same process) reach the engine first, so their waits count from before the jump. A
      // handle's first call is several round trips (connect, hello, queue setup), so wait until
      // nothing new has arrived for three turns in a row; at most about 50 turns, for a client that
      // keeps connecting.
      let seen = this.arrivals();
      const until = realNow() + ARRIVALS_WAIT_MAX_MS;
      for (let quiet = 0, turn = 0; quiet < 3 && (quiet > 0 || (turn < ARRIVALS_WAIT_TURNS && realNow() < until)); turn++) {
        await new Promise((r) => setTimeout(r, 1));
        await this.settle();
        const now = this.arrivals();
        quiet = now === seen ? quiet + 1 : 0;
        seen = now;
      }
      // Time is whole milliseconds. Rounded, not floored: 0.57 * 100 is 56.99999999999999, and a
      // test that computed its step must not land a millisecond short of a lease end.
      const target = clock.now() + Math.round(ms);
      // The clock is saved with the work done at each instant, so no stored time is ahead of it.
      // close() may come while this advance waits: then a coded error, not the closed store's own.
      const open = () => {
        if (this.closed) throw new QuaysideError('unavailable', 'the emulator was shut down while its clock was advancing');
      };
      const applyHere = () => {
        open();
        this.applyDue();
        this.saveClock();
      };
      this.handedOut = [];
      try {
        for (let guard = 0; guard < 100000; guard++) {
          open();
          const next = this.nextDueAt();
          if (next === null || next > target) break;
          clock.set(next);
          await this.gc.run(applyHere);
          await this.settle();
          await this.awaitHolders();
          if (next <= clock.now() && this.nextDueAt() === next) break; // nothing more can happen at this instant
        }
        clock.set(target);
        await this.gc.run(applyHere);
        await this.settle();
        await this.awaitHolders();
      } finally {
        this.handedOut = null;
      }
      open();
      for (const l of this.clockListeners) l(clock.now());
      // Two loop turns: the clock event's write, then the poll phase in which a subscriber in this
      // process (a test's own client) reads it. Change events get the same turns from settle().
      for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
      return clock.now();
    };
    const p = (this.advancing ?? Promise.resolve(0)).then(run, run);
    this.advancing = p;
    return p;
  }

  /**
   * A virtual clock's time, kept with the data (CLOCK_META) so a restart on this directory goes on
   * from here. A system clock needs nothing: wall time has moved on by the next start.
   */
  saveClock(): void {
    if (this.clock instanceof VirtualClock) this.store.setMeta(CLOCK_META, String(this.clock.now()));
  }

  /**
   * Waits for the answers to what this advance handed out at the current instant (a held pull
   * answered, a batch delivered), before the clock moves on: a handler that acks at once must
   * have its ack applied at this instant, not arrive after the advance ran past the lease's end and
   * find it stale. The engine cannot know whether a holder will answer, so it waits until every
   * such lease is settled (acked, nacked, given back), or until none has been for HOLDERS_QUIET_MS
   * of real time (a handler waiting on a real timer, or a test that reads its pull only after the
   * advance): those answer after the advance, in real time, as docs/protocol.md says.
   */
  private async awaitHolders(): Promise<void> {
    const out = this.handedOut;
    if (!out || out.length === 0) return;
    let since = realNow();
    let quiet = 0;
    let claims = this.claimsInAdvance;
    while (!this.closed) {
      await new Promise((r) => setTimeout(r, 1));
      await this.settle();
      if (this.closed) break;
      const now = this.clock.now();
      // Claims made meanwhile (a consumer's next pull) join the list and are waited for too.
      const still = out.filter((h) => this.store.leased(h.id, h.token, now) !== undefined);
      const moved = still.length < out.length || this.claimsInAdvance !== claims;
      claims = this.claimsInAdvance;
      out.length = 0;
      out.push(...still);
      if (moved) {
        since = realNow();
        quiet = 0;
      } else quiet++;
      // All answered: a few quiet turns more, for a consumer's next pull after its nack (a message
      // ready again at this instant goes to it now, as it would on a real clock).
      if (out.length === 0 ? quiet >= HOLDERS_SETTLED_TURNS : realNow() - since >= HOLDERS_QUIET_MS) break;
    }
    // The rest answer after the advance, if ever: the clock does not wait for them again.
    out.length = 0;
  }

  /** Waits until the group commit is idle and follow-up work (held pulls, batches) has run. */
  private async settle(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      await this.gc.idle();
      await new Promise((r) => setImmediate(r));
      if (this.gc.pending === 0 && this.serving.size === 0 && this.consumerBusy.size === 0) return;
    }
  }

  // ------------------------------------------------------------------ tokens

  /**
   * A new token: `access` read or readwrite, for one `namespace` (null: all), named for the audit
   * log; committed before it is handed out.
   */
  createToken(access: unknown, namespace: unknown, name: unknown, actor: Actor = SYSTEM_ACTOR): Promise<string> {
    return this.op(() => this.tokens.create(access, namespace, name, actor));
  }

  /** A token given at start (or kept from an earlier run) that grants read-write on everything. */
  ensureAdminToken(token: string | undefined): string {
    return this.tokens.ensureAdmin(token);
  }

  /** Who a token is, as an actor with its access; null for a token this emulator does not know. */
  lookupToken(token: string): (Actor & { access: Access }) | null {
    return this.tokens.lookup(token);
  }

  // ------------------------------------------------------------------ lifecycle

  /**
   * Closes the engine. `flush: false` (a start that failed) writes nothing more: the lag readings
   * still in memory and the clock are left as the data directory had them.
   */
  async close(opts: { flush?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    await this.gc.idle();
    this.closed = true;
    this.gc.closed = true;
    if (opts.flush !== false) {
      try {
        this.lag.flush();
        this.saveClock();
      } catch {
        // Disk full at close: the chart misses its last second, and a virtual clock restarts from its last save.
      }
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
    this.checkpointTimer = null;
    for (const w of this.waiters.all()) this.waiters.finish(w, []);
    this.listeners.clear();
  }
}

function badCursor(c: unknown): never {
  throw invalid(`${v.describe(c)} is not a cursor from an earlier page`);
}

/** A callback of the server's must not break the commit's other answers, whatever it throws. */
function tellDropped(a: Attachment): void {
  try {
    a.dropped?.(a.id);
  } catch {
    // the connection is gone, or the callback is broken: there is nobody left to tell
  }
}

/** An `expire` audit entry's detail: the limits that changed, old → new (ms; "none" for no limit). */
function retentionChange(before: QueuePolicy, after: QueuePolicy): string {
  const ms = (n: number | null) => (n === null ? 'none' : String(n));
  const parts: string[] = [];
  if (before.maxMessageAgeMs !== after.maxMessageAgeMs) parts.push(`maxMessageAgeMs ${ms(before.maxMessageAgeMs)} → ${ms(after.maxMessageAgeMs)}`);
  if (before.deadRetentionMs !== after.deadRetentionMs) parts.push(`deadRetentionMs ${ms(before.deadRetentionMs)} → ${ms(after.deadRetentionMs)}`);
  return parts.join(', ');
}
