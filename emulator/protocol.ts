// The wire types shared by the server, the clients and the extension.
// Everything that crosses the socket is described here and nowhere else.

export const PROTOCOL_VERSION = 1;

/** Stable error codes (DESIGN.md "Errors"). `unavailable` is client-side: no emulator answered. */
export type ErrorCode =
  | 'invalid_argument'
  | 'payload_too_large'
  | 'quota_exceeded'
  | 'queue_full'
  | 'not_found'
  | 'conflict'
  | 'unauthorized'
  | 'forbidden'
  | 'unavailable'
  | 'limit_exceeded'
  | 'storage_full'
  | 'internal';

export const HTTP_STATUS: Record<ErrorCode, number> = {
  invalid_argument: 400,
  payload_too_large: 413,
  quota_exceeded: 429,
  queue_full: 507,
  not_found: 404,
  conflict: 409,
  unauthorized: 401,
  forbidden: 403,
  unavailable: 503,
  limit_exceeded: 429,
  storage_full: 507,
  internal: 500,
};

export interface WireError {
  code: ErrorCode;
  message: string;
  /** quota_exceeded: epoch ms at which the quota resets (next 00:00 UTC). */
  resetAt?: number;
  /** Extra machine-readable detail (the field that was wrong, the limit, …). */
  details?: Record<string, unknown>;
}

export type Dialect = 'cache' | 'env' | 'sync';

/** The three dialects, for whatever checks a dialect it was given (the engine, the CLI, the extension). */
export const DIALECTS: readonly Dialect[] = ['cache', 'env', 'sync'];

export function isDialect(v: unknown): v is Dialect {
  return typeof v === 'string' && (DIALECTS as readonly string[]).includes(v);
}
export type MessageState = 'ready' | 'delayed' | 'leased' | 'dead';
export type Access = 'read' | 'readwrite';

/** Per-queue policy. Every field is filled in from the dialect preset when a queue is created. */
export interface QueuePolicy {
  /** Default lease for a pull/recv/delivery, ms. */
  leaseMs: number;
  /** Deliveries after which a failed message goes dead (cache 5, env maxRetries+1, sync 10). */
  maxDeliveries: number;
  /** How long dead messages are kept, ms. */
  deadRetentionMs: number;
  /** Live messages older than this are dead-lettered (`expired`) or dropped; null = no limit. */
  maxMessageAgeMs: number | null;
  /** What happens when a live message passes maxMessageAgeMs. */
  onMaxAge: 'dead' | 'drop';
  /** Dedupe window, ms. */
  dedupeTtlMs: number;
  /** Limit on the UTF-8 bytes of the JSON-serialised body (sync: of the envelope). */
  maxPayloadBytes: number;
  /** Live messages (ready + delayed + leased) at most; null = unbounded. */
  maxDepth: number | null;
  /** Bytes of live message bodies at most; null = unbounded. */
  maxBytes: number | null;
  /** Largest nack delay accepted, ms. */
  maxNackDelayMs: number;
  /** Largest push delay accepted, ms. */
  maxDelayMs: number;
  /** Dead reasons this dialect records. */
  reasons: { timeout: string; nack: string; expired: string };
  /** A nack's own `reason` is recorded when it sends the message dead (sync). */
  recordNackReason: boolean;
}

/** Settings of an env push consumer (DESIGN.md "env push consumers"). */
export interface ConsumerSettings {
  appId: string;
  maxBatchSize: number;
  maxBatchTimeoutMs: number;
  maxConcurrency: number;
  visibilityMs: number;
}

export interface QueueCounts {
  ready: number;
  delayed: number;
  leased: number;
  dead: number;
  /** ready + delayed */
  depth: number;
  /** Bytes of live bodies. */
  bytes: number;
  /** ms the oldest ready message has waited; 0 when none is ready. */
  oldestReadyAgeMs: number;
}

export interface QueueInfo {
  id: string;
  namespace: string;
  name: string;
  dialect: Dialect;
  policy: QueuePolicy;
  consumer: ConsumerSettings | null;
  createdAt: number;
  counts: QueueCounts;
}

export interface LagStep {
  /** Start of the half-hour step, epoch ms (aligned to :00 / :30 UTC). */
  start: number;
  peakDepth: number;
  /** Longest wait of the oldest ready message seen in the step, ms. */
  maxWaitMs: number;
}

