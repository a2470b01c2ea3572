import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { tempDir } from '../helpers';
import { DB_FILE, Store, type NewMessage } from '../../emulator/store/store';

// The WAL is copied into the database from a worker thread (store/checkpointer.ts). These tests
// watch it through the files: pages reach quayside.db only when a checkpoint copies them, and the
// main connection's own checkpoint cannot have run (it runs at 5,000 WAL pages, or when the engine
// is idle, and there is no engine here).

const NOW = Date.UTC(2026, 0, 5, 10, 0, 0);
const BODY = JSON.stringify({ pad: 'x'.repeat(900) });

function msg(): NewMessage {
  return { body: BODY, size: BODY.length, visibleAt: NOW, expiresAt: null, extra: null, dedupeKey: null, dedupeUntil: 0 };
}

const sizeOf = (f: string) => (fs.existsSync(f) ? fs.statSync(f).size : 0);
const tick = () => new Promise((r) => setTimeout(r, 5));

describe('store: the background checkpoint', () => {
  const dirs: string[] = [];
  const stores: Store[] = [];
  afterEach(() => {
    for (const s of stores.splice(0)) s.close();
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  function open(opts: ConstructorParameters<typeof Store>[0]): Store {
    const s = new Store(opts);
    stores.push(s);
    return s;
  }

  /** Commits one message per transaction until `until()` or 1,200 commits (about 3,600 WAL pages: under the 5,000-page backstop). */
  async function commitUntil(store: Store, queueId: number, until: () => boolean): Promise<number> {
    let n = 0;
    while (n < 1200 && !until()) {
      store.transaction(() => store.enqueue(queueId, [msg()], NOW));
      if (++n % 50 === 0) await tick();
    }
    return n;
  }

  it('copies committed pages into the database file while commits go on, and closes before the main connection', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const store = open({ dataDir: dir, checkpointer: { minCommits: 1, minIntervalMs: 0 } });
    const q = store.createQueue('q_1', 'ns', 'jobs', 'cache', '{}', null, NOW);
    const file = path.join(dir, DB_FILE);
    const before = sizeOf(file);
    const ck = store.checkpointer!;
    assert.ok(ck, 'a data directory gets a checkpointer');
    assert.equal(ck.started, false, 'no thread until the first commit asks');

    const n = await commitUntil(store, q.id, () => ck.runs >= 3 && sizeOf(file) > before + 100_000);
    assert.ok(ck.started);
    assert.ok(ck.runs >= 3, `the worker ran ${ck.runs} checkpoints in ${n} commits`);
    assert.ok(sizeOf(file) > before + 100_000, `quayside.db grew from ${before} to ${sizeOf(file)} bytes: the worker copied pages in`);

    store.close();
    stores.length = 0;
    // The worker's connection closed first, so the main one was the last: SQLite removed the WAL.
    assert.equal(fs.existsSync(`${file}-wal`), false, 'no WAL left after close');
    const db = new Database(file, { readonly: true });
    try {
      assert.equal((db.prepare('SELECT count(*) AS n FROM messages').get() as { n: number }).n, n);
    } finally {
      db.close();
    }
    // The directory is free again.
    const again = open({ dataDir: dir });
    assert.equal(again.queueById(q.id)!.n_waiting, n);
  });

  it('leaves the database file alone without one (checkpointer: false), and an in-memory store has none', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const store = open({ dataDir: dir, checkpointer: false });
    assert.equal(store.checkpointer, null);
    const q = store.createQueue('q_1', 'ns', 'jobs', 'cache', '{}', null, NOW);
    const file = path.join(dir, DB_FILE);
    const before = sizeOf(file);
    await commitUntil(store, q.id, () => false);
    assert.equal(sizeOf(file), before, 'nothing checkpointed the WAL: the pages are all still in it');
    assert.ok(sizeOf(`${file}-wal`) > 1_000_000);
    assert.equal(open({ dataDir: null }).checkpointer, null);
  });

  it('a store closed while the worker is starting or checkpointing still closes cleanly', async () => {
    for (let i = 0; i < 3; i++) {
      const dir = tempDir();
      dirs.push(dir);
      const store = new Store({ dataDir: dir, checkpointer: { minCommits: 1, minIntervalMs: 0 } });
      const q = store.createQueue('q_1', 'ns', 'jobs', 'cache', '{}', null, NOW);
      for (let k = 0; k < 20 * (i + 1); k++) store.transaction(() => store.enqueue(q.id, [msg()], NOW));
      if (i > 0) await commitUntil(store, q.id, () => store.checkpointer!.runs >= i);
      store.close();
      assert.equal(fs.existsSync(path.join(dir, `${DB_FILE}-wal`)), false);
      const again = new Store({ dataDir: dir });
      try {
        assert.ok(again.queueById(q.id)!.n_waiting >= 20);
      } finally {
        again.close();
      }
    }
  });
});
