import type { LagStep } from '../protocol';
import { LAG_STEPS, LAG_STEP_MS, lagStepOf } from '../protocol';
import type { QueueRow, QueueStore } from '../store/boundary';
import type { Clock } from './clock';
import { TIME } from './presets';

const HALF_HOUR = LAG_STEP_MS;
/** How long lag records are kept: the 24 hours the history shows, and a step to spare. */
const KEEP_MS = 25 * TIME.HOUR;
/** How often a queue's lag record may be written while it keeps changing (see unwritten). */
const WRITE_EVERY_MS = 1000;

interface LagSeen {
  start: number;
  depth: number;
  wait: number;
  now: number;
}

interface LagRecord extends LagSeen {
  id: number;
  /** Ids of deleted queues can be taken again; the public id tells whose record it is. */
  pubId: string;
}

const keyOf = (queueId: number, start: number): string => `${queueId}/${start}`;

/**
 * Each queue's depth and lag history (DESIGN.md "Metrics"): per aligned half-hour step, the peak
 * depth and the longest wait of the oldest ready message, kept in the store's `lag` table.
 *
 * It rides on the engine's transactions: `roll` runs first in each, `record` last before the
 * commit, `settle` after it (or after a rollback), so what it writes commits or rolls back with the
 * work it describes. Readings are staged until their transaction commits.
 */
export class LagHistory {
  private seen = new Map<number, LagSeen>();
  /**
   * Lag records not written yet: a queue's row is written at most once a second (of the engine's
   * clock), not in every commit, which saves a page write per commit. What waits here is written
   * when its step ends, when the engine is idle, and at close (a history read merges it without
   * writing); a kill -9 loses at most the last second of the chart, never a message.
   */
  private unwritten = new Map<string, LagRecord>();
  private writtenAt = new Map<number, number>();
  /** Records written in the open transaction: forgotten from `unwritten` only once it commits. */
  private writing: { rec: LagRecord; at: number }[] = [];
  /** Readings taken in the open transaction: they become `seen` / `unwritten` only once it commits. */
  private staged: LagRecord[] = [];
  /** Queues deleted by operations of the open transaction: their bookkeeping goes once it commits. */
  private deleted: { id: number; pubId: string }[] = [];
  /** Depth and wait seen just before a change (a claim) that the after-commit reading would miss. */
  private before = new Map<number, { depth: number; wait: number }>();
  /** The half-hour step the last transaction ran in (see roll). */
  private lastStep: number;
  /** The step the open transaction rolled on from: put back if it does not commit, so a later one closes those steps. */
  private rolledFrom: number | null = null;

  constructor(
    private readonly store: QueueStore,
    private readonly clock: Clock,
  ) {
    // From the last step written before a restart: the steps the emulator was down for are closed
    // by the first transaction with what was waiting then (it waited through them).
    this.lastStep = Math.min(lagStepOf(clock.now()), store.lagLatest() ?? Infinity);
  }

  /** When the step the last transaction ran in ends (due work: queues that hold messages roll on). */
  nextStepAt(): number {
    return this.lastStep + HALF_HOUR;
  }

  /**
   * Runs first in every transaction. When the clock has crossed into a new half-hour step, the
   * steps that ended are closed with each queue as the last commit left it: nothing has changed
   * it since, so that is what waited through them. (Closed later, at the commit, a step would
   * take on what this transaction does in the new one: a queue empty for hours and then pushed
   * to, or whose leases ran out, showed that depth in every step of the quiet hours.) Queues that
   * hold messages are added to `touched`, to get a point in the new step. Returns whether the
   * step changed.
   */
  roll(touched: Set<number>): boolean {
    const now = this.clock.now();
    const step = lagStepOf(now);
    if (step === this.lastStep) return false;
    // The step that ended is the last one seen, not simply the one before now: after a suspended
    // process, a restart or a long jump of the clock, several steps may have gone by.
    const ended = this.lastStep;
    this.lastStep = step;
    this.rolledFrom = ended;
    if (step > ended) {
      const from = Math.max(ended, step - LAG_STEPS * HALF_HOUR);
      for (const q of this.store.listQueues()) {
        if (q.n_waiting === 0) continue;
        for (let s = from; s < step; s += HALF_HOUR) {
          // What the oldest message had waited by the step's last instant.
          const oldest = this.store.oldestReadyAt(q.id, s + HALF_HOUR);
          this.closeStep(q, s, oldest === null ? 0 : Math.max(0, s + HALF_HOUR - oldest), now);
        }
        touched.add(q.id);
      }
    }
    this.store.lagSweep(now - KEEP_MS);
    return true;
  }

