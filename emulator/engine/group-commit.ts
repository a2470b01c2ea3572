import { QuaysideError } from '../errors';
import type { QueueStore } from '../store/boundary';
import { setImmediate } from '../real-time';

/** SQLite's "disk full" becomes a stable code; nothing of the failed transaction was kept. */
function storageError(e: unknown): unknown {
  const code = (e as { code?: string })?.code;
  if (code === 'SQLITE_FULL') return new QuaysideError('storage_full', 'the disk holding the data directory is full; nothing was written');
  if (code === 'SQLITE_READONLY') return new QuaysideError('storage_full', 'the data directory has become read-only; nothing was written');
  return e;
}

interface Job {
  fn: () => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit: the operations that arrive in the same turn of the event loop run in one SQLite
 * transaction, each inside its own savepoint (a failing one changes nothing and does not spoil
 * the others). Their promises settle only after COMMIT returned, so nothing is answered before
 * it is durable.
 */
export class GroupCommit {
  private jobs: Job[] = [];
  private scheduled = false;
  private idleWaiters: (() => void)[] = [];
  /** Runs inside the transaction before the jobs (what must see the state the last commit left). */
  afterBegin: (() => void) | null = null;
  /** Runs inside the transaction after the jobs (metrics that ride along). */
  beforeCommit: (() => void) | null = null;
  /** Runs after COMMIT with whether it succeeded, before the jobs' promises settle. */
  afterCommit: ((ok: boolean) => void) | null = null;
  closed = false;

  constructor(private readonly store: QueueStore) {}

  run<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new QuaysideError('unavailable', 'the emulator is shut down'));
    return new Promise<T>((resolve, reject) => {
      this.jobs.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  get pending(): number {
    return this.jobs.length;
  }

  /** Resolves when no job is waiting or running. */
  idle(): Promise<void> {
    if (!this.scheduled && this.jobs.length === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Runs everything queued now, synchronously (used at close). */
  flush(): void {
    this.scheduled = false;
    const jobs = this.jobs;
    this.jobs = [];
    if (jobs.length === 0) {
      this.wakeIdle();
      return;
    }
    const results: { ok: boolean; value: unknown }[] = new Array(jobs.length);
    let committed = true;
    let commitError: unknown = null;
    try {
      this.store.transaction(() => {
        this.afterBegin?.();
        for (let i = 0; i < jobs.length; i++) {
          this.store.savepoint();
          try {
            results[i] = { ok: true, value: jobs[i].fn() };
            this.store.releaseSavepoint();
          } catch (e) {
            results[i] = { ok: false, value: storageError(e) };
            this.store.rollbackSavepoint();
          }
        }
        this.beforeCommit?.();
      });
    } catch (e) {
      committed = false;
      commitError = storageError(e);
    }
    this.afterCommit?.(committed);
    for (let i = 0; i < jobs.length; i++) {
      if (!committed) jobs[i].reject(commitError);
      else if (results[i].ok) jobs[i].resolve(results[i].value);
      else jobs[i].reject(results[i].value);
    }
    if (this.jobs.length === 0 && !this.scheduled) this.wakeIdle();
  }

  private wakeIdle(): void {
    const w = this.idleWaiters;
    this.idleWaiters = [];
    for (const r of w) r();
  }
}
