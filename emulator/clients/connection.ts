import WebSocket from 'ws';
import { QuaysideError, isCode } from '../errors';
import { CLOSE_STOPPED_UNRUN, LIMITS, PROTOCOL_VERSION, type OpArgs, type OpName, type OpResult, type ServerEvent, type ServerFrame } from '../protocol';
import { abortError, orAbort, whenAborted } from './abort';
import { pause } from './common';
import { Slots, mayBeHeld } from './slots';
import { checkConnectionOptions, encodeRequest, resolveToken, resolveUrl, type ConnectionOptions, type RequestOptions, type Transport } from './transport';
import { clearInterval, clearTimeout, realNow, setInterval, setTimeout } from '../real-time';

/** The masking key ws asks for before each frame: left all zeros (see dial()). */
const zeroMask = (mask: Buffer): void => {
  mask.fill(0);
};

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  cleanup: () => void;
  /** A pull the server may be holding, sent on the socket: close() cancels it first. */
  held?: boolean;
  /** On the wire: close() waits for its answer rather than report an outcome it does not know. */
  sent?: boolean;
}

/** How long close() waits for the answers of requests already sent (a stopping emulator's own bound). */
const CLOSE_ANSWER_WAIT_MS = 500;

/**
 * How often one call is sent again after emulators stopped without running it (each time waiting,
 * as any call does, up to the connect timeout for the next one): a bound, not a retry policy.
 */
const MAX_RESENDS = 3;

/** The errors of calls a stopping emulator said it did not run (CLOSE_STOPPED_UNRUN): safe to send again. */
const unrun = new WeakSet<object>();

/**
 * Ops that make or name state of one connection (its session, subscriptions, consumer attachments,
 * held requests): sent again on another connection they would act on something else, such as the
 * subscription that took the same id there. Never sent again; whoever made that state makes it
 * again on reconnect (onReconnect).
 */
const CONNECTION_OPS: ReadonlySet<OpName> = new Set<OpName>(['hello', 'subscribe', 'unsubscribe', 'consumer.attach', 'consumer.done', 'consumer.detach', 'cancel']);

/** A request as JSON text, encoded when the call was made under its own id. */
interface Encoded {
  id: number;
  text: string;
}

