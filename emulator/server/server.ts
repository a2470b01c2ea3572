import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, WebSocket, type RawData } from 'ws';
import type { Engine, ChangeBody } from '../engine/engine';
import { CLOSE_STOPPED_UNRUN, LIMITS, type ChangeEvent, type ResponseFrame, type ServerEvent } from '../protocol';
import { hostAllowed, originAllowed } from './auth';
import { Session, answerNotSent, dispatch, endSession, matches } from './dispatch';
import { metricsText } from './metrics';
import { clearTimeout, nextTick, realNow, setTimeout } from '../real-time';

/** An HTTP route mounted on the emulator's port; answers true when it handled the request. */
export type HttpRoute = (req: http.IncomingMessage, res: http.ServerResponse, engine: Engine) => Promise<boolean>;

export interface ServerOptions {
  engine: Engine;
  host: string;
  port: number;
  routes?: HttpRoute[];
  /** Called with each line the emulator logs: listening, connections, refusals, failures, stopping. */
  log?: (line: string) => void;
}

/*
 * Flow control per connection, so that a client that sends faster than it reads cannot make the
 * emulator hold its answers without bound: at most WINDOW requests of a connection run at once;
 * while more than CATCH_UP bytes are unsent they run one at a time, and above HIGH_WATER none run,
 * change events to it are dropped, and the connection is not read until its socket drains. Frames
 * beyond the window wait, decoded, and count toward the in-flight limit; past WAITING_BYTES of
 * them the connection is not read either.
 */
const WINDOW = 32;
const CATCH_UP = 1024 * 1024;
const HIGH_WATER = 8 * 1024 * 1024;
const WAITING_BYTES = 8 * 1024 * 1024;
/** How often a connection that lost change events is looked at, to tell it once it reads again. */
const GAP_LOOK_MS = 50;
/** How long close() waits for running requests to be answered and clients to answer its close frames. */
const CLOSE_WAIT_MS = 500;
/**
 * A connection's first frames (hello, a handle's queue setup, its first call) count as arrivals;
 * later ones do not, so a worker that never pauses does not hold up every clock.advance.
 */
const OPENING_FRAMES = 8;

interface Flow {
  /** Decoded frames that arrived over the window, in order, and the size of their text. */
  waiting: { frame: unknown; bytes: number }[];
  waitingBytes: number;
  /** Requests of this connection being worked on now (long-polls and cancels not counted). */
  running: number;
  awaitingDrain: boolean;
  /** Frames received so far: the first few of a connection count as arrivals (see `arrivals`). */
  frames: number;
  /** Subscriptions whose change events were dropped, to be told (`gap`) once the connection reads again. */
  gaps: Set<string>;
  /** The look for the end of a backlog that will announce those gaps. */
  gapTimer: NodeJS.Timeout | null;
}

/** How many of a connection's requests may run at once, given what it has not read yet. */
function runLimit(ws: WebSocket): number {
  const unsent = ws.bufferedAmount;
  return unsent > HIGH_WATER ? 0 : unsent > CATCH_UP ? 1 : WINDOW;
}

/**
 * A long-poll waits for a message, and a cancel ends one: neither takes a place in the window
 * (waiting pulls have their own limit), or a client's held pulls would starve its other requests.
 */
function waitsForWork(frame: unknown): boolean {
  const f = frame as { op?: unknown; args?: { waitMs?: unknown } } | null;
  if (typeof f !== 'object' || f === null) return false;
  return f.op === 'cancel' || (f.op === 'pull' && typeof f.args?.waitMs === 'number' && f.args.waitMs > 0);
}

/** One port: WebSocket protocol, /healthz, /metrics and mounted HTTP routes. */
export class QuaysideServer {
  private readonly http: http.Server;
  private readonly wss: WebSocketServer;
  private readonly sessions = new Map<WebSocket, Session>();
  private readonly offChange: () => void;
  private readonly engine: Engine;
  private readonly host: string;
  private port: number;
  /**
   * Counts what arrives from a client that is still getting going (connections, upgrades, a
   * connection's first frames, HTTP requests): a virtual clock's advance waits for it to settle.
   */
  private arrivals = 0;
  /** HTTP requests being answered now; close() lets them finish. */
  private httpRunning = 0;
  /** Set by close(): frames that arrive after it are not run, since their answers could not be sent. */
  private closing = false;