/** The history's step (aligned to :00 / :30 UTC) and its length: the last 24 hours. */
export const LAG_STEP_MS = 30 * 60 * 1000;
export const LAG_STEPS = 48;

/** The start of the history step that `t` (epoch ms) falls in. */
export function lagStepOf(t: number): number {
  return Math.floor(t / LAG_STEP_MS) * LAG_STEP_MS;
}

/** The history of a queue that has none yet: every step empty, ending with the one `now` falls in. */
export function emptyLagHistory(now: number): LagStep[] {
  const current = lagStepOf(now);
  return Array.from({ length: LAG_STEPS }, (_, i) => ({ start: current - (LAG_STEPS - 1 - i) * LAG_STEP_MS, peakDepth: 0, maxWaitMs: 0 }));
}

export interface MessageView {
  id: string;
  namespace: string;
  queue: string;
  state: MessageState;
  body: unknown;
  attempts: number;
  enqueuedAt: number;
  /** When it becomes (or became) ready. */
  visibleAt: number;
  leaseUntil: number | null;
  dedupeKey: string | null;
  attributes: Record<string, unknown> | null;
  contentType: string | null;
  orderingKey: string | null;
  meta: unknown;
  sizeBytes: number;
  deadAt: number | null;
  deadReason: string | null;
  lastError: string | null;
}

/** A leased delivery: the message plus its receipt. */
export interface Delivery extends MessageView {
  receipt: string;
  leaseUntil: number;
}

export interface AuditEntry {
  id: number;
  at: number;
  /** The acting token's name (a label, not unique). */
  token: string;
  /** The acting token's id, a fingerprint that tells tokens apart; null for entries older than schema 4. */
  tokenId: string | null;
  namespace: string;
  queue: string;
  /** `expire`: a `queue.configure` that shortened an age limit or the dead-letter retention deleted messages. */
  action: 'replay' | 'purge_dead' | 'purge' | 'delete_queue' | 'expire';
  count: number;
  detail: string | null;
}

export interface PushInput {
  body: unknown;
  delayMs?: number;
  dedupeKey?: string;
  dedupeTtlMs?: number;
  attributes?: Record<string, unknown>;
  contentType?: string;
  orderingKey?: string;
  meta?: unknown;
}

export interface PushResult {
  id: string;
  deduped: boolean;
}

/** `queueId?`: the name must still belong to that very queue, else `not_found` (docs/protocol.md). */
export type QueueRef = { namespace: string; queue: string; queueId?: string };

/**
 * `dialect`: the queue must be of this dialect; one of another dialect answers `not_found`, as a
 * missing queue does (a face sees only its own dialect's queues). Checked in the operation's own
 * transaction.
 */
export type OfDialect = { dialect?: Dialect };

/** Change events pushed to subscribers. */
export interface ChangeEvent {
  event: 'change';
  subscription: string;
  namespace: string;
  queue: string;
  /** What happened; counts are the queue's counts after it. */
  kind:
    | 'pushed'
    | 'leased'
    | 'acked'
    | 'requeued'
    | 'ready'
    | 'dead'
    | 'replayed'
    | 'purged'
    | 'dropped'
    | 'extended'
    | 'queue_created'
    | 'queue_updated'
    | 'queue_deleted';
  ids: string[];
  counts: QueueCounts | null;
  at: number;
}

/** A batch pushed to a registered consumer (env push delivery). */
export interface DeliverEvent {
  event: 'deliver';
  consumer: string;
  batch: string;
  namespace: string;
  queue: string;
  messages: Delivery[];
}

export interface ClockEvent {
  event: 'clock';
  now: number;
}

/**
 * A registered consumer let go by the emulator, so no batch will come: its queue was deleted, or a
 * `hello` sent again on its connection gave a token that may not consume that queue.
 */
export interface ConsumerDroppedEvent {
  event: 'consumer_dropped';
  consumer: string;
  namespace: string;
  queue: string;
  reason: 'queue_deleted' | 'token_changed';
}

/**
 * Change events of this subscription were dropped while its connection did not read (see
 * Backpressure in docs/protocol.md); sent once it reads again. What was dropped is not named:
 * re-read with `stats` / `peek`.
 */
export interface GapEvent {
  event: 'gap';
  subscription: string;
}

