import v8 from 'node:v8';
import { QuaysideError } from '../errors';
import { contentTypeProblem, nameProblem, type ConsumerDroppedEvent, type Delivery, type DeliverEvent, type PushInput, type ServerEvent } from '../protocol';
import { envNamespace } from '../http/env-naming';
import { whenAborted } from './abort';
import { Connection } from './connection';
import type { Transport } from './transport';
import { EMULATOR_HANDLE_KEYS, callOnError, errorText, invalidArg, isCode, jsonValue, onlyKeys, optCount, options, optFunction, optKey, optObject, optSignal, optString, optTransport, pause, thrownText } from './common';
import { realNow } from '../real-time';

/** How long stop() waits for the emulator to take a detach (a call's wait for a connection). */
const DETACH_WAIT_MS = 5000;

// The `env` dialect (seeds/001): apps send with env.queue.send / sendBatch by slug within their
// (project, environment); a consumer app's queue(batch, env, ctx) is run by runConsumer().
// Queues are created in the console / management API (or quayside.json), never by a send.

export { QuaysideError };
export type { ErrorCode } from '../protocol';

/** The three with an encoding, or any other label (kept as given, with a JSON body). */
export type ContentType = 'json' | 'text' | 'bytes' | 'v8' | (string & {});

export interface SendOptions {
  /**
   * 'json' (default): any JSON value; 'text': a string; 'bytes': a Uint8Array / ArrayBuffer (sent
   * as base64); 'v8': any structured-cloneable value (a Map, a Date, a typed array …), serialised
   * with node:v8 and given back to the consumer as that value. Another label is kept with a JSON body.
   */
  contentType?: ContentType;
  /** Deliver this many seconds from now (at most 12 hours). */
  delaySeconds?: number;
  /** String-keyed metadata delivered with the message (msg.attributes). */
  attributes?: Record<string, unknown>;
  /** A repeat dedupId within an hour enqueues nothing. */
  dedupId?: string;
}

export interface BatchItem extends SendOptions {
  body: unknown;
}

export interface EnvQueue {
  send(slug: string, body: unknown, opts?: SendOptions): Promise<{ id: string }>;
  /** All or nothing. `opts.delaySeconds`: the delay of each message that does not set its own. */
  sendBatch(slug: string, messages: BatchItem[], opts?: SendBatchOptions): Promise<{ ids: string[] }>;
}

export interface SendBatchOptions {
  delaySeconds?: number;
}

export interface EnvOptions {
  url?: string;
  token?: string;
  project: string;
  environment: string;
  transport?: Transport;
}

const ENV_KEYS: readonly (keyof EnvOptions)[] = ['url', 'token', 'project', 'environment', 'transport'];

export interface Env {
  readonly project: string;
  readonly environment: string;
  readonly queue: EnvQueue;
  close(): Promise<void>;
}

const MAX_DELAY_S = 12 * 3600;

/**
 * A delay in whole seconds, as ms. The product's delays are whole seconds, and its HTTP API
 * refuses a fraction: rounding one here would let 0.0004 through as no delay at all.
 */
function delaySeconds(v: unknown, name: string): number | undefined {
  const s = optCount(v, name, 0, MAX_DELAY_S);
  return s === undefined ? undefined : s * 1000;
}

function encode(body: unknown, contentType: unknown, at: string): { body: unknown; contentType?: string } {
  if (contentType === 'text') {
    if (typeof body !== 'string') throw invalidArg(`${at}body must be a string with contentType "text"`);
    return { body, contentType: 'text' };
  }
  if (contentType === 'bytes') {
    let buf: Buffer;
    if (body instanceof ArrayBuffer) buf = Buffer.from(body);
    else if (ArrayBuffer.isView(body)) buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    else throw invalidArg(`${at}body must be a Uint8Array or ArrayBuffer with contentType "bytes"`);
    return { body: buf.toString('base64'), contentType: 'bytes' };
  }
  if (contentType === 'v8') {
    if (body === undefined) throw invalidArg(`${at}body is missing`);
    let buf: Buffer;
    try {
      buf = v8.serialize(body);
    } catch (e) {
      throw invalidArg(`${at}body cannot be sent with contentType "v8": ${(e as Error).message}`);
    }
    return { body: buf.toString('base64'), contentType: 'v8' };
  }
  // json (given or not), or another label kept as given (a MIME type such as "application/json"): the body is JSON.
  const label = contentType === undefined || contentType === null ? undefined : contentType;
  const problem = label === undefined || label === 'json' ? null : contentTypeProblem(label);
  if (problem) throw invalidArg(`${at}${problem}`);
  if (body === undefined) throw invalidArg(`${at}body is missing`);
  jsonValue(body, `${at}body`);
  return { body, contentType: label as string | undefined };
}

