import { QuaysideError } from '../errors';
import type { Delivery, QueueInfo, QueuePolicy } from '../protocol';
import { LIMITS } from '../protocol';
import type { Transport } from './transport';
import { errorText, invalidArg, isAbort, isCode, jsonValue, onlyKeys, optMs, optObject, optString, pause } from './common';
import { checkOrdering, syncPolicy, type SyncDelivery, type SyncLimits } from './policies';

// The `sync` dialect (seeds/002 and DESIGN.md "sync details") over any Transport: the WebSocket
// connection (quayside/sync) or the in-process engine (quayside/sync/memory). The semantics live in
// the engine; this file only speaks the product's names.

export type { SyncDelivery, SyncLimits };

export interface SyncQueueOptions {
  /** The queue's id (its name within the tenant). */
  id: string;
  /** The tenant, which scopes the queue; default `'default'`. */
  tenantId?: string;
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
  meta?: unknown;
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
  meta?: unknown;
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
}

export interface SyncReader {
  readonly consumerId: string;
  recv<T = unknown>(opts?: RecvOptions): Promise<SyncMessage<T> | null>;
  stream<T = unknown>(opts?: StreamOptions): AsyncIterableIterator<SyncMessage<T>>;
}

export interface SyncQueue extends SyncReader {
  readonly id: string;
  readonly tenantId: string;
  send<T = unknown>(opts: SendOptions<T>): Promise<{ messageId: string }>;
  /** An independent consumer of the same queue (its own consumerId and waits). */
  reader(opts?: { consumerId?: string }): SyncReader;
  /** Oldest first. */
  dlq<T = unknown>(opts?: { limit?: number }): Promise<DlqEntry<T>[]>;
  /** false when no such message is in the DLQ. */
  dlqRemove(opts: { messageId: string }): Promise<boolean>;
  /** The queue's counts. */
  stats(): Promise<{ ready: number; delayed: number; inFlight: number; dlq: number }>;
  /** Closes this queue's transport if it owns one. */
  close(): Promise<void>;
}

const QUEUE_KEYS = ['id', 'tenantId', 'limits', 'delivery', 'ordering', 'url', 'token', 'memory', 'transport'];
const MAX_LEASE_MS = 12 * 3600 * 1000;
const DAY = 24 * 3600 * 1000;

let readerSeq = 0;

