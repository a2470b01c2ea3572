import type { Delivery } from '../protocol';

/** A pull held until a message is ready or its wait ends (long-poll). */
export interface Waiter {
  queueId: number;
  max: number;
  leaseMs: number;
  /** On the engine's clock; a real timer also ends the wait, so it never outlives real time. */
  deadline: number;
  resolve: (messages: Delivery[]) => void;
  done: boolean;
  cleanup: () => void;
}

/** Held pulls per queue, oldest first. Woken by commits that make messages ready; never polls. */
export class Waiters {
  private byQueue = new Map<number, Waiter[]>();

  add(w: Waiter): void {
    const list = this.byQueue.get(w.queueId);
    if (list) list.push(w);
    else this.byQueue.set(w.queueId, [w]);
  }

  /** Ends a wait with what it got (nothing, on timeout or cancel). */
  finish(w: Waiter, messages: Delivery[]): void {
    if (w.done) return;
    w.done = true;
    w.cleanup();
    const list = this.byQueue.get(w.queueId);
    if (list) {
      const i = list.indexOf(w);
      if (i >= 0) list.splice(i, 1);
      if (list.length === 0) this.byQueue.delete(w.queueId);
    }
    w.resolve(messages);
  }

  waiting(queueId: number): Waiter[] {
    return this.byQueue.get(queueId) ?? [];
  }

  has(queueId: number): boolean {
    return this.byQueue.has(queueId);
  }

  nextDeadline(): number | null {
    let t: number | null = null;
    for (const list of this.byQueue.values()) for (const w of list) if (t === null || w.deadline < t) t = w.deadline;
    return t;
  }

  expire(now: number): void {
    for (const list of [...this.byQueue.values()]) for (const w of [...list]) if (w.deadline <= now) this.finish(w, []);
  }

  dropQueue(queueId: number): void {
    for (const w of [...this.waiting(queueId)]) this.finish(w, []);
  }

  all(): Waiter[] {
    return [...this.byQueue.values()].flat();
  }
}