export type ServerEvent = ChangeEvent | DeliverEvent | ClockEvent | ConsumerDroppedEvent | GapEvent;

/**
 * Every operation: its arguments and its result. A request frame is
 * `{ id, op, args }`; the answer is `{ id, ok: true, result }` or `{ id, ok: false, error }`.
 */
export interface Ops {
  hello: {
    args: { version: number; token?: string; client?: string };
    result: { version: number; server: string; clock: 'system' | 'virtual'; now: number; access: Access; namespace: string | null };
  };
  'queue.create': {
    args: QueueRef & { dialect: Dialect; policy?: Partial<QueuePolicy>; ifNotExists?: boolean };
    result: QueueInfo;
  };
  'queue.configure': { args: QueueRef & { policy: Partial<QueuePolicy> }; result: QueueInfo };
  'queue.delete': { args: QueueRef; result: { deleted: boolean } };
  'queue.get': { args: QueueRef | { id: string }; result: QueueInfo };
  'queue.list': { args: { namespace?: string; dialect?: Dialect }; result: { queues: QueueInfo[] } };
  'namespace.list': { args: Record<string, never>; result: { namespaces: { namespace: string; queues: number; dead: number }[] } };
  'namespace.configure': { args: { namespace: string; dailyQuota: number | null }; result: { namespace: string; dailyQuota: number | null } };
  /** `create`: create the queue with this dialect's preset if missing (cache's "exists as soon as you push"). */
  push: { args: QueueRef & OfDialect & PushInput & { create?: Dialect }; result: PushResult };
  'push.batch': { args: QueueRef & OfDialect & { messages: PushInput[]; create?: Dialect }; result: { results: PushResult[] } };
  /**
   * `waitMs` > 0 holds the request until a message is ready or the wait ends. With `waitUntil` (epoch
   * ms on the emulator's clock) the wait ends at that instant of the clock, and `waitMs` bounds it in
   * real time only; once it has passed, the pull answers `[]` at once and leases nothing (a client's
   * wait of several holds keeps one deadline).
   */
  pull: { args: QueueRef & { max?: number; leaseMs?: number; waitMs?: number; waitUntil?: number; consumerId?: string }; result: { messages: Delivery[]; leaseMs: number } };
  // Settles may name the queue (both namespace and queue): a receipt of another queue is then stale.
  ack: { args: { receipt: string } & Partial<QueueRef>; result: { ok: boolean } };
  'ack.batch': { args: { receipts: string[] } & Partial<QueueRef>; result: { acked: number; stale: number } };
  nack: { args: { receipt: string; delayMs?: number; reason?: string; error?: string; dead?: boolean } & Partial<QueueRef>; result: { ok: boolean } };
  extend: { args: { receipt: string; leaseMs?: number } & Partial<QueueRef>; result: { ok: boolean; leaseUntil: number | null } };
  peek: {
    args: QueueRef & { states?: MessageState[]; limit?: number; cursor?: string; search?: string };
    result: { messages: MessageView[]; next: string | null; total: number };
  };
  'message.get': { args: QueueRef & { id: string }; result: MessageView };
  'dead.list': { args: QueueRef & { limit?: number; cursor?: string }; result: { messages: MessageView[]; total: number; next: string | null } };
  'dead.replay': { args: QueueRef & { ids?: string[]; max?: number }; result: { replayed: number } };
  'dead.purge': { args: QueueRef & { ids?: string[] }; result: { purged: number } };
  /** Purge live messages (ready, delayed and leased); `confirm` must equal the queue's name. */
  purge: { args: QueueRef & { confirm: string }; result: { purged: number } };
  stats: { args: QueueRef; result: { counts: QueueCounts; lagHistory: LagStep[]; now: number } };
  'audit.list': { args: { namespace?: string; queue?: string; limit?: number }; result: { entries: AuditEntry[] } };
  subscribe: { args: { namespace?: string; queue?: string }; result: { subscription: string } };
  unsubscribe: { args: { subscription: string }; result: { ok: boolean } };
  /** Set (or clear with null) an env queue's consumer app. */
  'consumer.set': { args: QueueRef & OfDialect & { consumer: Partial<ConsumerSettings> & { appId: string } | null }; result: QueueInfo };
  /**
   * Register this connection as a push-delivery target of the queue's consumer. With `appId` it
   * receives batches only while that app is the queue's consumer app; without, whichever app is.
   */
  'consumer.attach': { args: QueueRef & OfDialect & { appId?: string }; result: { consumer: string; settings: ConsumerSettings } };
  /** A delivered batch's handler finished: frees its concurrency slot. */
  'consumer.done': { args: { consumer: string; batch: string }; result: { ok: boolean } };
  'consumer.detach': { args: { consumer: string }; result: { ok: boolean } };
  'clock.now': { args: Record<string, never>; result: { now: number; mode: 'system' | 'virtual' } };
  'clock.advance': { args: { ms: number }; result: { now: number } };
  /** Give up a held request (a waiting pull): it is answered at once with no messages. */
  cancel: { args: { request: number | string }; result: { ok: boolean } };
  'token.create': { args: { access: Access; namespace?: string | null; name?: string }; result: { token: string } };
}

