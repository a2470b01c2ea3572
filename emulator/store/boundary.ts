// The store boundary: every atomic operation the engine needs from a store, and the rows they
// trade in. store.ts implements it on SQLite. Another backend (Redis, for a team sharing one
// emulator) implements this interface and must pass the same engine and conformance tests.
//
// The rules an implementation keeps:
// - Every method runs inside the transaction the engine opened with transaction(); nothing is
//   visible to others or durable before that transaction commits. savepoint() /
//   releaseSavepoint() / rollbackSavepoint() bracket one operation inside it.
// - Each method is one transition of the queue state machine and keeps the queue's counts
//   (n_waiting, n_leased, n_dead, live_bytes) in step with the messages in the same transaction:
//   a rolled-back savepoint or transaction undoes them too. (The SQLite store holds them in memory
//   and persists them lazily, counting the messages again after an unclean stop.)
// - A receipt check (leased) is exact: the row's lease token matches and its lease has not ended
//   at `now`, whether or not any sweep has run.
// - Reads never change state.

export const WAITING = 0;
export const LEASED = 1;
export const DEAD = 2;

export interface QueueRow {
  id: number;
  pub_id: string;
  ns: string;
  name: string;
  dialect: string;
  created_at: number;
  n_waiting: number;
  n_leased: number;
  n_dead: number;
  live_bytes: number;
}

export interface MessageRow {
  id: number;
  queue_id: number;
  state: number;
  visible_at: number;
  lease_until: number | null;
  lease_token: number | null;
  attempts: number;
  enqueued_at: number;
  expires_at: number | null;
  body: string;
  size: number;
  extra: string | null;
  dead_at: number | null;
  dead_reason: string | null;
  last_error: string | null;
  /** Its place: in the queue while it waits; among the dead, the order they died. Rows a claim returns leave it out. */
  seq?: number | null;
}

export interface LagRow {
  start: number;
  peak_depth: number;
  max_wait_ms: number;
  end_depth: number;
}

export interface NewMessage {
  body: string;
  size: number;
  visibleAt: number;
  expiresAt: number | null;
  extra: string | null;
  dedupeKey: string | null;
  dedupeUntil: number;
}

export interface DueRow {
  id: number;
  queue_id: number;
  state: number;
  attempts: number;
  lease_until: number | null;
  size: number;
}

export interface TokenRow {
  token: string;
  name: string;
  access: string;
  ns: string | null;
}

export interface NamespaceRow {
  ns: string;
  daily_quota: number | null;
  day: number;
  used: number;
}

export interface AuditRow {
  id: number;
  at: number;
  token: string;
  token_id: string | null;
  ns: string;
  queue: string;
  action: string;
  count: number;
  detail: string | null;
}

export interface QueueStore {
  /** Where the data lives (a file path), or null when it lives in memory. */
  readonly file: string | null;

  // ---- transactions
  /** Runs fn in one transaction; commits when it returns, rolls back when it throws. */
  transaction<T>(fn: () => T): T;
  savepoint(): void;
  releaseSavepoint(): void;
  rollbackSavepoint(): void;
  close(): void;
  /** A moment with no commit running: a good time to tidy up (the SQLite WAL checkpoint). */
  checkpointIdle(): void;

  // ---- meta and tokens
  getMeta(key: string): string | null;
  setMeta(key: string, value: string): void;
  getToken(token: string): TokenRow | null;
  putToken(token: string, name: string, access: string, ns: string | null, now: number): void;

  // ---- queues
  queueByName(ns: string, name: string): QueueRow | undefined;
  queueByPubId(pubId: string): QueueRow | undefined;
  queueById(id: number): QueueRow | undefined;
  /** The queue's policy and consumer settings as stored (JSON text). */
  queueSettings(queueId: number): { policy: string; consumer: string | null } | undefined;
  listQueues(ns?: string): QueueRow[];
  createQueue(pubId: string, ns: string, name: string, dialect: string, policy: string, consumer: string | null, now: number): QueueRow;
  setPolicy(queueId: number, policy: string): void;
  /** Moves the queue's message expiries to a changed max message age and dead retention. */
  reExpire(queueId: number, age: { from: number | null; to: number | null }, deadRetentionDelta: number): void;
  setConsumer(queueId: number, consumer: string | null): void;
  /** Deletes the queue with its messages, dedupe keys and lag history. */
  deleteQueue(queueId: number): void;
  /** Has any namespace a quota of its own? */
  anyQuota(): boolean;
  /** Does any queue hold waiting messages? */
  anyWaiting(): boolean;

  // ---- enqueue
  /** The message that owns a live dedupe key, or null. */
  dedupeOwner(queueId: number, key: string, now: number): number | null;
  /** Inserts messages as waiting (attempts 0) and records their dedupe keys; returns their ids in order. */
  enqueue(queueId: number, items: NewMessage[], now: number): number[];

