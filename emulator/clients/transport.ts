import { QuaysideError } from '../errors';
import { LIMITS, lossyNullAt, lossyNullMessage, pathToUnencodable, type OpArgs, type OpName, type OpResult, type ServerEvent } from '../protocol';

export interface RequestOptions {
  signal?: AbortSignal;
  /** Called once the request has left for the emulator: from then on it may be applied. */
  onSent?: () => void;
}

/**
 * What a product face needs from "the emulator": requests and events. The WebSocket
 * `Connection` implements it; so does the in-process transport of `quayside/sync/memory`.
 */
export interface Transport {
  request<K extends OpName>(op: K, args: OpArgs<K>, opts?: RequestOptions): Promise<OpResult<K>>;
  /** Server events (change, deliver, clock). Returns an unsubscribe function. */
  onEvent(listener: (event: ServerEvent) => void): () => void;
  /** Called after a reconnect, so faces can restore subscriptions and consumer attachments. */
  onReconnect(listener: () => void): () => void;
  /**
   * Called when a background reconnect is refused for a reason waiting will not cure by itself
   * (`unauthorized`: the emulator came back with other tokens); it keeps trying all the same.
   */
  onReconnectFailed?(listener: (error: unknown) => void): () => void;
  close(): Promise<void>;
  /** True once closed for good: no request will succeed again, so retrying `unavailable` is pointless. */
  isClosed?(): boolean;
  /** False while no connection is up: the emulator then holds nothing of this session (its consumer attachments went with it). */
  readonly isOpen?: boolean;
}

export interface ConnectionOptions {
  /** `ws://host:port`; defaults to `QUAYSIDE_URL` (read at each connect), then `ws://127.0.0.1:7433`. */
  url?: string;
  /** Defaults to `QUAYSIDE_TOKEN` (read at each connect). */
  token?: string;
  /** A name the emulator logs for this client. */
  client?: string;
  /** How long a request waits for a (re)connection before failing `unavailable`. Default 5000 ms. */
  connectTimeoutMs?: number;
  /**
   * While requests wait for answers, the connection pings this often; one that leaves two pings in
   * a row unanswered is cut, and its requests fail `unavailable` (an emulator stopped with SIGSTOP,
   * a suspended machine, a connection that died without a close). Default 15000 ms.
   */
  heartbeatMs?: number;
}

export function resolveUrl(url?: string): string {
  // An empty variable counts as unset (`QUAYSIDE_URL= cmd`), as for the token.
  const u = (url ?? (process.env.QUAYSIDE_URL || 'ws://127.0.0.1:7433')).trim();
  // Accept the HTTP form of the same port too (a scheme is case-insensitive).
  const out = u.replace(/^http(s?):\/\//i, 'ws$1://').replace(/\/+$/, '');
  let ok = false;
  try {
    ok = /^wss?:$/.test(new URL(out).protocol);
  } catch {
    // not a URL at all: refused below
  }
  if (!ok) throw new QuaysideError('invalid_argument', `url ${JSON.stringify(u.slice(0, 200))} is not a ws:// or wss:// (or http://, https://) URL of the emulator, such as ws://127.0.0.1:7433`);
  return out;
}

/**
 * The types of `url` and `token` as given (their values are read at each dial): a number for a URL
 * must fail as a bad argument, not as a TypeError from deep inside the first call. The in-memory
 * sync checks them the same way, though it uses neither, so one options object fails alike in both.
 */
export function checkConnectionOptions(opts: { url?: unknown; token?: unknown } | null | undefined): void {
  for (const k of ['url', 'token'] as const) {
    const v = opts?.[k];
    if (v !== undefined && v !== null && typeof v !== 'string') throw new QuaysideError('invalid_argument', `${k} must be a string, got a ${typeof v}`);
    // An empty one is a mistake (an unset variable read into it), not "no token": said now, not as a 401 later.
    if (v === '') throw new QuaysideError('invalid_argument', `${k} must not be empty; leave it out to use QUAYSIDE_${k.toUpperCase()} (or the default)`);
  }
}

export function resolveToken(token?: string): string | undefined {
  return token ?? (process.env.QUAYSIDE_TOKEN || undefined);
}

/**
 * JSON text of `value` (a request's `args`, or the whole frame around them). A value JSON cannot
 * encode (a BigInt, a cycle) fails `invalid_argument` naming the argument, before anything is
 * sent, instead of a bare TypeError from JSON.stringify; so does what it would write as null (a NaN,
 * an Infinity, an undefined array element; looked for only when the text has a null), naming where it sits.
 */
export function argsJson(op: string, args: unknown, value: unknown = args): string {
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw notSerialisable(op, args, e);
  }
  if (text.includes('null')) {
    const found = lossyNullAt(args);
    if (found !== null) {
      const field = /^\.?([^.[]+)/.exec(found.path)?.[1];
      throw new QuaysideError('invalid_argument', lossyNullMessage(`${op}: ${found.path.replace(/^\./, '')}`, found), field ? { details: { field } } : {});
    }
  }
  return text;
}

/**
 * A request frame as JSON text (see argsJson). A frame over the emulator's limit is refused here,
 * `payload_too_large` with nothing sent: the server could not tell whose request it was.
 */
export function encodeRequest(id: number, op: string, args: unknown): string {
  const text = argsJson(op, args, { id, op, args });
  // UTF-8 takes at most 3 bytes per UTF-16 unit, so most frames need no count.
  if (text.length * 3 > LIMITS.maxFrameBytes) {
    const size = Buffer.byteLength(text);
    if (size > LIMITS.maxFrameBytes) {
      throw new QuaysideError('payload_too_large', `${op}: the request is ${size} bytes; the emulator takes at most ${LIMITS.maxFrameBytes} bytes (8 MiB) per request: send fewer messages at once`, { details: { size, limit: LIMITS.maxFrameBytes } });
    }
  }
  return text;
}

/** The `invalid_argument` error for arguments JSON cannot encode, naming the argument when it can. */
function notSerialisable(op: string, args: unknown, err: unknown): QuaysideError {
  // Only on this failure path: find where the fault sits (body.a.b), and its top-level argument.
  const path = pathToUnencodable(args).replace(/^\./, '');
  const field = /^([^.[]+)/.exec(path)?.[1];
  const reason = (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ');
  const what = path ? `${path} is` : 'the arguments are';
  return new QuaysideError('invalid_argument', `${op}: ${what} not JSON-serialisable: ${reason}`, field ? { details: { field } } : {});
}
