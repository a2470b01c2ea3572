import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { tempDir } from '../helpers';
import { DB_FILE, LOCK_FILE, Store, type NewMessage, type StoreOpenError } from '../../emulator/store/store';

// The store holds each queue's counts in memory and writes them to the queues table lazily
// (store.ts, `queues`). These tests pin what that must never break: rollbacks undo the counts,
// a clean close leaves the table exact, and a file whose table is behind is counted again at open.

const NOW = Date.UTC(2026, 0, 5, 10, 0, 0);

function msg(body: string): NewMessage {
  return { body, size: Buffer.byteLength(body), visibleAt: NOW, expiresAt: null, extra: null, dedupeKey: null, dedupeUntil: 0 };
}

function counts(store: Store, id: number) {
  const q = store.queueById(id)!;
  return [q.n_waiting, q.n_leased, q.n_dead, q.live_bytes];
}

/** What the queues table and meta say, read by another connection. */
function onDisk(dir: string) {
  const db = new Database(path.join(dir, DB_FILE), { readonly: true });
  try {
    const rows = db.prepare('SELECT id, n_waiting, n_leased, n_dead, live_bytes FROM queues ORDER BY id').all() as { id: number; n_waiting: number; n_leased: number; n_dead: number; live_bytes: number }[];
    const flag = (db.prepare("SELECT value FROM meta WHERE key = 'counts_dirty'").get() as { value: string } | undefined)?.value ?? null;
    return { rows: rows.map((r) => [r.id, r.n_waiting, r.n_leased, r.n_dead, r.live_bytes]), flag };
  } finally {
    db.close();
  }
}