  // ---- lease and settle
  /**
   * Leases up to `max` ready messages, oldest first, as many as fit in `maxBytes` of bodies (at
   * least one): attempts + 1, the lease token and end.
   */
  claim(queueId: number, max: number, now: number, leaseUntil: number, token: number, maxBytes?: number): MessageRow[];
  /** The leased row a (message id, lease token) pair names, if its lease has not ended at now. */
  leased(id: number, token: number, now: number): DueRow | undefined;
  /** Deletes acked messages. */
  ack(rows: readonly DueRow[]): void;
  /** A leased message back to waiting, visible at visibleAt. */
  requeue(row: { id: number; queue_id: number }, visibleAt: number, error: string | null): void;
  /** A lease nobody received undone: waiting again in its old place, the attempt not counted. */
  unclaim(row: { id: number; queue_id: number }): void;
  /** A live message (waiting or leased) to the dead letters, kept until deadUntil. */
  kill(row: { id: number; queue_id: number; state: number; size: number }, now: number, reason: string, error: string | null, deadUntil: number): void;
  /** Deletes one message of any state (age limit with drop, dead retention). */
  drop(row: { id: number; queue_id: number; state: number; size: number }): void;
  extend(id: number, leaseUntil: number): void;

  // ---- due work
  /** The earliest lease end or expiry across all queues (a lower bound is allowed), or null. */
  nextDue(): number | null;
  /** The earliest visible_at of a delayed message of the queue after now, or null. */
  nextDelayed(queueId: number, now: number): number | null;
  dueLeases(now: number, limit: number): DueRow[];
  dueExpiries(now: number, limit: number): DueRow[];
  /** Deletes up to `max` dedupe keys whose window ended by `now`; returns how many. */
  sweepDedupe(now: number, max: number): number;
  /** Dedupe keys written since the last call. */
  takeDedupeWritten(): number;

  // ---- dead letters and purge
  /** Dead messages back to waiting with attempts 0: the given ids, or the oldest max. Returns the ids moved. */
  replay(queueId: number, ids: number[] | null, max: number, now: number, expiresAt: number | null): number[];
  /** Deletes dead messages: the given ids, or all. Returns the ids deleted. */
  purgeDead(queueId: number, ids: number[] | null): number[];
  /** Deletes every live message (waiting and leased). Returns how many. */
  purgeLive(queueId: number): number;

  // ---- reads
  message(queueId: number, id: number): MessageRow | undefined;
  peek(queueId: number, states: readonly string[], now: number, afterId: number, limit: number, search: string | null): MessageRow[];
  peekCount(queueId: number, states: readonly string[], now: number, search: string | null): number;
  deadPage(queueId: number, afterDeadAt: number, afterSeq: number, limit: number): MessageRow[];
  oldestReadyAt(queueId: number, now: number): number | null;
  countDelayed(queueId: number, now: number): number;
  /** How many are ready, counting no further than cap. */
  readyAtMost(queueId: number, now: number, cap: number): number;

  // ---- namespaces and quota
  namespace(ns: string): NamespaceRow | null;
  setQuota(ns: string, quota: number | null): void;
  useQuota(ns: string, day: number, n: number): void;

  // ---- audit
  audit(at: number, token: string, tokenId: string | null, ns: string, queue: string, action: string, count: number, detail: string | null): void;
  auditList(ns: string | null, queue: string | null, limit: number): AuditRow[];

  // ---- lag history
  lagPeek(queueId: number, start: number): { peak_depth: number; max_wait_ms: number } | null;
  /** Raises the step's peaks and records the depth at this moment (carried into quiet steps). */
  lagRecord(queueId: number, start: number, peakDepth: number, waitMs: number, depthNow: number): void;
  lagSince(queueId: number, since: number): { before: LagRow | null; rows: LagRow[] };
  lagSweep(before: number): void;
  /** The start of the latest step any queue has a lag record for (null: none). */
  lagLatest(): number | null;
}

/** A data directory the store cannot open, and why (the CLI reports it as `data_dir`). */
export type StoreOpenProblem = 'not_quayside' | 'corrupt' | 'newer_version' | 'unwritable' | 'in_use';

export class StoreOpenError extends Error {
  /** Stable, as the CLI reports it; `problem` says which. */
  readonly code = 'data_dir';
  constructor(readonly problem: StoreOpenProblem, message: string) {
    super(message);
    this.name = 'StoreOpenError';
  }
}

/**
 * How many of `rows` (at most `limit`) fit in `maxBytes` of message bodies, counted from the
 * first; always at least one, so a message larger than the budget still goes, alone.
 */
export function countWithin(rows: readonly { size: number }[], limit: number, maxBytes: number): number {
  const most = Math.min(limit, rows.length);
  let n = 0;
  for (let bytes = 0; n < most && (n === 0 || bytes + rows[n].size <= maxBytes); n++) bytes += rows[n].size;
  return n;
}
