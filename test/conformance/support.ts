import assert from 'node:assert/strict';
import { startEmulator, type Emulator, type EmulatorOptions } from '../../emulator/emulator';
import { Connection } from '../../emulator/clients/connection';
import { QuaysideError } from '../../emulator/errors';
import type { Transport } from '../../emulator/clients/transport';

export { rng } from '../../scripts/seeded-random';

/**
 * Added to every seed of the model walks: 0 in CI, so a run is repeatable; set
 * QUAYSIDE_TEST_SEED_BASE to walk other seeds (docs/reliability.md, section 5).
 */
export const SEED_BASE = seedBase(process.env.QUAYSIDE_TEST_SEED_BASE);

function seedBase(v: string | undefined): number {
  if (v === undefined || v === '' || v === '0') return 0;
  const n = Number(v);
  // The generator takes the seed as 32 bits: a larger one (or a fraction) would wrap onto CI's seeds.
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1_000_000) throw new Error(`QUAYSIDE_TEST_SEED_BASE must be a whole number from 1 to ${2 ** 31 - 1_000_000}, got "${v}"`);
  return n;
}

/**
 * Each edge a model walk counts must have been reached at least 3 times, so a change to the
 * generator cannot quietly make the walks miss it. On other seeds (SEED_BASE) a rare edge may fall
 * short by chance: that is printed, and the walks' answers are what such a run checks.
 */
export function assertReached(seen: Record<string, number>): void {
  for (const [edge, n] of Object.entries(seen)) {
    if (n >= 3) continue;
    if (SEED_BASE !== 0) console.log(`      (seed base ${SEED_BASE}: the walks reached "${edge}" only ${n} times)`);
    else assert.fail(`the walks reached "${edge}" only ${n} times`);
  }
}

// Shared by the conformance suites: an in-memory emulator on a virtual clock, condition waits
// (for I/O to arrive, never for time to pass: time moves only by clock.advance), and error checks.

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
/** A Monday, 10:00 UTC: 14 hours before midnight. */
export const START = Date.UTC(2026, 0, 5, 10, 0, 0);

export async function startTestEmulator(opts: EmulatorOptions = {}): Promise<Emulator & { clock: NonNullable<Emulator['clock']> }> {
  const emu = await startEmulator({ memory: true, clock: { start: START }, ...opts });
  return emu as Emulator & { clock: NonNullable<Emulator['clock']> };
}

let seq = 0;
/** A fresh name, so tests sharing an emulator never see each other's queues. */
export function fresh(prefix = 'ns'): string {
  return `${prefix}-${++seq}-${Math.random().toString(36).slice(2, 6)}`;
}

/** Pulls the engine holds (private; read only to know that every wait has begun). */
export function heldPulls(emu: { engine: unknown }): number {
  let n = 0;
  for (const list of (emu.engine as { waiters: { byQueue: Map<number, unknown[]> } }).waiters.byQueue.values()) n += list.length;
  return n;
}

/** Waits (on real I/O, polling every few ms) until `cond` holds; fails after `ms` real time. */
export async function until(cond: () => boolean | Promise<boolean>, what = 'condition', ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The QuaysideError a promise rejects with (fails if it resolves or throws something else). */
export async function rejects(p: Promise<unknown> | (() => unknown)): Promise<QuaysideError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof QuaysideError) return e;
    throw e;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

/**
 * One request to the emulator's HTTP API, JSON in and out, with the emulator's token unless another
 * is given (null: no Authorization header). An empty answer body reads as null.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function httpCall(emu: Emulator, method: string, path: string, body?: unknown, token: string | null = emu.token): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const r = await fetch(`${emu.httpUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** A raw protocol connection, for looking at what a face did (audit log, tokens, peeks). */
export function admin(emu: Emulator): Connection {
  return new Connection({ url: emu.url, token: emu.token, client: 'conformance-admin' });
}

/**
 * A transport over `conn` whose requests go through `request` first, so a test can see (or hold,
 * or fail) what a face sends; everything else is the connection's own.
 */
export function through(conn: Connection, request: Transport['request']): Transport {
  return {
    request,
    onEvent: (l) => conn.onEvent(l),
    onReconnect: (l) => conn.onReconnect(l),
    close: () => conn.close(),
    isClosed: () => conn.isClosed(),
    get isOpen() {
      return conn.isOpen;
    },
  };
}

/** A read-only token for one namespace (or all). */
export async function readOnlyToken(emu: Emulator, namespace?: string): Promise<string> {
  const c = admin(emu);
  try {
    return (await c.request('token.create', { access: 'read', namespace: namespace ?? null })).token;
  } finally {
    await c.close();
  }
}

/** The bytes of a JSON string body of exactly n bytes once serialised (quotes included). */
export function bodyOfBytes(n: number): string {
  return 'x'.repeat(n - 2);
}

/**
 * Runs `fn` while collecting unhandled rejections and console.error lines (an app callback's failure
 * is logged there), instead of letting them end the run or fill its output.
 */
export async function watchingFailures<T>(fn: (seen: { unhandled: unknown[]; logged: unknown[][] }) => Promise<T>): Promise<T> {
  const seen = { unhandled: [] as unknown[], logged: [] as unknown[][] };
  const onUnhandled = (e: unknown) => void seen.unhandled.push(e);
  const log = console.error;
  process.on('unhandledRejection', onUnhandled);
  console.error = (...a: unknown[]) => void seen.logged.push(a);
  try {
    return await fn(seen);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    console.error = log;
  }
}
