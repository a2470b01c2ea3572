// Collects work for a short window and runs it once.

export interface Debounced<T> {
  /** Add to the pending batch; the flush runs `waitMs` after the first add (never later than that). */
  add(item: T): void;
  /** Run the pending batch now. */
  flush(): void;
  /** Drop the pending batch. */
  cancel(): void;
  readonly pending: boolean;
}

export interface Timers {
  set: (fn: () => void, ms: number) => unknown;
  clear: (t: unknown) => void;
}

/**
 * How often the tree tells VS Code what changed, at most. VS Code collects a tree's refreshes with
 * a 200 ms debounce that starts again at each one (extHostTreeViews): refreshes closer together
 * than that, as a steady stream of changes gives, are drawn only once the stream stops. So the
 * window must be longer than 200 ms.
 */
export const TREE_REFRESH_MS = 250;

const realTimers: Timers = { set: (fn, ms) => setTimeout(fn, ms), clear: (t) => clearTimeout(t as NodeJS.Timeout) };

export function batchDebounce<T>(waitMs: number, run: (items: T[]) => void, timers: Timers = realTimers): Debounced<T> {
  let items: T[] = [];
  let timer: unknown;
  const flush = () => {
    if (timer !== undefined) timers.clear(timer);
    timer = undefined;
    if (items.length === 0) return;
    const batch = items;
    items = [];
    run(batch);
  };
  return {
    add(item: T) {
      items.push(item);
      if (timer === undefined) timer = timers.set(flush, waitMs);
    },
    flush,
    cancel() {
      if (timer !== undefined) timers.clear(timer);
      timer = undefined;
      items = [];
    },
    get pending() {
      return timer !== undefined;
    },
  };
}