export type OpName = keyof Ops;
export type OpArgs<K extends OpName> = Ops[K]['args'];
export type OpResult<K extends OpName> = Ops[K]['result'];

export interface RequestFrame<K extends OpName = OpName> {
  id: number | string;
  op: K;
  args?: OpArgs<K>;
}

export type ResponseFrame =
  | { id: number | string | null; ok: true; result: unknown }
  | { id: number | string | null; ok: false; error: WireError };

export type ServerFrame = ResponseFrame | ServerEvent;

/** Operations a read-only token may call. */
export const READ_OPS: ReadonlySet<OpName> = new Set<OpName>([
  'hello',
  'queue.get',
  'queue.list',
  'namespace.list',
  'peek',
  'message.get',
  'dead.list',
  'stats',
  'audit.list',
  'subscribe',
  'unsubscribe',
  'clock.now',
  'cancel',
]);

export const OP_NAMES: readonly OpName[] = [
  'hello', 'queue.create', 'queue.configure', 'queue.delete', 'queue.get', 'queue.list',
  'namespace.list', 'namespace.configure', 'push', 'push.batch', 'pull', 'ack', 'ack.batch', 'nack',
  'extend', 'peek', 'message.get', 'dead.list', 'dead.replay', 'dead.purge', 'purge', 'stats',
  'audit.list', 'subscribe', 'unsubscribe', 'consumer.set', 'consumer.attach', 'consumer.done',
  'consumer.detach', 'clock.now', 'clock.advance', 'cancel', 'token.create',
];

type KeysOf<T> = T extends unknown ? keyof T & string : never;
const REF = ['namespace', 'queue', 'queueId', 'dialect'] as const;

/** The fields of one message in `push` / `push.batch`. */
export const PUSH_INPUT_KEYS: readonly (keyof PushInput)[] = ['body', 'delayMs', 'dedupeKey', 'dedupeTtlMs', 'attributes', 'contentType', 'orderingKey', 'meta'];

/**
 * The arguments each operation takes. The server refuses any other (a misspelt `ids` must not
 * purge every dead letter, a misspelt `delayMs` must not deliver now): `invalid_argument`.
 * `dialect` is accepted wherever a queue is named (see OfDialect).
 */
export const OP_ARGS: { readonly [K in OpName]: readonly (KeysOf<OpArgs<K>> | (typeof REF)[number])[] } = {
  hello: ['version', 'token', 'client'],
  'queue.create': ['namespace', 'queue', 'dialect', 'policy', 'ifNotExists'],
  'queue.configure': [...REF, 'policy'],
  'queue.delete': REF,
  'queue.get': [...REF, 'id'],
  'queue.list': ['namespace', 'dialect'],
  'namespace.list': [],
  'namespace.configure': ['namespace', 'dailyQuota'],
  push: [...REF, ...PUSH_INPUT_KEYS, 'create'],
  'push.batch': [...REF, 'messages', 'create'],
  pull: [...REF, 'max', 'leaseMs', 'waitMs', 'waitUntil', 'consumerId'],
  ack: [...REF, 'receipt'],
  'ack.batch': [...REF, 'receipts'],
  nack: [...REF, 'receipt', 'delayMs', 'reason', 'error', 'dead'],
  extend: [...REF, 'receipt', 'leaseMs'],
  peek: [...REF, 'states', 'limit', 'cursor', 'search'],
  'message.get': [...REF, 'id'],
  'dead.list': [...REF, 'limit', 'cursor'],
  'dead.replay': [...REF, 'ids', 'max'],
  'dead.purge': [...REF, 'ids'],
  purge: [...REF, 'confirm'],
  stats: REF,
  'audit.list': ['namespace', 'queue', 'limit'],
  subscribe: ['namespace', 'queue'],
  unsubscribe: ['subscription'],
  'consumer.set': [...REF, 'consumer'],
  'consumer.attach': [...REF, 'appId'],
  'consumer.done': ['consumer', 'batch'],
  'consumer.detach': ['consumer'],
  'clock.now': [],
  'clock.advance': ['ms'],
  cancel: ['request'],
  'token.create': ['access', 'namespace', 'name'],
};

