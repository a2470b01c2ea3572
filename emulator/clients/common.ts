import { QuaysideError } from '../errors';
import { abortError, whenAborted } from './abort';
import { LIMITS, LONE_SURROGATE, hasLoneSurrogate } from '../protocol';
import type { Transport } from './transport';
import { clearTimeout, setTimeout } from '../real-time';

// Small helpers shared by the product faces (cache, env, sync): argument checks that run before
// anything is sent (JSON cannot carry NaN or Infinity, so they must be caught here), and waits
// that honour an AbortSignal.

export function invalidArg(message: string, details?: Record<string, unknown>): QuaysideError {
  return new QuaysideError('invalid_argument', message, { details });
}

function show(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v);
  if (v === null) return 'null';
  return typeof v;
}

/**
 * A duration option: a finite number within [min, max], rounded to whole milliseconds (`msPerUnit`:
 * 1 for ms, 1000 for seconds); NaN, Infinity, negatives and non-numbers are refused with a clear
 * error. The limits are checked on the rounded value, the one that is sent (43200.0004 seconds is
 * 43,200,000 ms, within a 43,200 s limit), as the engine checks a rounded delay.
 */
function duration(v: unknown, name: string, opts: { min?: number; max?: number }, unit: string, msPerUnit: number): number | undefined {
  if (v === undefined || v === null) return undefined;
  const min = opts.min ?? 0;
  if (typeof v !== 'number' || Number.isNaN(v)) throw invalidArg(`${name} must be a number of ${unit}, got ${show(v)}`, { field: name });
  if (!Number.isFinite(v)) throw invalidArg(`${name} must be finite, got ${v}`, { field: name });
  if (v < 0) throw invalidArg(`${name} must not be negative, got ${v}`, { field: name });
  const ms = Math.round(v * msPerUnit);
  if (ms < Math.round(min * msPerUnit)) throw invalidArg(`${name} must be at least ${min} ${unit}, got ${v}`, { field: name });
  if (opts.max !== undefined && ms > Math.round(opts.max * msPerUnit)) throw invalidArg(`${name} must be at most ${opts.max} ${unit}, got ${v}`, { field: name });
  // Finite in its unit but not in milliseconds (1e306 seconds), with no bound of its own here: the engine would say delayMs.
  if (!Number.isSafeInteger(ms)) throw invalidArg(`${name} is too large, got ${v}`, { field: name });
  return ms;
}

/** Seconds → whole milliseconds, checked. */
export function optSeconds(v: unknown, name: string, opts: { min?: number; max?: number } = {}): number | undefined {
  return duration(v, name, opts, 'seconds', 1000);
}

/** Milliseconds, checked, rounded to a whole number. */
export function optMs(v: unknown, name: string, opts: { min?: number; max?: number } = {}): number | undefined {
  return duration(v, name, opts, 'ms', 1);
}

/** A whole number within [min, max], refused in the words the env HTTP API uses for the same check. */
export function optCount(v: unknown, name: string, min: number, max: number): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw invalidArg(`${name} must be a whole number from ${min} to ${max}, got ${show(v)}`, { field: name });
  return v;
}

export function optString(v: unknown, name: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length === 0) throw invalidArg(`${name} must be a non-empty string, got ${show(v)}`, { field: name });
  return v;
}

/**
 * A dedupe or ordering key under the product's own name (dedupId, idempotencyKey, orderingKey),
 * its length and text checked here so that the error names that field; the engine would say dedupeKey.
 */
export function optKey(v: unknown, field: string): string | undefined {
  const s = optString(v, field);
  if (s !== undefined && s.length > LIMITS.maxKeyChars) throw invalidArg(`${field} must be at most ${LIMITS.maxKeyChars} characters, got ${s.length}`, { field });
  if (s !== undefined && hasLoneSurrogate(s)) throw invalidArg(`${field} ${LONE_SURROGATE}`, { field });
  return s;
}

export function optFunction<F extends (...args: never[]) => unknown>(v: unknown, name: string): F | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'function') throw invalidArg(`${name} must be a function, got ${show(v)}`, { field: name });
  return v as F;
}

/**
 * Calls an app's error callback (a consume loop's onError) so that it cannot end the loop: what it
 * throws, or the promise it returns rejects with, is logged, not thrown (an unhandled rejection
 * would end a Node process).
 */
export function callOnError<A extends unknown[]>(fn: (...args: A) => unknown, ...args: A): void {
  const failed = (e: unknown) => console.error('[quayside] onError failed:', e);
  try {
    const r = fn(...args) as { then?: unknown } | undefined;
    if (r && typeof r.then === 'function') (r as Promise<unknown>).then(undefined, failed);
  } catch (e) {
    failed(e);
  }
}

export function optObject(v: unknown, name: string): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidArg(`${name} must be an object`, { field: name });
  return v as Record<string, unknown>;
}

/**
 * A message body must be a JSON value. JSON.stringify drops a function or a symbol without a word
 * (the server would then say the body is missing), so they are refused here by name. A BigInt, a
 * cycle, or a NaN or Infinity anywhere in a request is caught when it is encoded (transport.ts).
 */
export function jsonValue(v: unknown, name: string): void {
  if (typeof v === 'function' || typeof v === 'symbol') {
    throw invalidArg(`${name} is not a JSON value (got a ${typeof v}); send a string, number, boolean, null, array or plain object`, { field: name });
  }
  const top = asJsonTop(v);
  if (top === undefined || typeof top === 'function' || typeof top === 'symbol') {
    throw invalidArg(`${name} is not a JSON value: its toJSON() returned ${top === undefined ? 'undefined' : `a ${typeof top}`}, which JSON leaves out`, { field: name });
  }
}

