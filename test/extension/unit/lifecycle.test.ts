import { strict as assert } from 'assert';
import { LaunchError, Lifecycle, defaultBackoff, toggleAction, type EmulatorState, type LaunchContext, type Snapshot } from '../../../src/core/lifecycle';
import { FakeInstance } from './ext-fakes';

/** Timers the test fires by hand (the lifecycle takes `setTimer`), so nothing waits on the wall clock. */
function manualTimers() {
  const pending = new Set<{ fn: () => void; ms: number }>();
  return {
    setTimer: (fn: () => void, ms: number) => {
      const t = { fn, ms };
      pending.add(t);
      return t;
    },
    clearTimer: (t: unknown) => void pending.delete(t as { fn: () => void; ms: number }),
    get count() {
      return pending.size;
    },
    get delays() {
      return [...pending].map((t) => t.ms);
    },
    fireAll() {
      const due = [...pending];
      pending.clear();
      for (const t of due) t.fn();
    },
  };
}

function setup(opts: { maxRestarts?: number; stableMs?: number; now?: () => number; timers?: ReturnType<typeof manualTimers>; backoffMs?: (n: number) => number; restartWithoutLimit?: () => boolean } = {}) {
  const instances: FakeInstance[] = [];
  const states: string[] = [];
  let launchHook: ((ctx: LaunchContext) => Promise<void>) | undefined;
  const lc = new Lifecycle({
    launch: async (ctx) => {
      if (launchHook) await launchHook(ctx);
      const i = new FakeInstance(ctx);
      instances.push(i);
      return i;
    },
    backoffMs: opts.backoffMs ?? ((n) => n * 5),
    maxRestarts: opts.maxRestarts ?? 3,
    restartWithoutLimit: opts.restartWithoutLimit,
    stableMs: opts.stableMs ?? 60_000,
    now: opts.now,
    setTimer: opts.timers?.setTimer,
    clearTimer: opts.timers?.clearTimer,
  });
  lc.onDidChange((s) => states.push(s.state));
  /** Start, and let the launched instance listen: the lifecycle is then running. */
  const running = async () => {
    const p = lc.start();
    await tick();
    instances[instances.length - 1].listen();
    return p;
  };
  /** Run, crash, and let the automatic restart (with `timers`) begin: the lifecycle is then starting attempt 1. */
  const restarting = async () => {
    await running();
    instances[0].exit(1);
    await waitFor(lc, (s) => s.state === 'crashed');
    opts.timers!.fireAll();
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
  };
  return { lc, instances, states, running, restarting, setLaunchHook: (h: typeof launchHook) => (launchHook = h) };
}

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
function waitFor(lc: Lifecycle, pred: (s: Snapshot) => boolean, ms = 2000): Promise<Snapshot> {
  return new Promise((resolve, reject) => {
    if (pred(lc.snapshot())) return resolve(lc.snapshot());
    const t = setTimeout(() => reject(new Error(`timed out in ${lc.state}`)), ms);
    const off = lc.onDidChange((s) => {
      if (pred(s)) {
        clearTimeout(t);
        off();
        resolve(s);
      }
    });
  });
}

