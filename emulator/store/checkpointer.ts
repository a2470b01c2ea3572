import { Worker } from 'node:worker_threads';

/**
 * Copies the WAL back into the database from a worker thread, while the main thread goes on
 * committing.
 *
 * A checkpoint is an fsync of the WAL and one of the database file after the copy, and an fsync
 * costs what has been written since the last one: SQLite's own checkpoint every 5,000 pages held
 * the event loop for 25–40 ms (every ~1,500 sequential pushes, every ~300 batches of 100). Here a
 * second connection, in its own thread, runs `PRAGMA wal_checkpoint(PASSIVE)` (which never blocks
 * the writer) at most every `minIntervalMs` while commits come in. When the main connection's
 * backstop checkpoint or its idle one runs, nearly everything is copied and synced already, so
 * it costs about a millisecond. It still runs on the main connection, because only a checkpoint
 * that catches up with the last commit lets the next write start the WAL file over.
 *
 * Main and worker talk through a shared Int32Array, so asking costs no message and no event.
 */

// Slots of the shared array.
const STATE = 0; // IDLE | ASKED | STOP
const RUNS = 1; // checkpoints finished
const CLOSED = 2; // 1 once the worker's connection is closed
const IDLE = 0;
const ASKED = 1;
const STOP = 2;

// The worker: one synchronous loop, asleep in Atomics.wait until asked.
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const s = new Int32Array(workerData.shared);
let db = null;
for (;;) {
  Atomics.wait(s, ${STATE}, ${IDLE});
  if (Atomics.load(s, ${STATE}) === ${STOP}) break;
  try {
    if (!db) {
      db = new Database(workerData.file, { fileMustExist: true, timeout: 100 });
      db.pragma('synchronous = NORMAL');
    }
    db.pragma('wal_checkpoint(PASSIVE)');
    Atomics.add(s, ${RUNS}, 1);
  } catch {
    // Busy or an I/O error: the main connection's own checkpoint still runs.
  }
  if (Atomics.compareExchange(s, ${STATE}, ${ASKED}, ${IDLE}) === ${STOP}) break;
  Atomics.notify(s, ${STATE});
}
try { if (db) db.close(); } catch {}
Atomics.store(s, ${CLOSED}, 1);
Atomics.notify(s, ${CLOSED});
`;

export interface CheckpointerOptions {
  /** Commits between two asks, at least. */
  minCommits?: number;
  /** Milliseconds between two asks, at least. */
  minIntervalMs?: number;
}

export class BackgroundCheckpointer {
  private readonly shared = new Int32Array(new SharedArrayBuffer(3 * 4));
  private worker: Worker | null = null;
  private failed = false;
  private closed = false;
  private commits = 0;
  private lastAsk = 0;
  private readonly minCommits: number;
  private readonly minIntervalMs: number;

  constructor(
    private readonly file: string,
    private readonly driver: string,
    opts: CheckpointerOptions = {},
  ) {
    this.minCommits = opts.minCommits ?? 16;
    this.minIntervalMs = opts.minIntervalMs ?? 100;
  }

  /** Checkpoints the worker has finished. */
  get runs(): number {
    return Atomics.load(this.shared, RUNS);
  }

  /** Whether the worker thread was started (it starts at the first ask). */
  get started(): boolean {
    return this.worker !== null;
  }

  /** Called after each commit of the main connection; asks for a checkpoint now and then. */
  afterCommit(): void {
    if (++this.commits < this.minCommits || this.closed || this.failed) return;
    const t = performance.now();
    if (t - this.lastAsk < this.minIntervalMs) return;
    // One at a time: if the last is still running, the next commit asks again.
    if (Atomics.compareExchange(this.shared, STATE, IDLE, ASKED) !== IDLE) return;
    this.commits = 0;
    this.lastAsk = t;
    if (!this.worker) this.start();
    Atomics.notify(this.shared, STATE);
  }

  private start(): void {
    try {
      const w = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { shared: this.shared.buffer, file: this.file, driver: this.driver },
        resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 2 },
        stdout: true,
        stderr: true,
      });
      w.unref();
      // A worker that cannot run (no threads left, the driver fails to load) leaves checkpoints
      // to the main connection, as before.
      const fail = () => {
        this.failed = true;
        Atomics.store(this.shared, CLOSED, 1);
        Atomics.store(this.shared, STATE, IDLE);
      };
      w.on('error', fail);
      w.on('exit', () => {
        if (!this.closed) fail();
      });
      this.worker = w;
    } catch {
      this.failed = true;
      Atomics.store(this.shared, STATE, IDLE);
    }
  }

  /**
   * Stops the worker and waits (at most `timeoutMs`) until its connection is closed, so the main
   * connection closes last and SQLite folds the WAL into the database as it did without a worker.
   */
  close(timeoutMs = 10_000): void {
    if (this.closed) return;
    this.closed = true;
    const w = this.worker;
    if (!w || this.failed) {
      if (w) void w.terminate();
      return;
    }
    const deadline = performance.now() + timeoutMs;
    // Idle, the worker wakes and stops; asked or running, it stops when the checkpoint ends.
    Atomics.store(this.shared, STATE, STOP);
    Atomics.notify(this.shared, STATE);
    while (Atomics.load(this.shared, CLOSED) === 0) {
      const left = deadline - performance.now();
      if (left <= 0 || Atomics.wait(this.shared, CLOSED, 0, left) === 'timed-out') break;
    }
    void w.terminate();
  }
}
