import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { startEmulator } from '../../emulator/emulator';
import { Connection } from '../../emulator/clients/connection';
import { QuaysideError } from '../../emulator/errors';
import { Store, StoreOpenError } from '../../emulator/store/store';
import { RawClient, dirDigest, ensureBuilt, isFailure, kill9, rssKb, startChild, startOk, tempDir } from './support';

// Resources and faults: a consumer that never reads its socket (backpressure), and data
// directories that are read-only, full, or hold something that is not a Quayside database.

function mount(args: string[]): string | null {
  try {
    execFileSync('mount', args, { stdio: 'pipe' });
    return null;
  } catch (e) {
    return ((e as { stderr?: Buffer }).stderr?.toString() || (e as Error).message).trim();
  }
}
const umount = (dir: string) => {
  try {
    execFileSync('umount', [dir], { stdio: 'pipe' });
  } catch {
    /* already gone */
  }
};

describe('reliability: resources and faults', function () {
  this.timeout(120_000);
  before(() => ensureBuilt());

  it('a client that never reads its socket does not grow the emulator without bound (backpressure)', async () => {
    const emu = await startOk({ memory: true });
    const hogs: RawClient[] = [];
    try {
      const setup = await RawClient.hello(emu.url, emu.token);
      await setup.ok('queue.create', { namespace: 'bp', queue: 'big', dialect: 'cache' });
      const body = 'z'.repeat(10 * 1024);
      await setup.ok('push.batch', { namespace: 'bp', queue: 'big', messages: Array.from({ length: 100 }, (_, i) => ({ body: { i, body } })) });
      const base = rssKb(emu.pid);
      let peak = base;
      const sampler = setInterval(() => (peak = Math.max(peak, rssKb(emu.pid))), 25);
      const normal = await RawClient.hello(emu.url, emu.token);
      for (let h = 0; h < 2; h++) {
        const hog = await RawClient.hello(emu.url, emu.token);
        await hog.ok('subscribe', {});
        (hog.ws as unknown as { _socket: import('node:net').Socket })._socket.pause();
        hogs.push(hog);
      }
      // Each peek answers about 1 MiB; each hog asks for 6,000 of them (6 GiB of answers), 50 at a time, and reads none.
      let peakHalf = 0;
      for (let round = 0; round < 120; round++) {
        for (const hog of hogs) for (let i = 0; i < 50; i++) hog.sendRaw(`{"id":${round * 50 + i + 10},"op":"peek","args":{"namespace":"bp","queue":"big","limit":100}}`);
        await new Promise((r) => setTimeout(r, 20));
        if (round === 89) peakHalf = peak;
      }
      const latencies: number[] = [];
      try {
        for (let i = 0; i < 40; i++) {
          const t = Date.now();
          // Pushes make change events for the hogs' subscriptions, which are dropped once they lag.
          assert.equal((await normal.request('push', { namespace: 'bp', queue: 'big', body: 'tick' }, 30_000)).ok, true);
          latencies.push(Date.now() - t);
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        clearInterval(sampler);
      }
      const grewMb = (peak - base) / 1024;
      const lateMb = (peak - peakHalf) / 1024;
      console.log(`      RSS ${Math.round(base / 1024)} MiB → ${Math.round(peakHalf / 1024)} MiB after 9 GiB asked → peak ${Math.round(peak / 1024)} MiB after 12 GiB asked (2 clients that read nothing); a normal client's push took at most ${Math.max(...latencies)} ms`);
      // Bounded: it plateaus (about 290 MiB here); the last quarter of the unread requests adds (almost)
      // nothing. How soon the plateau is reached depends on the machine (a CI run reached it only
      // after 5 GiB asked), so the check looks at the last quarter, not the second half.
      assert.ok(lateMb < 64, `the emulator kept growing: ${lateMb.toFixed(0)} MiB more for the last 3,000 unread requests`);
      assert.ok(grewMb < 600, `the emulator grew by ${grewMb.toFixed(0)} MiB for clients that do not read`);
      assert.ok(Math.max(...latencies) < 5000, 'a normal client was starved');
      await normal.close();
      await setup.close();
    } finally {
      for (const h of hogs) h.ws.terminate();
      await kill9(emu);
    }
  });

  it('a data directory holding a file that is not a Quayside database: a clear error, and the file is untouched', async () => {
    const cases: [string, (file: string) => void, RegExp][] = [
      ['a text file', (f) => fs.writeFileSync(f, 'hello, I am notes.txt\n'.repeat(100)), /not a Quayside database/],
      ['another program\'s SQLite', (f) => {
        const db = new Database(f);
        db.exec('CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER); INSERT INTO accounts VALUES (1, 100);');
        db.close();
      }, /another program/],
      ['a damaged Quayside file', (f) => {
        const dir = path.dirname(f);
        const db = new Database(f);
        db.pragma('application_id = 1364804657');
        db.exec('CREATE TABLE t (x); ' + Array.from({ length: 200 }, (_, i) => `INSERT INTO t VALUES (randomblob(1000)); CREATE INDEX i${i} ON t(x);`).join(''));
        db.close();
        const fd = fs.openSync(f, 'r+');
        fs.writeSync(fd, Buffer.alloc(8192, 0xab), 0, 8192, 4096 * 3);
        fs.closeSync(fd);
        void dir;
      }, /damaged|cannot open|malformed/],
      ['a truncated Quayside file', (f) => {
        const db = new Database(f);
        db.pragma('application_id = 1364804657');
        db.exec('CREATE TABLE t (x); ' + Array.from({ length: 40 }, () => 'INSERT INTO t VALUES (randomblob(4000));').join(''));
        db.close();
        fs.truncateSync(f, 50_000);
      }, /damaged|malformed/],
    ];
    for (const [what, make, message] of cases) {
      const dir = tempDir();
      make(path.join(dir, 'quayside.db'));
      const before = dirDigest(dir);
      const r = await startChild({ dataDir: dir });
      assert.ok(isFailure(r), `${what}: it started`);
      assert.equal(r.code, 'data_dir', `${what}: ${r.code} ${r.message}`);
      assert.match(r.message, message, what);
      assert.equal(r.exitCode, 1);
      assert.equal(dirDigest(dir), before, `${what}: the directory was changed`);
      // The in-process API says the same, with the StoreOpenError's problem.
      await assert.rejects(startEmulator({ dataDir: dir }), (e: Error & { problem?: string }) => e.name === 'StoreOpenError' && message.test(e.message));
      assert.equal(dirDigest(dir), before);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('quayside start: a usage error (a missing value, an unknown option) exits 64 before anything listens or locks', async () => {
    for (const [args, what] of [
      [['--config'], /--config needs a value/],
      [['--token'], /--token needs a value/],
      [['--data-dir', 'x'], /unknown option --data-dir for start/],
      [['--memroy'], /unknown option --memroy/],
      [['--memory'], /exclude each other/], // with the --data startChild gives
      [['--data', 'x'], /--data is given more than once/],
    ] as const) {
      const dir = tempDir();
      const r = await startChild({ dataDir: dir, args: [...args] });
      assert.ok(isFailure(r), `${args.join(' ')}: it started`);
      assert.equal(r.code, 'usage', args.join(' '));
      assert.match(r.message, what);
      assert.equal(r.exitCode, 64, args.join(' '));
      assert.deepEqual(fs.readdirSync(dir), [], `${args.join(' ')}: the data directory was touched`);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('quayside start: a config file that is missing or wrong is refused (config, exit 1) before the data directory is opened', async () => {
    const dir = tempDir();
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ cache: [{ namespace: 'app', name: 'emails', visibilitySeconds: -1 }] }));
    const data = path.join(dir, 'data');
    fs.mkdirSync(data);
    for (const file of [path.join(dir, 'missing.json'), bad]) {
      const r = await startChild({ dataDir: data, args: ['--config', file] });
      assert.ok(isFailure(r), `${file}: it started`);
      assert.equal(r.code, 'config');
      assert.equal(r.exitCode, 1);
      assert.deepEqual(fs.readdirSync(data), [], `${file}: the data directory was opened`);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a second emulator on a data directory in use is refused (data_dir), and a lock left by kill -9 is taken over', async () => {
    const dir = tempDir();
    const first = await startOk({ dataDir: dir });
    try {
      const r = await startChild({ dataDir: dir });
      assert.ok(isFailure(r), 'a second emulator started on the same data directory');
      assert.equal(r.code, 'data_dir');
      assert.match(r.message, new RegExp(`in use by another Quayside emulator \\(pid ${first.pid}\\)`));
      assert.equal(r.exitCode, 1);
      await assert.rejects(startEmulator({ dataDir: dir }), (e: Error & { problem?: string }) => e.name === 'StoreOpenError' && e.problem === 'in_use');
    } finally {
      await kill9(first);
    }
    // The lock file is still there, naming a process that is gone: the next start takes it over.
    assert.equal(fs.readFileSync(path.join(dir, 'quayside.lock'), 'utf8').trim(), String(first.pid));
    const next = await startOk({ dataDir: dir });
    await kill9(next);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a quayside.db the user may not write (another owner, mode 444): a clear error, and nothing is left behind (no lock, no -wal or -shm)', async function () {
    // Root writes any file, so the store is opened with this process's effective user set to
    // "nobody" for the moment of the (synchronous) open; nothing else runs in between.
    if (process.getuid?.() !== 0 || !process.seteuid) return this.skip();
    const dir = tempDir();
    const emu = await startEmulator({ dataDir: dir });
    await emu.engine.push({ namespace: 'ro', queue: 'q', body: 1, create: 'cache' });
    await emu.close();
    fs.chmodSync(path.join(dir, 'quayside.db'), 0o444);
    fs.chmodSync(dir, 0o777);
    const before = dirDigest(dir);
    let refused: unknown = null;
    process.seteuid(65534);
    try {
      new Store({ dataDir: dir }).close();
    } catch (e) {
      refused = e;
    } finally {
      process.seteuid(0);
    }
    assert.ok(refused instanceof StoreOpenError, `it opened a database it cannot write (${String(refused)})`);
    assert.equal(refused.problem, 'unwritable');
    assert.match(refused.message, /quayside\.db cannot be read and written \(EACCES\); check its permissions/);
    assert.equal(dirDigest(dir), before, `left behind: ${fs.readdirSync(dir).join(', ')}`);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a data path that is a file, or whose quayside.db is a directory, gives a clear error', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'plain-file');
    fs.writeFileSync(file, 'x');
    const r = await startChild({ dataDir: file });
    assert.ok(isFailure(r));
    assert.equal(r.code, 'data_dir');
    assert.equal(fs.readFileSync(file, 'utf8'), 'x');
    fs.mkdirSync(path.join(dir, 'd', 'quayside.db'), { recursive: true });
    const r2 = await startChild({ dataDir: path.join(dir, 'd') });
    assert.ok(isFailure(r2));
    assert.equal(r2.code, 'data_dir', `${r2.code}: ${r2.message}`);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a read-only data directory (a read-only bind mount) gives a clear error and touches nothing', async function () {
    const src = tempDir();
    const emu = await startEmulator({ dataDir: src });
    await emu.engine.push({ namespace: 'ro', queue: 'q', body: 1, create: 'cache' });
    await emu.close();
    const before = dirDigest(src);
    const ro = tempDir();
    let why = mount(['--bind', src, ro]);
    if (!why) why = mount(['-o', 'remount,bind,ro', ro]);
    if (why) {
      umount(ro);
      // eslint-disable-next-line no-console
      console.log(`      skipped: cannot make a read-only mount here (${why})`);
      return this.skip();
    }
    try {
      assert.throws(() => fs.writeFileSync(path.join(ro, 'probe'), 'x'), /EROFS/, 'the mount is not read-only');
      const r = await startChild({ dataDir: ro });
      assert.ok(isFailure(r), 'it started on a read-only directory');
      assert.equal(r.code, 'data_dir');
      assert.match(r.message, /cannot be written|read-only/);
      // An empty read-only directory too.
      const empty = tempDir();
      const roEmpty = tempDir();
      assert.equal(mount(['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', roEmpty]), null);
      try {
        const r2 = await startChild({ dataDir: roEmpty });
        assert.ok(isFailure(r2));
        assert.equal(r2.code, 'data_dir');
        assert.deepEqual(fs.readdirSync(roEmpty), []);
      } finally {
        umount(roEmpty);
        fs.rmSync(empty, { recursive: true, force: true });
      }
    } finally {
      umount(ro);
    }
    assert.equal(dirDigest(src), before, 'the database was changed');
    fs.rmSync(src, { recursive: true, force: true });
  });

  it('export --out onto a full disk keeps the file that was there (never one cut short) and leaves nothing aside', async function () {
    const dir = tempDir();
    const why = mount(['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]);
    if (why) {
      console.log(`      skipped: cannot mount a small tmpfs here (${why})`);
      return this.skip();
    }
    const emu = await startEmulator({ memory: true });
    try {
      await emu.engine.pushBatch({ namespace: 'full', queue: 'q', messages: Array.from({ length: 400 }, (_, i) => ({ body: { i, pad: 'x'.repeat(200) } })), create: 'cache' });
      const old = path.join(dir, 'old.json');
      fs.writeFileSync(old, '[{"kept":true}]');
      fs.writeFileSync(path.join(dir, 'filler'), Buffer.alloc(40 * 1024));
      const tsx = path.resolve(__dirname, '../../node_modules/.bin/tsx');
      const cli = path.resolve(__dirname, '../../emulator/cli.ts');
      // Not execFileSync: the emulator answering it runs in this process.
      const failure = await new Promise<{ code: number | null; stderr: string } | null>((resolve) => {
        execFile(tsx, [cli, 'export', 'q', '--ns', 'full', '--out', old, '--url', emu.url, '--token', emu.token, '--json'], { timeout: 60_000 }, (e, _out, stderr) =>
          resolve(e ? { code: typeof e.code === 'number' ? e.code : null, stderr } : null),
        );
      });
      assert.ok(failure, 'the export did not fit, and said so');
      assert.equal(failure.code, 1, failure.stderr);
      assert.match(JSON.parse(failure.stderr!).error.message, /the disk is full \(ENOSPC\); nothing was exported/);
      assert.equal(fs.readFileSync(old, 'utf8'), '[{"kept":true}]', 'the old export is as it was');
      assert.deepEqual(fs.readdirSync(dir).sort(), ['filler', 'old.json']);
    } finally {
      await emu.close();
      umount(dir);
    }
  });

  it('a full disk (a tiny tmpfs) gives a clear error at start, and a full disk later refuses writes without losing data', async function () {
    const dir = tempDir();
    const why = mount(['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]);
    if (why) {
      console.log(`      skipped: cannot mount a small tmpfs here (${why})`);
      return this.skip();
    }
    try {
      // Fill it so only a few KiB remain: not enough for the schema.
      fs.writeFileSync(path.join(dir, 'filler'), Buffer.alloc(48 * 1024));
      const before = fs.readdirSync(dir).sort();
      const r = await startChild({ dataDir: dir });
      assert.ok(isFailure(r), 'it started on a full disk');
      assert.equal(r.code, 'data_dir', `${r.code}: ${r.message}`);
      assert.match(r.message, /full|space/i);
      assert.deepEqual(fs.readdirSync(dir).sort(), before, 'it left files behind');
    } finally {
      umount(dir);
    }
    // Started with room, then the disk fills: writes fail with a coded error, what was answered stays.
    const dir2 = tempDir();
    assert.equal(mount(['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir2]), null);
    try {
      const emu = await startOk({ dataDir: dir2 });
      const c = await RawClient.hello(emu.url, emu.token);
      await c.ok('queue.create', { namespace: 'full', queue: 'q', dialect: 'cache' });
      let answered = 0;
      let refused: { code: string; message: string } | undefined;
      for (let i = 0; i < 400 && !refused; i++) {
        const r = await c.request('push', { namespace: 'full', queue: 'q', body: 'f'.repeat(8 * 1024) });
        if (r.ok) answered++;
        else refused = r.error;
      }
      assert.ok(refused, 'the disk never filled');
      assert.notEqual(refused.code, undefined);
      assert.match(refused.message, /full/i);
      // The emulator is still up and reads still work.
      const s = await c.ok('stats', { namespace: 'full', queue: 'q' });
      assert.equal(s.counts.ready, answered);
      await c.close();
      await kill9(emu);
      const db = new Database(path.join(dir2, 'quayside.db'), { readonly: true });
      assert.equal((db.prepare('SELECT count(*) AS n FROM messages').get() as { n: number }).n, answered);
      assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
      db.close();
      console.log(`      full disk: ${answered} pushes answered, then "${refused.code}: ${refused.message.slice(0, 80)}"; all ${answered} kept`);
    } finally {
      umount(dir2);
    }
  });

  it('an emulator that stops answering (SIGSTOP) fails the requests waiting on it, unavailable, by the heartbeat; once it runs again the next request goes through', async () => {
    const c = await startOk({ memory: true });
    const conn = new Connection({ url: c.url, token: c.token, heartbeatMs: 100 });
    try {
      await conn.request('push', { namespace: 'hb', queue: 'q', body: 1, create: 'cache' });
      c.proc.kill('SIGSTOP');
      const e = await conn.request('queue.list', {}).then(() => null, (err: QuaysideError) => err);
      assert.ok(e instanceof QuaysideError, 'the request failed');
      assert.equal(e.code, 'unavailable');
      assert.match(e.message, /did not answer 2 pings in a row, 100 ms apart/);
      c.proc.kill('SIGCONT');
      assert.deepEqual((await conn.request('queue.list', {})).queues.map((q) => q.name), ['q']);
      // A hello refused (a token it does not know) leaves no socket behind for the heartbeat to watch.
      const refused = new Connection({ url: c.url, token: 'qs_rw_unknown', heartbeatMs: 100 });
      assert.equal((await refused.open().then(() => null, (err: QuaysideError) => err))?.code, 'unauthorized');
      assert.equal((refused as unknown as { ws: unknown }).ws, null);
      await refused.close();
    } finally {
      c.proc.kill('SIGCONT');
      await conn.close();
      await kill9(c);
    }
  });
});