/** What a consumer sees: bytes come back as a Uint8Array, v8 as the value that was sent. */
function decode(body: unknown, contentType: string | null): unknown {
  if (contentType === 'bytes' && typeof body === 'string') return new Uint8Array(Buffer.from(body, 'base64'));
  if (contentType === 'v8' && typeof body === 'string') {
    const buf = Buffer.from(body, 'base64');
    try {
      return v8.deserialize(buf);
    } catch {
      return new Uint8Array(buf); // not a v8 serialisation (sent so over HTTP by hand): its bytes
    }
  }
  return body;
}

function pushInput(body: unknown, o: SendOptions | undefined, at = ''): PushInput {
  const opts = optObject(o, `${at || ''}send options`) ?? {};
  // A batch item's unknown key names the item: "unknown sendBatch messages[1] option …".
  onlyKeys(opts, ['contentType', 'delaySeconds', 'attributes', 'dedupId', ...(at ? ['body'] : [])], at ? `sendBatch ${at.slice(0, -1)}` : 'send');
  const enc = encode(body, opts.contentType, at);
  const delayMs = delaySeconds(opts.delaySeconds, `${at}delaySeconds`);
  const attributes = optObject(opts.attributes, `${at}attributes`);
  const dedupeKey = optKey(opts.dedupId, `${at}dedupId`);
  const input: PushInput = { body: enc.body };
  if (enc.contentType) input.contentType = enc.contentType;
  if (delayMs !== undefined) input.delayMs = delayMs;
  if (attributes) input.attributes = attributes;
  if (dedupeKey !== undefined) input.dedupeKey = dedupeKey;
  return input;
}

function slugArg(slug: unknown): string {
  const s = optString(slug, 'slug');
  if (s === undefined) throw invalidArg('a queue slug is required');
  // Checked here so that the error says slug, as the HTTP API does; the engine would say queue.
  const problem = nameProblem(s);
  if (problem) throw invalidArg(`slug ${problem}`, { field: 'slug' });
  return s;
}

/** The sender half, over a transport: env.queue. */
export function envQueueOver(transport: () => Transport, namespace: string): EnvQueue {
  return {
    async send(slug, body, opts) {
      const r = await transport().request('push', { namespace, queue: slugArg(slug), dialect: 'env', ...pushInput(body, opts) });
      return { id: r.id };
    },
    async sendBatch(slug, messages, given) {
      const q = slugArg(slug);
      if (!Array.isArray(messages)) throw invalidArg('sendBatch(slug, messages) needs an array of { body, … }');
      if (messages.length === 0) throw invalidArg('sendBatch needs at least one message');
      // A batch-wide delay (beyond the seed, which shows per-message ones); refused when misspelt,
      // since a misspelt one would otherwise send every message at once.
      const o = options(given, 'sendBatch', ['delaySeconds']);
      const batchDelayMs = delaySeconds(o.delaySeconds, 'sendBatch delaySeconds');
      const inputs = messages.map((m, i) => {
        if (!m || typeof m !== 'object') throw invalidArg(`messages[${i}] must be an object { body, … }`);
        const input = pushInput(m.body, m, `messages[${i}].`);
        if (input.delayMs === undefined && batchDelayMs !== undefined) input.delayMs = batchDelayMs;
        return input;
      });
      const r = await transport().request('push.batch', { namespace, queue: q, dialect: 'env', messages: inputs });
      return { ids: r.results.map((x) => x.id) };
    },
  };
}

