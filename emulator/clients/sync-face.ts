import { QuaysideError } from '../errors';
import type { Delivery, QueueInfo, QueueRef } from '../protocol';
import { LIMITS, nameProblem, syncEnvelopeBytes } from '../protocol';
import { argsJson, type Transport } from './transport';
import { orAbort } from './abort';
import { EMULATOR_HANDLE_KEYS, asJsonTop, errorText, invalidArg, isAbort, isCode, jsonValue, onlyKeys, optKey, optMs, optSignal, options, optString, pause, readOnlyRefusal } from './common';
import { DEFAULT_PREFIX, checkOrdering, syncNamespace, syncPolicy, type SyncDelivery, type SyncLimits, type SyncSettings } from './policies';
import { realNow } from '../real-time';

// The `sync` dialect (seeds/002 and DESIGN.md "sync details") over any Transport: the WebSocket
// connection (quayside/sync) or the in-process engine (quayside/sync/memory). The semantics live in
// the engine; this file only speaks the product's names.

export type { SyncDelivery, SyncLimits, SyncSettings };

export { DEFAULT_PREFIX };

/**
 * Payload validation, as a Zod schema gives it: `parse` returns the value (maybe transformed) or
 * throws. A `parse` that returns a promise is awaited; its rejection is a refusal. `In`, what
 * `send` takes, is read from the schema's Standard Schema types (Zod 3.24+, Zod 4, Valibot,
 * ArkType declare them) so that a transforming schema is sent its input; without them it is `T`.
 */
export interface SyncSchema<T = unknown, In = T> {
  parse(data: unknown): T | Promise<T>;
  // All of the spec's members, optional: with `types` alone a schema that declares none would share
  // no member with this (a "weak type") and be refused.
  readonly '~standard'?: {
    readonly version?: number;
    readonly vendor?: string;
    readonly validate?: unknown;
    // When `queue<Job>({ schema })` names the type, In is Unnamed and any input is taken (a
    // `.default()` or a transform makes it differ from Job); otherwise In is inferred from here.
    readonly types?: { readonly input: In | (Unnamed extends In ? any : never); readonly output: T } | undefined;
  };
}

declare const unnamed: unique symbol;
/** `queue()`'s input type when nothing gives one: neither the call (`queue<Job>`) nor the schema's types. */
export type Unnamed = typeof unnamed;
/** What `send` takes: the schema's input type when it declares one, else the queue's data type. */
export type SentData<T, In> = [In] extends [Unnamed] ? T : In;

/**
 * `T`: the messages' data, as the library gives it: taken from `schema` (what its `parse` returns)
 * when one is given, else named (`queue<Job>({ id })`), else `unknown`. `In`: the data as sent and
 * stored (what `send` takes and `dlq` lists): the schema's input type, else `T`.
 */
export interface SyncQueueOptions<T = unknown, In = T> {
  /** The queue's id (its name within the tenant). */
  id: string;
  /** The tenant, which scopes the queue; default `'default'`. */
  tenantId?: string;
  /** The product's Redis key prefix (default `'sync:queue'`): another prefix is another set of queues. */
  prefix?: string;
  /** Checks `data` at send; each received message's `data` is `schema.parse(stored data)`. */
  schema?: SyncSchema<T, In>;
  /** This handle's settings (see docs/dialects.md, "Settings are per handle"). */
  limits?: SyncLimits;
  delivery?: SyncDelivery;
  /** Accepted, not enforced (orderingKey is metadata only); a partitioned mode throws. */
  ordering?: unknown;
}

export interface SendOptions<T = unknown> {
  data: T;
  delayMs?: number;
  /** A repeat key within the TTL sends nothing and answers the first message's id. */
  idempotencyKey?: string;
  /** Default: the queue's `idempotencyTtlMs` (7 days). */
  idempotencyTtlMs?: number;
  /** Stored with the message, not enforced. */
  orderingKey?: string;
  /** Stored with the message and given back with each delivery. */
  meta?: Record<string, unknown>;
  /** Send to this tenant's queue of the same id (default: the handle's tenant). */
  tenantId?: string;
}

