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
    // A read-only token is refused too: the tree and panel offer writes it could not make.
    const ro = await emu.createToken({ access: 'read' });
    await assert.rejects(attachEmulator(emu.url, ro).ready, (e: LaunchError) => e.code === 'unauthorized' && /read-only token/.test(e.message));
    const port = emu.port;
    await emu.close();
    await assert.rejects(attachEmulator(`ws://127.0.0.1:${port}`, emu.token).ready, (e: LaunchError) => e.code === 'attach_failed');
  });

  /**
   * A stand-in emulator: answers hello (unless `hello` is false) and answers the pings `pong` says
   * to (by their number, from 1). It counts the pings and notes when the client hangs up.
   */
  async function standIn(o: { hello?: boolean; pong?: (n: number) => boolean } = {}) {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', autoPong: false });
    await new Promise((r) => wss.once('listening', r));
    const seen = { pings: 0, closed: false };
    const pingListeners = new Set<() => void>();
    let onClose!: () => void;
    const closed = new Promise<void>((r) => (onClose = r));
    wss.on('connection', (sock) => {
      if (o.hello !== false) sock.on('message', () => sock.send(JSON.stringify({ id: 1, ok: true, result: { clock: 'system', access: 'readwrite', namespace: null } })));
      sock.on('ping', () => {
        seen.pings++;
        if (o.pong?.(seen.pings)) sock.pong();
        for (const l of pingListeners) l();
      });
      sock.on('close', () => {
        seen.closed = true;
        onClose();
      });
    });
    return {
      url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
      seen,
      closed,
      /** Resolves once the client has sent `n` pings. */
      pings: (n: number) =>
        new Promise<void>((resolve) => {
          const check = () => seen.pings >= n && (pingListeners.delete(check), resolve());
          pingListeners.add(check);
          check();
        }),
      close: async () => {
        for (const c of wss.clients) c.terminate();
        await new Promise((r) => wss.close(r));
      },
    };
  }

  it('an emulator that stops answering pings (a half-open connection) counts as gone after `missedPongs` in a row', async () => {
    const s = await standIn({ pong: () => false });
    try {
      const inst = attachEmulator(s.url, 't', { heartbeatMs: 20, missedPongs: 3 });
      await within(inst.ready, 5000, 'ready');
      const info = await within(inst.exited, 5000, 'exited after unanswered pings');
      assert.match(info.reason ?? '', /lost the connection/);
      assert.equal(s.seen.pings, 3, 'three unanswered pings, then it hung up');
    } finally {
      await s.close();
    }
  });

  it('a few missed pongs (a busy or briefly paused emulator) are not a loss: an answer resets the count', async () => {
    // Every other ping goes unanswered (and an answer may come a ping late): never three in a row.
    const s = await standIn({ pong: (n) => n % 2 === 0 });
    try {
      const inst = attachEmulator(s.url, 't', { heartbeatMs: 20, missedPongs: 3 });
      await within(inst.ready, 5000, 'ready');
      let exited = false;
      void inst.exited.then(() => (exited = true));
      await within(s.pings(9), 5000, 'nine pings');
      assert.equal(exited, false);
      assert.equal(s.seen.closed, false);
      await inst.stop();
      assert.deepEqual(await inst.exited, { code: 0, signal: null });
    } finally {
      await s.close();
    }
  });

  it('a server that upgrades but never answers hello fails the attach (attach_failed) after the connect timeout, and is hung up on', async () => {
    const s = await standIn({ hello: false });
    try {
      const inst = attachEmulator(s.url, 't', { connectTimeoutMs: 50 });
      await within(
        assert.rejects(inst.ready, (e: LaunchError) => e.code === 'attach_failed' && /did not answer hello within 50 ms/.test(e.message)),
        5000,
        'the attach to fail',
      );
      await within(s.closed, 5000, 'the socket closed');
      assert.equal((await within(inst.exited, 5000, 'exited')).code, null);
    } finally {
      await s.close();
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