/**
 * The first key of `obj` not in `allowed` (one whose value is undefined counts as absent, as JSON
 * leaves it out), with a message completing "<where>: …", or null.
 */
export function unknownKeyProblem(obj: Record<string, unknown>, allowed: readonly string[]): string | null {
  for (const k of Object.keys(obj)) {
    if (obj[k] === undefined || allowed.includes(k)) continue;
    return `unknown argument "${k.slice(0, 60)}"; it takes ${allowed.length ? allowed.join(', ') : 'none'}`;
  }
  return null;
}

/**
 * Why an env `contentType` other than json / text / bytes / v8 is refused, or null when it is a label
 * the emulator keeps as given (with a JSON body). Shared by env.queue.send and POST …/messages.
 */
export function contentTypeProblem(contentType: unknown): string | null {
  if (typeof contentType !== 'string' || contentType.length === 0 || contentType.length > 200) {
    return `contentType must be "json", "text", "bytes", "v8" or another label of at most 200 characters, got ${JSON.stringify(contentType)?.slice(0, 60)}`;
  }
  return null;
}

/**
 * Content types whose body travels and is stored as base64 text, measured by the bytes it decodes
 * to: `bytes` (a Uint8Array) and `v8` (the value's structured-clone serialisation, which the env
 * client makes with node:v8 and a consumer gets back as the value).
 */
export function isBinaryContentType(contentType: unknown): contentType is 'bytes' | 'v8' {
  return contentType === 'bytes' || contentType === 'v8';
}

/**
 * Whether `body` is what a `bytes` or `v8` message carries: base64 text (padded, standard
 * alphabet), which the env client makes of a Uint8Array or a v8 serialisation. Shared by the engine
 * and POST …/messages, so such a body is the same thing however it arrives, and its size (the bytes
 * it decodes to) is well defined.
 */
export function isBase64Text(body: unknown): body is string {
  return typeof body === 'string' && body.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(body);
}

/** Server limits, also reported in docs/protocol.md. */
export const LIMITS = {
  /** A request frame, in UTF-8 bytes: the same 8 MiB as an HTTP request body, so a batch that one takes the other takes. */
  maxFrameBytes: 8 * 1024 * 1024,
  /** The most a queue's message size limit (`maxPayloadBytes`) may be set to: half a frame, so one message always fits. */
  maxMessageBytes: 4 * 1024 * 1024,
  /** A namespace or queue name, in characters. */
  maxNameChars: 200,
  maxInFlightPerConnection: 1024,
  maxConnections: 512,
  maxWaitingPullsPerConnection: 256,
  maxBatchMessages: 1000,
  maxPullMessages: 1000,
  /** The most one page of peek or dead.list holds. */
  maxPageSize: 1000,
  /**
   * The most message bytes one answer (a pull, a batch delivered to a consumer, a page of peek or
   * dead.list) carries; a message that alone is more still goes, one at a time. Fewer messages
   * than asked for is an answer these allow, and it keeps each frame well under the 100 MiB a
   * WebSocket client takes by default (1000 messages of 256 KB would be 256 MB).
   */
  maxAnswerBodyBytes: 32 * 1024 * 1024,
  /** The most audit entries one audit.list returns. */
  maxAuditEntries: 10_000,
  /** The most dead letters one replay moves. */
  maxReplay: 100_000,
  maxWaitMs: 20 * 60 * 1000,
  /** A dedupe key or ordering key, in characters. */
  maxKeyChars: 512,
  /** The largest epoch ms a Date can hold: the bound on every instant on the wire (`waitUntil`). */
  maxEpochMs: 8.64e15,
};