export interface RecvOptions {
  /** Block until a message is ready (default true). */
  wait?: boolean;
  /** How long a blocking recv waits before resolving to null (default 30000). */
  timeoutMs?: number;
  /** This delivery's lease (default: the queue's defaultLeaseMs). */
  leaseMs?: number;
  /** A name for this consumer (logged by the emulator). */
  consumerId?: string;
  /** Aborting ends a wait at once with null. */
  signal?: AbortSignal;
  /** Receive from this tenant's queue of the same id (default: the handle's tenant). */
  tenantId?: string;
}

export interface StreamOptions extends Omit<RecvOptions, 'wait'> {
  /** true (default): wait for more and ride out lost connections; false: end when the queue is empty. */
  wait?: boolean;
}

export interface SyncMessage<T = unknown> {
  data: T;
  messageId: string;
  /** This delivery's id (its receipt): ack/nack/touch act on this delivery only. */
  deliveryId: string;
  /** Deliveries so far, this one included. */
  attempt: number;
  /** Epoch ms the lease ends; touch() moves it. */
  leaseUntil: number;
  orderingKey?: string;
  meta?: Record<string, unknown>;
  /** Epoch ms it was sent. */
  enqueuedAt: number;
  /** Done: removed. false if the lease already expired (another consumer may have it). */
  ack(): Promise<boolean>;
  /** Failed: back on the queue after delayMs; to the DLQ after maxDeliveries. false if the lease expired. */
  nack(opts?: { delayMs?: number; reason?: string; error?: unknown }): Promise<boolean>;
  /** Extends the lease by leaseMs (default: this delivery's own lease). false if it already expired. */
  touch(opts?: { leaseMs?: number }): Promise<boolean>;
}

export interface DlqEntry<T = unknown> {
  messageId: string;
  data: T;
  attempts: number;
  /** Epoch ms it moved to the DLQ. */
  movedAt: number;
  /** `max_deliveries_exceeded`, `expired`, or the last nack's own reason. */
  reason: string;
  lastError?: string;
  /** As sent (stored, not enforced); only when it was given. */
  orderingKey?: string;
  /** As sent; only when it was given. */
  meta?: Record<string, unknown>;
}

/** `T`: the queue's data type (see SyncQueueOptions); a call may name another (`recv<Other>()`). */
export interface SyncReader<T = unknown> {
  readonly consumerId: string;
  recv<U = T>(opts?: RecvOptions): Promise<SyncMessage<U> | null>;
  stream<U = T>(opts?: StreamOptions): AsyncIterableIterator<SyncMessage<U>>;
}

export interface SyncQueue<T = unknown, In = T> extends SyncReader<T> {
  readonly id: string;
  readonly tenantId: string;
  readonly prefix: string;
  send(opts: SendOptions<In>): Promise<{ messageId: string }>;
  /** An independent consumer of the same queue (its own consumerId and waits). */
  reader(opts?: { consumerId?: string }): SyncReader<T>;
  /** Oldest first, `data` as stored (not parsed: the schema may be why a message is there). */
  dlq<U = In>(opts?: { limit?: number; tenantId?: string }): Promise<DlqEntry<U>[]>;
  /** false when no such message is in the DLQ. */
  dlqRemove(opts: { messageId: string; tenantId?: string }): Promise<boolean>;
  /** The queue's counts. */
  stats(): Promise<{ ready: number; delayed: number; inFlight: number; dlq: number }>;
  /** Closes this queue's transport if it owns one. */
  close(): Promise<void>;
}

