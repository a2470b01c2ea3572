// A shared emulator started by a test runner's global setup (jest, vitest, mocha --parallel): the
// tests run in other processes, where there is no `emu.clock`, and move its virtual time with
// connectClock from quayside/emulator.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { connectClock, startEmulator, type VirtualEmulator } from '../../emulator/emulator';
import { createCache } from '../../emulator/clients/cache';
import { rejects } from './support';

const run = promisify(execFile);
const tsx = path.resolve(__dirname, '../../node_modules/.bin/tsx');

describe('connectClock: the virtual clock of an emulator another process started', function () {
  this.timeout(60_000);
  let emu: VirtualEmulator;
  before(async () => {
    emu = await startEmulator({ memory: true, clock: 'virtual' });
  });
  after(() => emu.close());

  it('reads and moves the emulator\'s time; an advance resolves once what fell due was applied', async () => {
    const clock = connectClock({ url: emu.url, token: emu.token });
    try {
      const t0 = await clock.now();
      assert.equal(t0, emu.clock.now());
      const q = createCache({ url: emu.url, token: emu.token, namespace: 'shared' }).queue('later');
      await q.push('in a minute', { delaySeconds: 60 });
      assert.deepEqual(await q.pull(), []);
      assert.equal(await clock.advance(60_000), t0 + 60_000);
      assert.equal(emu.clock.now(), t0 + 60_000);
      assert.deepEqual((await q.pull()).map((m) => m.body), ['in a minute']);
    } finally {
      await clock.close();
    }
  });

  it('from a test worker\'s own process, with QUAYSIDE_URL and QUAYSIDE_TOKEN as a global setup leaves them', async () => {
    const before = emu.clock.now();
    const script = "const { connectClock } = require('./emulator/emulator'); const c = connectClock(); c.advance(90000).then((now) => console.log(now));";
    const { stdout } = await run(tsx, ['-e', script], { cwd: path.resolve(__dirname, '../..'), env: { ...process.env, QUAYSIDE_URL: emu.url, QUAYSIDE_TOKEN: emu.token }, timeout: 30_000 });
    assert.equal(Number(stdout.trim()), before + 90_000, 'it printed the new time, and exited without a close()');
    assert.equal(emu.clock.now(), before + 90_000);
  });

  it('refuses what it cannot do, saying why: an unknown option, a bad ms, a system clock', async () => {
    assert.equal((await rejects(Promise.resolve().then(() => connectClock({ url: emu.url, tokn: 'x' } as never)))).code, 'invalid_argument');
    assert.equal((await rejects(Promise.resolve().then(() => connectClock({ url: '' })))).code, 'invalid_argument');
    assert.equal((await rejects(Promise.resolve().then(() => connectClock([] as never)))).code, 'invalid_argument');
    // The emulator handle itself, as the other clients take it ({ ...emu, namespace }).
    const fromHandle = connectClock(emu);
    assert.equal(await fromHandle.now(), emu.clock.now());
    await fromHandle.close();
    const clock = connectClock({ url: emu.url, token: emu.token });
    const sys = await startEmulator({ memory: true });
    const sysClock = connectClock({ url: sys.url, token: sys.token });
    try {
      const now = emu.clock.now();
      assert.equal((await rejects(clock.advance(-1))).code, 'invalid_argument');
      assert.equal(emu.clock.now(), now, 'nothing moved');
      const e = await rejects(sysClock.advance(1000));
      assert.equal(e.code, 'conflict');
      assert.match(e.message, /virtual/);
    } finally {
      await clock.close();
      await sysClock.close();
      await sys.close();
    }
  });
});