/**
 * What JSON writes for `v` at the top: what its toJSON returns (a Date's text), a boxed string,
 * number or boolean's primitive, else `v`. (A toJSON that throws is left to the encoding, which
 * names it.)
 */
export function asJsonTop(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  try {
    const toJSON = (v as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return toJSON.call(v, '');
    return v instanceof String || v instanceof Number || v instanceof Boolean ? v.valueOf() : v;
  } catch {
    return v; // a toJSON (or a getter, a Proxy) that throws: the encoding names it
  }
}

/** A Transport given as an option (tests, embedding), or undefined; anything else is refused by name (it would fail at the first call as a TypeError). */
export function optTransport(v: unknown): Transport | undefined {
  if (v === undefined || v === null) return undefined;
  const t = v as Partial<Transport>;
  if (typeof v === 'object' && typeof t.request === 'function' && typeof t.onEvent === 'function' && typeof t.onReconnect === 'function' && typeof t.close === 'function') return v as Transport;
  throw invalidArg(`transport must be a Transport (an object with request, onEvent, onReconnect and close), got ${show(v)}`, { field: 'transport' });
}

/** An AbortSignal, or undefined; anything else is refused by name (it would fail later as a TypeError). */
export function optSignal(v: unknown, name = 'signal'): AbortSignal | undefined {
  if (v === undefined || v === null) return undefined;
  const s = v as Partial<AbortSignal>;
  if (typeof v === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function' && typeof s.removeEventListener === 'function') return v as AbortSignal;
  throw invalidArg(`${name} must be an AbortSignal, got ${show(v)}`, { field: name });
}

/** Refuses keys outside `allowed`, naming the one that is wrong. */
export function onlyKeys(o: Record<string, unknown> | undefined, allowed: readonly string[], what: string, tolerated: readonly string[] = []): void {
  if (!o) return;
  for (const k of Object.keys(o)) {
    if (allowed.includes(k) || tolerated.includes(k)) continue;
    throw invalidArg(allowed.length ? `unknown ${what} option "${k}"; expected one of ${allowed.join(', ')}` : `unknown ${what} option "${k}"; ${what}() takes none`, { field: k });
  }
}

/**
 * A call's options: `{}` when none are given (`undefined` or `null`), else an object whose keys are
 * all in `allowed` (optObject and onlyKeys, with their messages: "recv options must be an object",
 * "unknown recv option …").
 */
export function options<T extends object>(v: T | null | undefined, what: string, allowed: readonly string[]): T {
  const o = optObject(v, `${what} options`) ?? {};
  onlyKeys(o, allowed, what);
  return o as T;
}

/**
 * The other keys of what `startEmulator()` resolves to, besides `url` and `token`. A client's
 * connection options accept (and ignore) them, so an app's test may pass `{ ...emu, namespace }`;
 * any other unknown key is still refused.
 */
export const EMULATOR_HANDLE_KEYS: readonly string[] = ['httpUrl', 'host', 'port', 'clock', 'engine', 'createToken', 'close'];

export function isAbort(e: unknown): boolean {
  return e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError');
}

export { isCode } from '../errors';

/** Waits `ms` of real time, or until the signal aborts (then resolves early, never rejects). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      stopListening?.();
      resolve();
    };
    const t = setTimeout(done, ms);
    const stopListening = signal ? whenAborted(signal, done) : undefined;
  });
}

export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortError(signal);
}

/** An Error (or anything) as text for a nack's `error`. Never throws, whatever was thrown. */
export function errorText(e: unknown): string | undefined {
  try {
    if (e === undefined || e === null) return undefined;
    if (e instanceof Error) return e.message || e.name;
    if (typeof e === 'string') return e;
    if (typeof e === 'function') return `a function${e.name ? ` (${e.name})` : ''}`;
    // An object that says what it is (its own toString) is taken at its word; others as JSON.
    if (typeof e === 'object' && !Array.isArray(e) && typeof (e as { toString?: unknown }).toString === 'function' && (e as { toString: unknown }).toString !== Object.prototype.toString) return String(e);
    try {
      return JSON.stringify(e) ?? String(e);
    } catch {
      return String(e);
    }
  } catch {
    // A revoked proxy, a message getter that throws, an object with neither toJSON nor toString.
    return 'a thrown value with no text';
  }
}

/**
 * What a handler threw, as a dead letter's lastError. A `throw null` still says so: leaving it out
 * would let the failed area show an earlier attempt's error as the last one.
 */
export function thrownText(e: unknown): string {
  const text = errorText(e);
  return (text ? text : `threw ${typeof e === 'string' ? '""' : String(e)}`).slice(0, 8192);
}

/**
 * A read-only token's refusal (`details.readOnly`) in the product's words: the emulator names the
 * operation it was sent (`dead.replay`, `queue.create`); the app called `op` (`replay`, `recv`).
 * Other errors pass as they are.
 */
export function readOnlyRefusal(e: unknown, op: string): unknown {
  if (!(e instanceof QuaysideError) || e.code !== 'forbidden' || e.details?.readOnly !== true) return e;
  return new QuaysideError('forbidden', `${op}(): this token is read-only; ${op} needs a read-write token`, { details: e.details, cause: e });
}
