// Attaching to an emulator the extension did not start (quayside.url): against a real one started
// in this process, which the tests then close to play "it went away".
import { strict as assert } from 'assert';
import { WebSocketServer } from 'ws';
import { startEmulator, type Emulator } from '../../../emulator/emulator';
import { Lifecycle, LaunchError, type Snapshot } from '../../../src/core/lifecycle';
import { attachEmulator } from '../../../src/core/process';

/** Await `p`, failing (instead of hanging) if it has not settled within `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms)));
  return Promise.race([p, guard]).finally(() => clearTimeout(timer));
}

function nextState(lc: Lifecycle, pred: (s: Snapshot) => boolean): Promise<Snapshot> {
  return new Promise((resolve) => {
    if (pred(lc.snapshot())) return resolve(lc.snapshot());
    const off = lc.onDidChange((s) => {
      if (!pred(s)) return;
      off();
      resolve(s);
    });
  });
}

describe('extension: attaching to a running emulator', function () {
  this.timeout(20000);
  const emulators: Emulator[] = [];
  const start = async (port = 0, token?: string) => {
    const emu = await startEmulator({ memory: true, port, token });
    emulators.push(emu);
    return emu;
  };
  afterEach(async () => {
    for (const e of emulators.splice(0)) await e.close();
  });

  it('is ready once hello answers, and `exited` resolves when the emulator goes away', async () => {
    const emu = await start();
    const inst = attachEmulator(emu.url, emu.token);
    const ep = await within(inst.ready, 5000, 'ready');
    assert.equal(ep.url, emu.url);
    assert.equal(ep.port, emu.port);
    assert.equal(ep.attached, true);
    let exited = false;
    void inst.exited.then(() => (exited = true));
    await emu.close();
    const info = await within(inst.exited, 5000, 'exited after the emulator closed');
    assert.equal(info.code, null, 'not a normal stop');
    assert.match(info.reason ?? '', /lost the connection to the attached emulator/);
    assert.ok(exited);
  });

  it('stop only disconnects: `exited` resolves as a normal end and the emulator keeps running', async () => {
    const emu = await start();
    const inst = attachEmulator(emu.url, emu.token);
    await within(inst.ready, 5000, 'ready');
    await within(inst.stop(), 5000, 'stop');
    assert.deepEqual(await inst.exited, { code: 0, signal: null });
    const again = attachEmulator(emu.url, emu.token);
    await within(again.ready, 5000, 'a second attach to the same emulator');
    await again.stop();
  });

  it('a wrong token is unauthorized; nothing listening is attach_failed', async () => {
    const emu = await start();
    await assert.rejects(attachEmulator(emu.url, 'wrong').ready, (e: LaunchError) => e.code === 'unauthorized');
    const port = emu.port;
    await emu.close();
    await assert.rejects(attachEmulator(`ws://127.0.0.1:${port}`, emu.token).ready, (e: LaunchError) => e.code === 'attach_failed');
  });

  it('an emulator that stops answering pings (a half-open connection) counts as gone', async () => {
    // A stand-in that answers hello and then goes silent: no pongs.
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', autoPong: false });
    await new Promise((r) => wss.once('listening', r));
    wss.on('connection', (sock) => sock.on('message', () => sock.send(JSON.stringify({ id: 1, ok: true, result: { clock: 'system' } }))));
    try {
      const port = (wss.address() as { port: number }).port;
      const inst = attachEmulator(`ws://127.0.0.1:${port}`, 't', { heartbeatMs: 20 });
      await within(inst.ready, 5000, 'ready');
      const info = await within(inst.exited, 5000, 'exited after unanswered pings');
      assert.match(info.reason ?? '', /lost the connection/);
    } finally {
      for (const c of wss.clients) c.terminate();
      await new Promise((r) => wss.close(r));
    }
  });

  it('the lifecycle sees it crash and re-attaches with back-off, up to maxRestarts', async () => {
    const emu = await start();
    const { port, token } = emu;
    const timers: (() => void)[] = [];
    const lc = new Lifecycle({
      launch: async () => attachEmulator(`ws://127.0.0.1:${port}`, token),
      maxRestarts: 2,
      setTimer: (fn) => timers.push(fn),
      clearTimer: () => undefined,
    });
    try {
      assert.equal((await within(lc.start(), 5000, 'attach')).state, 'running');
      await emu.close();
      const crashed = await within(nextState(lc, (s) => s.state === 'crashed'), 5000, 'crashed');
      assert.ok(crashed.restartAt, 'a re-attach is scheduled');
      assert.match(crashed.error!.message, /lost the connection/);

      // The same emulator comes back on its port: the scheduled re-attach finds it.
      await start(port, token);
      timers.shift()!();
      const back = await within(nextState(lc, (s) => s.state === 'running'), 5000, 're-attached');
      assert.equal(back.endpoint?.port, port);
      assert.equal(back.restarts, 1);

      // Gone for good: re-attaching fails until maxRestarts, then it gives up (crashed, no restart pending).
      await emulators.pop()!.close();
      await within(nextState(lc, (s) => s.state === 'crashed'), 5000, 'crashed again');
      timers.shift()!();
      const gaveUp = await within(nextState(lc, (s) => s.state === 'crashed' && s.restartAt === undefined), 5000, 'gave up');
      assert.equal(gaveUp.error?.code, 'attach_failed');
      assert.match(gaveUp.error!.message, /gave up after 2 automatic restarts$/);
      assert.equal(timers.length, 0);
    } finally {
      await lc.dispose();
    }
  });
});
