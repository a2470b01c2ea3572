import { QuaysideError } from '../errors';
import type { Delivery, LagStep, MessageView } from '../protocol';
import { emptyLagHistory } from '../protocol';
import { Connection } from './connection';
import type { Transport } from './transport';
import { EMULATOR_HANDLE_KEYS, callOnError, invalidArg, isAbort, isCode, jsonValue, onlyKeys, options, optCount, optFunction, optMs, optObject, optSeconds, optSignal, optString, optTransport, pause, readOnlyRefusal, throwIfAborted, thrownText } from './common';

// The `cache` dialect (seeds/000): cache.queue(name) → push / pull / ack / nack / consume /
// deadLetters / replay / purgeDead. A queue exists as soon as you push to it.

export { QuaysideError };
export type { ErrorCode } from '../protocol';

export interface CacheOptions {
  /** `ws://host:port` of the emulator; defaults to `QUAYSIDE_URL`, then `ws://127.0.0.1:7433`. */
  url?: string;
  /** Defaults to `QUAYSIDE_TOKEN`. */
  token?: string;
  /** The namespace that scopes every queue of this cache. */
  namespace: string;
  /** Use this transport instead of opening a WebSocket connection (tests, embedding). */
  transport?: Transport;
}

export interface PushOptions {
  /** Make the message visible this many seconds from now (at most 7 days, the queue's `maxDelayMs`). */
  delaySeconds?: number;
  /** A repeat key within an hour enqueues nothing and answers the first message's id. */
  dedupeKey?: string;
}

export interface PushResult {
  id: string;
  /** true when a live dedupe key answered an earlier message's id and nothing was enqueued. */
  deduped: boolean;
}

export interface PullOptions {
  /** How many messages at most (default 1, at most 1000). */
  max?: number;
  /** The lease: how long each pulled message stays invisible to other consumers (default 30). */
  visibilitySeconds?: number;
  /** Hold the pull on the server until a message is ready or this many ms pass (default 0). */
  waitMs?: number;
  signal?: AbortSignal;
}

export interface CacheMessage<T = unknown> {
  id: string;
  body: T;
  /** Acks or nacks this delivery only, and only until its lease ends. */
  receipt: string;
  /** Deliveries so far, this one included (1 on the first delivery). */
  attempts: number;
  /** Epoch ms the message was pushed. */
  enqueuedAt: number;
  /** Epoch ms the lease ends (the message is invisible until then). */
  leaseUntil: number;
  /** The same instant as `leaseUntil`, by the name "visibility timeout" users know. */
  visibleUntil: number;
  dedupeKey: string | null;
}

export interface ConsumeOptions<T = unknown> {
  /** Batch size per pull (default 10). */
  max?: number;
  /** Lease per message (default 30). */
  visibilitySeconds?: number;
  /** How long a pull waits on an empty queue before polling again (default 1000 ms); held by the server, never a busy poll. */
  idleMs?: number;
  /** Abort to stop the loop cleanly: the batch in hand is finished, nothing is lost. */
  signal?: AbortSignal;
  /** Called with a handler's error before the message is nacked; what it throws or rejects with is logged. */
  onError?: (error: unknown, message: CacheMessage<T>) => unknown;
}

export interface DeadLetter<T = unknown> {
  id: string;
  /** `timeout` when the last lease expired, `nack` when the handler gave it back. */
  reason: string;
  attempts: number;
  /** Epoch ms it moved to the dead-letter queue. */
  deadAt: number;
  body: T;
  enqueuedAt: number;
  lastError: string | null;
}

export interface DeadLetterPage<T = unknown> {
  messages: DeadLetter<T>[];
  /** Dead letters in the queue in all. */
  total: number;
  /** Pass as `cursor` for the next page; null on the last. */
  next: string | null;
}

export interface QueueStats {
  /** ready + delayed */
  depth: number;
  ready: number;
  delayed: number;
  inFlight: number;
  dead: number;
  /** ms the oldest ready message has waited. */
  oldestReadyAgeMs: number;
  /** The last 24 hours in half-hour steps: peak depth and longest wait of the oldest message. */
  lag_history: LagStep[];
}

