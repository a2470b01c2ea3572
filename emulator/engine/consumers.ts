import type { ConsumerSettings, Delivery } from '../protocol';

/** One attached push consumer (a `runConsumer` process) and its delivery callback. */
export interface Attachment {
  id: string;
  queueId: number;
  /** The app it runs: it gets batches only while that app is the queue's consumer (null: any app). */
  appId: string | null;
  deliver: (batch: string, messages: Delivery[]) => void;
  /** Told, after the commit, that its queue was deleted and it with it (given its own id). */
  dropped?: (id: string) => void;
}

interface InFlight {
  attachment: string;
  /** The batch's lease end: a consumer that never reports back frees its slot then. */
  until: number;
}

interface QueueConsumers {
  attachments: Attachment[];
  next: number;
  inflight: Map<string, InFlight>;
  /** When the oldest ready message will have waited maxBatchTimeoutMs. */
  batchDueAt: number | null;
}

/** A deleted queue's consumers, held until its transaction's outcome is known. */
export interface DroppedConsumers {
  queueId: number;
  state: QueueConsumers;
}

/** Bookkeeping for push delivery: who is attached, which batches are in flight, when a partial batch is due. */
export class ConsumerHub {
  private byQueue = new Map<number, QueueConsumers>();
  private seq = 0;

  attach(queueId: number, appId: string | null, deliver: Attachment['deliver'], dropped?: Attachment['dropped']): Attachment {
    const a: Attachment = { id: `c_${++this.seq}_${Math.random().toString(36).slice(2, 8)}`, queueId, appId, deliver, dropped };
    let q = this.byQueue.get(queueId);
    if (!q) {
      q = { attachments: [], next: 0, inflight: new Map(), batchDueAt: null };
      this.byQueue.set(queueId, q);
    }
    q.attachments.push(a);
    return a;
  }

  /**
   * Takes an attachment out of the rotation. A run that stops (`keepInFlight`) still has its batches
   * in hand: they hold their slots until it reports them done or their lease ends, so another run
   * cannot go past maxConcurrency meanwhile. A connection that is gone has nothing in hand.
   */
  detach(id: string, keepInFlight: boolean): number | null {
    let found: number | null = null;
    for (const [queueId, q] of this.byQueue) {
      const i = q.attachments.findIndex((a) => a.id === id);
      if (i >= 0) {
        q.attachments.splice(i, 1);
        found = queueId;
      }
      // Also for a run detached earlier whose batches were still in hand.
      if (!keepInFlight) {
        for (const [b, f] of q.inflight) {
          if (f.attachment !== id) continue;
          q.inflight.delete(b);
          found ??= queueId;
        }
      }
      this.forgetIfIdle(queueId, q);
    }
    return found;
  }

  private forgetIfIdle(queueId: number, q: QueueConsumers): void {
    if (q.attachments.length === 0 && q.inflight.size === 0) this.byQueue.delete(queueId);
  }

  /**
   * Forgets a deleted queue's consumers. What is returned tells them once the delete commits, or
   * puts them back (`restore`) if it did not.
   */
  dropQueue(queueId: number): DroppedConsumers | null {
    const state = this.byQueue.get(queueId);
    this.byQueue.delete(queueId);
    return state ? { queueId, state } : null;
  }

  /** Undoes a dropQueue whose transaction did not commit: the queue is still there, and so are they. */
  restore(d: DroppedConsumers): void {
    if (!this.byQueue.has(d.queueId)) this.byQueue.set(d.queueId, d.state);
  }

  queues(): number[] {
    return [...this.byQueue.keys()];
  }

  has(queueId: number): boolean {
    return this.byQueue.has(queueId);
  }

  /** Frees a batch's slot; returns its queue, or null for an unknown batch. */
  done(attachmentId: string, batch: string): number | null {
    for (const [queueId, q] of this.byQueue) {
      const f = q.inflight.get(batch);
      if (f && f.attachment === attachmentId) {
        q.inflight.delete(batch);
        this.forgetIfIdle(queueId, q);
        return queueId;
      }
    }
    return null;
  }

  /** Batches that may start now: none while no attachment runs the queue's consumer app. */
  freeSlots(queueId: number, settings: ConsumerSettings): number {
    const q = this.byQueue.get(queueId);
    if (!q || !q.attachments.some((a) => runs(a, settings.appId))) return 0;
    return Math.max(0, settings.maxConcurrency - q.inflight.size);
  }

  /** Picks the next attachment that runs `appId`, round-robin, and records the batch as in flight. */
  start(queueId: number, appId: string, until: number): { attachment: Attachment; batch: string } | null {
    const q = this.byQueue.get(queueId);
    if (!q) return null;
    let attachment: Attachment | undefined;
    for (let i = 0; i < q.attachments.length && !attachment; i++) {
      const a = q.attachments[q.next++ % q.attachments.length];
      if (runs(a, appId)) attachment = a;
    }
    if (!attachment) return null;
    const batch = `b_${++this.seq}`;
    q.inflight.set(batch, { attachment: attachment.id, until });
    return { attachment, batch };
  }

  setBatchDue(queueId: number, at: number | null): void {
    const q = this.byQueue.get(queueId);
    if (q) q.batchDueAt = at;
  }

  /** Frees slots whose lease ended; returns the queues that got a slot back. */
  expire(now: number): number[] {
    const freed: number[] = [];
    for (const [queueId, q] of this.byQueue) {
      for (const [b, f] of q.inflight) if (f.until <= now) { q.inflight.delete(b); freed.push(queueId); }
      this.forgetIfIdle(queueId, q);
    }
    return freed;
  }

  nextDue(): number | null {
    let t: number | null = null;
    for (const q of this.byQueue.values()) {
      if (q.batchDueAt !== null && (t === null || q.batchDueAt < t)) t = q.batchDueAt;
      for (const f of q.inflight.values()) if (t === null || f.until < t) t = f.until;
    }
    return t;
  }
}

function runs(a: Attachment, appId: string): boolean {
  return a.appId === null || a.appId === appId;
}
