// Checking the push form: shared by the webview (to show errors before sending) and the host
// (which never trusts the webview). Pure functions, no Node, no DOM.

import { formatDuration, parseDuration } from '../core/duration';
import { LIMITS, LONE_SURROGATE, hasLoneSurrogate } from '../../emulator/protocol';
import { MAX_PUSH_COUNT, type PushForm } from './messages';

export interface JsonCheck {
  ok: boolean;
  value?: unknown;
  /** A readable message with the line and column, when not ok. */
  error?: string;
  line?: number;
  column?: number;
}

/** Parse JSON text; on failure say where (line and column) and what, in plain words. */
export function checkJson(text: string): JsonCheck {
  if (text.trim() === '') return { ok: false, error: 'Empty: type a JSON value, e.g. {"hello": "world"}' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    // Engines word (and place) JSON errors differently; find the spot ourselves.
    const found = locateJsonError(text);
    const msg = found?.message ?? (e instanceof Error ? e.message : String(e));
    if (!found) return { ok: false, error: msg };
    const { line, column } = lineColumn(text, found.pos);
    return { ok: false, error: `${msg} (line ${line}, column ${column})`, line, column };
  }
}

/** A strict JSON scanner that reports the first error's position (it does not build values). */
export function locateJsonError(text: string): { pos: number; message: string } | null {
  let i = 0;
  class Bad {
    constructor(readonly pos: number, readonly message: string) {}
  }
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const what = () => (i >= text.length ? 'end of input' : `'${text[i]}'`);
  const fail = (expected: string): never => {
    throw new Bad(i, `Expected ${expected} but found ${what()}`);
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') return void i++;
      for (;;) {
        ws();
        if (text[i] !== '"') fail('a property name in double quotes');
        string();
        ws();
        if (text[i] !== ':') fail("':' after the property name");
        i++;
        value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') return void i++;
        fail("',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') return void i++;
        fail("',' or ']'");
      }
    }
    if (c === '"') return string();
    const lit = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i, i + 400));
    if (lit) {
      i += lit[0].length;
      return;
    }
    fail('a value (object, array, string, number, true, false or null)');
  };
  const string = () => {
    i++;
    while (i < text.length) {
      const ch = text[i];
      if (ch === '"') return void i++;
      if (ch === '\\') {
        const n = text[i + 1];
        if (n === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) throw new Bad(i, 'Bad \\u escape in a string');
          i += 6;
        } else if (n !== undefined && '"\\/bfnrt'.includes(n)) i += 2;
        else throw new Bad(i, 'Bad escape in a string');
      } else if (ch < ' ') throw new Bad(i, 'Control character in a string (use \\n for a new line)');
      else i++;
    }
    throw new Bad(i, 'Unterminated string');
  };
  try {
    value();
    ws();
    if (i < text.length) fail('the end of the JSON (only one value is allowed)');
    return null;
  } catch (e) {
    if (e instanceof Bad) return { pos: e.pos, message: e.message };
    throw e;
  }
}

export function lineColumn(text: string, pos: number): { line: number; column: number } {
  let line = 1;
  let col = 1;
  for (let i = 0; i < pos && i < text.length; i++) {
    if (text[i] === '\n') {
      line++;
      col = 1;
    } else col++;
  }
  return { line, column: col };
}

/** A dedupe key's problem, if it has one (shared with the palette's Push Message). */
export function checkDedupeKey(key: string): string | undefined {
  // Spaces alone look like an empty field, and would quietly dedupe every later push onto the first.
  if (key.trim() === '') return 'Dedupe key is only spaces: type a key, or leave the field empty for none';
  if (key.length > LIMITS.maxKeyChars) return `Dedupe key is too long (${LIMITS.maxKeyChars} characters at most)`;
  return hasLoneSurrogate(key) ? `Dedupe key ${LONE_SURROGATE}` : undefined;
}

/**
 * Attributes as typed, in the panel's Push tab and the palette's "Push with options…" alike: what
 * the protocol takes, a JSON object with any JSON values. Empty text, `{}` and `null` are none.
 */
