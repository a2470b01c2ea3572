// An app's tests fake the timers for their own code (jest.useFakeTimers(), vi.useFakeTimers(),
// node:test's mock.timers) while they talk to an emulator in the same process. Quayside's engine,
// server and clients keep the timers Node gave them at load, so their calls go on; before, a push
// never settled, and the in-process emulator stayed wedged after the test restored real timers.
import assert from 'node:assert/strict';
import { mock } from 'node:test';
import { startEmulator, type VirtualEmulator } from '../../emulator/emulator';
import { createCache } from '../../emulator/clients/cache';
import { createEnv, runConsumer } from '../../emulator/clients/env';
import { queue as syncQueue } from '../../emulator/clients/sync';
import { createMemoryQueues } from '../../emulator/embedded/memory';

// The test's own bound, on timers taken before anything is faked (as mocha keeps its own).
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

/** `p`, or a failure naming `what` after `ms` of real time. */
async function within<T>(what: string, p: Promise<T>, ms = 10_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = realSetTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms of real time under fake timers`)), ms);
  });
  try {
    return await Promise.race([p, bound]);
  } finally {
    realClearTimeout(timer);
  }
}

/**
 * Fake timers that nobody advances, installed on the globals as @sinonjs/fake-timers does for
 * vi.useFakeTimers() and jest.useFakeTimers(): setTimeout, setInterval, setImmediate,
 * queueMicrotask and Date (frozen). A callback given to them never runs. (process.nextTick is left
 * alone: jest fakes it on a process object of the test's own, and Node's core would stop with the
 * real one; Quayside keeps its own reference all the same.) Returns the restore function.
 */
function freezeTimers(): () => void {
  const g = globalThis as Record<string, unknown>;
  const names = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'queueMicrotask'];
  const saved = new Map(names.map((n) => [n, g[n]]));
  const savedDate = globalThis.Date;
  let ids = 0;
  for (const n of names) g[n] = n.startsWith('clear') ? () => undefined : () => ({ id: ++ids, ref() { return this; }, unref() { return this; }, hasRef: () => false });
  const frozen = savedDate.now();
  globalThis.Date = class extends savedDate {
    static now() {
      return frozen;
    }
  } as DateConstructor;
  return () => {
    for (const [n, v] of saved) g[n] = v;
    globalThis.Date = savedDate;
  };
}

describe('fake timers in the app\'s tests do not reach the emulator or the clients', function () {
  this.timeout(60_000);
  let emu: VirtualEmulator;
  let restore: (() => void) | undefined;
  before(async () => {
    emu = await startEmulator({ memory: true, clock: 'virtual' });
  });
  afterEach(() => {
    restore?.();
    restore = undefined;
  });
  after(() => emu.close());

  it('with every timer faked and never advanced (jest.useFakeTimers() after the app loaded): cache, env, sync and the virtual clock go on', async () => {
    const { url, token } = emu;
    const cache = createCache({ url, token, namespace: 'fake' });
    const env = createEnv({ url, token, project: 'fake', environment: 'dev' });
    await emu.engine.createQueue({ namespace: 'fake/dev', queue: 'orders', dialect: 'env' });
    restore = freezeTimers();

    // cache: push, pull, ack; a delay that ends on the virtual clock.
    const q = cache.queue('jobs');
    await within('cache push', q.push({ n: 1 }));
    const [m] = await within('cache pull', q.pull());
    assert.deepEqual(m.body, { n: 1 });
    assert.equal(await within('cache ack', q.ack(m.receipt)), true);
    await within('cache push', q.push({ n: 2 }, { delaySeconds: 30 }));
    assert.deepEqual(await within('cache pull', q.pull()), [], 'delayed');
    await within('clock.advance', emu.clock.advance(30_000));
    assert.deepEqual((await within('cache pull', q.pull())).map((x) => x.body), [{ n: 2 }], 'due on the virtual clock');

    // env: a push consumer gets its batch when the virtual clock reaches its batch timeout.
    const got: unknown[] = [];
    const consumer = await within('runConsumer', runConsumer({ async queue(batch) { for (const msg of batch.messages) got.push(msg.body); } }, { url, token, project: 'fake', environment: 'dev', queue: 'orders' }));
    try {
      await within('env send', env.queue.send('orders', { order: 7 }));
      await within('clock.advance', emu.clock.advance(5_000));
      await within('the batch', (async () => {
        while (got.length === 0) await new Promise((r) => realSetTimeout(r, 10));
      })());
      assert.deepEqual(got, [{ order: 7 }]);
    } finally {
      await within('consumer stop', consumer.stop());
    }

    // sync, on the emulator and in memory.
    const remote = syncQueue<{ k: number }>({ url, token, id: 'work', tenantId: 'fake' });
    await within('sync send', remote.send({ data: { k: 1 } }));
    const r = await within('sync recv', remote.recv({ timeoutMs: 0 }));
    assert.deepEqual(r?.data, { k: 1 });
    assert.equal(await within('sync ack', r!.ack()), true);
    await remote.close();
    const mem = createMemoryQueues({ clock: 'virtual' });
    const local = mem.queue<string>({ id: 'work' });
    await within('memory send', local.send({ data: 'later', delayMs: 1_000 }));
    await within('memory advance', mem.clock.advance(1_000));
    assert.equal((await within('memory recv', local.recv({ timeoutMs: 0 })))?.data, 'later');
    await within('memory close', mem.close());
    await within('cache close', cache.close());
    await within('env close', env.close());

    // Restored: nothing was left wedged.
    restore();
    restore = undefined;
    await within('cache push after', q.push({ n: 3 }));
    assert.equal((await within('stats after', q.stats())).ready, 1);
  });

  it('with node:test\'s mock.timers enabled (which also mocks node:timers), calls and advances go on', async () => {
    const q = createCache({ url: emu.url, token: emu.token, namespace: 'mocked' }).queue('jobs');
    await within('push before the mock', q.push('warm')); // the connection made before the mock, as in a test's before hook
    mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'setImmediate', 'Date'] });
    restore = () => mock.timers.reset();
    await within('push', q.push('under the mock', { delaySeconds: 10 }));
    await within('clock.advance', emu.clock.advance(10_000));
    const got = await within('pull', q.pull({ max: 2 }));
    assert.deepEqual(got.map((m) => m.body), ['warm', 'under the mock']);
  });
});

describe('the emulator\'s code takes its timers from real-time.ts, never the globals', () => {
  it('no file of the engine, the server, the clients or the in-memory variant calls a global timer, process.nextTick or Date.now', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const fs = require('node:fs') as typeof import('node:fs');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const path = require('node:path') as typeof import('node:path');
    const root = path.resolve(__dirname, '../../emulator');
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(dir, e.name));
        else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) files.push(path.join(dir, e.name));
      }
    };
    walk(root);
    // The CLI is a process of its own (no app's fakes in it), and real-time.ts is where they come from.
    const checked = files.filter((f) => !/[\\/](cli|real-time)\.ts$/.test(f));
    assert.ok(checked.length > 20, 'the walk found the sources');
    const offences: string[] = [];
    for (const f of checked) {
      const text = fs.readFileSync(f, 'utf8').replace(/\/\/.*$/gm, '').replace(/\/\*[\s\S]*?\*\//g, '');
      const imported = /import \{([^}]*)\} from '\.{1,2}\/(?:\.\.\/)*real-time'/.exec(text)?.[1] ?? '';
      if (/process\.nextTick\(|Date\.now\(/.test(text)) offences.push(`${path.relative(root, f)}: process.nextTick or Date.now`);
      for (const name of ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'queueMicrotask']) {
        if (new RegExp(`(?<![.\\w])${name}\\(`).test(text) && !new RegExp(`\\b${name}\\b`).test(imported)) offences.push(`${path.relative(root, f)}: ${name}`);
      }
    }
    assert.deepEqual(offences, []);
  });
});

describe('real-time.ts loaded while fake timers are on (jest\'s enableGlobally, a resetModules after useFakeTimers)', () => {
  it('takes the originals @sinonjs/fake-timers keeps on its clock, not the fakes, and the real wall clock whatever mocks Date', () => {
    // @sinonjs/fake-timers (jest and vitest) installs a wrapper on the global with `.clock` set, and
    // keeps the original as clock._<name>: this is that shape.
    const originals = { nextTick: process.nextTick, queueMicrotask: globalThis.queueMicrotask, Date: globalThis.Date };
    const clock: Record<string, unknown> = { _nextTick: originals.nextTick, _queueMicrotask: originals.queueMicrotask, _Date: originals.Date };
    const fakeTick = Object.assign(() => undefined, { clock });
    const fakeMicrotask = Object.assign(() => undefined, { clock });
    // A Date mock of any make (mockdate, vi.setSystemTime, node:test's): no clock to look through.
    const FakeDate = class extends originals.Date {
      static now() {
        return 0;
      }
    };
    const modulePath = require.resolve('../../emulator/real-time');
    const cached = require.cache[modulePath];
    process.nextTick = fakeTick as unknown as typeof process.nextTick;
    globalThis.queueMicrotask = fakeMicrotask as unknown as typeof queueMicrotask;
    globalThis.Date = FakeDate as unknown as DateConstructor;
    let fresh: typeof import('../../emulator/real-time');
    try {
      delete require.cache[modulePath];
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      fresh = require('../../emulator/real-time') as typeof import('../../emulator/real-time');
    } finally {
      process.nextTick = originals.nextTick;
      globalThis.queueMicrotask = originals.queueMicrotask;
      globalThis.Date = originals.Date;
      if (cached) require.cache[modulePath] = cached;
    }
    assert.equal(fresh.nextTick, originals.nextTick);
    assert.equal(fresh.queueMicrotask, originals.queueMicrotask);
    assert.ok(Math.abs(fresh.realNow() - Date.now()) < 5_000, 'the real time, not the fake Date\'s 0');
    // Anything not faked that way is taken as it is.
    assert.equal(fresh.setImmediate, globalThis.setImmediate);
  });
});