export function createEnv(opts: EnvOptions): Env {
  if (!opts || typeof opts !== 'object') throw invalidArg('createEnv needs { project, environment }');
  onlyKeys(opts as unknown as Record<string, unknown>, ENV_KEYS, 'createEnv', EMULATOR_HANDLE_KEYS);
  const namespace = envNamespace(opts.project, opts.environment);
  const given = optTransport(opts.transport);
  let transport: Transport = given ?? new Connection({ url: opts.url, token: opts.token, client: 'quayside-env' });
  return {
    project: opts.project,
    environment: opts.environment,
    queue: envQueueOver(() => transport, namespace),
    async close() {
      await transport.close();
      if (!given) transport = new Connection({ url: opts.url, token: opts.token, client: 'quayside-env' });
    },
  };
}

// ---------------------------------------------------------------- consumer apps

export interface Message<Body = unknown> {
  readonly id: string;
  readonly body: Body;
  /** Deliveries so far, this one included (1 on the first). */
  readonly attempts: number;
  readonly attributes: Record<string, unknown>;
  readonly contentType: string;
  /** When it was sent. */
  readonly timestamp: Date;
  /** Done with this message (it is not redelivered). */
  ack(): void;
  /** Deliver it again, after delaySeconds (default none). */
  retry(opts?: { delaySeconds?: number }): void;
}

export interface MessageBatch<Body = unknown> {
  /** The queue's slug. */
  readonly queue: string;
  readonly messages: readonly Message<Body>[];
  ackAll(): void;
  retryAll(opts?: { delaySeconds?: number }): void;
}

export interface ExecutionContext {
  /** Keeps the consumer alive until the promise settles (stop() waits for it, up to the batch's lease end). */
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
}

export interface ConsumerEnv extends Record<string, unknown> {
  queue: EnvQueue;
}

/** The app: any object (a literal, a class instance) with this handler; other members are its own. */
export interface ConsumerApp<Body = unknown, E = ConsumerEnv> {
  queue(batch: MessageBatch<Body>, env: E, ctx: ExecutionContext): unknown;
  /** The same module's HTTP handler, as the platform's apps have one (the seed's `fetch`); runConsumer does not call it. */
  fetch?(request: any, env: E, ctx: ExecutionContext): unknown;
}

/**
 * The `env` option as the app's own env type needs it: the bindings besides `queue` (which
 * runConsumer provides), required when the app's env declares required ones.
 */
export type ConsumerBindings<E> = {} extends BindingsOf<E> ? { env?: BindingsOf<E> } : { env: BindingsOf<E> };

/**
 * E without `queue`, key by key: `Omit` would reduce an env that extends ConsumerEnv (a record) to
 * its index signature and lose the bindings the app names.
 */
type BindingsOf<E> = { [K in keyof E as K extends 'queue' ? never : K]: E[K] };

export interface RunConsumerOptions {
  url?: string;
  token?: string;
  project: string;
  environment: string;
  /** The slug of the queue to consume. */
  queue: string;
  /** The consumer app's id, set as the queue's consumer (default 'local'). */
  appId?: string;
  maxBatchSize?: number;
  maxBatchTimeoutMs?: number;
  maxConcurrency?: number;
  visibilityMs?: number;
  /** Extra bindings merged into the `env` the handler gets. */
  env?: Record<string, unknown>;
  /** A handler's error (default: logged to stderr). */
  onError?: (error: unknown, batch: MessageBatch) => void;
  /** Aborting it is the same as calling stop(). */
  signal?: AbortSignal;
  transport?: Transport;
}

const CONSUMER_KEYS: readonly (keyof RunConsumerOptions)[] = [
  'url', 'token', 'project', 'environment', 'queue', 'appId', 'maxBatchSize', 'maxBatchTimeoutMs', 'maxConcurrency',
  'visibilityMs', 'env', 'onError', 'signal', 'transport',
];