/** `T`: the bodies this queue carries (`cache.queue<Job>('jobs')`); a call may name another. */
export interface CacheQueue<T = unknown> {
  readonly name: string;
  readonly namespace: string;
  push(body: T, opts?: PushOptions): Promise<PushResult>;
  pull<U = T>(opts?: PullOptions): Promise<CacheMessage<U>[]>;
  /** false when the receipt is stale (its lease ended or it was already settled). */
  ack(receipt: string): Promise<boolean>;
  /** Releases the message for another attempt now; false when the receipt is stale. */
  nack(receipt: string): Promise<boolean>;
  consume<U = T>(handler: (msg: CacheMessage<U>) => unknown, opts?: ConsumeOptions<U>): Promise<void>;
  deadLetters<U = T>(opts?: { limit?: number; cursor?: string }): Promise<DeadLetterPage<U>>;
  /** Puts dead letters back on the queue with their attempts reset; the oldest 100 without ids. */
  replay(opts?: { ids?: string[] }): Promise<{ replayed: number }>;
  /** Deletes dead letters for good; all of them without ids. */
  purgeDead(opts?: { ids?: string[] }): Promise<{ purged: number }>;
  stats(): Promise<QueueStats>;
}

export interface Cache {
  readonly namespace: string;
  queue<T = unknown>(name: string): CacheQueue<T>;
  /** Closes the connection (a later call reopens it). */
  close(): Promise<void>;
}

const MAX_LEASE_S = 12 * 3600;

/** The longest a pull may hold (`waitMs`) and consume() may idle (`idleMs`): 20 minutes. */
const MAX_WAIT_MS = 20 * 60 * 1000;

/** The shortest time consume() holds an empty pull (`idleMs` below it is raised to it). */
const MIN_HOLD_MS = 100;

export function createCache(opts: CacheOptions): Cache {
  if (!opts || typeof opts !== 'object') throw invalidArg('createCache needs { namespace }');
  onlyKeys(opts as unknown as Record<string, unknown>, ['url', 'token', 'namespace', 'transport'] satisfies (keyof CacheOptions)[], 'createCache', EMULATOR_HANDLE_KEYS);
  const namespace = optString(opts.namespace, 'namespace');
  if (namespace === undefined) throw invalidArg('createCache needs a namespace');
  const given = optTransport(opts.transport);
  let transport: Transport = given ?? new Connection({ url: opts.url, token: opts.token, client: 'quayside-cache' });
  // One handle per name while the app holds it; weakly, so a cache that outlives many queue names
  // (one per test) does not keep a handle for every name it was ever asked for.
  const queues = new Map<string, WeakRef<CacheQueue>>();
  const forget = new FinalizationRegistry<string>((n) => {
    if (queues.get(n)?.deref() === undefined) queues.delete(n);
  });
  /** How many times close() was called: a consume() loop ends when it changes. */
  let closes = 0;
  /** Connections a consume() loop still settles a batch over, and those close() retired meanwhile. */
  const inUse = new Map<Transport, number>();
  const retired = new Set<Transport>();
  const link: Link = {
    current: () => transport,
    closes: () => closes,
    hold(tr) {
      inUse.set(tr, (inUse.get(tr) ?? 0) + 1);
      return async () => {
        const left = inUse.get(tr)! - 1;
        if (left > 0) return void inUse.set(tr, left);
        inUse.delete(tr);
        if (retired.delete(tr)) await tr.close();
      };
    },
  };
  return {
    namespace,
    queue<T = unknown>(name: string): CacheQueue<T> {
      const n = optString(name, 'queue name');
      if (n === undefined) throw invalidArg('cache.queue(name) needs a name');
      let q = queues.get(n)?.deref();
      if (!q) {
        q = cacheQueue(link, namespace, n);
        queues.set(n, new WeakRef(q));
        forget.register(q, n);
      }
      // One handle per name whatever type it is asked with: the type is the caller's word for the bodies.
      return q as CacheQueue<T>;
    },
    async close() {
      closes++;
      const old = transport;
      if (!given) transport = new Connection({ url: opts.url, token: opts.token, client: 'quayside-cache' });
      // A consume() loop settling its batch in hand keeps the old connection until it is done, then
      // closes it: close() does not wait for a handler, and no connection is left open behind it.
      if (inUse.has(old)) retired.add(old);
      else await old.close();
    },
  };
}

