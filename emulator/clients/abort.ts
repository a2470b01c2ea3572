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

/** `p`, or the signal's abort if that comes first. */
export function orAbort<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