export interface RunningConsumer {
  /**
   * Stops taking batches, waits for the ones in hand (and their waitUntil work), and detaches. A
   * batch whose lease has ended (the emulator timed it out) is not waited for.
   */
  stop(): Promise<void>;
}

/** A batch in hand: its work, and when its lease ends in the emulator's time and in real time. */
interface InHand {
  work: Promise<void>;
  leaseUntil: number;
  realEnd: number;
}

type Settle = { kind: 'ack' } | { kind: 'retry'; delayMs?: number; error?: string };

/**
 * Runs a consumer app locally: makes `appId` the queue's consumer (as the console would), attaches
 * to push delivery and calls `app.queue(batch, env, ctx)` per batch. Re-attaches after the emulator
 * restarts.
 */
export async function runConsumer<Body = unknown, E = ConsumerEnv>(
  appOrModule: ConsumerApp<Body, E> | { default: ConsumerApp<Body, E> },
  opts: RunConsumerOptions & ConsumerBindings<E>,
): Promise<RunningConsumer> {
  // The seed's app is `export default { queue }`: require() of that module hands over { default }.
  const given = appOrModule as Partial<ConsumerApp<Body, any>> & { default?: ConsumerApp<Body, any> } | null | undefined;
  const app = given && typeof given.queue !== 'function' && given.default ? given.default : (given as ConsumerApp<Body, any>);
  if (!app || typeof app.queue !== 'function') throw invalidArg('runConsumer(app) needs an app with a queue(batch, env, ctx) handler (or a module whose default export is one)');
  if (!opts || typeof opts !== 'object') throw invalidArg('runConsumer needs { project, environment, queue }');
  // Before anything is set: a misspelt setting would otherwise leave the queue on its default.
  onlyKeys(opts as unknown as Record<string, unknown>, CONSUMER_KEYS, 'runConsumer', EMULATOR_HANDLE_KEYS);
  const namespace = envNamespace(opts.project, opts.environment);
  const slug = slugArg(opts.queue);
  const appId = optString(opts.appId, 'appId') ?? 'local';
  const settings: Record<string, unknown> = { appId };
  const maxBatchSize = optCount(opts.maxBatchSize, 'maxBatchSize', 1, 100);
  if (maxBatchSize !== undefined) settings.maxBatchSize = maxBatchSize;
  // Whole milliseconds, as PUT …/consumer takes them.
  const maxBatchTimeoutMs = optCount(opts.maxBatchTimeoutMs, 'maxBatchTimeoutMs', 0, 60_000);
  if (maxBatchTimeoutMs !== undefined) settings.maxBatchTimeoutMs = maxBatchTimeoutMs;
  const maxConcurrency = optCount(opts.maxConcurrency, 'maxConcurrency', 1, 250);
  if (maxConcurrency !== undefined) settings.maxConcurrency = maxConcurrency;
  const visibilityMs = optCount(opts.visibilityMs, 'visibilityMs', 1, 12 * 3600 * 1000);
  if (visibilityMs !== undefined) settings.visibilityMs = visibilityMs;
  const signal = optSignal(opts.signal);
  const givenOnError = optFunction<NonNullable<RunConsumerOptions['onError']>>(opts.onError, 'onError');

  const givenTransport = optTransport(opts.transport);
  const owned = !givenTransport;
  const transport: Transport = givenTransport ?? new Connection({ url: opts.url, token: opts.token, client: `quayside-env-consumer:${appId}` });
  // Only env queues: one of another dialect under this slug is not_found, as over the HTTP API.
  const ref = { namespace, queue: slug, dialect: 'env' as const };
  const env: ConsumerEnv = { ...(opts.env ?? {}), queue: envQueueOver(() => transport, namespace) };
  const appOnError =
    givenOnError ??
    // A failure of no batch (a refused reconnect, the queue deleted) is not the handler's.
    ((e: unknown, batch: MessageBatch) => console.error(`[quayside] consumer ${appId} on ${slug}${batch.messages.length > 0 ? ': handler threw' : ''}:`, e));
  // Whatever the app's onError throws or rejects with must not stop delivery.
  const onError = (e: unknown, batch: MessageBatch) => callOnError(appOnError, e, batch);

  let consumerId: string | null = null;
  /** Stops listening for reconnects (set once the listeners are in place). */
  let forgetReconnects = (): void => {};
  let attaching = true;
  let stopped = false;
  /** Set once the emulator answered the detach: no batch comes after that answer. */
  let detached = false;
  const early: (DeliverEvent | ConsumerDroppedEvent)[] = [];
  /** Set once the queue was deleted under this run: it gets nothing more and attaches no more. */
  let dropped = false;
  /** What onError gets for a failure that belongs to no batch. */
  const noBatch = (): MessageBatch<Body> => ({ queue: slug, messages: [], ackAll() {}, retryAll() {} });
  /** The emulator let this run's consumer go (its queue was deleted): said once, then nothing more is tried. */
  const droppedNow = (reason: ConsumerDroppedEvent['reason'] = 'queue_deleted') => {
    if (dropped || stopped) return;
    dropped = true;
    consumerId = null;
    // Nothing will be attached again, and nothing delivered: no reason left to keep the process
    // alive, through reconnects or on the connection (its listeners hold it).
    forgetReconnects();
    offEvent();
    onError(
      reason === 'token_changed'
        ? new QuaysideError('forbidden', `the connection's token changed to one that may not consume queue "${slug}": no more batches will come`)
        : // A queue made again under the slug has no consumer app until one is set: nothing comes from it either.
          new QuaysideError('not_found', `queue "${slug}" was deleted, and this consumer with it: no more batches will come (run the consumer again once the queue exists)`),
      noBatch(),
    );
  };
  /**
   * Batches in hand: the handler, its settles and its waitUntil work; when its lease ends in the
   * emulator's time, and in real time counted from its delivery.
   */
  const inHand = new Set<InHand>();
  /** The lease a batch gets (the consumer's visibilityMs, as the last attach said). */
  let batchLeaseMs = 30_000;

  async function handle(ev: DeliverEvent, background: Set<Promise<unknown>>): Promise<void> {
    const settled = new Map<string, Settle>();
    /** A settle found the emulator down: consumer.done would only wait out the same timeout (the slot frees at the lease end). */
    let unreachable = false;
    const sends: Promise<unknown>[] = [];
    const byId = new Map<string, Delivery>(ev.messages.map((d) => [d.id, d]));
    const settle = (id: string, s: Settle) => {
      if (settled.has(id)) return; // the first explicit call stands
      settled.set(id, s);
      const d = byId.get(id)!;
      const p = s.kind === 'ack' ? transport.request('ack', { receipt: d.receipt }) : transport.request('nack', { receipt: d.receipt, delayMs: s.delayMs, error: s.error });
      sends.push(p.catch((e) => {
        if (!isCode(e, 'unavailable')) return onError(e, batch);
        unreachable = true;
      }));
    };
    // Thrown to the handler that called retry() / retryAll(), settling nothing (uncaught, it fails the batch).
    const retryDelay = (o: unknown, call: string) => {
      const oo = optObject(o, `${call} options`);
      onlyKeys(oo, ['delaySeconds'], call);
      return delaySeconds(oo?.delaySeconds, 'delaySeconds');
    };
    const messages: Message<Body>[] = ev.messages.map((d) => ({
      id: d.id,
      body: decode(d.body, d.contentType) as Body,
      attempts: d.attempts,
      attributes: d.attributes ?? {},
      contentType: d.contentType ?? 'json',
      timestamp: new Date(d.enqueuedAt),
      // No options: an ack({ delaySeconds }) meant as a retry throws, as a bad retry() does, rather than ack.
      ack: (o?: Record<string, never>) => {
        options(o, 'ack', []);
        settle(d.id, { kind: 'ack' });
      },
      retry: (o?: { delaySeconds?: number }) => settle(d.id, { kind: 'retry', delayMs: retryDelay(o, 'retry') }),
    }));
    const batch: MessageBatch<Body> = {
      queue: slug,
      messages,
      ackAll: (o?: Record<string, never>) => {
        options(o, 'ackAll', []);
        messages.forEach((m) => m.ack());
      },
      retryAll: (o?: { delaySeconds?: number }) => {
        const delayMs = retryDelay(o, 'retryAll');
        for (const m of messages) settle(m.id, { kind: 'retry', delayMs });
      },
    };
    const ctx: ExecutionContext = {
      waitUntil: (p) => {
        const w = Promise.resolve(p).catch((e) => onError(e, batch));
        background.add(w);
        void w.finally(() => background.delete(w));
      },
      passThroughOnException: () => {},
    };
    let threw = false;
    let error: string | undefined;
    try {
      await app.queue(batch, env, ctx);
    } catch (e) {
      threw = true;
      // Kept as the messages' last error, so the failed area shows why they failed.
      error = thrownText(e);
      onError(e, batch);
    }
    // Unsettled messages: acked when the handler resolved, retried (no delay) when it threw.
    for (const m of messages) settle(m.id, threw ? { kind: 'retry', error } : { kind: 'ack' });
    await Promise.all(sends);
    if (!unreachable) await transport.request('consumer.done', { consumer: ev.consumer, batch: ev.batch }).catch(() => {});
  }

  function run(ev: DeliverEvent): void {
    const background = new Set<Promise<unknown>>();
    const work = handle(ev, background)
      .catch((e) => onError(e, noBatch()))
      .then(async () => {
        while (background.size > 0) await Promise.all([...background]); // waitUntil may add more while it runs
      });
    const h = { work, leaseUntil: Math.max(...ev.messages.map((d) => d.leaseUntil)), realEnd: realNow() + batchLeaseMs };
    inHand.add(h);
    void work.finally(() => inHand.delete(h));
  }

  /**
   * Waits for a batch in hand, but not past the end of its lease: by then the emulator has timed it
   * out (its messages go back, or to the failed area), as the platform stops such an invocation,
   * so a handler that never returns cannot hold stop() forever. The lease is in the emulator's
   * time (a virtual clock moves only when advanced), so it is asked every 100 ms while a batch
   * outlives stop(). The lease counted in real time from the delivery bounds the wait too: a test
   * that never advances its virtual clock is not held for ever (as a held recv is not), nor is a
   * stop() while the emulator is down, whose time cannot be asked.
   */
  async function finishOrTimeOut(h: InHand): Promise<void> {
    for (;;) {
      const left = h.realEnd - realNow();
      if (left <= 0) return;
      const wake = new AbortController();
      // The batch may finish while the emulator's time is asked (a long wait while it is down).
      // 'over': the batch finished, or its lease ran out in real time while the clock was asked.
      const now = await Promise.race([
        h.work.then(() => 'over' as const),
        pause(left, wake.signal).then(() => 'over' as const),
        transport.request('clock.now', {}, { signal: wake.signal }).then((r) => r.now, () => null),
      ]);
      wake.abort();
      if (now === 'over' || (now !== null && now >= h.leaseUntil)) return;
      const step = Math.min(100, h.realEnd - realNow(), now === null ? 100 : h.leaseUntil - now);
      const nap = new AbortController();
      const finished = await Promise.race([h.work.then(() => true), pause(Math.max(step, 0), nap.signal).then(() => false)]);
      nap.abort();
      if (finished) return;
    }
  }

  const offEvent = transport.onEvent((e: ServerEvent) => {
    if (e.event === 'consumer_dropped') {
      // Before the attach is answered (a delete in the same commit) it is held, as a batch is.
      if (attaching) early.push(e);
      else if (e.consumer === consumerId) droppedNow(e.reason);
      return;
    }
    // A batch sent before the emulator took the detach is in hand: handled, not dropped (it would
    // sit leased until its lease ended, an attempt spent with no handler having seen it).
    if (e.event !== 'deliver' || detached) return;
    if (attaching) {
      early.push(e);
      return;
    }
    if (e.consumer === consumerId) run(e);
  });

  /**
   * The first time, makes this app the queue's consumer (as deploying it would); after a reconnect
   * it only attaches again, so an app the console (or another run) has put in its place since stays
   * in its place: this run then gets no batches, as the platform would not call it.
   */
  async function attach(first: boolean): Promise<void> {
    attaching = true;
    try {
      if (first) await transport.request('consumer.set', { ...ref, consumer: settings as { appId: string } });
      const r = await transport.request('consumer.attach', { ...ref, appId });
      consumerId = r.consumer;
      batchLeaseMs = r.settings.visibilityMs;
    } finally {
      attaching = false;
      const held = early.splice(0);
      for (const e of held) {
        if (e.consumer !== consumerId) continue;
        if (e.event === 'consumer_dropped') droppedNow(e.reason);
        else if (!dropped) run(e);
      }
    }
  }

  let reattaching = false;
  async function reattach(): Promise<void> {
    if (reattaching || stopped || dropped) return;
    reattaching = true;
    try {
      // The emulator freed this run's slots with the old connection, but batches still in their
      // handlers are in flight: attaching now could start more than maxConcurrency at once. They
      // settle over the new connection; their lease end bounds the wait.
      await Promise.all([...inHand].map(finishOrTimeOut));
      for (let wait = 50; !stopped && !dropped; wait = Math.min(wait * 2, 2000)) {
        try {
          await attach(false);
          return;
        } catch (e) {
          // conflict: the queue has no consumer app now (made a pull queue); wait for one quietly.
          // not_found: the queue was deleted while the connection was down.
          if (isCode(e, 'not_found')) return droppedNow();
          if (!isCode(e, 'unavailable') && !isCode(e, 'conflict')) onError(e, noBatch());
          await pause(wait);
        }
      }
    } finally {
      reattaching = false;
    }
  }

  /** The refusal last told to onError while the connection cannot come back: each is said once. */
  let refusal: string | null = null;
  const offReconnect = transport.onReconnect(() => {
    refusal = null;
    void reattach();
  });
  // Without this the run would wait in silence for ever (the emulator restarted with other tokens).
  const offRefused =
    transport.onReconnectFailed?.((e) => {
      const said = `${(e as { code?: string })?.code}: ${(e as Error)?.message}`;
      if (stopped || dropped || said === refusal) return;
      refusal = said;
      onError(e, noBatch());
    }) ?? (() => {});
  forgetReconnects = () => {
    offReconnect();
    offRefused();
  };
  try {
    await attach(true);
  } catch (e) {
    offEvent();
    forgetReconnects();
    if (owned) await transport.close();
    throw e;
  }

  let stopping: Promise<void> | null = null;
  const running: RunningConsumer = {
    stop() {
      stopping ??= stopNow();
      return stopping;
    },
  };
  // A signal may outlive many runs (one for a whole test suite): a stopped run lets go of it.
  let stopListening: (() => void) | undefined;
  if (signal) {
    if (signal.aborted) void running.stop();
    else stopListening = whenAborted(signal, () => void running.stop());
  }
  return running;

  async function stopNow(): Promise<void> {
    if (stopped) return;
    stopped = true;
    stopListening?.();
    forgetReconnects();
    // Detach first so no new batch comes; then finish what is in hand (up to its lease end). With
    // no connection up (the emulator closed or restarting) there is nothing to detach: the emulator
    // let the attachment go with the connection, and a detach would only wait out the reconnect.
    // Bounded as a dial is: on a link that died without a word the detach would wait for the
    // heartbeat to cut it (up to 45 s), and the emulator lets the attachment go with the link anyway.
    if (consumerId && transport.isOpen !== false) await transport.request('consumer.detach', { consumer: consumerId }, { signal: AbortSignal.timeout(DETACH_WAIT_MS) }).catch(() => {});
    detached = true;
    await Promise.all([...inHand].map(finishOrTimeOut));
    offEvent();
    if (owned) await transport.close();
  }
}

