import { LIMITS } from '../protocol';
import { realNow } from '../real-time';

/** The engine's time source: the system clock, or a virtual one that tests move by hand. */
export interface Clock {
  readonly mode: 'system' | 'virtual';
  now(): number;
}

export class SystemClock implements Clock {
  readonly mode = 'system' as const;
  now(): number {
    return realNow();
  }
}

/** Starts at `start` (default: the real time at creation) and moves only when the engine advances it. */
export class VirtualClock implements Clock {
  readonly mode = 'virtual' as const;
  private t: number;
  constructor(start: number = realNow()) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  /** Only the engine moves it, so due work is applied in order on the way. */
  set(t: number): void {
    if (t > this.t) this.t = t;
  }
}

/** What `clock: 'virtual'` (or `{ start }`) asks for: a clock only `advance()` moves. */
export type VirtualClockOption = 'virtual' | { start: number };

/** The handle a virtual clock gives tests (startEmulator, createMemoryQueues). */
export interface VirtualClockControl {
  /** Epoch ms. */
  now(): number;
  /** Moves time on; resolves once all work that fell due was applied and its events were sent. */
  advance(ms: number): Promise<number>;
}

/** What is wrong with a clock option (`'system'`, `'virtual'`, `{ start: epoch ms }`), or null when nothing is. */
export function clockOptionProblem(c: unknown): string | null {
  if (c === undefined || c === 'system' || c === 'virtual') return null;
  const start = typeof c === 'object' && c !== null && Object.keys(c).every((k) => k === 'start') ? (c as { start?: unknown }).start : undefined;
  if (typeof start === 'number' && Number.isFinite(start)) {
    // An instant the engine can move on from: whole ms (leases and steps are), and within a Date's range.
    if (Number.isInteger(start) && start >= 0 && start <= LIMITS.maxEpochMs) return null;
    return `clock.start must be whole epoch ms from 0 (1970-01-01) to ${LIMITS.maxEpochMs} (the last instant a date can hold), got ${start}`;
  }
  return `clock must be "system", "virtual" or { start: <epoch ms> }, got ${JSON.stringify(c) ?? String(c)}`;
}

/**
 * The clock an option asks for (startEmulator, createMemoryQueues). A virtual one starts at
 * `start`, or now, but never before `notBefore`: the time a virtual clock had reached on the same
 * data directory (an advance may have taken it past now), so that stored times never run backwards.
 */
export function clockFor(option: 'system' | VirtualClockOption | undefined, notBefore: number | null = null): Clock {
  if (option !== 'virtual' && (typeof option !== 'object' || option === null)) return new SystemClock();
  const asked = typeof option === 'object' ? option.start : realNow();
  return new VirtualClock(notBefore !== null && Number.isFinite(notBefore) ? Math.max(asked, notBefore) : asked);
}