function toMessage<T>(d: Delivery): CacheMessage<T> {
  return {
    id: d.id,
    body: d.body as T,
    receipt: d.receipt,
    attempts: d.attempts,
    enqueuedAt: d.enqueuedAt,
    leaseUntil: d.leaseUntil,
    visibleUntil: d.leaseUntil,
    dedupeKey: d.dedupeKey,
  };
}

function toDead<T>(m: MessageView): DeadLetter<T> {
  return {
    id: m.id,
    reason: m.deadReason ?? 'nack',
    attempts: m.attempts,
    deadAt: m.deadAt ?? 0,
    body: m.body as T,
    enqueuedAt: m.enqueuedAt,
    lastError: m.lastError,
  };
}

function idsOf(o: { ids?: unknown } | undefined): string[] | undefined {
  if (o === undefined || o === null) return undefined;
  if (typeof o !== 'object') throw invalidArg('expected { ids?: string[] }');
  onlyKeys(o as Record<string, unknown>, ['ids'], 'dead-letter');
  if (o.ids === undefined) return undefined;
  if (!Array.isArray(o.ids) || !o.ids.every((x) => typeof x === 'string')) throw invalidArg('ids must be an array of message ids');
  return o.ids;
}

/**
 * The queue's delay limit is the engine's to check (a queue may set its own), and it speaks in
 * delayMs; this face's callers gave delaySeconds, so its refusal is restated in their terms.
 */
function inSeconds(e: unknown, delayMs: number | undefined): unknown {
  const over = e instanceof QuaysideError && e.code === 'invalid_argument' && delayMs !== undefined ? /^delayMs must be at most (\d+)/.exec(e.message) : null;
  if (!over) return e;
  return invalidArg(`delaySeconds must be at most ${Number(over[1]) / 1000} (the queue's delay limit), got ${delayMs! / 1000}`, { field: 'delaySeconds' });
}

function receiptArg(r: unknown): string {
  if (typeof r !== 'string' || r.length === 0) throw invalidArg('a receipt must be the non-empty string a pulled message carries (msg.receipt)');
  return r;
}

/** What a queue handle needs of its cache: the connection now, close() calls, and a hold on a connection. */
interface Link {
  current(): Transport;
  closes(): number;
  /** Keeps `tr` open for a batch in hand; the function returned lets go (closing it if close() retired it). */
  hold(tr: Transport): () => Promise<void>;
}

