// The emulator's time as the UI shows it (the tree and the panel's webview both use this: no Node,
// no VS Code). A virtual clock only moves when it is advanced, so between advances relative times
// must stand still; a system clock runs, offset by the skew seen at the last answer.

export type ClockMode = 'system' | 'virtual';

export class EmulatorClock {
  private mode: ClockMode = 'system';
  private known: number | undefined;
  private seenAt = 0;

  constructor(private readonly local: () => number = Date.now) {}

  get virtual(): boolean {
    return this.mode === 'virtual';
  }

  /** A new emulator (or none): forget what the last one said. */
  setMode(mode: ClockMode | undefined): void {
    this.mode = mode ?? 'system';
    this.known = undefined;
  }

  /** The emulator said its time is `now` (an answer, or a `clock` event after an advance). */
  observe(now: number): void {
    this.known = now;
    this.seenAt = this.local();
  }

  now(): number {
    if (this.known === undefined) return this.local();
    return this.mode === 'virtual' ? this.known : this.local() + (this.known - this.seenAt);
  }
}

/**
 * How long the oldest ready message has waited by `now`, from counts taken at `countsAt` (both
 * the emulator's time): its wait grows until the next change says otherwise (a backlog nobody
 * touches sends no events), and stands still with a virtual clock between advances.
 */
export function oldestWaitAt(c: { ready: number; oldestReadyAgeMs: number }, countsAt: number, now: number): number {
  return c.ready > 0 ? c.oldestReadyAgeMs + Math.max(0, now - countsAt) : 0;
}