  /** A reading just before a change that the after-commit reading would miss (a claim takes the oldest). */
  point(queueId: number, depth: number, wait: number): void {
    const p = this.before.get(queueId);
    this.before.set(queueId, { depth: Math.max(depth, p?.depth ?? 0), wait: Math.max(wait, p?.wait ?? 0) });
  }

  /** Waiting messages are about to leave unclaimed (purge, age limit): what they waited still counts. */
  beforeLeaving(q: QueueRow, now: number): void {
    if (q.n_waiting === 0) return;
    const oldest = this.store.oldestReadyAt(q.id, now);
    this.point(q.id, q.n_waiting, oldest === null ? 0 : Math.max(0, now - oldest));
  }

  /** Runs last before each commit: a reading of every queue the transaction touched. */
  record(touched: ReadonlySet<number>): void {
    const before = this.before;
    this.before = new Map();
    if (touched.size === 0) return;
    const now = this.clock.now();
    const start = lagStepOf(now);
    for (const id of touched) {
      const q = this.store.queueById(id);
      if (!q) continue;
      const oldest = q.n_waiting > 0 ? this.store.oldestReadyAt(id, now) : null;
      const seenBefore = before.get(id);
      const depth = Math.max(q.n_waiting, seenBefore?.depth ?? 0);
      const wait = Math.max(oldest === null ? 0 : Math.max(0, now - oldest), seenBefore?.wait ?? 0);
      const seen = this.seen.get(id);
      if (seen && seen.start === start && seen.depth >= depth && seen.wait >= wait && seen.now === q.n_waiting) continue;
      const same = seen?.start === start;
      const rec = this.reading(q, start, depth, wait);
      this.staged.push(rec);
      // A step that ended is written with the first record of the next one; otherwise at most once a second.
      if (!same || now - (this.writtenAt.get(id) ?? -Infinity) >= WRITE_EVERY_MS) {
        // (A step closed by roll in this transaction may have its last reading among these:
        // its depth at the end is the closing record's, as nothing changed between them.)
        for (const r of this.unwrittenOf(q)) if (r.start !== start) this.write(r, now);
        this.write(rec, now);
      }
    }
  }

  /** A queue deleted in the open transaction: its bookkeeping goes once that commits. */
  queueDeleted(q: QueueRow): void {
    this.deleted.push({ id: q.id, pubId: q.pub_id });
  }

  /** After a commit (ok) or a rollback: what was written is forgotten, what was not stays for the next write. */
  settle(ok: boolean): void {
    if (!ok && this.rolledFrom !== null) this.lastStep = this.rolledFrom;
    this.rolledFrom = null;
    const staged = this.staged;
    const written = this.writing;
    const deleted = this.deleted;
    this.staged = [];
    this.writing = [];
    this.deleted = [];
    if (!ok) return;
    for (const r of staged) {
      this.seen.set(r.id, { start: r.start, depth: r.depth, wait: r.wait, now: r.now });
      this.unwritten.set(keyOf(r.id, r.start), r);
    }
    for (const { rec, at } of written) {
      this.writtenAt.set(rec.id, at);
      // Only if no newer reading replaced it in the meantime.
      if (this.unwritten.get(keyOf(rec.id, rec.start)) === rec) this.unwritten.delete(keyOf(rec.id, rec.start));
    }
    for (const d of deleted) {
      if (this.store.queueById(d.id)?.pub_id === d.pubId) continue; // its delete was rolled back with its savepoint
      this.seen.delete(d.id);
      this.writtenAt.delete(d.id);
      // (a queue made in the same commit may have taken the id: only the deleted one's records go)
      for (const [k, r] of this.unwritten) if (r.pubId === d.pubId) this.unwritten.delete(k);
    }
  }

