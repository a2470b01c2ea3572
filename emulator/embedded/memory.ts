import { Engine } from '../engine/engine';
import { clockFor, clockOptionProblem, type VirtualClockControl, type VirtualClockOption } from '../engine/clock';
import { Store } from '../store/store';
import { Session, dispatch, endSession } from '../server/dispatch';
import { QuaysideError } from '../errors';
import { LIMITS, PROTOCOL_VERSION, type OpArgs, type OpName, type OpResult, type ServerEvent } from '../protocol';
import { checkConnectionOptions, encodeRequest, type RequestOptions, type Transport } from '../clients/transport';
import { HandleTransport } from '../clients/handle-transport';
import { abortError, whenAborted } from '../clients/abort';
import { Slots, mayBeHeld } from '../clients/slots';
import { syncQueueOver, type SentData, type SyncQueue, type SyncQueueOptions, type Unnamed } from '../clients/sync-face';
import { invalidArg } from '../clients/common';
import { clearInterval, setInterval } from '../real-time';

// quayside/sync/memory: the same `queue()` as quayside/sync, with no emulator. An in-process
// Transport runs the real engine on an in-memory store and calls the server's dispatch() with a
// Session, so every semantic is the engine's, not a re-implementation. Every request and answer is
// passed through JSON, exactly as over the socket (bodies are copies; NaN cannot sneak through).

export * from '../clients/sync-face';
export { QuaysideError };

/** Runs requests against an engine in this process. */
export class LocalTransport implements Transport {
  private readonly session: Session;
  private readonly eventListeners = new Set<(e: ServerEvent) => void>();
  private nextId = 1;
  private ready: Promise<void>;
  private closed = false;
  /** Requests the engine has not answered yet, each with whether it is a pull the session may hold. */
  private readonly pending = new Map<(e: Error) => void, boolean>();
  /**
   * Keeps the process alive while a pull waits (a blocking recv, a nack's delay coming due), as an
   * open socket does for the emulator's clients: the engine's own timers are unref'd, so without it
   * Node would exit with the recv unanswered. Other requests answer within the turn; idle, nothing
   * is held.
   */
  private keepAlive: NodeJS.Timeout | null = null;
  private waiting = 0;
  private readonly waitingPulls = new Slots(LIMITS.maxWaitingPullsPerConnection);

  constructor(private readonly engine: Engine, token: string) {
    this.session = new Session((e) => {
      for (const l of this.eventListeners) l(JSON.parse(JSON.stringify(e)) as ServerEvent);
    }, 'quayside-sync-memory');
    this.ready = dispatch(engine, this.session, { id: 0, op: 'hello', args: { version: PROTOCOL_VERSION, token, client: 'quayside-sync-memory' } }).then((r) => {
      if (!r.ok) throw QuaysideError.fromWire(r.error);
    });
  }

  async request<K extends OpName>(op: K, args: OpArgs<K>, opts: RequestOptions = {}): Promise<OpResult<K>> {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    // The args as the server would see them off the socket, encoded now: a BigInt or a cycle is
    // invalid_argument, a request larger than a frame is refused as over the network, and what the
    // caller changes in its objects after the call is not what the engine gets.
    return this.requestEncoded<K>(op, encodeRequest(0, op, args), opts);
  }

  /** A request as encodeRequest() wrote it when it was made (sharedTransport may bring it again). */
  async requestEncoded<K extends OpName>(op: K, text: string, opts: RequestOptions = {}): Promise<OpResult<K>> {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const frame = JSON.parse(text) as { id: number; op: string; args?: unknown };
    if (!mayBeHeld(op, frame.args as OpArgs<K>)) return this.requestNow<K>(frame, opts, false);
    // Past the waiting pulls the server holds for one connection, a pull waits here for its turn.
    return this.waitingPulls.run(opts.signal, () => this.requestNow<K>(frame, opts, true));
  }

