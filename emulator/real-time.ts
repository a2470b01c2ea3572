// The timers and the wall clock as Node gave them when Quayside was loaded.
//
// An app's tests often fake the globals afterwards (jest.useFakeTimers(), vi.useFakeTimers(),
// node:test's mock.timers) to drive their own code's time. The emulator and the clients run in that
// same process, and their commits, answers, leases and timeouts must not stop with the test's fake
// clock: a group commit waiting on a faked setImmediate never ran, and the emulator stayed wedged
// even after the test restored real timers. So every timer of the engine, the server and the
// clients comes from here, captured at load. Quayside's own time for tests is its virtual clock.
import * as timers from 'node:timers';
import { runInNewContext } from 'node:vm';

/**
 * The original behind a function that @sinonjs/fake-timers installed (jest's and vitest's fake
 * timers): it marks each with its `clock`, which keeps the original as `_<name>`. So a Quayside
 * loaded while they are on (jest's enableGlobally, a jest.resetModules() after useFakeTimers())
 * still takes the real ones. Anything else is taken as it is.
 */
function unfaked<T>(fn: T, name: string): T {
  const clock = (fn as { clock?: Record<string, unknown> } | null | undefined)?.clock;
  const original = clock && typeof clock === 'object' ? clock[`_${name}`] : undefined;
  return typeof original === 'function' ? (original as T) : fn;
}

// Values, not re-exports: `timers.setTimeout` read at each call would see node:test's mock.
export const setTimeout = unfaked(timers.setTimeout, 'setTimeout');
export const clearTimeout = unfaked(timers.clearTimeout, 'clearTimeout');
export const setInterval = unfaked(timers.setInterval, 'setInterval');
export const clearInterval = unfaked(timers.clearInterval, 'clearInterval');
export const setImmediate = unfaked(timers.setImmediate, 'setImmediate');
export const nextTick = unfaked(process.nextTick, 'nextTick');
export const queueMicrotask = unfaked(globalThis.queueMicrotask, 'queueMicrotask');
/**
 * The wall clock, from a realm of its own: a faked Date (jest.setSystemTime, vi.setSystemTime,
 * mockdate, node:test's Date mock), on before Quayside loaded or after, is the app's time, not the
 * emulator's. (A fresh context costs about a millisecond, once.)
 */
export const realNow: () => number = runInNewContext('Date.now') as () => number;