describe('extension: emulator lifecycle', () => {
  it('starts: stopped → starting → running, with the endpoint', async () => {
    const { lc, instances, states } = setup();
    assert.equal(lc.state, 'stopped');
    const p = lc.start();
    assert.equal(lc.state, 'starting');
    await tick();
    instances[0].listen(7500);
    const s = await p;
    assert.equal(s.state, 'running');
    assert.equal(s.endpoint?.port, 7500);
    assert.deepEqual(states, ['starting', 'running']);
  });

  it('a second start while starting or running does not launch again', async () => {
    const { lc, instances } = setup();
    const a = lc.start();
    const b = lc.start();
    await tick();
    instances[0].listen();
    await Promise.all([a, b]);
    await lc.start();
    assert.equal(instances.length, 1);
  });

  it('a failed start ends stopped with the error, and does not retry', async () => {
    const { lc, instances, states } = setup();
    const p = lc.start();
    await tick();
    instances[0].fail(new LaunchError('port_in_use', 'port 7433 is in use'));
    const s = await p;
    assert.equal(s.state, 'stopped');
    assert.equal(s.error?.code, 'port_in_use');
    await tick(30);
    assert.equal(instances.length, 1);
    assert.deepEqual(states, ['starting', 'stopped']);
  });

  it('a launch that throws (no node) ends stopped with that error', async () => {
    const { lc, setLaunchHook } = setup();
    setLaunchHook(async () => {
      throw new LaunchError('node_not_found', '"node" is not on PATH');
    });
    const s = await lc.start();
    assert.equal(s.state, 'stopped');
    assert.equal(s.error?.code, 'node_not_found');
  });

  it('stops: running → stopping → stopped, and stops the instance', async () => {
    const { lc, instances, states } = setup();
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    await lc.stop();
    assert.equal(lc.state, 'stopped');
    assert.ok(instances[0].stopped);
    assert.deepEqual(states, ['starting', 'running', 'stopping', 'stopped']);
    assert.equal(lc.snapshot().endpoint, undefined);
  });

  it('stop while starting stops the half-started instance and never reports running', async () => {
    const { lc, instances, states } = setup();
    const p = lc.start();
    await tick();
    const stopped = lc.stop();
    assert.equal(lc.state, 'stopping');
    await stopped;
    instances[0].listen(); // too late: it was stopped
    await p;
    assert.equal(lc.state, 'stopped');
    assert.ok(instances[0].stopped);
    assert.ok(!states.includes('running'));
  });

  it('stop while the launch itself is still pending stops the instance once it appears', async () => {
    const { lc, instances, setLaunchHook } = setup();
    let release!: () => void;
    setLaunchHook(() => new Promise<void>((r) => (release = r)));
    const p = lc.start();
    await tick();
    const stopped = lc.stop();
    release();
    await stopped;
    await p;
    assert.equal(lc.state, 'stopped');
    assert.equal(instances.length, 1);
    assert.ok(instances[0].stopped);
  });

  it('a crash goes to crashed, then restarts after the back-off with the previous port', async () => {
    const { lc, instances, states } = setup();
    const p = lc.start();
    await tick();
    instances[0].listen(7601);
    await p;
    instances[0].exit(1);
    const crashed = await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(crashed.error?.code, 'crashed');
    assert.ok(crashed.restartAt! > 0);
    assert.equal(crashed.restarts, 1);
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    assert.equal(instances.length, 2);
    assert.equal(instances[1].ctx.attempt, 1);
    assert.equal(instances[1].ctx.previous?.port, 7601);
    instances[1].listen(7601);
    await waitFor(lc, (s) => s.state === 'running');
    assert.deepEqual(states, ['starting', 'running', 'crashed', 'starting', 'running']);
  });

  it('backs off longer each time and gives up after maxRestarts', async () => {
    const { lc, instances } = setup({ maxRestarts: 2 });
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    instances[0].exit(1);
    // restart 1 fails, restart 2 fails, then it gives up
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    instances[1].fail(new LaunchError('exited', 'exited before it listened'));
    const between = await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(between.restarts, 2);
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    instances[2].fail(new LaunchError('exited', 'exited before it listened'));
    const s = await waitFor(lc, (s) => s.state === 'crashed' && s.restartAt === undefined);
    assert.match(s.error!.message, /gave up after 2 automatic restarts/);
    await tick(40);
    assert.equal(instances.length, 3);
    // A manual start still works and resets the count.
    const again = lc.start();
    await tick();
    instances[3].listen();
    assert.equal((await again).state, 'running');
    assert.equal(lc.snapshot().restarts, 0);
  });

  it('a crash-restart that hits a permanent failure (native module) stops retrying, visibly: crashed, no restart pending, saying why', async () => {
    const timers = manualTimers();
    const { lc, instances, states, restarting } = setup({ timers });
    await restarting();
    instances[1].fail(new LaunchError('native_module', 'better-sqlite3 does not load'));
    const s = await waitFor(lc, (s) => s.state !== 'starting');
    assert.equal(s.state, 'crashed');
    assert.equal(s.restartAt, undefined);
    assert.equal(s.error?.code, 'native_module', 'the code stays the cause, so the right fixes are offered');
    assert.match(s.error!.message, /^better-sqlite3 does not load; gave up restarting it: a retry cannot fix this$/);
    assert.equal(timers.count, 0, 'no restart scheduled');
    assert.deepEqual(states, ['starting', 'running', 'crashed', 'starting', 'crashed']);
  });

  it('a crash-restart refused for a broken quayside.json (config) stops retrying too: the file needs fixing', async () => {
    const timers = manualTimers();
    const { lc, instances, restarting } = setup({ timers });
    await restarting();
    instances[1].fail(new LaunchError('config', '/w/quayside.json: queues[0].slug must be a string'));
    const s = await waitFor(lc, (s) => s.state !== 'starting');
    assert.deepEqual([s.state, s.error?.code, timers.count], ['crashed', 'config', 0]);
  });

  it('with automatic restarts off (maxRestarts 0) a crash ends crashed and says restarts are off', async () => {
    const timers = manualTimers();
    const { lc, instances, running } = setup({ maxRestarts: 0, timers });
    await running();
    instances[0].exit(1);
    const s = await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(s.restartAt, undefined);
    assert.equal(s.error?.message, 'the emulator exited unexpectedly (exit code 1); automatic restarts are off');
    assert.equal(timers.count, 0);
  });

  it('a crash names the exit reason an instance gives (an attached emulator that went away)', async () => {
    const { lc, instances, running } = setup({ timers: manualTimers() });
    await running();
    instances[0].exitWith({ code: null, signal: null, reason: 'lost the connection to the emulator at ws://x' });
    const s = await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(s.error?.message, 'lost the connection to the emulator at ws://x');
    assert.ok(s.restartAt);
  });

  it('two starts while it is stopping launch once, and both get the same outcome', async () => {
    const { lc, instances, running } = setup({ timers: manualTimers() });
    await running();
    const stopping = lc.stop();
    assert.equal(lc.state, 'stopping');
    const a = lc.start();
    const b = lc.start();
    await stopping;
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    assert.equal(instances.length, 2, 'exactly one new launch');
    instances[1].listen(7700);
    const [sa, sb] = await Promise.all([a, b]);
    assert.deepEqual(sa, sb);
    assert.equal(sa.state, 'running');
    assert.equal(sa.endpoint?.port, 7700);
    assert.equal(instances[1].stopped, false, 'the one running emulator is left running');
  });

  it('a manual start during an automatic restart replaces it: the restart is stopped, attempt 0 runs, the count resets', async () => {
    const timers = manualTimers();
    const { lc, instances, states, restarting } = setup({ timers });
    // What the commands report: a crash given up on (the crash listener) and a failed start (its caller).
    const gaveUp: Snapshot[] = [];
    lc.onDidChange((s) => s.state === 'crashed' && s.restartAt === undefined && gaveUp.push(s));
    await restarting();
    assert.equal(instances[1].ctx.attempt, 1);
    assert.equal(lc.snapshot().restarts, 1);

    const manual = lc.start();
    await waitFor(lc, (s) => s.state === 'starting' && s.restarts === 0);
    await tick();
    assert.ok(instances[1].stopped, 'the half-started restart is stopped (it would hold the port)');
    assert.equal(instances.length, 3);
    assert.equal(instances[2].ctx.attempt, 0, 'a fresh attempt, as the user asked');
    assert.equal(lc.snapshot().restarts, 0);
    // A failure a retry cannot fix: the caller learns it (once); nothing gives up or retries behind it.
    instances[2].fail(new LaunchError('native_module', 'better-sqlite3 does not load'));
    const s = await manual;
    assert.equal(s.state, 'stopped');
    assert.equal(s.error?.code, 'native_module');
    assert.deepEqual(gaveUp, []);
    assert.equal(timers.count, 0);
    assert.deepEqual(states, ['starting', 'running', 'crashed', 'starting', 'stopping', 'stopped', 'starting', 'stopped']);
  });

  it('a manual start that fails in a way a retry might fix is not retried: stopped, with the error', async () => {
    const timers = manualTimers();
    const { lc, instances, restarting } = setup({ timers });
    await restarting();
    const a = lc.start();
    const b = lc.start();
    await waitFor(lc, (s) => s.state === 'starting' && s.restarts === 0);
    await tick();
    assert.equal(instances.length, 3, 'two manual starts launch once');
    instances[2].fail(new LaunchError('exited', 'the emulator exited before it listened (exit code 1)'));
    const [sa, sb] = await Promise.all([a, b]);
    assert.deepEqual(sa, sb);
    assert.equal(sa.state, 'stopped');
    assert.equal(sa.restartAt, undefined);
    assert.equal(timers.count, 0, 'no automatic retry of a start the user asked for');
  });

  it('a manual start while a restart is pending cancels it and starts at once', async () => {
    const timers = manualTimers();
    const { lc, instances, running } = setup({ timers });
    await running();
    instances[0].exit(1);
    await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(timers.count, 1);
    const p = lc.start();
    assert.equal(timers.count, 0, 'the pending restart is cancelled');
    await tick();
    assert.equal(instances[1].ctx.attempt, 0);
    instances[1].listen();
    const s = await p;
    assert.equal(s.state, 'running');
    assert.equal(s.restarts, 0);
  });

  it('with restartWithoutLimit (an attached emulator) it keeps restarting past maxRestarts at the capped back-off; a permanent failure still stops it', async () => {
    const timers = manualTimers();
    const { lc, instances, running } = setup({ timers, maxRestarts: 2, backoffMs: defaultBackoff, restartWithoutLimit: () => true });
    await running();
    instances[0].exit(1);
    await waitFor(lc, (s) => s.state === 'crashed');
    for (let n = 1; n <= 8; n++) {
      assert.deepEqual(timers.delays, [defaultBackoff(n)]);
      timers.fireAll();
      await waitFor(lc, (s) => s.state === 'starting');
      await tick();
      instances[n].fail(new LaunchError('attach_failed', 'cannot attach: ECONNREFUSED'));
      const s = await waitFor(lc, (s) => s.state === 'crashed');
      assert.ok(s.restartAt, `restart ${n} failed and another is scheduled`);
    }
    assert.deepEqual(timers.delays, [30_000], 'capped');
    timers.fireAll();
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    instances[9].fail(new LaunchError('unauthorized', 'the token is refused'));
    const s = await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(s.restartAt, undefined);
    assert.equal(s.error?.code, 'unauthorized');
    assert.equal(timers.count, 0);
  });

  it('stop while crashed cancels the pending restart', async () => {
    const { lc, instances } = setup();
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    instances[0].exit(1);
    await waitFor(lc, (s) => s.state === 'crashed');
    await lc.stop();
    assert.equal(lc.state, 'stopped');
    await tick(30);
    assert.equal(instances.length, 1);
  });

  it('a long, stable run resets the restart count', async () => {
    let now = 0;
    const { lc, instances } = setup({ stableMs: 1000, now: () => now });
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    instances[0].exit(1);
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    instances[1].listen();
    await waitFor(lc, (s) => s.state === 'running');
    assert.equal(lc.snapshot().restarts, 1);
    now += 5000;
    instances[1].exit(1);
    const s = await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(s.restarts, 1, 'counted from zero again');
  });

  it('an exit after a normal stop is not a crash', async () => {
    const { lc, instances, states } = setup();
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    await lc.stop();
    await tick(20);
    assert.ok(!states.includes('crashed'));
  });

  it('restart() stops and starts again', async () => {
    const { lc, instances } = setup();
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    const r = lc.restart();
    await waitFor(lc, (s) => s.state === 'starting');
    await tick();
    instances[1].listen();
    assert.equal((await r).state, 'running');
    assert.ok(instances[0].stopped);
  });

  it('dispose stops, refuses later starts, and lets go of its listeners (the output channel is disposed with it)', async () => {
    const { lc, instances } = setup();
    const lines: string[] = [];
    const changes: string[] = [];
    lc.onLog((l) => lines.push(l));
    lc.onDidChange((s) => changes.push(s.state));
    const p = lc.start();
    await tick();
    instances[0].listen();
    await p;
    await lc.dispose();
    assert.ok(instances[0].stopped);
    const heard = [lines.length, changes.length];
    assert.ok(heard[0] > 0 && heard[1] > 0);
    lc.log('after dispose');
    assert.equal((await lc.start()).state, 'stopped');
    assert.equal(instances.length, 1);
    assert.deepEqual([lines.length, changes.length], heard, 'no listener hears anything after dispose');
  });

  it('toggle stops what runs or starts, starts what is stopped or crashed, and leaves a stop in progress alone', () => {
    const states: EmulatorState[] = ['running', 'starting', 'stopping', 'stopped', 'crashed'];
    assert.deepEqual(states.map(toggleAction), ['stop', 'stop', 'none', 'start', 'start']);
  });

  it('default back-off doubles from 1 s up to 30 s', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(defaultBackoff), [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  });
});