function cacheQueue(link: Link, namespace: string, name: string): CacheQueue {
  const ref = { namespace, queue: name };
  const t = link.current;
  const closes = link.closes;

  /** Reads on a queue nobody pushed to yet see an empty queue: it "exists as soon as you push". */
  async function orEmpty<T>(p: Promise<T>, empty: T): Promise<T> {
    try {
      return await p;
    } catch (e) {
      if (isCode(e, 'not_found')) return empty;
      throw e;
    }
  }

  const createEmpty = () => t().request('queue.create', { ...ref, dialect: 'cache', ifNotExists: true });

  /** A pull that reports a missing queue as not_found. */
  async function pullRaw<T>(o: PullOptions, over: Transport = t()): Promise<CacheMessage<T>[]> {
    const max = optCount(o.max, 'max', 1, 1000) ?? 1;
    const leaseMs = optSeconds(o.visibilitySeconds, 'visibilitySeconds', { min: 0.001, max: MAX_LEASE_S });
    const waitMs = optMs(o.waitMs, 'waitMs', { max: MAX_WAIT_MS });
    const signal = optSignal(o.signal);
    throwIfAborted(signal);
    const r = await over.request('pull', { ...ref, max, leaseMs, waitMs: waitMs || undefined }, { signal });
    return r.messages.map((d) => toMessage<T>(d));
  }

  /**
   * ack and nack take a receipt only. An option given anyway is refused, not dropped: a
   * `nack(r, { delaySeconds: 60 })` would otherwise put the message back at once.
   */
  const noOptions = (op: 'ack' | 'nack', rest: unknown[]): void => {
    const o = optObject(rest[0], `${op} options`);
    const extra = rest.length > 1 ? 'a third argument' : o && Object.keys(o).length > 0 ? `option "${Object.keys(o)[0]}"` : null;
    const why = op === 'nack' ? '; a nacked message is ready again at once (its queue has no nack delay)' : '';
    if (extra) throw invalidArg(`${op}(receipt) takes no options, got ${extra}${why}`);
  };

  /**
   * Settles name this queue, so a receipt of another queue (or namespace) is stale here, as it
   * would be against the hosted service; a queue that does not exist holds no lease either.
   */
  const settleHere = (op: 'ack' | 'nack', receipt: string, error?: string, over: Transport = t()): Promise<boolean> =>
    orEmpty(over.request(op, { ...ref, receipt, error }).then((r) => r.ok), false);

  const q: CacheQueue = {
    name,
    namespace,

    async push(body, opts) {
      // A misspelt option (delaySecond) is refused, not dropped: the message would go out at once.
      const o = options(opts, 'push', ['delaySeconds', 'dedupeKey']);
      // The bound is the queue's maxDelayMs, checked by the engine (a queue may set its own).
      const delayMs = optSeconds(o.delaySeconds, 'delaySeconds');
      const dedupeKey = optString(o.dedupeKey, 'dedupeKey');
      if (body === undefined) throw invalidArg('push(body) needs a body (any JSON value)');
      jsonValue(body, 'body');
      const r = await t().request('push', { ...ref, body, delayMs, dedupeKey, create: 'cache' }).catch((e) => {
        throw readOnlyRefusal(inSeconds(e, delayMs), 'push');
      });
      return { id: r.id, deduped: r.deduped };
    },

    async pull<T>(opts?: PullOptions | null) {
      const o = options(opts, 'pull', ['max', 'visibilitySeconds', 'waitMs', 'signal']);
      // A pull that may wait, on a queue nobody made yet, makes the (empty) queue and waits there,
      // as consume() does: answering [] at once would turn a `pull({ waitMs })` loop into a spin.
      const pulled: Promise<CacheMessage<T>[]> = o.waitMs ? orNotFound(pullRaw<T>(o), () => createEmpty().then(() => pullRaw<T>(o))) : orEmpty(pullRaw<T>(o), []);
      return pulled.catch((e): never => {
        throw readOnlyRefusal(e, 'pull');
      });
    },

    async ack(receipt, ...rest: unknown[]) {
      noOptions('ack', rest);
      return settleHere('ack', receiptArg(receipt));
    },

    async nack(receipt, ...rest: unknown[]) {
      noOptions('nack', rest);
      return settleHere('nack', receiptArg(receipt));
    },

    async consume<T>(handler: (msg: CacheMessage<T>) => unknown, opts?: ConsumeOptions<T> | null) {
      if (typeof handler !== 'function') throw invalidArg('consume(handler) needs a handler function');
      const o = options(opts, 'consume', ['max', 'visibilitySeconds', 'idleMs', 'signal', 'onError']);
      const max = optCount(o.max, 'max', 1, 1000) ?? 10;
      const visibilitySeconds = o.visibilitySeconds;
      optSeconds(visibilitySeconds, 'visibilitySeconds', { min: 0.001, max: MAX_LEASE_S });
      const idleMs = optMs(o.idleMs, 'idleMs', { max: MAX_WAIT_MS }) ?? 1000;
      // A held pull answers the moment a message comes, so a shorter hold than this would only spin.
      const holdMs = Math.max(idleMs, MIN_HOLD_MS);
      const signal = optSignal(o.signal);
      const onError = optFunction<NonNullable<ConsumeOptions['onError']>>(o.onError, 'onError');
      // close() on the cache ends the loop (after the batch in hand), as aborting the signal does.
      const epoch = closes();
      let backoff = 50;
      while (!signal?.aborted && closes() === epoch) {
        // The batch is pulled, and settled, over one connection: a close() meanwhile keeps it open
        // until the batch is done.
        const over = t();
        let batch: CacheMessage<T>[];
        try {
          batch = await orNotFound(
            pullRaw<T>({ max, visibilitySeconds, waitMs: holdMs, signal }, over),
            // Nobody pushed yet: create the (empty) queue so the server can hold the next pull.
            () => createEmpty().then(() => []),
          );
          backoff = 50;
        } catch (e) {
          if (signal?.aborted || isAbort(e)) break;
          // Closed: the cache (the loop ends), or the caller's own transport for good.
          if (isCode(e, 'unavailable') && (closes() !== epoch || t().isClosed?.())) break;
          if (isCode(e, 'unavailable')) {
            // The emulator is restarting: keep trying until it is back or the signal aborts.
            await pause(backoff, signal);
            backoff = Math.min(backoff * 2, 1000);
            continue;
          }
          throw e;
        }
        // The batch in hand is finished, even when the signal aborts or the cache closes meanwhile:
        // every message is acked or nacked, never left leased. Only an emulator that cannot be
        // reached ends it early: the rest could not be settled either, so they are not handed to
        // the handler, and go back to the queue when their lease ends.
        const release = link.hold(over);
        try {
          for (const msg of batch) {
            if (over.isClosed?.()) break;
            let failure: { error: unknown } | null = null;
            try {
              await handler(msg);
            } catch (e) {
              failure = { error: e };
              if (onError) callOnError(onError, e, msg as CacheMessage);
            }
            const reached = await settle(() =>
              failure ? settleHere('nack', msg.receipt, thrownText(failure.error), over) : settleHere('ack', msg.receipt, undefined, over),
            );
            if (!reached) break;
          }
        } finally {
          await release();
        }
      }
    },

    async deadLetters<T>(opts?: { limit?: number; cursor?: string } | null) {
      const o = options(opts, 'deadLetters', ['limit', 'cursor']);
      const limit = optCount(o.limit, 'limit', 1, 1000);
      const cursor = optString(o.cursor, 'cursor');
      const r = await orEmpty(t().request('dead.list', { ...ref, limit, cursor }), { messages: [], total: 0, next: null });
      return { messages: r.messages.map((m) => toDead<T>(m)), total: r.total, next: r.next };
    },

    async replay(o) {
      // ids: [] goes to the emulator too: every replay is audited (count 0), and a read-only token refused.
      const ids = idsOf(o);
      return orEmpty(t().request('dead.replay', { ...ref, ids, max: ids ? undefined : 100 }), { replayed: 0 }).catch((e): never => {
        throw readOnlyRefusal(e, 'replay');
      });
    },

    async purgeDead(o) {
      const ids = idsOf(o);
      return orEmpty(t().request('dead.purge', { ...ref, ids }), { purged: 0 }).catch((e): never => {
        throw readOnlyRefusal(e, 'purgeDead');
      });
    },

    async stats(...rest: unknown[]) {
      if (rest.length > 0 && rest[0] !== undefined) throw invalidArg('stats() takes no arguments');
      // A queue never pushed to: zeros, and a history of 48 empty steps, as an idle queue shows.
      const s = await orNotFound(t().request('stats', ref), async () => {
        const { now } = await t().request('clock.now', {});
        return { counts: { ready: 0, delayed: 0, leased: 0, dead: 0, depth: 0, bytes: 0, oldestReadyAgeMs: 0 }, lagHistory: emptyLagHistory(now), now };
      });
      return {
        depth: s.counts.depth,
        ready: s.counts.ready,
        delayed: s.counts.delayed,
        inFlight: s.counts.leased,
        dead: s.counts.dead,
        oldestReadyAgeMs: s.counts.oldestReadyAgeMs,
        lag_history: s.lagHistory,
      };
    },
  };
  return q;
}

async function orNotFound<T>(p: Promise<T>, onMissing: () => Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (isCode(e, 'not_found')) return onMissing();
    throw e;
  }
}

/** Runs a settle; false when the emulator could not be reached (the lease then runs out instead). */
async function settle(fn: () => Promise<boolean>): Promise<boolean> {
  try {
    await fn();
    return true;
  } catch (e) {
    if (!isCode(e, 'unavailable')) throw e;
    return false;
  }
}