export function checkAttributes(text: string): { ok: true; value: Record<string, unknown> | undefined } | { ok: false; error: string } {
  if (text.trim() === '') return { ok: true, value: undefined };
  const a = checkJson(text);
  if (!a.ok) return { ok: false, error: a.error ?? 'Not valid JSON' };
  if (a.value === null) return { ok: true, value: undefined };
  if (typeof a.value !== 'object' || Array.isArray(a.value)) return { ok: false, error: 'Attributes must be a JSON object, e.g. {"source": "vscode", "retries": 3}' };
  return { ok: true, value: Object.keys(a.value).length > 0 ? (a.value as Record<string, unknown>) : undefined };
}

export interface PushPlan {
  body: unknown;
  delayMs?: number;
  dedupeKey?: string;
  attributes?: Record<string, unknown>;
  count: number;
}

export type FieldErrors = Partial<Record<keyof PushForm, string>>;

/** A delay past the queue's `maxDelayMs` (the emulator would refuse it), said in seconds as the form asks. */
export function delayProblem(delayMs: number, maxDelayMs: number | undefined): string | undefined {
  if (maxDelayMs === undefined || delayMs <= maxDelayMs) return undefined;
  return `Delay must be at most ${(maxDelayMs / 1000).toLocaleString('en-US')} seconds (${formatDuration(maxDelayMs)}) on this queue`;
}

/**
 * The palette's push delay as typed (empty: none). A bare number must carry a unit: it is seconds
 * in this panel's Push tab and ms on the CLI, and the palette cannot know which was meant.
 */
export function typedDelayProblem(text: string, maxDelayMs: number | undefined): string | undefined {
  if (!text.trim()) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(text)) return `Give a unit: ${text.trim()}s or ${text.trim()}ms`;
  const ms = parseDuration(text);
  if (ms === undefined) return 'A duration such as 30s, 5m, 1h or 1500ms; empty for none';
  return delayProblem(ms, maxDelayMs);
}

/** `maxDelayMs`: the queue's, when known, so a delay it would refuse is caught here. */
export function validatePushForm(form: PushForm, limits: { maxDelayMs?: number } = {}): { ok: true; plan: PushPlan } | { ok: false; errors: FieldErrors } {
  const errors: FieldErrors = {};
  const plan: PushPlan = { body: undefined, count: 1 };

  const body = checkJson(typeof form.body === 'string' ? form.body : '');
  if (!body.ok) errors.body = body.error;
  else plan.body = body.value;

  const delay = (form.delaySeconds ?? '').trim();
  if (delay !== '') {
    // Decimal digits only: Number() would also read 0x10 and 1e3.
    const n = /^\d+(\.\d+)?$/.test(delay) ? Number(delay) : NaN;
    if (!Number.isFinite(n) || n < 0) errors.delaySeconds = 'Delay must be a number of seconds, 0 or more';
    else {
      const ms = Math.round(n * 1000);
      const tooFar = delayProblem(ms, limits.maxDelayMs);
      if (tooFar) errors.delaySeconds = tooFar;
      else if (ms > 0) plan.delayMs = ms;
    }
  }

  // As typed, spaces and all: the emulator matches keys exactly, as the app's own pushes do.
  const key = form.dedupeKey ?? '';
  if (key !== '') {
    const keyError = checkDedupeKey(key);
    if (keyError) errors.dedupeKey = keyError;
    else plan.dedupeKey = key;
  }

  const attrs = checkAttributes(form.attributes ?? '');
  if (!attrs.ok) errors.attributes = attrs.error;
  else if (attrs.value) plan.attributes = attrs.value;

  const count = (form.count ?? '').trim();
  if (count !== '') {
    const n = Number(count);
    if (!Number.isInteger(n) || n < 1 || n > MAX_PUSH_COUNT) errors.count = `Send ×N: a whole number from 1 to ${MAX_PUSH_COUNT}`;
    else plan.count = n;
  }

  if (Object.keys(errors).length > 0) return { ok: false, errors };
  return { ok: true, plan };
}