describe('extension: what the lifecycle tells the log', () => {
  function logged(opts: { attaching?: boolean; maxRestarts?: number } = {}) {
    const timers = manualTimers();
    const instances: FakeInstance[] = [];
    const lines: string[] = [];
    let fail: Error | undefined;
    const lc = new Lifecycle({
      launch: async (ctx) => {
        if (fail) throw fail;
        const i = new FakeInstance(ctx);
        instances.push(i);
        return i;
      },
      backoffMs: () => 4000,
      maxRestarts: opts.maxRestarts ?? 1,
      restartWithoutLimit: () => opts.attaching === true,
      attaching: () => opts.attaching === true,
      setTimer: timers.setTimer,
      clearTimer: timers.clearTimer,
    });
    lc.onLog((l) => lines.push(l));
    const run = async (endpoint?: { attached: boolean }) => {
      const p = lc.start();
      await tick();
      instances.at(-1)!.listen(7433, endpoint);
      return p;
    };
    return { lc, lines, timers, instances, run, failWith: (e: Error | undefined) => (fail = e) };
  }

  it('a stop ends with "stopped", or "detached" from an attached emulator; a stop while a restart waits says it is cancelled', async () => {
    const { lc, lines, instances, run } = logged();
    await run();
    await lc.stop();
    assert.deepEqual(lines.slice(-2), ['stopping the emulator', 'stopped']);
    await run();
    instances.at(-1)!.exit(1);
    await waitFor(lc, (s) => s.state === 'crashed');
    assert.equal(lines.at(-1), 'restarting in 4 s');
    await lc.stop();
    assert.equal(lines.at(-1), 'stopped; the pending restart is cancelled', 'not "restarting in 4 s" as the last word');
    const attached = logged({ attaching: true });
    await attached.run({ attached: true });
    await attached.lc.stop();
    assert.equal(attached.lines.at(-1), 'detached from the emulator (it goes on running)');
  });

  it('an attached emulator is attached again with no "attempt n of max" (it has no limit), and a failed attach is not called a failed start', async () => {
    const { lc, lines, timers, instances, run, failWith } = logged({ attaching: true, maxRestarts: 1 });
    await run({ attached: true });
    instances.at(-1)!.exit(1);
    await waitFor(lc, (s) => s.state === 'crashed');
    failWith(new LaunchError('attach_failed', 'cannot attach to the emulator at ws://127.0.0.1:7433: refused'));
    timers.fireAll();
    await waitFor(lc, (s) => s.state === 'crashed' && s.restarts === 2);
    assert.ok(lines.includes('attaching to the emulator again (attempt 1)'), lines.join('\n'));
    assert.ok(lines.includes('could not attach to the emulator: cannot attach to the emulator at ws://127.0.0.1:7433: refused'), lines.join('\n'));
    assert.ok(!lines.some((l) => / of 1\)/.test(l) || l.startsWith('the emulator did not start')), lines.join('\n'));
    await lc.dispose();
    // One the extension started keeps its count and its words.
    const started = logged({ maxRestarts: 2 });
    await started.run();
    started.instances.at(-1)!.exit(1);
    await waitFor(started.lc, (s) => s.state === 'crashed');
    started.failWith(new LaunchError('exited', 'the emulator exited before it listened (exit code 1)'));
    started.timers.fireAll();
    await waitFor(started.lc, (s) => s.state === 'crashed' && s.restarts === 2);
    assert.ok(started.lines.includes('restarting the emulator (attempt 1 of 2)'), started.lines.join('\n'));
    assert.ok(started.lines.includes('the emulator did not start: the emulator exited before it listened (exit code 1)'));
    await started.lc.dispose();
  });
});
