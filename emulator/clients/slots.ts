import type { OpName } from '../protocol';
import { abortError, whenAborted } from './abort';

/** A pull the server may hold (`waitMs > 0`): the ones it counts against its waiting-pull limit. */
export function mayBeHeld(op: OpName, args: unknown): boolean {
  const waitMs = op === 'pull' ? (args as { waitMs?: unknown } | null)?.waitMs : undefined;
  return typeof waitMs === 'number' && waitMs > 0;
}

/**
 * A counted set of slots taken in call order. The connection keeps its waiting pulls within the
 * server's per-connection limit with it: a pull past the limit waits here for one to be answered
 * instead of being refused (`limit_exceeded`), as requests past the in-flight limit wait.
 */
export class Slots {
  private used = 0;
  private readonly queue: Array<{ go: () => void }> = [];

  constructor(private readonly size: number) {}

  /**
   * Takes a slot: at once (undefined) when one is free, so the caller can send in this very turn and
   * keep its call order; else a promise that resolves once one is held, or rejects with the signal's
   * reason, holding none, if it aborts first.
   */
  private acquire(signal?: AbortSignal): Promise<void> | undefined {
    if (this.used < this.size && this.queue.length === 0) {
      this.used++;
      return undefined;
    }
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise((resolve, reject) => {
      const entry = {
        go: () => {
          stopListening?.();
          this.used++;
          resolve();
        },
      };
      const stopListening = signal
        ? whenAborted(signal, () => {
            const i = this.queue.indexOf(entry);
            if (i >= 0) this.queue.splice(i, 1);
            reject(abortError(signal));
          })
        : undefined;
      this.queue.push(entry);
    });
  }

  /**
   * Runs `fn` holding a slot, released when its promise settles. With a slot free, `fn` runs in this
   * very turn (so a request keeps its place among the calls made around it).
   */
  run<T>(signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    const go = (): Promise<T> => {
      let p: Promise<T>;
      try {
        p = fn();
      } catch (e) {
        this.release();
        return Promise.reject(e);
      }
      return p.finally(() => this.release());
    };
    const queued = this.acquire(signal);
    return queued ? queued.then(go) : go();
  }

  private release(): void {
    if (this.used > 0) this.used--;
    if (this.used < this.size) this.queue.shift()?.go();
  }
}