  /** Writes every unwritten lag record in a transaction of its own (idle, close). */
  flush(): void {
    if (this.unwritten.size === 0) return;
    let ok = false;
    try {
      this.store.transaction(() => {
        const at = this.clock.now();
        for (const r of this.unwritten.values()) if (this.store.queueById(r.id)?.pub_id === r.pubId) this.write(r, at);
      });
      ok = true;
    } finally {
      this.settle(ok);
    }
  }

  /**
   * 48 aligned half-hour steps ending with the current one; a step with no record carries the last
   * depth on. `live`: the queue's depth and oldest ready wait now, which the current step includes.
   */
  history(q: QueueRow, now: number, live: { depth: number; oldestReadyAgeMs: number }): LagStep[] {
    const current = lagStepOf(now);
    const first = current - (LAG_STEPS - 1) * HALF_HOUR;
    const { before, rows } = this.store.lagSince(q.id, first);
    const byStart = new Map(rows.map((r) => [r.start, r]));
    // What waits to be written merges as the upsert will: peaks by max, the depth at the end as it is now.
    for (const u of this.unwrittenOf(q)) {
      if (u.start < first) continue;
      const r = byStart.get(u.start);
      byStart.set(u.start, {
        start: u.start,
        peak_depth: Math.max(r?.peak_depth ?? 0, u.depth),
        max_wait_ms: Math.max(r?.max_wait_ms ?? 0, u.wait),
        end_depth: u.now,
      });
    }
    const out: LagStep[] = [];
    let carry = before ? before.end_depth : 0;
    for (let s = first; s <= current; s += HALF_HOUR) {
      const r = byStart.get(s);
      if (r) {
        out.push({ start: s, peakDepth: r.peak_depth, maxWaitMs: r.max_wait_ms });
        carry = r.end_depth;
      } else {
        out.push({ start: s, peakDepth: s < q.created_at - HALF_HOUR ? 0 : carry, maxWaitMs: 0 });
      }
    }
    const last = out[out.length - 1];
    last.peakDepth = Math.max(last.peakDepth, live.depth);
    last.maxWaitMs = Math.max(last.maxWaitMs, live.oldestReadyAgeMs);
    return out;
  }

  /** The final reading of an ended step, merged with what it holds, written at once (it no longer changes). */
  private closeStep(q: QueueRow, start: number, wait: number, now: number): void {
    const rec = this.reading(q, start, q.n_waiting, wait);
    this.staged.push(rec);
    this.write(rec, now);
  }

  /** A reading for step `start`: its peaks merged with the last one seen if that was the same step. */
  private reading(q: QueueRow, start: number, depth: number, wait: number): LagRecord {
    const seen = this.seen.get(q.id);
    const same = seen?.start === start;
    return { id: q.id, pubId: q.pub_id, start, depth: Math.max(depth, same ? seen!.depth : 0), wait: Math.max(wait, same ? seen!.wait : 0), now: q.n_waiting };
  }

  /** Writes one lag record inside the open transaction; settle forgets it once that commits. */
  private write(r: LagRecord, at: number): void {
    this.store.lagRecord(r.id, r.start, r.depth, r.wait, r.now);
    this.writing.push({ rec: r, at });
  }

  /** Readings of this queue not written yet (they count in its history like written ones). */
  private unwrittenOf(q: QueueRow): LagRecord[] {
    const out: LagRecord[] = [];
    for (const r of this.unwritten.values()) if (r.id === q.id && r.pubId === q.pub_id) out.push(r);
    return out;
  }
}
