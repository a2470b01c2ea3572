import { HTTP_STATUS, type ErrorCode, type WireError } from './protocol';

/** The one error type every layer throws; `code` is stable, `message` says what was wrong. */
export class QuaysideError extends Error {
  readonly code: ErrorCode;
  readonly resetAt?: number;
  readonly details?: Record<string, unknown>;
  /** HTTP-style status, so product faces can expose e.g. `status === 429`. */
  readonly status: number;

  constructor(code: ErrorCode, message: string, extra: { resetAt?: number; details?: Record<string, unknown>; cause?: unknown } = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'QuaysideError';
    this.code = code;
    if (extra.resetAt !== undefined) this.resetAt = extra.resetAt;
    if (extra.details !== undefined) this.details = extra.details;
    this.status = HTTP_STATUS[code] ?? 500;
  }

  toWire(): WireError {
    const w: WireError = { code: this.code, message: this.message };
    if (this.resetAt !== undefined) w.resetAt = this.resetAt;
    if (this.details !== undefined) w.details = this.details;
    return w;
  }

  static fromWire(w: WireError): QuaysideError {
    return new QuaysideError(w.code, w.message, { resetAt: w.resetAt, details: w.details });
  }
}


export const invalid = (message: string, details?: Record<string, unknown>) =>
  new QuaysideError('invalid_argument', message, { details });
/** Whether `e` is a QuaysideError with this code. */
export function isCode(e: unknown, code: string): boolean {
  return e instanceof QuaysideError && e.code === code;
}

export const notFound = (message: string) => new QuaysideError('not_found', message);
export const conflict = (message: string) => new QuaysideError('conflict', message);