  constructor(private readonly opts: ServerOptions) {
    this.engine = opts.engine;
    this.host = opts.host;
    this.port = opts.port;
    this.http = http.createServer((req, res) => {
      this.arrivals++;
      if (this.closing) return json(res, 503, { error: { code: 'unavailable', message: 'the emulator is stopping' } });
      this.httpRunning++;
      void this.onHttp(req, res).finally(() => this.httpRunning--);
    });
    this.http.on('connection', () => this.arrivals++);
    this.http.keepAliveTimeout = 5000;
    this.wss = new WebSocketServer({ noServer: true, maxPayload: LIMITS.maxFrameBytes * 2, perMessageDeflate: false });
    this.http.on('upgrade', (req, socket, head) => {
      this.arrivals++;
      const refuse = (status: number, text: string, why: string) => {
        this.log(`refused a WebSocket connection (${status}): ${why}`);
        socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      };
      // Sec-WebSocket-Origin is where the older handshake (version 8, which ws still accepts) puts it.
      const origin = req.headers.origin ?? req.headers['sec-websocket-origin'];
      if (!originAllowed(req.headers.origin) || !originAllowed(req.headers['sec-websocket-origin'])) return refuse(403, 'Forbidden', `Origin ${JSON.stringify(String(origin).slice(0, 100))} is a web page, which may not reach the emulator`);
      if (!hostAllowed(req.headers.host, this.host)) return refuse(403, 'Forbidden', `Host ${JSON.stringify(String(req.headers.host).slice(0, 100))} is not this emulator's address`);
      if (this.sessions.size >= LIMITS.maxConnections) return refuse(503, 'Service Unavailable', `${LIMITS.maxConnections} connections are open, the most it takes`);
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onConnection(ws));
    });
    const offChange = this.engine.onChange((e) => this.broadcast(e));
    // Subscribers learn that a virtual clock moved, so relative times can follow it.
    const offClock = this.engine.onClock((now) => {
      for (const [ws, s] of this.sessions) if (s.subscriptions.size > 0) this.send(ws, { event: 'clock', now }, false);
    });
    this.offChange = () => {
      offChange();
      offClock();
    };
    this.engine.eventsWanted = () => {
      for (const s of this.sessions.values()) if (s.subscriptions.size > 0) return true;
      return false;
    };
    this.engine.arrivals = () => this.arrivals;
  }

  listen(): Promise<{ host: string; port: number }> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error) => reject(e);
      this.http.once('error', onError);
      this.http.listen(this.port, this.host, () => {
        this.http.off('error', onError);
        this.port = (this.http.address() as AddressInfo).port;
        this.log(`listening on ${this.host}:${this.port} (WebSocket and HTTP)`);
        resolve({ host: this.host, port: this.port });
      });
    });
  }

  /** Set once close() has said "stopped": a socket cut late says nothing after it. */
  private stopped = false;

  /** A line for the `log` option; a logger that throws breaks nothing, and nothing comes after "stopped". */
  log(line: string): void {
    if (this.stopped) return;
    try {
      this.opts.log?.(line);
    } catch {
      // A logger that throws must not break the request that logged.
    }
  }

  get address(): { host: string; port: number } {
    return { host: this.host, port: this.port };
  }

  private onConnection(ws: WebSocket): void {
    const session = new Session((e) => this.send(ws, e, false));
    const flow: Flow = { waiting: [], waitingBytes: 0, running: 0, awaitingDrain: false, frames: 0, gaps: new Set(), gapTimer: null };
    this.sessions.set(ws, session);
    this.flows.set(ws, flow);
    ws.on('message', (data, isBinary) => this.onFrame(ws, session, flow, data, isBinary));
    this.log(`connection opened (${this.sessions.size} open)`);
    ws.on('close', () => {
      this.sessions.delete(ws);
      this.flows.delete(ws);
      flow.waiting.length = 0;
      if (flow.gapTimer) clearTimeout(flow.gapTimer);
      endSession(this.engine, session);
      this.log(`connection closed${session.actor ? ` (token "${session.actor.name}")` : ''} (${this.sessions.size} open)`);
    });
    ws.on('error', () => ws.terminate());
  }

  private readonly flows = new Map<WebSocket, Flow>();

  private onFrame(ws: WebSocket, s: Session, flow: Flow, data: RawData, isBinary: boolean): void {
    if (++flow.frames <= OPENING_FRAMES) this.arrivals++;
    if (this.closing) return;
    const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer).byteLength;
    if (size > LIMITS.maxFrameBytes) {
      const id = leadingId(Array.isArray(data) ? data[0] : Buffer.isBuffer(data) ? data : Buffer.from(data));
      this.reply(ws, { id, ok: false, error: { code: 'payload_too_large', message: `a frame is at most ${LIMITS.maxFrameBytes} bytes; this one was ${size}`, details: { size, limit: LIMITS.maxFrameBytes } } });
      return;
    }
    if (isBinary) {
      this.reply(ws, { id: null, ok: false, error: { code: 'invalid_argument', message: 'frames are JSON text, not binary' } });
      return;
    }
    let frame: unknown;
    try {
      frame = JSON.parse(data.toString());
    } catch (e) {
      this.reply(ws, { id: null, ok: false, error: { code: 'invalid_argument', message: `the frame is not JSON: ${(e as Error).message}` } });
      return;
    }
    if (s.inFlight + flow.waiting.length >= LIMITS.maxInFlightPerConnection) {
      const id = (frame as { id?: unknown })?.id;
      this.reply(ws, { id: typeof id === 'number' || typeof id === 'string' ? id : null, ok: false, error: { code: 'limit_exceeded', message: `at most ${LIMITS.maxInFlightPerConnection} requests in flight per connection` } });
      return;
    }
    if (waitsForWork(frame)) return this.run(ws, s, flow, frame, false);
    if (flow.waiting.length === 0 && flow.running < runLimit(ws)) return this.run(ws, s, flow, frame, true);
    // Over the window, or the client owes us reads: the frame waits its turn.
    flow.waiting.push({ frame, bytes: size });
    flow.waitingBytes += size;
    // With nothing running, no answer will come to pump it: pump now (it waits for the drain).
    if (flow.running === 0) this.pump(ws, s, flow);
    else if (flow.waitingBytes > WAITING_BYTES) this.hold(ws, flow);
  }

  private run(ws: WebSocket, s: Session, flow: Flow, frame: unknown, counted: boolean): void {
    s.inFlight++;
    if (counted) flow.running++;
    void dispatch(this.engine, s, frame).then((r) => {
      s.inFlight--;
      if (counted) flow.running--;
      if (ws.readyState !== WebSocket.OPEN) answerNotSent(this.engine, r);
      this.reply(ws, r);
      this.pump(ws, s, flow);
    });
  }

  /** Runs waiting frames as far as the window and the unsent bytes allow; reads again once none wait. */
  private pump(ws: WebSocket, s: Session, flow: Flow): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    while (flow.waiting.length > 0 && flow.running < runLimit(ws)) {
      const next = flow.waiting.shift()!;
      flow.waitingBytes -= next.bytes;
      this.run(ws, s, flow, next.frame, true);
    }
    if (ws.bufferedAmount <= HIGH_WATER && flow.waitingBytes <= WAITING_BYTES) {
      if (!flow.awaitingDrain && ws.isPaused) ws.resume();
      return;
    }
    if (flow.running > 0) return; // the next answer pumps again
    this.hold(ws, flow);
    // Unsent bytes still in ws's own queue rather than the socket's: no drain will come, look again.
    if (!flow.awaitingDrain) setTimeout(() => this.pump(ws, s, flow), 10).unref();
  }

  /** Stops reading a connection; it reads again from pump(), after a drain or an answer. */
  private hold(ws: WebSocket, flow: Flow): void {
    const sock = socketOf(ws);
    if (!sock) return;
    // ws.pause(), not the raw socket's: ws resumes a raw socket itself whenever its parser drains.
    ws.pause();
    if (flow.awaitingDrain || !sock.writableNeedDrain) return;
    flow.awaitingDrain = true;
    sock.once('drain', () => {
      flow.awaitingDrain = false;
      const s = this.sessions.get(ws);
      if (s) this.pump(ws, s, flow);
    });
  }

  private reply(ws: WebSocket, frame: ResponseFrame): void {
    // The answers of one commit settle in the same tick: cork the socket so they leave in one write.
    const sock = socketOf(ws);
    if (sock && !this.corked.has(sock)) {
      this.corked.add(sock);
      sock.cork();
      nextTick(() => {
        this.corked.delete(sock);
        sock.uncork();
      });
    }
    this.send(ws, frame, true);
  }

  private readonly corked = new Set<import('node:net').Socket>();

  /**
   * Answers always go out; change events are dropped for a connection that does not read, and its
   * subscription is told of the gap once it reads again, so a tool knows to re-read.
   */
  private send(ws: WebSocket, frame: ResponseFrame | ServerEvent, essential: boolean): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    const flow = this.flows.get(ws);
    if (!essential && (frame as ServerEvent).event === 'change') {
      const subscription = (frame as ChangeEvent).subscription;
      if (ws.bufferedAmount > HIGH_WATER) {
        if (flow) this.noteGap(ws, flow, subscription);
        return;
      }
      // A change after a gap not yet told: the gap goes first, so it is never read after later news.
      if (flow?.gaps.delete(subscription)) this.send(ws, { event: 'gap', subscription }, true);
    }
    ws.send(JSON.stringify(frame));
    if (flow && ws.bufferedAmount > HIGH_WATER) this.hold(ws, flow);
  }

  private noteGap(ws: WebSocket, flow: Flow, subscription: string): void {
    flow.gaps.add(subscription);
    if (flow.gapTimer) return;
    // Polled, not tied to a drain: the backlog may sit in ws's own queue, where no drain comes.
    const look = () => {
      flow.gapTimer = null;
      if (ws.readyState !== WebSocket.OPEN) return;
      if (ws.bufferedAmount > HIGH_WATER) return void (flow.gapTimer = setTimeout(look, GAP_LOOK_MS).unref());
      const gaps = [...flow.gaps];
      flow.gaps.clear();
      // Only subscriptions still there (one may have been unsubscribed meanwhile).
      const live = this.sessions.get(ws)?.subscriptions;
      for (const subscription of gaps) if (live?.has(subscription)) this.send(ws, { event: 'gap', subscription }, true);
    };
    flow.gapTimer = setTimeout(look, GAP_LOOK_MS).unref();
  }

  private broadcast(e: ChangeBody): void {
    for (const [ws, s] of this.sessions) {
      for (const [id, sub] of s.subscriptions) {
        if (matches(sub, e.namespace, e.queue)) this.send(ws, { event: 'change', subscription: id, ...e }, false);
      }
    }
  }

  private async onHttp(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    try {
      if (!hostAllowed(req.headers.host, this.host)) return json(res, 403, { error: { code: 'forbidden', message: 'unexpected Host header' } });
      const url = new URL(req.url ?? '/', 'http://localhost');
      // HEAD as GET (a probe's check); Node sends the headers and leaves out the body.
      const read = req.method === 'GET' || req.method === 'HEAD';
      if (read && url.pathname === '/healthz') {
        return json(res, 200, { ok: true, clock: this.engine.clock.mode, now: this.engine.now(), connections: this.sessions.size });
      }
      if (read && url.pathname === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        res.end(await metricsText(this.engine));
        return;
      }
      if (url.pathname === '/healthz' || url.pathname === '/metrics') {
        res.setHeader('allow', 'GET, HEAD');
        return json(res, 405, { error: { code: 'invalid_argument', message: `${req.method} is not allowed on ${url.pathname}; use GET` } });
      }
      for (const route of this.opts.routes ?? []) if (await route(req, res, this.engine)) return;
      json(res, 404, { error: { code: 'not_found', message: `no route for ${req.method} ${url.pathname}` } });
    } catch (e) {
      this.log(`HTTP ${req.method} ${req.url} failed: ${(e as Error).message}`);
      if (!res.headersSent) json(res, 500, { error: { code: 'internal', message: (e as Error).message } });
      else res.end();
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    this.log(`stopping (${this.sessions.size} connections open)`);
    this.offChange();
    const deadline = realNow() + CLOSE_WAIT_MS;
    // Requests already running finish and are answered first (held pulls end at once, empty);
    // frames that were waiting their turn are dropped unrun, as are any that arrive from now on.
    for (const [ws, s] of this.sessions) {
      endSession(this.engine, s);
      const flow = this.flows.get(ws);
      if (flow) {
        flow.waiting.length = 0;
        flow.waitingBytes = 0;
      }
    }
    const busy = () => this.httpRunning > 0 || [...this.sessions.values()].some((s) => s.inFlight > 0);
    while (busy() && realNow() < deadline) await new Promise((r) => setTimeout(r, 2));
    // Then a close frame, not a bare TCP reset: a client in this process knows before close()
    // resolves that its socket is going, so its next call dials the next emulator instead of
    // writing to this one. Clients that do not answer within the bound are cut off.
    const gone: Promise<void>[] = [];
    for (const [ws, s] of this.sessions) {
      gone.push(new Promise<void>((r) => ws.once('close', () => r())));
      // Every run of this connection answered, ahead of the close frame: whatever it sent and was
      // not answered was not run, and the code says so, so its client may send it again.
      if (s.inFlight === 0) ws.close(CLOSE_STOPPED_UNRUN, 'the emulator is stopping; requests not answered were not run');
      else ws.close(1001, 'the emulator is stopping');
    }
    await Promise.race([Promise.all(gone), new Promise<void>((r) => setTimeout(r, Math.max(0, deadline - realNow())).unref())]);
    for (const ws of this.sessions.keys()) ws.terminate();
    this.sessions.clear();
    this.wss.close();
    this.http.closeAllConnections?.();
    await new Promise<void>((r) => this.http.close(() => r()));
    this.log('stopped');
    this.stopped = true;
  }
}

/** The TCP socket under a ws connection (ws does not expose it publicly). */
function socketOf(ws: WebSocket): import('node:net').Socket | undefined {
  return (ws as unknown as { _socket?: import('node:net').Socket })._socket;
}

export function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The `id` of a frame too large to parse, when it opens the frame (`{"id":…` as the clients write
 * it), so the sender's request is answered rather than left waiting; otherwise null.
 */
export function leadingId(head: Buffer): number | string | null {
  const m = /^\s*\{\s*"id"\s*:\s*(?:(-?\d{1,15})\s*[,}]|"([^"\\]{1,64})")/.exec(head.subarray(0, 256).toString('utf8'));
  if (!m) return null;
  return m[1] !== undefined ? Number(m[1]) : m[2];
}
