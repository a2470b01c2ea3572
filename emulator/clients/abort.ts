import { queueMicrotask } from '../real-time';
/**
 * What an aborted call rejects with: the signal's reason, whatever the caller gave (as `fetch`
 * does); an AbortError only for a signal that carries none.
 */
export function abortError(signal: AbortSignal): unknown {
  const reason: unknown = signal.reason;
  if (reason !== undefined) return reason;
  const e = new Error('The operation was aborted');
  e.name = 'AbortError';
  return e;
}

/** The callbacks waiting on each signal, behind the one listener it has for all of them. */
const waiting = new WeakMap<AbortSignal, { listener: () => void; callbacks: Set<() => void> }>();

/**
 * Calls `fn` once when `signal` aborts, and returns what takes it back. However many calls wait on
 * one signal (a pool of workers sharing one AbortController, as the seeds write it), the signal
 * holds one listener, so Node never warns of a leak (MaxListenersExceededWarning at 11); the last
 * call to be taken back removes it. Not for a signal already aborted: callers check that first.
 * The waits run in the order they were registered, all at the place of the first among the
 * signal's other listeners (the library relies on no order against an app's own listeners).
 */
export function whenAborted(signal: AbortSignal, fn: () => void): () => void {
  let entry = waiting.get(signal);
  if (!entry) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      waiting.delete(signal);
      for (const f of callbacks) {
        callbacks.delete(f); // fired: nothing keeps it (or what it holds) once the abort is over
        try {
          f();
        } catch (e) {
          queueMicrotask(() => {
            throw e; // as an EventTarget listener's throw: reported, and the others still run
          });
        }
      }
    };
    entry = { listener, callbacks };
    waiting.set(signal, entry);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { callbacks, listener } = entry;
  // Dropped once it ran or was taken back, so a take-back an app keeps (a RunningConsumer's) holds
  // nothing of what the callback held. `fn` itself is not named in a closure, which would keep it.
  let target: (() => void) | null = fn;
  const wait = () => {
    const run = target;
    target = null;
    run?.();
  }; // its own identity: one fn given twice is two waits
  callbacks.add(wait);
  return () => {
    target = null;
    if (!callbacks.delete(wait) || callbacks.size > 0 || waiting.get(signal)?.callbacks !== callbacks) return;
    waiting.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}

/** `p`, or the signal's abort if that comes first. */
export function orAbort<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const off = whenAborted(signal, () => reject(abortError(signal)));
    p.then(
      (v) => {
        off();
        resolve(v);
      },
      (e) => {
        off();
        reject(e);
      },
    );
  });
}