const QUEUE_KEYS = ['id', 'tenantId', 'prefix', 'schema', 'limits', 'delivery', 'ordering'];
const RECV_KEYS = ['wait', 'timeoutMs', 'leaseMs', 'consumerId', 'signal', 'tenantId'];
const MAX_LEASE_MS = 12 * 3600 * 1000;
const DAY = 24 * 3600 * 1000;
/** How many other tenants' queues a handle keeps set up (per-call tenantId). */
const MAX_SITES = 256;
/** The DLQ reason of a message this handle's schema refused at receive. */
export const INVALID_PAYLOAD = 'invalid_payload';

let readerSeq = 0;

/** A name (id, tenantId, prefix) checked as the engine will check it, but named as the product names it. */
function nameArg(v: unknown, field: string): string | undefined {
  const s = optString(v, field);
  const problem = s === undefined ? null : nameProblem(s);
  if (problem) throw invalidArg(`${field} ${problem}`, { field });
  return s;
}

function schemaArg(v: unknown): SyncSchema | undefined {
  if (v === undefined || v === null) return undefined;
  if ((typeof v !== 'object' && typeof v !== 'function') || typeof (v as SyncSchema).parse !== 'function') {
    throw invalidArg('schema must be an object with a parse(data) method (a Zod schema, for one)', { field: 'schema' });
  }
  return v as SyncSchema;
}

const ENVELOPE = 'data, attempt, orderingKey, meta and enqueuedAt as JSON';

/** The message's envelope in bytes, as the engine measures a sync message (`syncEnvelopeBytes`). */
function envelopeBytes(data: unknown, meta: unknown, orderingKey: string | undefined): number {
  const size = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');
  return syncEnvelopeBytes(size(data), meta === undefined || meta === null ? undefined : size(meta), orderingKey, realNow());
}

/**
 * A push error in the product's words: the engine and the transport name the message `body` and
 * the operation `push`; the product calls it `data` and `send`. Codes and details are kept.
 */
function sendError(e: unknown): unknown {
  if (!(e instanceof QuaysideError)) return e;
  const { size, limit, field } = e.details ?? {};
  if (e.code === 'payload_too_large' && typeof size === 'number' && typeof limit === 'number') {
    const message = limit === LIMITS.maxFrameBytes
      ? `send: data and meta make a request of ${size} bytes, over the ${limit} bytes a request may carry (a message is at most ${LIMITS.maxMessageBytes} bytes)`
      : `send: the message is ${size} bytes as stored (${ENVELOPE}), over the queue's payloadBytes (${limit})`;
    return new QuaysideError('payload_too_large', message, { details: e.details, cause: e });
  }
  if (e.code === 'invalid_argument' && (field === 'body' || field === 'meta')) {
    const message = e.message.replace(/^push: body\b/, 'send: data').replace(/^push:/, 'send:');
    return new QuaysideError('invalid_argument', message, { details: { field: field === 'body' ? 'data' : field }, cause: e });
  }
  return e;
}

/**
 * An engine refusal in the product's words: the engine names the operation it was sent
 * (`queue.create`, `push`, `dead.purge`) and the queue's namespace; the caller called `op` on a
 * tenant's queue. Codes, details and the cause are kept.
 */
function productError(e: unknown, op: string, tenant: string, id: string): unknown {
  if (!(e instanceof QuaysideError)) return e;
  if (e.code === 'forbidden') return readOnlyRefusal(e, op);
  if (e.code === 'not_found' && e.message.startsWith('queue "')) {
    return new QuaysideError('not_found', `${op}(): queue "${id}" not found for tenant "${tenant}"`, { details: e.details, cause: e });
  }
  return e;
}

/** One tenant's queue of this handle: set up (created or configured) on its first use. */
interface Site {
  tenant: string;
  /** With `dialect`: a queue of that name made by another dialect is not this handle's (not_found, then conflict). */
  ref: QueueRef & { dialect: 'sync' };
  ensured: Promise<void> | null;
  /**
   * Set once `ensured` has resolved. Calls then go out without waiting on it, in the order they
   * were made: `[m.nack(), m.ack()]` must reach the emulator as nack, then ack.
   */
  ready: boolean;
  /** Why queue.create was refused (a read-only token), when ensure() fell back to queue.get. */
  createRefused: QuaysideError | null;
}