  /** `holds`: a pull the session may hold (see mayBeHeld), which keeps the process alive while it waits. */
  private async requestNow<K extends OpName>(frame: { id: number; op: string; args?: unknown }, opts: RequestOptions, holds: boolean): Promise<OpResult<K>> {
    const signal = opts.signal;
    if (signal?.aborted) throw abortError(signal);
    if (this.closed) throw notSent();
    await this.ready;
    // Closed while waiting for hello: nothing may reach the engine on an ended session.
    if (this.closed) throw notSent();
    if (signal?.aborted) throw abortError(signal);
    const id = (frame.id = this.nextId++);
    opts.onSent?.();
    const answer = dispatch(this.engine, this.session, frame);
    return new Promise<OpResult<K>>((resolve, reject) => {
      const fail = (e: unknown) => {
        if (this.pending.delete(fail) && holds) this.hold(-1);
        stopListening?.();
        reject(e);
      };
      const onAbort = () => {
        // Give up a held pull: the engine answers it with nothing, so nothing is leased for us.
        void dispatch(this.engine, this.session, { id: this.nextId++, op: 'cancel', args: { request: id } });
        fail(abortError(signal!));
      };
      this.pending.set(fail, holds);
      if (holds) this.hold(+1);
      const stopListening = signal ? whenAborted(signal, onAbort) : undefined;
      void answer.then((r) => {
        if (!this.pending.delete(fail)) return; // already aborted, or the transport was closed
        if (holds) this.hold(-1);
        stopListening?.();
        try {
          resolve(unwrap<K>(r));
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  private hold(delta: number): void {
    this.waiting += delta;
    if (this.waiting > 0) this.keepAlive ??= setInterval(() => {}, 1 << 30);
    else if (this.keepAlive) {
      clearInterval(this.keepAlive);
      this.keepAlive = null;
    }
  }

  onEvent(listener: (event: ServerEvent) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** In-process: there is never a reconnect. */
  onReconnect(_listener: () => void): () => void {
    return () => {};
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // A held pull is given up (the engine answers it with nothing, so it leases nothing). A call the
    // engine already has (a send, an ack) gets its own answer once its commit is done, as a
    // HandleTransport leaves it: one that was applied is never reported as failed.
    for (const [fail, holds] of [...this.pending]) if (holds) fail(new QuaysideError('unavailable', 'the in-memory queue was closed'));
    endSession(this.engine, this.session);
    this.eventListeners.clear();
  }
}

/** Calls that never reached an engine because it was closed first: the shared transport sends them on to the fresh one. */
const unsent = new WeakSet<Error>();

function notSent(): QuaysideError {
  const e = new QuaysideError('unavailable', 'the in-memory queue was closed');
  unsent.add(e);
  return e;
}

function unwrap<K extends OpName>(r: Awaited<ReturnType<typeof dispatch>>): OpResult<K> {
  if (!r.ok) throw QuaysideError.fromWire(r.error);
  return JSON.parse(JSON.stringify(r.result)) as OpResult<K>;
}

export interface MemoryQueuesOptions {
  /** 'virtual': time moves only by `clock.advance(ms)` (for tests); `{ start }` (epoch ms) starts a virtual clock there. Default 'system'. */
  clock?: 'system' | VirtualClockOption;
}

export interface MemoryQueues {
  /** The same `queue()` as quayside/sync, on this in-memory engine. */
  /** `url` and `token` are accepted unused, as quayside/sync's connection options. */
  queue<T = unknown, In = Unnamed>(opts: SyncQueueOptions<T, In> & ConnectionOptionsUnused): SyncQueue<T, SentData<T, In>>;
  /** Present with `clock: 'virtual'`: epoch ms now, and advance (resolves once due work was applied). */
  clock?: VirtualClockControl;
  /** The engine, for tests that want to look inside. */
  readonly engine: Engine;
  /** Drops every queue and message. */
  close(): Promise<void>;
}

/** In-memory queues with a virtual clock: their `clock` is always there. */
export type VirtualMemoryQueues = MemoryQueues & { clock: VirtualClockControl };

/** An isolated in-memory queue system: its own engine, store and (optionally virtual) clock. */
export function createMemoryQueues(opts: MemoryQueuesOptions & { clock: VirtualClockOption }): VirtualMemoryQueues;
export function createMemoryQueues(opts?: MemoryQueuesOptions): MemoryQueues;
export function createMemoryQueues(opts: MemoryQueuesOptions = {}): MemoryQueues {
  // Checked as startEmulator checks them: a misspelt clock must not quietly run on the system clock.
  if (opts === null || typeof opts !== 'object') throw new QuaysideError('invalid_argument', 'createMemoryQueues: options must be an object');
  for (const k of Object.keys(opts)) if (k !== 'clock') throw new QuaysideError('invalid_argument', `createMemoryQueues: unknown option "${k}"; expected clock`);
  const clockProblem = clockOptionProblem(opts.clock);
  if (clockProblem) throw new QuaysideError('invalid_argument', `createMemoryQueues: ${clockProblem}`);
  const clock = clockFor(opts.clock);
  const store = new Store({ dataDir: null });
  const engine = new Engine({ store, clock });
  const token = engine.ensureAdminToken(undefined);
  const transport = new LocalTransport(engine, token);
  let closed = false;
  const mq: MemoryQueues = {
    engine,
    // Each handle gets its own view of the one session, so its close() ends only its own calls, as
    // each quayside/sync handle closes only its own connection; a handle never closed holds nothing.
    queue: <T, In = Unnamed>(o: SyncQueueOptions<T, In> & ConnectionOptionsUnused) => {
      checkConnectionOptions(o);
      return syncQueueOver(new HandleTransport(transport), o, true, IGNORED_KEYS);
    },
    async close() {
      if (closed) return;
      closed = true;
      await transport.close();
      await engine.close();
      store.close();
    },
  };
  if (clock.mode === 'virtual') mq.clock = { now: () => clock.now(), advance: (ms: number) => engine.advance(ms) };
  sessions.set(mq, transport);
  return mq;
}

/** Each in-memory system's one session, for the shared transport below. */
const sessions = new WeakMap<MemoryQueues, LocalTransport>();

/**
 * quayside/sync's connection options, accepted and unused: the same options object works with
 * either import. A `transport` is refused (there is nothing to carry here).
 */
const IGNORED_KEYS = ['url', 'token'];

let shared: MemoryQueues | null = null;
const sharedListeners = new Set<(e: ServerEvent) => void>();

function sharedSession(): LocalTransport {
  if (!shared) {
    shared = createMemoryQueues();
    sessions.get(shared)!.onEvent((e) => {
      for (const l of sharedListeners) l(e);
    });
  }
  return sessions.get(shared)!;
}

/**
 * The shared engine as one transport that outlives resetMemory(): each request goes to the engine
 * current when it is made, as a quayside/sync handle's go to whichever emulator is listening. So a
 * handle made at import time goes on after a test's reset; its queue, dropped by the reset, is made
 * again on its next call (the face does so on not_found), as after an in-memory emulator restarts.
 */
const sharedTransport: Transport = {
  async request(op, args, opts) {
    // A reset that came before the call reached the engine (it waited for its turn): the fresh
    // engine takes it, as a quayside/sync call made while the emulator restarts goes once it is back,
    // as it was when the call was made.
    if (opts?.signal?.aborted) throw abortError(opts.signal);
    const text = encodeRequest(0, op, args);
    for (;;) {
      try {
        return await sharedSession().requestEncoded(op, text, opts);
      } catch (e) {
        if (!unsent.has(e as Error)) throw e;
      }
    }
  },
  onEvent(listener) {
    sharedListeners.add(listener);
    return () => sharedListeners.delete(listener);
  },
  onReconnect: () => () => {},
  // Never closed for good: each handle's own close() is its HandleTransport's.
  close: async () => {},
};

/**
 * quayside/sync's options: `url` and `token` are accepted and unused, so one options object serves
 * either import; `memory` picks an isolated createMemoryQueues() instead of the shared engine.
 */
export type MemoryQueueOptions<T = unknown, In = T> = SyncQueueOptions<T, In> & ConnectionOptionsUnused & { memory?: MemoryQueues | null };

/** quayside/sync's connection options, which an in-memory queue takes and does not use. */
export interface ConnectionOptionsUnused {
  url?: string;
  token?: string;
}

/**
 * `queue({ id, tenantId?, prefix?, schema?, limits?, delivery? })` on this process's shared in-memory engine (system
 * clock): every `queue()` call with the same tenant and id sees the same messages, and everything
 * is gone when the process ends. Pass `memory` to use an isolated `createMemoryQueues()` instead.
 */
export function queue<T = unknown, In = Unnamed>(opts: MemoryQueueOptions<T, In>): SyncQueue<T, SentData<T, In>> {
  if (opts && typeof opts === 'object' && 'memory' in opts) {
    const { memory, ...rest } = opts;
    if (memory !== undefined && memory !== null) {
      if (typeof memory !== 'object' || typeof (memory as Partial<MemoryQueues>).queue !== 'function') {
        throw invalidArg('memory must be what createMemoryQueues() returned', { field: 'memory' });
      }
      return memory.queue(rest);
    }
    opts = rest;
  }
  // `memory` was taken off above; it is named so that a refusal lists it among the keys taken.
  checkConnectionOptions(opts);
  return syncQueueOver(new HandleTransport(sharedTransport), opts, true, [...IGNORED_KEYS, 'memory']);
}

/**
 * Empties the shared in-memory engine used by `queue()` (a fresh one is made on next use). Handles
 * made before go on against the fresh one; a recv held at the reset fails `unavailable`; a call the
 * old engine already has is answered after its commit, and one not there yet goes to the fresh one.
 */
export async function resetMemory(): Promise<void> {
  const s = shared;
  shared = null;
  await s?.close();
}
