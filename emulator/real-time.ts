// The timers and the wall clock as Node gave them when Quayside was loaded.
//
// An app's tests often fake the globals afterwards (jest.useFakeTimers(), vi.useFakeTimers(),
// node:test's mock.timers) to drive their own code's time. The emulator and the clients run in that
// same process, and their commits, answers, leases and timeouts must not stop with the test's fake
// clock: a group commit waiting on a faked setImmediate never ran, and the emulator stayed wedged
// even after the test restored real timers. So every timer of the engine, the server and the
// clients comes from here, captured at load. Quayside's own time for tests is its virtual clock.
import * as timers from 'node:timers';

// Values, not re-exports: `timers.setTimeout` read at each call would see node:test's mock.
export const setTimeout = timers.setTimeout;
export const clearTimeout = timers.clearTimeout;
export const setInterval = timers.setInterval;
export const clearInterval = timers.clearInterval;
export const setImmediate = timers.setImmediate;
export const nextTick = process.nextTick;
export const queueMicrotask = globalThis.queueMicrotask;
/** Date.now as it was: a faked Date (jest.setSystemTime) is the app's time, not the emulator's. */
export const realNow: () => number = Date.now;