describe('store: queue counts', () => {
  const dirs: string[] = [];
  const stores: Store[] = [];
  function open(dir: string | null): Store {
    const s = new Store({ dataDir: dir });
    stores.push(s);
    return s;
  }
  function dir(): string {
    const d = tempDir();
    dirs.push(d);
    return d;
  }
  afterEach(() => {
    for (const s of stores.splice(0)) s.close();
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  it('a rolled-back savepoint or transaction undoes the counts, a created queue and a deleted one', () => {
    const s = open(null);
    const q = s.transaction(() => s.createQueue('q_1', 'ns', 'a', 'cache', '{}', null, NOW));
    s.transaction(() => s.enqueue(q.id, [msg('"one"'), msg('"two"')], NOW));
    assert.deepEqual(counts(s, q.id), [2, 0, 0, 10]);
    assert.equal(s.anyWaiting(), true);

    // One operation of a group commit fails after it wrote: its savepoint is rolled back, the group commits.
    s.transaction(() => {
      s.savepoint();
      s.claim(q.id, 2, NOW, NOW + 1000, 7);
      s.enqueue(q.id, [msg('"three"')], NOW);
      s.rollbackSavepoint();
      s.savepoint();
      s.claim(q.id, 1, NOW, NOW + 1000, 8);
      s.releaseSavepoint();
    });
    assert.deepEqual(counts(s, q.id), [1, 1, 0, 10]);

    // The whole transaction fails: the counts, a queue made inside it and a queue deleted inside it come back as they were.
    const other = s.transaction(() => s.createQueue('q_2', 'ns', 'b', 'cache', '{}', null, NOW));
    assert.throws(() =>
      s.transaction(() => {
        s.enqueue(q.id, [msg('"four"')], NOW);
        s.deleteQueue(other.id);
        s.createQueue('q_3', 'ns', 'c', 'cache', '{}', null, NOW);
        s.deleteQueue(q.id);
        throw new Error('boom');
      }),
    );
    assert.deepEqual(counts(s, q.id), [1, 1, 0, 10]);
    assert.equal(s.queueByName('ns', 'a')?.id, q.id);
    assert.equal(s.queueByName('ns', 'b')?.id, other.id);
    assert.equal(s.queueByName('ns', 'c'), undefined);
    assert.deepEqual(s.listQueues('ns').map((r) => [r.name, r.n_waiting, r.n_leased]), [['a', 1, 1], ['b', 0, 0]]);

    // Deleting the only queue with waiting messages leaves none waiting.
    s.transaction(() => s.deleteQueue(q.id));
    assert.equal(s.anyWaiting(), false);
    assert.equal(s.queueById(q.id), undefined);
  });

  it('message ids given by a rolled-back write are given again, and never twice across a restart (blocks of 1,000 in meta)', () => {
    const d = dir();
    let s = open(d);
    const q = s.transaction(() => s.createQueue('q_1', 'ns', 'a', 'cache', '{}', null, NOW));
    assert.deepEqual(s.transaction(() => s.enqueue(q.id, [msg('1'), msg('2')], NOW)), [1, 2]);
    s.transaction(() => {
      s.savepoint();
      s.enqueue(q.id, [msg('3')], NOW);
      s.rollbackSavepoint();
    });
    assert.throws(() =>
      s.transaction(() => {
        s.enqueue(q.id, [msg('3')], NOW);
        throw new Error('boom');
      }),
    );
    assert.deepEqual(s.transaction(() => s.enqueue(q.id, [msg('3')], NOW)), [3], 'no gap after refused writes');
    // Crossing a block: the reservation made by a rolled-back write is rolled back with it.
    const many = Array.from({ length: 997 }, (_, i) => msg(String(i)));
    assert.throws(() =>
      s.transaction(() => {
        s.enqueue(q.id, [...many, msg('x')], NOW);
        throw new Error('boom');
      }),
    );
    const ids = s.transaction(() => s.enqueue(q.id, [...many, msg('x')], NOW));
    assert.deepEqual([ids[0], ids[ids.length - 1]], [4, 1001]);
    s.close();
    // A restarted store starts above every id handed out, and above the reserved block.
    s = open(d);
    const [next] = s.transaction(() => s.enqueue(q.id, [msg('after')], NOW));
    assert.ok(next > 1001, `id ${next} after a restart`);
  });

  it('rows written by multi-row inserts roll back with their savepoint, and the counts with them; a claim takes the oldest visible first', () => {
    const s = open(null);
    const q = s.transaction(() => s.createQueue('q_1', 'ns', 'a', 'cache', '{}', null, NOW));
    const batch = (n: number, tag: string) => Array.from({ length: n }, (_, i) => msg(`"${tag}${i}"`));
    s.transaction(() => {
      s.savepoint();
      s.enqueue(q.id, batch(60, 'gone'), NOW); // two 25-row statements and ten single rows
      s.rollbackSavepoint();
      s.savepoint();
      s.enqueue(q.id, batch(30, 'kept'), NOW);
      s.releaseSavepoint();
    });
    const keptBytes = batch(30, 'kept').reduce((n, m) => n + m.size, 0);
    assert.deepEqual(counts(s, q.id), [30, 0, 0, keptBytes]);
    assert.equal(s.peekCount(q.id, ['ready'], NOW, null), 30);
    // Later messages visible earlier are claimed first; equal times go by id.
    s.transaction(() => s.enqueue(q.id, [{ ...msg('"early"'), visibleAt: NOW - 5 }], NOW));
    const got = s.transaction(() => s.claim(q.id, 3, NOW, NOW + 1000, 9));
    assert.deepEqual(got.map((r) => r.body), ['"early"', '"kept0"', '"kept1"']);
    assert.deepEqual(got.map((r) => [r.state, r.attempts, r.lease_until, r.lease_token]), got.map(() => [1, 1, NOW + 1000, 9]));
    assert.deepEqual(counts(s, q.id), [28, 3, 0, keptBytes + 7]);
  });

  it('a commit marks the table behind in the same transaction; an idle flush and a clean close make it exact', () => {
    const d = dir();
    const s = open(d);
    const q = s.transaction(() => s.createQueue('q_1', 'ns', 'a', 'cache', '{}', null, NOW));
    s.transaction(() => s.enqueue(q.id, [msg('"one"'), msg('"two"'), msg('"three"')], NOW));
    assert.deepEqual(onDisk(d), { rows: [[q.id, 0, 0, 0, 0]], flag: '1' });

    s.checkpointIdle();
    assert.deepEqual(onDisk(d), { rows: [[q.id, 3, 0, 0, 17]], flag: '0' });

    s.transaction(() => s.claim(q.id, 2, NOW, NOW + 1000, 1));
    assert.equal(onDisk(d).flag, '1');
    s.close();
    assert.deepEqual(onDisk(d), { rows: [[q.id, 1, 2, 0, 17]], flag: '0' });

    const again = open(d);
    assert.deepEqual(counts(again, q.id), [1, 2, 0, 17]);
  });

  it('a file left with its table behind (a kill -9) is counted again at open', () => {
    const d = dir();
    const s = open(d);
    const q = s.transaction(() => s.createQueue('q_1', 'ns', 'a', 'cache', '{}', null, NOW));
    const empty = s.transaction(() => s.createQueue('q_2', 'ns', 'b', 'cache', '{}', null, NOW));
    s.checkpointIdle();
    s.transaction(() => s.enqueue(q.id, [msg('"1"'), msg('"22"'), msg('"333"'), msg('"4444"')], NOW));
    const leased = s.transaction(() => s.claim(q.id, 2, NOW, NOW + 1000, 1));
    s.transaction(() => s.kill({ ...leased[0], state: leased[0].state }, NOW, 'test', null, NOW + 1000));
    assert.deepEqual(counts(s, q.id), [2, 1, 1, 15]);
    // What a kill -9 now would leave: the table still says empty, and the flag says so.
    assert.deepEqual(onDisk(d), { rows: [[q.id, 0, 0, 0, 0], [empty.id, 0, 0, 0, 0]], flag: '1' });

    // What a kill -9 now leaves is the file and its WAL as they are: a store opened on a copy of
    // them (as after a restart) counts the messages again.
    const copy = dir();
    for (const f of [DB_FILE, `${DB_FILE}-wal`]) fs.copyFileSync(path.join(d, f), path.join(copy, f));
    assert.deepEqual(onDisk(copy).flag, '1');
    const after = open(copy);
    assert.deepEqual(counts(after, q.id), [2, 1, 1, 15]);
    assert.deepEqual(counts(after, empty.id), [0, 0, 0, 0]);
    assert.deepEqual(onDisk(copy), { rows: [[q.id, 2, 1, 1, 15], [empty.id, 0, 0, 0, 0]], flag: '0' });
  });

  it('one store per data directory: a second one is refused while the first is open, and may open after it closed', () => {
    const d = dir();
    const first = open(d);
    first.transaction(() => first.createQueue('q_1', 'ns', 'a', 'cache', '{}', null, NOW));
    const before = fs.readdirSync(d).sort();
    assert.throws(() => new Store({ dataDir: d }), (e: StoreOpenError) => e.name === 'StoreOpenError' && e.problem === 'in_use' && /in use by another store in this process/.test(e.message));
    assert.deepEqual(fs.readdirSync(d).sort(), before);
    assert.equal(fs.readFileSync(path.join(d, LOCK_FILE), 'utf8').trim(), String(process.pid));
    first.close();
    assert.equal(fs.existsSync(path.join(d, LOCK_FILE)), false);
    const second = open(d);
    assert.equal(second.queueByName('ns', 'a')?.pub_id, 'q_1');
  });

  it('one data directory reached by two paths (a symlink, a bind mount) is still one: the second store is refused', function () {
    const d = dir();
    const link = path.join(dir(), 'link');
    fs.symlinkSync(d, link, 'dir');
    const bound = dir();
    // A bind mount needs root (CI has it); where it is refused, the symlink case still runs.
    const mounted = spawnSync('mount', ['--bind', d, bound], { stdio: 'ignore' }).status === 0;
    try {
      const first = open(d);
      const others = mounted ? [link, bound] : [link];
      for (const other of others) {
        assert.throws(() => new Store({ dataDir: other }), (e: StoreOpenError) => e.problem === 'in_use' && /another store in this process/.test(e.message), other);
      }
      // The refused stores did not take the lock away from the first.
      assert.equal(fs.readFileSync(path.join(d, LOCK_FILE), 'utf8').trim(), String(process.pid));
      first.close();
      const second = open(mounted ? bound : link);
      second.close();
    } finally {
      if (mounted) spawnSync('umount', [bound], { stdio: 'ignore' });
    }
    if (!mounted) console.log('      (bind mount not permitted here: only the symlink was checked)');
  });

  it('a lock left by a process that is gone (kill -9) is taken over; one held by a live process is not', () => {
    const d = dir();
    // A pid that has just exited.
    const gone = spawnSync(process.execPath, ['-e', '']).pid!;
    fs.writeFileSync(path.join(d, LOCK_FILE), `${gone}\n`);
    const s = open(d);
    assert.equal(fs.readFileSync(path.join(d, LOCK_FILE), 'utf8').trim(), String(process.pid));
    s.close();
    // The parent of this test process is alive.
    fs.writeFileSync(path.join(d, LOCK_FILE), `${process.ppid}\n`);
    assert.throws(() => new Store({ dataDir: d }), (e: StoreOpenError) => e.problem === 'in_use' && e.message.includes(`pid ${process.ppid}`));
    assert.equal(fs.readFileSync(path.join(d, LOCK_FILE), 'utf8').trim(), String(process.ppid));
  });

  it('a lock held by a zombie (killed, never reaped: a container whose pid 1 reaps nobody) is taken over', async function () {
    if (!fs.existsSync('/proc/self/stat')) this.skip();
    this.timeout(10_000);
    const d = dir();
    // bash starts a child that exits half a second later, then becomes `sleep`, which never reaps
    // it. (A child that exited at once could be reaped by bash before the exec: a flaky zombie.)
    const holder = spawn('bash', ['-c', 'sleep 0.5 & echo $!; exec sleep 20'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const zombie = Number(await new Promise<string>((resolve) => holder.stdout!.once('data', (b: Buffer) => resolve(b.toString().trim()))));
      for (let i = 0; i < 400 && !/\) Z /.test(fs.readFileSync(`/proc/${zombie}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
      assert.match(fs.readFileSync(`/proc/${zombie}/stat`, 'utf8'), /\) Z /, 'the child is a zombie');
      fs.writeFileSync(path.join(d, LOCK_FILE), `${zombie}\n`);
      const s = open(d);
      assert.equal(fs.readFileSync(path.join(d, LOCK_FILE), 'utf8').trim(), String(process.pid));
      s.close();
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('two starts that find the same stale lock: the later one\'s take-over leaves the lock the earlier one made since', () => {
    const d = dir();
    const file = path.join(d, LOCK_FILE);
    const takeOver = (Store as unknown as { takeOver(file: string, owner: number): void }).takeOver.bind(Store);
    const gone = spawnSync(process.execPath, ['-e', '']).pid!;
    // Both read the dead pid; the first removed it and wrote its own (here: this test's parent, alive).
    fs.writeFileSync(file, `${process.ppid}\n`);
    takeOver(file, gone); // the second, still acting on what it read
    assert.equal(fs.readFileSync(file, 'utf8').trim(), String(process.ppid), 'the live lock was put back');
    assert.throws(() => new Store({ dataDir: d }), (e: StoreOpenError) => e.problem === 'in_use' && e.message.includes(`pid ${process.ppid}`));
    // What it read is what is there: the stale lock goes, and nothing is left aside.
    fs.writeFileSync(file, `${gone}\n`);
    takeOver(file, gone);
    assert.deepEqual(fs.readdirSync(d).filter((f) => f.startsWith(LOCK_FILE)), []);
    const s = open(d);
    assert.equal(fs.readFileSync(file, 'utf8').trim(), String(process.pid));
    s.close();
  });

  it('a lock path that is a directory is refused as data_dir (not_quayside), and left alone', () => {
    const d = dir();
    fs.mkdirSync(path.join(d, LOCK_FILE));
    assert.throws(() => new Store({ dataDir: d }), (e: StoreOpenError) => e.name === 'StoreOpenError' && e.problem === 'not_quayside' && /quayside\.lock is not a Quayside lock \(not a file\)/.test(e.message));
    assert.ok(fs.statSync(path.join(d, LOCK_FILE)).isDirectory());
  });

  it('a data directory the file system will not create (under /proc) is refused at once, not retried for ever', function () {
    if (!fs.existsSync('/proc/self')) this.skip();
    assert.throws(() => new Store({ dataDir: '/proc/self/quayside-test/data' }), (e: StoreOpenError) => e.name === 'StoreOpenError' && e.problem === 'unwritable');
  });
});