/**
 * The UTF-8 bytes of a `sync` message as the library stores it, `{"data":…,"attempt":0,
 * "orderingKey":…,"meta":…,"enqueuedAt":…}`: the envelope its `payloadBytes` limit is on (DESIGN.md).
 * Shared by the engine and the sync face's own check, so both count the same bytes.
 */
export function syncEnvelopeBytes(dataBytes: number, metaBytes: number | undefined, orderingKey: string | undefined, enqueuedAt: number): number {
  const fixed = '{"data":,"attempt":0,"enqueuedAt":}'.length;
  const key = orderingKey === undefined ? 0 : ',"orderingKey":'.length + utf8Bytes(JSON.stringify(orderingKey));
  const meta = metaBytes === undefined ? 0 : ',"meta":'.length + metaBytes;
  return fixed + dataBytes + key + meta + String(enqueuedAt).length;
}

/** UTF-8 length without Buffer, so this module also runs in the webview. */
export function utf8Bytes(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a surrogate pair: 4 bytes for 2 code units
      i++;
    } else if (c >= 0x800) n += 2;
    else if (c >= 0x80) n += 1;
  }
  return n;
}

/**
 * Why a namespace or queue name is refused (completing "<field> …"), or null. Shared by the engine
 * and the faces, so a face can check a name before sending and call the field by its own name.
 */
export function nameProblem(name: string): string | null {
  if (name.length > LIMITS.maxNameChars) return `must be at most ${LIMITS.maxNameChars} characters`;
  // C0, DEL and C1: the Unicode control characters (Cc), none of which prints as part of a name.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return 'must not contain control characters';
  if (hasLoneSurrogate(name)) return LONE_SURROGATE;
  return null;
}

/**
 * Half of a UTF-16 surrogate pair on its own. SQLite stores text as UTF-8, where it cannot be
 * written, so it would come back as U+FFFD and two different strings as the same one.
 */
const LONE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
export const LONE_SURROGATE = 'must be well-formed Unicode (it has half of a surrogate pair on its own)';

export function hasLoneSurrogate(s: string): boolean {
  return LONE.test(s);
}

/** The text with each lone surrogate replaced by U+FFFD (for free text such as an error's, never refused). */
export function toWellFormed(s: string): string {
  return hasLoneSurrogate(s) ? s.replace(new RegExp(LONE.source, 'g'), '\ufffd') : s;
}

/** A value JSON.stringify writes as `null` without a word, and why. */
export interface LossyNull {
  /** Path suffix from the value passed in (".a[2].b"; "" for the value itself). */
  path: string;
  /** What sits there, for the error: "NaN", "Infinity", "-Infinity", "an invalid Date", "a function", "undefined" or "a symbol". */
  what: string;
}

/**
 * Where a value holds something JSON.stringify would write as null, so a body would arrive
 * changed: NaN or ±Infinity anywhere, or undefined, a function or a symbol as an array element.
 * (As an object's property JSON leaves those out, as every JSON-based SDK does: not refused.)
 * Callers look only once the JSON text has a null in it. Call it on a value JSON.stringify has
 * already written (so it has no cycle). Iterative: a deep value cannot overflow the stack. Shared
 * by the clients' request encoding and the engine (in-process callers).
 */
export function lossyNullAt(root: unknown): LossyNull | null {
  // Almost every value has none: a quick look without bookkeeping first (a few times cheaper than
  // JSON.stringify), the walk that keeps the path only when there is something to name.
  return holdsLossyNull(asWritten(root), 0) ? pathToLossyNull(root) : null;
}

/** The error text for a LossyNull at `where` ("push: body.a[1]"). */
export function lossyNullMessage(where: string, found: LossyNull): string {
  return `${where} is not a JSON value: it is ${found.what}, which JSON would write as null`;
}

const INVALID_DATE = Symbol('an invalid Date');

/**
 * The value JSON goes on to write for `v`: what its toJSON returns (a Date's ISO text; an invalid
 * Date, whose toJSON says null, is marked, since JSON would turn it into null as it does NaN), a
 * boxed number's number, else `v` itself.
 */
function asWritten(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (v instanceof Date && Number.isNaN(v.getTime())) return INVALID_DATE;
  const toJSON = (v as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    try {
      return toJSON.call(v, '');
    } catch {
      return null; // it did not throw for JSON.stringify; nothing to name here
    }
  }
  return v instanceof Number ? v.valueOf() : v;
}