/** Builds a sync queue over a transport. `owned` transports are closed by `close()`. */
export function syncQueueOver(transport: Transport, opts: SyncQueueOptions, owned = false): SyncQueue {
  if (!opts || typeof opts !== 'object') throw invalidArg('queue() needs { id }');
  onlyKeys(opts as unknown as Record<string, unknown>, QUEUE_KEYS, 'queue');
  const id = optString(opts.id, 'id');
  if (id === undefined) throw invalidArg('queue() needs an id');
  const tenantId = optString(opts.tenantId, 'tenantId') ?? 'default';
  checkOrdering(opts.ordering);
  checkOrdering(optObject(opts.delivery, 'delivery')?.ordering);
  const overrides = syncPolicy(opts.limits, opts.delivery);
  const ref = { namespace: tenantId, queue: id };

  let ensured: Promise<QueuePolicy> | null = null;
  /**
   * The policy once `ensured` has resolved. Calls then go out without waiting on it, in the order
   * they were made: `[m.nack(), m.ack()]` must reach the emulator as nack, then ack.
   */
  let known: QueuePolicy | null = null;
  /** Why queue.create was refused (a read-only token), when ensure() fell back to queue.get. */
  let createRefused: QuaysideError | null = null;
  /**
   * Creates the queue on first use (sync preset plus overrides); applies overrides to an existing one.
   * A read-only token may not create or configure, but may list the DLQ and read stats (DESIGN.md
   * "Access"), so a refused create falls back to reading the queue as it is; it must then exist.
   * For a write (`write`), a missing queue reports the refusal (`forbidden`), not `not_found`.
   */
  function ensure(write = false): Promise<QueuePolicy> {
    if (!ensured) {
      const mine = create();
      ensured = mine;
      mine.then(
        (p) => {
          if (ensured === mine) known = p;
        },
        () => {
          if (ensured === mine) ensured = null;
        },
      );
    }
    if (!write) return ensured;
    return ensured.catch((e) => {
      throw isCode(e, 'not_found') && createRefused ? createRefused : e;
    });
  }

  async function create(): Promise<QueuePolicy> {
    let info: QueueInfo;
    try {
      info = await transport.request('queue.create', { ...ref, dialect: 'sync', policy: overrides, ifNotExists: true });
    } catch (e) {
      if (!isCode(e, 'forbidden')) throw e;
      createRefused = e as QuaysideError;
      return (await transport.request('queue.get', ref)).policy;
    }
    createRefused = null;
    const differs = Object.entries(overrides).some(([k, v]) => (info.policy as unknown as Record<string, unknown>)[k] !== v);
    if (differs) info = await transport.request('queue.configure', { ...ref, policy: overrides });
    return info.policy;
  }

  /** Runs an operation on the queue; a queue that vanished (a restarted in-memory emulator) is made again. */
  async function onQueue<T>(fn: () => Promise<T>, write = false): Promise<T> {
    if (!known) await ensure(write);
    try {
      return await fn();
    } catch (e) {
      if (!isCode(e, 'not_found')) throw e;
      ensured = null;
      known = null;
      await ensure(write);
      return fn();
    }
  }

  function toMessage<T>(d: Delivery, leaseMs: number): SyncMessage<T> {
    const m: SyncMessage<T> = {
      data: d.body as T,
      messageId: d.id,
      deliveryId: d.receipt,
      attempt: d.attempts,
      leaseUntil: d.leaseUntil,
      enqueuedAt: d.enqueuedAt,
      async ack() {
        return (await transport.request('ack', { receipt: d.receipt })).ok;
      },
      async nack(o = {}) {
        optObject(o, 'nack options');
        onlyKeys(o as Record<string, unknown>, ['delayMs', 'reason', 'error'], 'nack');
        const delayMs = optMs(o.delayMs, 'delayMs');
        const policy = known ?? (await ensure(true));
        if (delayMs !== undefined && delayMs > policy.maxNackDelayMs) {
          throw invalidArg(`nack delayMs ${delayMs} is over the queue's maxNackDelayMs (${policy.maxNackDelayMs}); nothing was settled`, { field: 'delayMs', limit: policy.maxNackDelayMs });
        }
        const reason = optString(o.reason, 'reason');
        const error = errorText(o.error)?.slice(0, 8192);
        return (await transport.request('nack', { receipt: d.receipt, delayMs, reason, error })).ok;
      },
      async touch(o = {}) {
        optObject(o, 'touch options');
        onlyKeys(o as Record<string, unknown>, ['leaseMs'], 'touch');
        const ms = optMs(o.leaseMs, 'leaseMs', { min: 1, max: MAX_LEASE_MS }) ?? leaseMs;
        const r = await transport.request('extend', { receipt: d.receipt, leaseMs: ms });
        if (r.ok && r.leaseUntil !== null) m.leaseUntil = r.leaseUntil;
        return r.ok;
      },
    };
    if (d.orderingKey !== null && d.orderingKey !== undefined) m.orderingKey = d.orderingKey;
    if (d.meta !== null && d.meta !== undefined) m.meta = d.meta;
    return m;
  }

  function makeReader(consumerId: string): SyncReader {
    async function recv<T>(o: RecvOptions = {}): Promise<SyncMessage<T> | null> {
      optObject(o, 'recv options');
      onlyKeys(o as Record<string, unknown>, ['wait', 'timeoutMs', 'leaseMs', 'consumerId', 'signal'], 'recv');
      if (o.wait !== undefined && typeof o.wait !== 'boolean') throw invalidArg('wait must be true or false');
      const wait = o.wait ?? true;
      const timeoutMs = optMs(o.timeoutMs, 'timeoutMs') ?? 30000;
      const leaseArg = optMs(o.leaseMs, 'leaseMs', { min: 1, max: MAX_LEASE_MS });
      const who = optString(o.consumerId, 'consumerId') ?? consumerId;
      const signal = o.signal;
      if (signal?.aborted) return null;
      const policy = known ?? (await ensure(true));
      const leaseMs = leaseArg ?? policy.leaseMs;
      // A wait longer than the server holds one request is several held pulls in a row.
      let left = wait ? timeoutMs : 0;
      for (;;) {
        const waitMs = Math.min(left, LIMITS.maxWaitMs);
        const started = Date.now();
        let got: Delivery[];
        try {
          got = (await onQueue(() => transport.request('pull', { ...ref, max: 1, leaseMs, waitMs: waitMs || undefined, consumerId: who }, { signal }), true)).messages;
        } catch (e) {
          if (signal?.aborted || isAbort(e)) return null;
          throw e;
        }
        if (got.length > 0) return toMessage<T>(got[0], leaseMs);
        left -= Math.max(waitMs, Date.now() - started);
        if (left <= 0 || signal?.aborted) return null;
      }
    }

    async function* stream<T>(o: StreamOptions = {}): AsyncGenerator<SyncMessage<T>> {
      optObject(o, 'stream options');
      onlyKeys(o as Record<string, unknown>, ['wait', 'timeoutMs', 'leaseMs', 'consumerId', 'signal'], 'stream');
      const wait = o.wait ?? true;
      const signal = o.signal;
      let backoff = 50;
      while (!signal?.aborted) {
        let m: SyncMessage<T> | null;
        try {
          m = await recv<T>({ ...o, wait });
          backoff = 50;
        } catch (e) {
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
    consumerId: main.consumerId,
    recv: main.recv,
    stream: main.stream,

    async send<T>(o: SendOptions<T>) {
      if (!o || typeof o !== 'object') throw invalidArg('send() needs { data }');
      onlyKeys(o as unknown as Record<string, unknown>, ['data', 'delayMs', 'idempotencyKey', 'idempotencyTtlMs', 'orderingKey', 'meta'], 'send');
      if (o.data === undefined) throw invalidArg('send() needs data (any JSON value)');
      jsonValue(o.data, 'data');
      const delayMs = optMs(o.delayMs, 'delayMs');
      const dedupeTtlMs = optMs(o.idempotencyTtlMs, 'idempotencyTtlMs', { min: 1, max: 365 * DAY });
      const dedupeKey = optString(o.idempotencyKey, 'idempotencyKey');
      const orderingKey = optString(o.orderingKey, 'orderingKey');
      const r = await onQueue(() => transport.request('push', { ...ref, body: o.data, delayMs, dedupeKey, dedupeTtlMs, orderingKey, meta: o.meta }), true);
      return { messageId: r.id };
    },

    reader(o = {}) {
      const cid = optString(o.consumerId, 'consumerId') ?? `${tenantId}/${id}#${++readerSeq}`;
      return makeReader(cid);
    },

    async dlq<T>(o: { limit?: number } = {}) {
      optObject(o, 'dlq options');
      const limit = o.limit ?? 100;
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) throw invalidArg(`limit must be a positive whole number, got ${String(limit)}`);
      const out: DlqEntry<T>[] = [];
      let cursor: string | undefined;
      // dead.list pages hold at most 1000; a larger limit reads several.
      while (out.length < limit) {
        const page = await onQueue(() => transport.request('dead.list', { ...ref, limit: Math.min(1000, limit - out.length), cursor }));
        for (const m of page.messages) {
          const e: DlqEntry<T> = { messageId: m.id, data: m.body as T, attempts: m.attempts, movedAt: m.deadAt ?? 0, reason: m.deadReason ?? 'max_deliveries_exceeded' };
          if (m.lastError) e.lastError = m.lastError;
          out.push(e);
        }
        if (!page.next) break;
        cursor = page.next;
      }
      return out;
    },

    async dlqRemove(o) {
      if (!o || typeof o !== 'object') throw invalidArg('dlqRemove() needs { messageId }');
      const mid = optString(o.messageId, 'messageId');
      if (mid === undefined) throw invalidArg('dlqRemove() needs a messageId');
      if (!/^m_[1-9][0-9]{0,15}$/.test(mid)) return false;
      const r = await onQueue(() => transport.request('dead.purge', { ...ref, ids: [mid] }), true);
      return r.purged > 0;
    },

    async stats() {
      const s = await onQueue(() => transport.request('stats', ref));
      return { ready: s.counts.ready, delayed: s.counts.delayed, inFlight: s.counts.leased, dlq: s.counts.dead };
    },

    async close() {
      if (owned) await transport.close();
    },
  };
}

export { QuaysideError };
