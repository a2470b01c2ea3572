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
