import { invalid } from '../errors';
import { LIMITS, LONE_SURROGATE, hasLoneSurrogate, lossyNullAt, lossyNullMessage, nameProblem } from '../protocol';

// Argument checks shared by every operation: each names the field and what was wrong.

export function obj(v: unknown, name: string): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name} must be an object`);
  return v as Record<string, unknown>;
}

/** A non-empty string of at most `max` UTF-16 units, as it came (see `str` for what is stored as is). */
export function anyText(v: unknown, name: string, max = 256): string {
  if (typeof v !== 'string') throw invalid(`${name} must be a string, got ${typeof v}`);
  if (v.length === 0) throw invalid(`${name} must not be empty`);
  if (v.length > max) throw invalid(`${name} must be at most ${max} characters`);
  return v;
}

/** A string that is kept and compared as it is: it must also be text SQLite can store unchanged. */
export function str(v: unknown, name: string, max = 256): string {
  const s = anyText(v, name, max);
  if (hasLoneSurrogate(s)) throw invalid(`${name} ${LONE_SURROGATE}`);
  return s;
}

export function optStr(v: unknown, name: string, max = 256): string | undefined {
  return v === undefined || v === null ? undefined : str(v, name, max);
}

/** A whole number in [min, max]; NaN, Infinity, fractions and other types are refused. */
export function int(v: unknown, name: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`${name} must be a finite number, got ${describe(v)}`);
  if (!Number.isInteger(v)) throw invalid(`${name} must be a whole number, got ${v}`);
  if (v < min) throw invalid(`${name} must be at least ${min}, got ${v}`);
  if (v > max) throw invalid(`${name} must be at most ${max}, got ${v}`);
  return v;
}

export function optInt(v: unknown, name: string, min: number, max: number): number | undefined {
  return v === undefined || v === null ? undefined : int(v, name, min, max);
}

export function bool(v: unknown, name: string): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(`${name} must be true or false`);
  return v;
}

export function describe(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (v === null) return 'null';
  if (typeof v === 'string') return `"${v.length > 40 ? v.slice(0, 40) + '…' : v}"`;
  return typeof v;
}

/** Namespace and queue names: any text (quotes, unicode, SQL fragments are just names) within bounds. */
export function name(v: unknown, what: string): string {
  const s = anyText(v, what, LIMITS.maxNameChars);
  const problem = nameProblem(s); // control characters and lone surrogates
  if (problem) throw invalid(`${what} ${problem}`);
  return s;
}

/** JSON text of a body, refusing what JSON cannot carry. */
export function serialise(v: unknown, what: string): string {
  if (v === undefined) throw invalid(`${what} is missing`);
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch (e) {
    throw invalid(`${what} is not JSON-serialisable: ${(e as Error).message}`);
  }
  if (text === undefined) throw invalid(`${what} is not a JSON value`);
  // NaN, Infinity and holes like [undefined] come out as null (only from callers in this process:
  // JSON.parse never makes them). Looked for only when the text has a null, so a plain body pays nothing.
  if (text.includes('null')) {
    const found = lossyNullAt(v);
    if (found !== null) throw invalid(lossyNullMessage(`${what}${found.path}`, found));
  }
  return text;
}

export function optRecord(v: unknown, what: string): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${what} must be an object`);
  return v as Record<string, unknown>;
}
