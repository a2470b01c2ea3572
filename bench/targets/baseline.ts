// The limits of the machine, measured in the same run as everything else:
//  - a bare `ws` echo (server in its own process, like the emulator), sequential and 16 in flight;
//  - bare SQLite inserts through better-sqlite3 (the emulator's own driver): one row per
//    transaction and 100 rows per transaction, WAL, synchronous=NORMAL (what Quayside ships).
import path from 'node:path';
import Database from 'better-sqlite3';
import WebSocket from 'ws';
import { drive, makeBody, makeTmpDir, removeTmpDir, startProc, type Proc, type Sample } from '../lib';

export class WsEcho {
  private proc: Proc | null = null;
  private ws: WebSocket | null = null;
  private pending = new Map<number, () => void>();
  private nextId = 1;

  async start(): Promise<void> {
    this.proc = startProc(process.execPath, [path.join(__dirname, '..', 'servers', 'ws-echo.js')]);
    const line = await this.proc.waitForLine(/^listening \d+/, 10_000);
    const port = Number(line.split(' ')[1]);
    this.ws = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      this.ws!.once('open', () => resolve());
      this.ws!.once('error', reject);
    });
    this.ws.on('message', (data) => {
      // Parse the answer as a client would, then settle the request with that id.
      const frame = JSON.parse(data.toString()) as { id: number };
      const p = this.pending.get(frame.id);
      if (p) {
        this.pending.delete(frame.id);
        p();
      }
    });
  }

  /** One round trip with a push-sized frame. */
  roundTrip(i: number): Promise<void> {
    const id = this.nextId++;
    return new Promise<void>((resolve) => {
      this.pending.set(id, resolve);
      this.ws!.send(JSON.stringify({ id, op: 'push', args: { namespace: 'bench', queue: 'echo', body: makeBody(i) } }));
    });
  }

  run(n: number, inFlight: number): Promise<Sample> {
    return drive(n, inFlight, (i) => this.roundTrip(i), true);
  }

  async stop(): Promise<void> {
    this.ws?.terminate();
    this.ws = null;
    await this.proc?.stop();
    this.proc = null;
  }
}

/** Inserts n ~200-byte rows, `rowsPerTx` per transaction, into a fresh WAL database on disk. */
export function sqliteInserts(n: number, rowsPerTx: number, synchronous: 'NORMAL' | 'FULL' = 'NORMAL'): Sample {
  const dir = makeTmpDir('sqlite');
  const db = new Database(path.join(dir, 'bare.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.exec('CREATE TABLE m (id INTEGER PRIMARY KEY, queue_id INTEGER NOT NULL, visible_at INTEGER NOT NULL, body TEXT NOT NULL)');
    const ins = db.prepare('INSERT INTO m (queue_id, visible_at, body) VALUES (1, ?, ?)');
    const bodies = Array.from({ length: Math.min(n, 1000) }, (_, i) => JSON.stringify(makeBody(i)));
    const tx = db.transaction((from: number, k: number) => {
      for (let j = 0; j < k; j++) ins.run(Date.now(), bodies[(from + j) % bodies.length]);
    });
    const t0 = performance.now();
    for (let i = 0; i < n; i += rowsPerTx) tx(i, Math.min(rowsPerTx, n - i));
    const seconds = (performance.now() - t0) / 1000;
    return { rate: n / seconds, count: n, seconds };
  } finally {
    db.close();
    removeTmpDir(dir);
  }
}