/**
 * Builds a sync queue over a transport. `owned` transports are closed by `close()`. `entryKeys`:
 * the options the entry point itself takes (quayside/sync's url, token, transport), read there.
 */
export function syncQueueOver<T = unknown, In = Unnamed>(transport: Transport, opts: SyncQueueOptions<T, In>, owned = false, entryKeys: readonly string[] = []): SyncQueue<T, SentData<T, In>> {
  if (!opts || typeof opts !== 'object') throw invalidArg('queue() needs { id }');
  onlyKeys(opts as unknown as Record<string, unknown>, [...QUEUE_KEYS, ...entryKeys], 'queue', EMULATOR_HANDLE_KEYS);
  const id = nameArg(opts.id, 'id');
  if (id === undefined) throw invalidArg('queue() needs an id');
  const tenantId = nameArg(opts.tenantId, 'tenantId') ?? 'default';
  const prefix = nameArg(opts.prefix, 'prefix') ?? DEFAULT_PREFIX;
  const schema = schemaArg(opts.schema);
  checkOrdering(opts.ordering); // in limits or delivery: checked by syncPolicy
  /**
   * This handle's settings, as the library keeps them in each handle: they govern the calls this
   * handle makes. What it was not given is left to the queue's stored policy (the engine's default).
   */
  const own = syncPolicy(opts.limits, opts.delivery);

  const namespaceOf = (tenant: string) => syncNamespace(prefix, tenant);

  /** Other tenants' queues this handle addressed per call, most recent last; at most MAX_SITES. */
  const sites = new Map<string, Site>();
  /** The queue of `tenant` (checked like the handle's tenantId), or of the handle's own tenant. */
  function site(tenant?: unknown): Site {
    const t = tenant === undefined ? tenantId : nameArg(tenant, 'tenantId') ?? tenantId;
    if (t === tenantId) return home;
    let s = sites.get(t);
    if (s) {
      sites.delete(t); // re-inserted below: the least recently used goes first
    } else {
      s = newSite(t);
      // A long-lived handle serving many tenants stays bounded; a forgotten one is set up again on
      // its next use, as on a first use (this handle's settings are written to it again).
      if (sites.size >= MAX_SITES) sites.delete(sites.keys().next().value!);
    }
    sites.set(t, s);
    return s;
  }
  function newSite(t: string): Site {
    return { tenant: t, ref: { namespace: namespaceOf(t), queue: id!, dialect: 'sync' }, ensured: null, ready: false, createRefused: null };
  }
  const home = newSite(tenantId);
  /** Set by close(): a stream then ends instead of retrying. */
  let closed = false;

  /**
   * Creates the queue on first use (sync preset plus this handle's settings); applies them to an
   * existing one. A read-only token may not create or configure, but may list the DLQ and read stats
   * (DESIGN.md "Access"), so a refused create falls back to reading the queue as it is; it must then
   * exist. For a write (`write`), a missing queue reports the refusal (`forbidden`), not `not_found`.
   */
  function ensure(s: Site, write = false): Promise<void> {
    if (!s.ensured) {
      const mine = create(s);
      s.ensured = mine;
      mine.then(
        () => {
          if (s.ensured === mine) s.ready = true;
        },
        () => {
          if (s.ensured === mine) s.ensured = null;
        },
      );
    }
    if (!write) return s.ensured;
    return s.ensured.catch((e) => {
      throw isCode(e, 'not_found') && s.createRefused ? s.createRefused : e;
    });
  }

  async function create(s: Site): Promise<void> {
    let info: QueueInfo;
    try {
      info = await transport.request('queue.create', { ...s.ref, policy: own, ifNotExists: true });
    } catch (e) {
      if (!isCode(e, 'forbidden')) throw e;
      s.createRefused = e as QuaysideError;
      await transport.request('queue.get', s.ref);
      return;
    }
    s.createRefused = null;
    const differs = Object.entries(own).some(([k, v]) => (info.policy as unknown as Record<string, unknown>)[k] !== v);
    if (differs) await transport.request('queue.configure', { ...s.ref, policy: own });
  }

  /**
   * Runs the product operation `op` on the queue; a queue that vanished (a restarted in-memory
   * emulator) is made again. Its errors are told in the product's words (see productError).
   */
  async function onQueue<T>(s: Site, op: string, fn: () => Promise<T>, write = false): Promise<T> {
    try {
      if (!s.ready) await ensure(s, write);
      try {
        return await fn();
      } catch (e) {
        if (!isCode(e, 'not_found')) throw e;
        s.ensured = null;
        s.ready = false;
        await ensure(s, write);
        return await fn();
      }
    } catch (e) {
      throw productError(e, op, s.tenant, id!);
    }
  }

  /** `leaseMs`: what this delivery was leased for, when the client chose it (else the queue's default). */
  function toMessage<T>(ref: QueueRef, d: Delivery, data: T, leaseMs: number | undefined): SyncMessage<T> {
    const m: SyncMessage<T> = {
      data,
      messageId: d.id,
      deliveryId: d.receipt,
      attempt: d.attempts,
      leaseUntil: d.leaseUntil,
      enqueuedAt: d.enqueuedAt,
      async ack(given?: Record<string, never>) {
        // No options, but an `ack({ delayMs })` meant as a nack must not delete the message unseen.
        options(given, 'ack', []);
        return (await transport.request('ack', { receipt: d.receipt })).ok;
      },
      async nack(given = {}) {
        const o = options(given, 'nack', ['delayMs', 'reason', 'error']);
        const delayMs = optMs(o.delayMs, 'delayMs');
        const mine = own.maxNackDelayMs;
        if (delayMs !== undefined && mine !== undefined && delayMs > mine) {
          throw invalidArg(`nack delayMs ${delayMs} is over this handle's maxNackDelayMs (${mine}); nothing was settled`, { field: 'delayMs', limit: mine });
        }
        const reason = optString(o.reason, 'reason');
        const error = errorText(o.error)?.slice(0, 8192);
        try {
          // Naming the queue makes the engine hold the delay to its stored maxNackDelayMs even when
          // the lease has ended: a nack over it throws, stale or not (DESIGN's sync row).
          return (await transport.request('nack', { ...ref, receipt: d.receipt, delayMs, reason, error })).ok;
        } catch (e) {
          if (isCode(e, 'invalid_argument') && /^delayMs /.test((e as Error).message)) {
            throw invalidArg(`nack ${(e as Error).message}: over the queue's maxNackDelayMs; nothing was settled`, { field: 'delayMs' });
          }
          // The queue is gone (deleted, or an in-memory emulator restarted): so is the lease.
          if (isCode(e, 'not_found')) return false;
          throw e;
        }
      },
      async touch(given = {}) {
        const o = options(given, 'touch', ['leaseMs']);
        // Without leaseMs: this delivery's own lease; one leased at the queue's default is extended by it.
        const ms = optMs(o.leaseMs, 'leaseMs', { min: 1, max: MAX_LEASE_MS }) ?? leaseMs;
        const r = await transport.request('extend', { receipt: d.receipt, leaseMs: ms });
        if (r.ok && r.leaseUntil !== null) m.leaseUntil = r.leaseUntil;
        return r.ok;
      },
    };
    if (d.orderingKey !== null && d.orderingKey !== undefined) m.orderingKey = d.orderingKey;
    if (d.meta !== null && d.meta !== undefined) m.meta = d.meta as Record<string, unknown>;
    return m;
  }

  /**
   * A delivery as the consumer sees it: its data re-parsed by the schema. One the schema refuses
   * (sent without it, by the CLI, or before the schema changed) goes to the DLQ at once, with the
   * schema's error, rather than back to the queue to fail again; the caller then receives the next.
   */
  async function accept<T>(s: Site, d: Delivery, leaseMs: number | undefined): Promise<SyncMessage<T> | null> {
    if (!schema) return toMessage(s.ref, d, d.body as T, leaseMs);
    let data: T;
    try {
      data = (await schema.parse(d.body)) as T;
    } catch (e) {
      const error = `data does not match this handle's schema: ${errorText(e) ?? 'parse() threw'}`.slice(0, 8192);
      await transport.request('nack', { receipt: d.receipt, dead: true, reason: INVALID_PAYLOAD, error });
      return null;
    }
    return toMessage(s.ref, d, data, leaseMs);
  }

  function makeReader(consumerId: string): SyncReader {
    async function recv<T>(given: RecvOptions = {}): Promise<SyncMessage<T> | null> {
      const o = options(given, 'recv', RECV_KEYS);
      if (o.wait !== undefined && typeof o.wait !== 'boolean') throw invalidArg('wait must be true or false');
      const wait = o.wait ?? true;
      const timeoutMs = optMs(o.timeoutMs, 'timeoutMs') ?? 30000;
      const leaseMs = optMs(o.leaseMs, 'leaseMs', { min: 1, max: MAX_LEASE_MS }) ?? own.leaseMs;
      const who = optString(o.consumerId, 'consumerId') ?? consumerId;
      const s = site(o.tenantId);
      const signal = optSignal(o.signal);
      if (signal?.aborted) return null;
      if (!s.ready) {
        // The queue's first use may wait for the emulator to come back: an abort ends that wait too.
        try {
          await orAbort(ensure(s, true), signal);
        } catch (e) {
          if (signal?.aborted) return null;
          throw productError(e, 'recv', s.tenant, id!);
        }
      }
      try {
        return await receive<T>(s, wait ? timeoutMs : 0, leaseMs, who, signal);
      } catch (e) {
        if (signal?.aborted || isAbort(e)) return null;
        throw e;
      }
    }

    /**
     * The pulls of one recv. A wait longer than the server holds one request is several holds that
     * share one deadline on the emulator's clock (`waitUntil`), so a clock.advance past it ends the
     * wait even while the next hold is on its way, and that hold takes nothing. So is a wait that a
     * schema may cut short (a refused message, then the rest of the wait). Real time bounds the wait
     * too, as it bounds a single hold.
     */
    async function receive<T>(s: Site, timeoutMs: number, leaseMs: number | undefined, who: string, signal: AbortSignal | undefined): Promise<SyncMessage<T> | null> {
      const realEnd = realNow() + timeoutMs;
      const clockNow = async () => (await transport.request('clock.now', {}, { signal })).now;
      const several = timeoutMs > LIMITS.maxWaitMs || (schema !== undefined && timeoutMs > 0);
      // At most the largest time the engine takes (a Date's): a huge finite timeout still just waits.
      const until = several ? Math.min((await clockNow()) + timeoutMs, LIMITS.maxEpochMs) : undefined;
      let waitMs = Math.min(timeoutMs, LIMITS.maxWaitMs);
      for (;;) {
        const args = { ...s.ref, max: 1, leaseMs, waitMs: waitMs || undefined, waitUntil: until, consumerId: who };
        const r = await onQueue(s, 'recv', () => transport.request('pull', args, { signal }), true);
        const got = r.messages;
        if (got.length > 0) {
          // The lease this delivery got (the queue's default at the pull, when none was asked for):
          // touch() without leaseMs extends by it, even if the queue's default changes meanwhile.
          const m = await accept<T>(s, got[0], leaseMs ?? r.leaseMs);
          if (m) return m;
        } else if (timeoutMs === 0 || until === undefined || signal?.aborted || realNow() >= realEnd || (await clockNow()) >= until) {
          // One hold was the whole wait, or the wait's end has come.
          return null;
        }
        // The rest of the wait in real time; the server ends the hold at `until` if that comes first.
        waitMs = timeoutMs === 0 ? 0 : Math.min(Math.max(0, realEnd - realNow()), LIMITS.maxWaitMs);
      }
    }

    async function* stream<T>(given: StreamOptions = {}): AsyncGenerator<SyncMessage<T>> {
      const o = options(given, 'stream', RECV_KEYS);
      const wait = o.wait ?? true;
      const signal = optSignal(o.signal);
      let backoff = 50;
      while (!signal?.aborted) {
        let m: SyncMessage<T> | null;
        try {
          m = await recv<T>({ ...o, wait });
          backoff = 50;
        } catch (e) {
          // Closed (this handle, or its transport for good): the stream ends; there is nothing to wait for.
          if (isCode(e, 'unavailable') && (closed || transport.isClosed?.())) return;
          // stream({ wait: true }) rides out transient transport errors (the emulator restarting).
          if (wait && isCode(e, 'unavailable')) {
            await pause(backoff, signal);
            backoff = Math.min(backoff * 2, 1000);
            continue;
          }
          throw e;
        }
        if (m) yield m;
        else if (!wait) return;
      }
    }

    return { consumerId, recv, stream };
  }

  const main = makeReader(`${tenantId}/${id}#${++readerSeq}`);

  return {
    id,
    tenantId,
    prefix,
    consumerId: main.consumerId,
    recv: main.recv,
    stream: main.stream,

    async send<T>(o: SendOptions<T>) {
      if (!o || typeof o !== 'object') throw invalidArg('send() needs { data }');
      onlyKeys(o as unknown as Record<string, unknown>, ['data', 'delayMs', 'idempotencyKey', 'idempotencyTtlMs', 'orderingKey', 'meta', 'tenantId'], 'send');
      if (o.data === undefined) throw invalidArg('send() needs data (any JSON value)');
      jsonValue(o.data, 'data');
      if (o.meta !== undefined && o.meta !== null) {
        // The product's meta is a record: what a receiver reads as msg.meta.key. Checked on what
        // JSON will write (a Date or a boxed string would arrive as a string).
        const written = asJsonTop(o.meta);
        if (written === null || typeof written !== 'object' || Array.isArray(written)) {
          const got = Array.isArray(written) ? 'an array' : written === null ? 'null' : typeof written;
          throw invalidArg(`send: meta must be an object of JSON values, got ${got}${written !== o.meta ? ' (as JSON writes it)' : ''}`, { field: 'meta' });
        }
        jsonValue(o.meta, 'meta');
      }
      // Everything below up to the schema's check runs in the turn of the call, so it reads the
      // caller's objects as they are then: they may change or be reused once it has called.
      const delayMs = optMs(o.delayMs, 'delayMs');
      const dedupeTtlMs = optMs(o.idempotencyTtlMs, 'idempotencyTtlMs', { min: 1, max: 365 * DAY }) ?? own.dedupeTtlMs;
      const dedupeKey = optKey(o.idempotencyKey, 'idempotencyKey');
      const orderingKey = optKey(o.orderingKey, 'orderingKey');
      const s = site(o.tenantId);
      let args = { ...s.ref, body: o.data, delayMs, dedupeKey, dedupeTtlMs, orderingKey, meta: o.meta };
      // Data JSON cannot carry is refused before the first use sets up the queue (creates it, writes
      // this handle's settings), so such a send changes nothing. Synchronous: calls made together
      // still reach the emulator in the order they were made. Where the request goes out only after
      // a wait (that set-up, the schema's check), what is sent is what was encoded here.
      if (!s.ready || schema) {
        try {
          args = JSON.parse(argsJson('push', args)) as typeof args;
        } catch (e) {
          throw sendError(e);
        }
      }
      const mine = own.maxPayloadBytes;
      if (mine !== undefined) {
        let size = 0;
        try {
          size = envelopeBytes(o.data, o.meta, orderingKey);
        } catch {
          // not JSON-serialisable: the request's encoding names the field
        }
        if (size > mine) throw new QuaysideError('payload_too_large', `send: the message is ${size} bytes as stored (${ENVELOPE}), over this handle's payloadBytes (${mine})`, { details: { size, limit: mine } });
      }
      if (schema) {
        // Validated at send. What is stored is the data as sent (the schema's input): the receiver
        // parses it again, so a transforming schema runs once, on the consumer's side. It checks
        // the data as taken and stored, in the JSON form recv will parse, so a parse that takes
        // turns cannot pass a body the caller changed meanwhile while the old one is stored.
        try {
          await schema.parse(args.body);
        } catch (e) {
          throw new QuaysideError('invalid_argument', `data does not match this handle's schema: ${errorText(e) ?? 'parse() threw'}; nothing was sent`, { details: { field: 'data' }, cause: e });
        }
      }
      try {
        const r = await onQueue(s, 'send', () => transport.request('push', args), true);
        return { messageId: r.id };
      } catch (e) {
        throw sendError(e);
      }
    },

    reader(given = {}) {
      const o = options(given, 'reader', ['consumerId']);
      const cid = optString(o.consumerId, 'consumerId') ?? `${tenantId}/${id}#${++readerSeq}`;
      return makeReader(cid);
    },

    async dlq<T>(given: { limit?: number; tenantId?: string } = {}) {
      const o = options(given, 'dlq', ['limit', 'tenantId']);
      const limit = o.limit ?? 100;
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) throw invalidArg(`limit must be a positive whole number, got ${typeof limit === 'string' ? JSON.stringify(limit) : String(limit)}`);
      const s = site(o.tenantId);
      const out: DlqEntry<T>[] = [];
      let cursor: string | undefined;
      // dead.list pages hold at most 1000; a larger limit reads several.
      while (out.length < limit) {
        const page = await onQueue(s, 'dlq', () => transport.request('dead.list', { ...s.ref, limit: Math.min(1000, limit - out.length), cursor }));
        for (const m of page.messages) {
          const e: DlqEntry<T> = { messageId: m.id, data: m.body as T, attempts: m.attempts, movedAt: m.deadAt ?? 0, reason: m.deadReason ?? 'max_deliveries_exceeded' };
          if (m.lastError) e.lastError = m.lastError;
          // What a received message carries, as the product's dead letters keep it.
          if (m.orderingKey !== null && m.orderingKey !== undefined) e.orderingKey = m.orderingKey;
          if (m.meta !== null && m.meta !== undefined) e.meta = m.meta as Record<string, unknown>;
          out.push(e);
        }
        if (!page.next) break;
        cursor = page.next;
      }
      return out;
    },

    async dlqRemove(o) {
      if (!o || typeof o !== 'object') throw invalidArg('dlqRemove() needs { messageId }');
      onlyKeys(o as Record<string, unknown>, ['messageId', 'tenantId'], 'dlqRemove');
      const mid = optString(o.messageId, 'messageId');
      if (mid === undefined) throw invalidArg('dlqRemove() needs a messageId');
      const s = site(o.tenantId);
      if (!/^m_[1-9][0-9]{0,15}$/.test(mid)) return false;
      const r = await onQueue(s, 'dlqRemove', () => transport.request('dead.purge', { ...s.ref, ids: [mid] }), true);
      return r.purged > 0;
    },

    async stats(given?: Record<string, never>) {
      // The handle's own tenant only: a `{ tenantId }` here would read another tenant's name as this one's.
      options(given, 'stats', []);
      const r = await onQueue(home, 'stats', () => transport.request('stats', home.ref));
      return { ready: r.counts.ready, delayed: r.counts.delayed, inFlight: r.counts.leased, dlq: r.counts.dead };
    },

    async close() {
      closed = true;
      if (owned) await transport.close();
    },
  };
}

export { QuaysideError };
export type { ErrorCode } from '../protocol';