/** What JSON would write as null for `w` (a value as written) in an array (`inArray`) or anywhere, or null if nothing. */
function lossy(w: unknown, inArray: boolean): string | null {
  const t = typeof w;
  if (t === 'number') return Number.isFinite(w) ? null : String(w);
  if (w === INVALID_DATE) return 'an invalid Date';
  if (!inArray) return null;
  if (t === 'undefined') return 'undefined';
  if (t === 'function') return 'a function';
  if (t === 'symbol') return 'a symbol';
  return null;
}

/** `w` is a value as written (asWritten). */
function holdsLossyNull(w: unknown, depth: number): boolean {
  if (typeof w !== 'object' || w === null) return lossy(w, false) !== null;
  if (depth > 256) return pathToLossyNull(w) !== null; // deeper: the iterative walk, so the stack holds
  if (Array.isArray(w)) {
    for (let i = 0; i < w.length; i++) {
      const e = asWritten(w[i]);
      if (lossy(e, true) !== null || holdsLossyNull(e, depth + 1)) return true;
    }
    return false;
  }
  for (const k in w) if (Object.prototype.hasOwnProperty.call(w, k) && holdsLossyNull(asWritten((w as Record<string, unknown>)[k]), depth + 1)) return true;
  return false;
}

function pathToLossyNull(root: unknown): LossyNull | null {
  type Step = { v: unknown; up: Step | null; key: string | number | null; inArray: boolean };
  const stack: Step[] = [{ v: root, up: null, key: null, inArray: false }];
  while (stack.length > 0) {
    const step = stack.pop()!;
    const w = asWritten(step.v);
    const what = lossy(w, step.inArray);
    if (what !== null) return { path: pathOf(step), what };
    if (typeof w !== 'object' || w === null) continue;
    if (Array.isArray(w)) {
      for (let i = w.length - 1; i >= 0; i--) stack.push({ v: w[i], up: step, key: i, inArray: true });
    } else {
      const keys = Object.keys(w);
      for (let i = keys.length - 1; i >= 0; i--) stack.push({ v: (w as Record<string, unknown>)[keys[i]], up: step, key: keys[i], inArray: false });
    }
  }
  return null;

  function pathOf(step: Step): string {
    const parts: string[] = [];
    for (let s: Step | null = step; s && s.key !== null; s = s.up) parts.push(pathStep(s.key));
    return parts.reverse().join('');
  }
}

/** One step of a path as JavaScript would write it: `[3]`, `.name`, `["odd key"]`. */
function pathStep(k: string | number): string {
  return typeof k === 'number' ? `[${k}]` : /^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
}

/**
 * Where inside `root` JSON.stringify fails (a BigInt, a cycle, a toJSON or getter that throws):
 * the path (`.a.b[2]`) to the deepest value whose own encoding still fails, or '' for `root`
 * itself (at most 32 levels down). Only for a value known to fail (an error path): each level is
 * tried child by child.
 */
export function pathToUnencodable(root: unknown): string {
  let path = '';
  const seen = new Set<object>();
  // Bounded: a value nested past the stack (a RangeError) is named by its first levels.
  for (let v = root; v !== null && typeof v === 'object' && !seen.has(v) && seen.size < 32; ) {
    seen.add(v);
    let next: { key: string | number; v: unknown } | null = null;
    try {
      // A toJSON decides what is written: the fault is in the value itself, or in what it returned.
      if (typeof (v as { toJSON?: unknown }).toJSON === 'function') break;
      const keys: (string | number)[] = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
      for (const k of keys) {
        let child: unknown;
        try {
          child = (v as Record<string | number, unknown>)[k];
          JSON.stringify(child);
        } catch {
          next = { key: k, v: child };
          break;
        }
      }
    } catch {
      break; // a getter or a Proxy that throws when looked at: the fault is here
    }
    if (!next) break;
    path += pathStep(next.key);
    v = next.v;
  }
  return path;
}

export const DEFAULT_PORT = 7433;

/**
 * The close code of a stopping emulator that had answered every request it ran on the connection:
 * a request the client sent and got no answer to was not run, so it may be sent again (to the
 * emulator that comes back). A stop that had to cut requests off mid-run closes with 1001 instead,
 * and their outcome is unknown. (4000–4999 are for applications, RFC 6455 §7.4.2.)
 */
export const CLOSE_STOPPED_UNRUN = 4001;