/** The same request under another id (sent again: ids on a connection are never reused). */
function retag(f: Encoded, id: number): Encoded {
  return { id, text: `{"id":${id}${f.text.slice(`{"id":${f.id}`.length)}` };
}

type State = 'idle' | 'connecting' | 'open' | 'closed';

/**
 * One WebSocket connection to the emulator: many requests in flight, each with its own id.
 * It opens lazily, reconnects after the emulator restarts (with back-off), and fails a request
 * it cannot send or get answered with `unavailable` instead of hanging.
 */
export class Connection implements Transport {
  /** As given; when absent, QUAYSIDE_URL / QUAYSIDE_TOKEN are read at each dial, not here. */
  private readonly urlOpt: string | undefined;
  private readonly tokenOpt: string | undefined;
  /** The URL last dialled; `url` reports it while that socket is open or opening. */
  private activeUrl: string | null = null;
  private readonly clientName: string;
  private readonly connectTimeoutMs: number;
  private readonly heartbeatMs: number;
  /** Why the socket was cut by this side (see watch), for the error its requests get. */
  private cutReason: string | null = null;
  private ws: WebSocket | null = null;
  /** The socket of a dial still in its handshake: close() ends it too. */
  private dialling: WebSocket | null = null;
  /** Set while close() waits for the answers of requests on the wire: called once none is left. */
  private drained: (() => void) | null = null;
  private state: State = 'idle';
  private opening: Promise<void> | null = null;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private eventListeners = new Set<(e: ServerEvent) => void>();
  private reconnectListeners = new Set<() => void>();
  private reconnectFailedListeners = new Set<(error: unknown) => void>();
  private everOpened = false;
  /** Whether the socket holds the process open now (see holdProcess). */
  private holding = true;
  private retryTimer: NodeJS.Timeout | null = null;
  private backoffMs = 50;
  /**
   * Frames sent on this socket and not yet answered. The server refuses requests past
   * LIMITS.maxInFlightPerConnection (`limit_exceeded`); an app's Promise.all of 2,000 sends must not
   * see that, so frames past the limit wait here, in call order, for an answer to free a slot.
   */
  private outstanding = 0;
  private parked: Array<() => void> = [];
  /**
   * Pulls that may be held (`waitMs > 0`) sent and not answered: the server holds at most
   * LIMITS.maxWaitingPullsPerConnection and refuses more; a pull past that waits here instead.
   */
  private readonly waitingPulls = new Slots(LIMITS.maxWaitingPullsPerConnection);
  /** Facts from the server's hello answer. */
  serverInfo: OpResult<'hello'> | null = null;

  constructor(opts: ConnectionOptions = {}) {
    // Resolved late: apps build clients at import time, before a test's before() hook has started
    // the emulator and set QUAYSIDE_URL / QUAYSIDE_TOKEN.
    checkConnectionOptions(opts);
    this.urlOpt = opts.url ?? undefined;
    this.tokenOpt = opts.token ?? undefined;
    this.clientName = opts.client ?? 'quayside-client';
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
    const hb = opts.heartbeatMs ?? 15_000;
    if (typeof hb !== 'number' || !Number.isFinite(hb) || hb < 10) throw new QuaysideError('invalid_argument', `heartbeatMs must be a number of ms, at least 10, got ${String(hb)}`);
    this.heartbeatMs = hb;
  }

  /** The emulator's address: the one in use while connected, otherwise the one the next dial will use. */
  get url(): string {
    const live = this.state === 'open' || this.state === 'connecting';
    if (live && this.activeUrl !== null) return this.activeUrl;
    try {
      return resolveUrl(this.urlOpt);
    } catch {
      return this.urlOpt ?? process.env.QUAYSIDE_URL ?? ''; // not a URL: dialling it says so
    }
  }

  get isOpen(): boolean {
    return this.state === 'open';
  }

  /** Open now (requests also open it on demand). Rejects `unavailable` / `unauthorized`. */
  open(): Promise<void> {
    if (this.state === 'closed') return Promise.reject(new QuaysideError('unavailable', 'connection closed'));
    if (this.state === 'open') return Promise.resolve();
    if (!this.opening) {
      this.state = 'connecting';
      this.opening = this.dial().finally(() => {
        this.opening = null;
      });
    }
    return this.opening;
  }

  private dial(): Promise<void> {
    // Read the environment now, so a reconnect also picks up a changed QUAYSIDE_URL / QUAYSIDE_TOKEN.
    let url: string;
    try {
      url = resolveUrl(this.urlOpt);
    } catch (e) {
      if (this.state !== 'closed') this.state = 'idle';
      return Promise.reject(e);
    }
    const token = resolveToken(this.tokenOpt);
    this.activeUrl = url;
    return new Promise<void>((resolve, reject) => {
      // A zero mask: ws then sends the frame's text as it is instead of copying and XOR-ing it.
      // Masking guards proxies against pages that choose what bytes a browser sends; a Node client
      // talking to its emulator has no such page in front of it.
      const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: this.connectTimeoutMs, generateMask: zeroMask });
      this.dialling = ws;
      let settled = false;
      // The whole dial, upgrade and hello, within connectTimeoutMs: a peer that takes the upgrade
      // and never answers hello (another WebSocket service on the port, an emulator frozen right
      // after the upgrade) must not hold every call for ever.
      const dialTimer = setTimeout(() => {
        const adopted = this.ws === ws;
        const err = new QuaysideError('unavailable', `the emulator at ${url} did not ${adopted ? 'answer hello' : 'complete the WebSocket upgrade'} within ${this.connectTimeoutMs} ms`);
        if (adopted) {
          // Adopted for its hello, the one request on it: fail it here, as its close will not.
          this.failPending(err);
          this.resetSlots();
        }
        fail(err);
      }, this.connectTimeoutMs);
      dialTimer.unref();
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(dialTimer);
        if (this.dialling === ws) this.dialling = null;
        if (this.state !== 'closed') this.state = 'idle';
        if (this.ws === ws) this.ws = null; // (a refused hello): its heartbeat sees that and stops
        ws.removeAllListeners();
        ws.on('error', () => {});
        ws.terminate();
        reject(err);
      };
      ws.on('error', (e) => fail(new QuaysideError('unavailable', `cannot reach the emulator at ${url}: ${e.message}`)));
      ws.on('close', () => fail(new QuaysideError('unavailable', `the emulator at ${url} closed the connection`)));
      ws.on('open', () => {
        // Closed while the handshake ran (a call that waited for it was aborted, then close()).
        if (this.state === 'closed') return fail(new QuaysideError('unavailable', 'connection closed'));
        if (this.dialling === ws) this.dialling = null;
        this.ws = ws;
        this.holding = true; // a socket holds the process until told otherwise
        ws.removeAllListeners('close');
        ws.removeAllListeners('error');
        ws.on('message', (data) => this.onMessage(data.toString()));
        ws.on('close', (code) => this.onClose(ws, code));
        ws.on('error', () => {});
        this.watch(ws);
        const helloArgs: OpArgs<'hello'> = { version: PROTOCOL_VERSION, client: this.clientName };
        if (token) helloArgs.token = token;
        this.send(this.encode('hello', helloArgs))
          .then((info) => {
            if (settled) return;
            if (this.state === 'closed') return fail(new QuaysideError('unavailable', 'connection closed'));
            settled = true;
            clearTimeout(dialTimer);
            this.serverInfo = info as OpResult<'hello'>;
            this.state = 'open';
            this.backoffMs = 50;
            const reconnected = this.everOpened;
            this.everOpened = true;
            resolve();
            if (reconnected) for (const l of this.reconnectListeners) l();
          })
          .catch((e: Error) => fail(e));
      });
    });
  }

  /**
   * While requests wait on `ws`, a ping every heartbeatMs; a socket that leaves two in a row
   * unanswered is cut, so its requests fail instead of waiting for ever on an emulator that is frozen
   * (SIGSTOP, a suspended machine) or a connection that died without a close. A socket nothing
   * waits on (no request, no consumer, no subscription) is not pinged: the next request finds out
   * for itself.
   */
  private watch(ws: WebSocket): void {
    // Two pings in a row unanswered, not one: an emulator busy for a while (a purge of a huge
    // queue) or this process's own loop held up must not cost requests that may have been applied.
    let unanswered = 0;
    ws.on('pong', () => (unanswered = 0));
    ws.on('message', () => (unanswered = 0)); // any frame shows the emulator alive
    const timer = setInterval(() => {
      if (this.ws !== ws) return clearInterval(timer);
      // A consumer waiting for batches, or a subscription, waits on the socket too: a link that died
      // without a word must be found and dialled again, or batches go into it until they fail.
      if (this.pending.size === 0 && this.eventListeners.size === 0 && this.reconnectListeners.size === 0) {
        unanswered = 0;
        return;
      }
      // A socket only listened on (no request waiting) gets four: an emulator busy for a while (a
      // purge of a huge queue) must not cost a consumer its attachment and its batches in hand.
      if (unanswered >= (this.pending.size > 0 ? 2 : 4)) {
        clearInterval(timer);
        this.cutReason = `the emulator at ${this.activeUrl ?? this.url} did not answer ${unanswered} pings in a row, ${this.heartbeatMs} ms apart`;
        ws.terminate();
        return;
      }
      if (ws.readyState !== WebSocket.OPEN) return;
      unanswered++;
      ws.ping();
    }, this.heartbeatMs);
    timer.unref();
    ws.once('close', () => clearInterval(timer));
  }

  private onClose(ws: WebSocket, code?: number): void {
    if (this.ws !== ws) return;
    this.ws = null;
    this.resetSlots();
    const at = this.activeUrl ?? this.url;
    let err: QuaysideError;
    if (code === CLOSE_STOPPED_UNRUN && !this.cutReason) {
      // The emulator stopped and answered all it ran first: what is unanswered changed nothing.
      err = new QuaysideError('unavailable', `the emulator at ${at} stopped before it ran the call`);
      unrun.add(err);
    } else {
      err = new QuaysideError('unavailable', this.cutReason ?? `lost the connection to the emulator at ${at}`);
    }
    this.cutReason = null;
    this.failPending(err);
    if (this.state === 'closed') return;
    this.state = 'idle';
    // Reconnect in the background only if someone listens for events or reconnects
    // (subscriptions, consumers); plain requests reconnect on demand.
    if (this.eventListeners.size > 0 || this.reconnectListeners.size > 0) this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.retryTimer || this.state === 'closed') return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, 2000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.state === 'closed' || this.state === 'open') return;
      this.open().catch((e: unknown) => {
        // Refused rather than unreachable (another token after a restart, another protocol
        // version): retrying goes on, but whoever waits to come back is told why it does not.
        if (this.state !== 'closed' && !isCode(e, 'unavailable')) {
          for (const l of this.reconnectFailedListeners) {
            try {
              l(e);
            } catch {
              // A listener's own failure must not stop the retrying.
            }
          }
        }
        this.scheduleReconnect();
      });
    }, delay);
    // A consumer waiting to come back keeps the process alive, as its open socket did: a worker
    // must outlive an emulator restart. Subscriptions alone do not hold a process that is done.
    if (this.reconnectListeners.size === 0) this.retryTimer.unref?.();
  }

  private onMessage(text: string): void {
    let frame: ServerFrame;
    try {
      frame = JSON.parse(text) as ServerFrame;
    } catch {
      return;
    }
    if ('event' in frame) {
      for (const l of this.eventListeners) l(frame);
      return;
    }
    // Every answer, even one the server could only give `"id": null` (a frame it could not read),
    // is for one frame this connection sent: it frees that frame's place.
    if (typeof frame.id === 'number' || frame.id === null) this.freeSlot();
    const p = typeof frame.id === 'number' ? this.pending.get(frame.id) : undefined;
    if (!p) return;
    this.forget(frame.id as number);
    p.cleanup();
    if (frame.ok) p.resolve(frame.result);
    else p.reject(QuaysideError.fromWire(frame.error));
  }

  /** Fails every request still waiting for an answer (its socket is gone, or given up on). */
  private failPending(err: Error): void {
    for (const [, p] of this.pending) {
      p.cleanup();
      p.reject(err);
    }
    this.pending.clear();
    this.holdProcess();
    this.drained?.();
  }

  /** Drops a request that has its outcome; the last one a closing connection waited for ends the wait. */
  private forget(id: number): void {
    this.pending.delete(id);
    this.holdProcess();
    if (this.pending.size === 0) this.drained?.();
  }

  /**
   * The socket keeps the process alive only while something waits on it: a request, a consumer or
   * a subscription. An idle one does not, so a script that pushed and is done exits without a
   * close(), as it would with the products' own SDKs (an HTTP client's idle sockets hold nothing).
   */
  private holdProcess(): void {
    const sock = socketOf(this.ws);
    if (!sock) return;
    const hold = this.pending.size > 0 || this.eventListeners.size > 0 || this.reconnectListeners.size > 0;
    if (hold === this.holding) return;
    this.holding = hold;
    if (hold) sock.ref();
    else sock.unref();
  }

  /** Encoded before anything is registered, so an unencodable body leaves nothing pending. */
  private encode(op: OpName, args: unknown): Encoded {
    const id = this.nextId++;
    return { id, text: encodeRequest(id, op, args) };
  }

  /** Send on the open socket (used for hello before the state is `open`). */
  private send(frame: Encoded, signal?: AbortSignal, held = false, onSent?: () => void): Promise<unknown> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new QuaysideError('unavailable', `not connected to the emulator at ${this.activeUrl ?? this.url}`));
    }
    const { id, text } = frame;
    return new Promise((resolve, reject) => {
      let sent = false;
      let stopListening: (() => void) | null = null;
      const cleanup = () => stopListening?.();
      const entry: Pending = { resolve, reject, cleanup };
      this.pending.set(id, entry);
      this.holdProcess();
      if (signal) {
        // An abandoned held request is cancelled on the server, so it leases nothing for us.
        stopListening = whenAborted(signal, () => {
          if (!this.pending.has(id)) return;
          this.forget(id);
          if (sent) {
            const cancel = JSON.stringify({ id: this.nextId++, op: 'cancel', args: { request: id } });
            this.whenSlotFree(() => this.transmit(ws, cancel));
          }
          reject(abortError(signal));
        });
      }
      this.whenSlotFree(() => {
        // Aborted while it waited for a slot: it was never sent, so there is nothing to cancel.
        if (!this.pending.has(id)) return;
        sent = true;
        entry.held = held;
        entry.sent = true;
        onSent?.();
        this.transmit(ws, text, (err) => {
          if (err && this.pending.has(id)) {
            this.forget(id);
            cleanup();
            reject(new QuaysideError('unavailable', `could not send to the emulator: ${err.message}`));
          }
        });
      });
    });
  }

  private whenSlotFree(go: () => void): void {
    if (this.outstanding < LIMITS.maxInFlightPerConnection && this.parked.length === 0) go();
    else this.parked.push(go);
  }

  private transmit(ws: WebSocket, text: string, done?: (err?: Error) => void): void {
    if (this.ws !== ws || ws.readyState !== WebSocket.OPEN) return;
    this.outstanding++;
    ws.send(text, done);
  }

  private freeSlot(): void {
    if (this.outstanding > 0) this.outstanding--;
    while (this.outstanding < LIMITS.maxInFlightPerConnection && this.parked.length > 0) this.parked.shift()!();
  }

  /** A socket's slots go with it; requests parked on it are failed by whoever closed it. */
  private resetSlots(): void {
    this.outstanding = 0;
    this.parked = [];
  }

  async request<K extends OpName>(op: K, args: OpArgs<K>, opts: RequestOptions = {}): Promise<OpResult<K>> {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    // Encoded now, though it may wait for a connection or a turn: what the caller changes in its
    // objects after the call (a body it reuses) is not what gets sent, as with a product's SDK.
    const frame = this.encode(op, args);
    const again = !CONNECTION_OPS.has(op);
    if (!mayBeHeld(op, args)) return this.requestNow<K>(frame, opts, false, again);
    // Past the waiting pulls the server holds for one connection, a pull waits here for its turn.
    return this.waitingPulls.run(opts.signal, () => this.requestNow<K>(frame, opts, true, again));
  }

  /**
   * `held`: a pull the server may hold (see mayBeHeld), which close() cancels. A call an emulator
   * stopped without running goes to the next one, as a call made after the stop would.
   */
  private async requestNow<K extends OpName>(frame: Encoded, opts: RequestOptions, held: boolean, again: boolean): Promise<OpResult<K>> {
    for (let resent = 0; ; resent++) {
      try {
        return (await this.requestOnce(resent === 0 ? frame : retag(frame, this.nextId++), opts, held)) as OpResult<K>;
      } catch (e) {
        if (!again || !unrun.has(e as object)) throw e;
        if (this.state === 'closed') throw new QuaysideError('unavailable', 'connection closed');
        if (resent >= MAX_RESENDS) throw e;
      }
    }
  }

  private async requestOnce(frame: Encoded, opts: RequestOptions, held: boolean): Promise<unknown> {
    // Aborted while it waited for a slot or a connection: send() would add a listener too late.
    if (opts.signal?.aborted) throw abortError(opts.signal);
    // The socket may be closing (the emulator went away) before its close event has arrived:
    // treat it as lost now, so this request reconnects instead of failing.
    const ws = this.ws;
    if (this.state === 'open' && ws && ws.readyState !== WebSocket.OPEN) {
      // Its close frame may be in (an answer and the close often come in one read): keep its code.
      this.onClose(ws, closeCodeOf(ws));
      ws.terminate();
    }
    if (this.state !== 'open') {
      await this.openWithin(this.connectTimeoutMs, opts.signal);
      if (opts.signal?.aborted) throw abortError(opts.signal);
    }
    return this.send(frame, opts.signal, held, opts.onSent);
  }

  /** Keep trying to (re)connect for up to `ms`, so a request rides out an emulator restart. */
  private async openWithin(ms: number, signal?: AbortSignal): Promise<void> {
    const deadline = realNow() + ms;
    let wait = 25;
    for (;;) {
      try {
        // An abort ends the wait at once, during a dial as between two (the dial goes on for others).
        await orAbort(this.open(), signal);
        return;
      } catch (e) {
        if (signal?.aborted) throw abortError(signal);
        const err = e as QuaysideError;
        if (err.code !== 'unavailable' || this.state === 'closed' || realNow() + wait > deadline) throw err;
        await pause(wait, signal);
        if (signal?.aborted) throw abortError(signal);
        wait = Math.min(wait * 2, 500);
      }
    }
  }

  onEvent(listener: (event: ServerEvent) => void): () => void {
    this.eventListeners.add(listener);
    this.holdProcess();
    return () => {
      this.eventListeners.delete(listener);
      this.holdProcess();
    };
  }

  onReconnect(listener: () => void): () => void {
    this.reconnectListeners.add(listener);
    this.holdProcess();
    return () => {
      this.reconnectListeners.delete(listener);
      this.holdProcess();
    };
  }

  onReconnectFailed(listener: (error: unknown) => void): () => void {
    this.reconnectFailedListeners.add(listener);
    return () => this.reconnectFailedListeners.delete(listener);
  }

  isClosed(): boolean {
    return this.state === 'closed';
  }

  /** Closes for good; a second call gets the first one's promise. */
  close(): Promise<void> {
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private closing: Promise<void> | null = null;

  private async closeNow(): Promise<void> {
    // Before hello was answered nothing but hello went out: nothing to wait for, nothing applied.
    const wasOpen = this.state === 'open';
    this.state = 'closed';
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    // A dial still in its handshake would otherwise come back open after this close (its 'error'
    // listener fails it, so whoever waits on the dial hears "unavailable").
    this.dialling?.terminate();
    this.dialling = null;
    const ws = this.ws;
    this.parked = []; // never sent: failed below as "connection closed", which is the whole truth
    const err = new QuaysideError('unavailable', 'connection closed');
    for (const [id, p] of this.pending) {
      if (wasOpen && p.sent && !p.held && ws?.readyState === WebSocket.OPEN) continue; // its answer is awaited below
      // Cancelled ahead of the close frame: an answer already on its way is given back by the
      // server (we will not read it), so closing never leaves a message leased to nobody.
      if (p.held && ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ id: this.nextId++, op: 'cancel', args: { request: id } }));
      this.pending.delete(id);
      p.cleanup();
      p.reject(err);
    }
    // Requests on the wire may have been applied: their answers come after their commits, so they
    // are waited for (as long as a stopping emulator waits for its own), not reported as failed.
    if (this.pending.size > 0 && ws) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, CLOSE_ANSWER_WAIT_MS);
        this.drained = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.drained = null;
      this.failPending(new QuaysideError('unavailable', `connection closed before the emulator answered (within ${CLOSE_ANSWER_WAIT_MS} ms): the call may have been applied`));
    }
    if (this.ws === ws) this.ws = null;
    this.resetSlots();
    if (ws && !wasOpen) {
      ws.terminate(); // mid-dial: its own failure (the hello refused above) also lets it go
    } else if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.close();
        // Kept referenced (at most 500 ms): an unreferenced one let the process end with close() unsettled.
        setTimeout(() => {
          ws.terminate();
          resolve();
        }, 500);
      });
    }
  }
}

/** Open a connection and wait for the hello to succeed. */
export async function connect(opts: ConnectionOptions = {}): Promise<Connection> {
  const c = new Connection(opts);
  await c.open();
  return c;
}

/** The TCP socket under a ws connection (ws does not expose it publicly). */
function socketOf(ws: WebSocket | null): import('node:net').Socket | undefined {
  return (ws as unknown as { _socket?: import('node:net').Socket } | null)?._socket;
}

/** The code of the close frame a socket received, before its 'close' event reports it (ws keeps it privately). */
function closeCodeOf(ws: WebSocket): number | undefined {
  const received = ws as unknown as { _closeFrameReceived?: boolean; _closeCode?: number };
  return received._closeFrameReceived ? received._closeCode : undefined;
}
