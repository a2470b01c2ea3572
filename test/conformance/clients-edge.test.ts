import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { getEventListeners } from 'node:events';
import WebSocket from 'ws';
import { createCache, type Cache } from '../../emulator/clients/cache';
import { createEnv, runConsumer } from '../../emulator/clients/env';
import { Connection } from '../../emulator/clients/connection';
import { whenAborted } from '../../emulator/clients/abort';
import * as remote from '../../emulator/clients/sync';
import type { SyncQueue } from '../../emulator/clients/sync-face';
import * as memory from '../../emulator/embedded/memory';
import { fresh, heldPulls, readOnlyToken, rejects, startTestEmulator, until } from './support';
import { gc } from '../helpers';
import { QuaysideError } from '../../emulator/errors';
import { optMs, optSeconds } from '../../emulator/clients/common';
import { envNamespace } from '../../emulator/http/env-naming';

// Client edge cases: environment read at connect time (not when the client is built), bodies JSON
// cannot carry, and read operations of a sync handle with a read-only token.

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

/** Requests still waiting for an answer on a Connection (private; read only to prove nothing leaked). */
function pendingOf(c: Connection): number {
  return (c as unknown as { pending: Map<number, unknown> }).pending.size;
}

/** The ops of every request frame sent over any WebSocket while `fn` runs (server answers have none). */
async function framesSentDuring(fn: () => Promise<void>): Promise<string[]> {
  const ops: string[] = [];
  const orig = WebSocket.prototype.send;
  WebSocket.prototype.send = function (this: WebSocket, data: unknown, ...rest: unknown[]) {
    const op = JSON.parse(String(data)).op;
    if (op !== undefined) ops.push(op);
    return (orig as (...a: unknown[]) => void).call(this, data, ...rest);
  } as typeof orig;
  try {
    await fn();
  } finally {
    WebSocket.prototype.send = orig;
  }
  return ops;
}

function circular(): Record<string, unknown> {
  const o: Record<string, unknown> = { a: 1 };
  o.self = o;
  return o;
}

describe('clients: QUAYSIDE_URL / QUAYSIDE_TOKEN are read when a client connects', function () {
  const saved = { url: process.env.QUAYSIDE_URL, token: process.env.QUAYSIDE_TOKEN };
  const emus: Emu[] = [];
  const closers: (() => Promise<void>)[] = [];

  function restoreEnv() {
    for (const [k, v] of [['QUAYSIDE_URL', saved.url], ['QUAYSIDE_TOKEN', saved.token]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  beforeEach(() => {
    delete process.env.QUAYSIDE_URL;
    delete process.env.QUAYSIDE_TOKEN;
  });
  afterEach(async () => {
    restoreEnv();
    for (const c of closers.splice(0)) await c();
    for (const e of emus.splice(0)) await e.close();
  });

  it('a cache and a sync handle built before the emulator started (import time) use the env set afterwards', async () => {
    // As an app module would at import time: nothing configured yet.
    const cache = createCache({ namespace: fresh('app') });
    const jobs = remote.queue({ id: fresh('jobs') });
    closers.push(() => cache.close(), () => jobs.close());

    // The test's before() hook.
    const emu = await startTestEmulator();
    emus.push(emu);
    process.env.QUAYSIDE_URL = emu.url;
    process.env.QUAYSIDE_TOKEN = emu.token;

    const q = cache.queue('work');
    await q.push({ n: 1 });
    const [m] = await q.pull();
    assert.deepEqual(m.body, { n: 1 });
    assert.equal(await q.ack(m.receipt), true);

    await jobs.send({ data: 'hello' });
    const got = await jobs.recv({ wait: false });
    assert.equal(got?.data, 'hello');
    assert.equal(await got!.ack(), true);
  });

  it('a reconnect picks up a changed QUAYSIDE_URL / QUAYSIDE_TOKEN; explicit url / token still win', async () => {
    const a = await startTestEmulator();
    const b = await startTestEmulator();
    emus.push(a, b);
    const conn = new Connection({ client: 'edge-test' });
    closers.push(() => conn.close());
    process.env.QUAYSIDE_URL = a.url;
    process.env.QUAYSIDE_TOKEN = a.token;
    assert.equal(conn.url, a.url);
    const cache = createCache({ namespace: 'swap', transport: conn });
    await cache.queue('q').push(1);
    assert.equal(conn.url, a.url);

    // The emulator goes away and comes back elsewhere (new port, new token).
    await a.close();
    emus.splice(emus.indexOf(a), 1);
    // A push in flight when the socket drops fails `unavailable` (it may or may not have landed), so
    // wait for the client to see the close; the next request then dials again.
    await until(() => !conn.isOpen, 'the client to see the emulator go');
    process.env.QUAYSIDE_URL = b.url;
    process.env.QUAYSIDE_TOKEN = b.token;
    await cache.queue('q').push(2);
    assert.equal(conn.url, b.url);
    assert.equal((await cache.queue('q').stats()).depth, 1, 'the second push went to the new emulator');

    // Given explicitly, the environment is not consulted.
    const pinned = new Connection({ url: b.url, token: b.token });
    closers.push(() => pinned.close());
    process.env.QUAYSIDE_URL = 'ws://127.0.0.1:1';
    process.env.QUAYSIDE_TOKEN = 'nope';
    assert.equal((await pinned.request('stats', { namespace: 'swap', queue: 'q' })).counts.depth, 1);
    assert.equal(pinned.url, b.url);
  });
});

/** A test's emulator on a data directory of its own, which it may restart on the same port, and a Connection to it. */
interface Restartable {
  emu: Emu;
  conn: Connection;
  ns: string;
  restart(): Promise<Emu>;
}

async function onRestartable(fn: (t: Restartable) => Promise<void>, connectTimeoutMs?: number): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-restart-'));
  const first = await startTestEmulator({ memory: false, dataDir: dir });
  const t: Restartable = {
    emu: first,
    conn: new Connection({ url: first.url, token: first.token, connectTimeoutMs }),
    ns: fresh('ns'),
    async restart() {
      t.emu = await startTestEmulator({ memory: false, dataDir: dir, port: t.emu.port, token: t.emu.token });
      return t.emu;
    },
  };
  try {
    await fn(t);
  } finally {
    await t.conn.close();
    await t.emu.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('clients: the emulator restarts under them', function () {
  it('the first call after a restart on the same port reconnects, and a lease held across the restart still acks', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-restart-'));
    let emu = await startTestEmulator({ memory: false, dataDir: dir });
    try {
      const q = remote.queue({ url: emu.url, token: emu.token, id: fresh('jobs') });
      const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh('ns') });
      const c = cache.queue('q');
      await q.send({ data: 'a' });
      await c.push({ n: 1 });
      const m = await q.recv({ wait: false });
      const [pulled] = await c.pull();
      await emu.close();
      emu = await startTestEmulator({ memory: false, dataDir: dir, port: emu.port, token: emu.token });
      // Called at once: the old socket must not take these calls.
      assert.equal(await m!.ack(), true);
      assert.equal(await c.ack(pulled.receipt), true);
      assert.equal((await q.send({ data: 'b' })).messageId.length > 0, true);
      assert.deepEqual(await q.stats(), { ready: 1, delayed: 0, inFlight: 0, dlq: 0 });
      await q.close();
      await cache.close();
    } finally {
      await emu.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('calls on the wire that a stopping emulator did not run go to the emulator that comes back, each applied once', async () => {
    await onRestartable(async (t) => {
      const cache = createCache({ url: t.emu.url, token: t.emu.token, namespace: t.ns });
      const q = remote.queue({ url: t.emu.url, token: t.emu.token, id: fresh('jobs') });
      const c = cache.queue('q');
      await c.push({ n: 0 });
      const [pulled] = await c.pull({ max: 1 });
      await q.send({ data: 'first' });
      const outcome = (p: Promise<unknown>) => p.then((v) => ({ ok: v }), (e: QuaysideError) => ({ failed: `${e.code}: ${e.message}` }));
      // Written to the socket in the turn the stop begins: the emulator reads them only once it is
      // stopping, so it runs none of them. Before, each failed "lost the connection".
      const calls = [...Array.from({ length: 20 }, (_, i) => outcome(c.push({ n: i + 1 }))), outcome(c.ack(pulled.receipt)), outcome(q.send({ data: 'second' }))];
      const closing = t.emu.close();
      calls.push(outcome(c.push({ n: 21 }))); // made after the stop began, as before
      await closing;
      await t.restart();
      const results = await Promise.all(calls);
      for (const r of results) assert.ok('ok' in r, `every call was answered by the new emulator: ${JSON.stringify(r)}`);
      assert.equal((results[20] as { ok: unknown }).ok, true, 'the ack of a lease held across the restart applies');
      const stats = await c.stats();
      assert.equal(stats.ready, 21, '21 pushes, each applied once');
      assert.equal(stats.inFlight, 0);
      assert.deepEqual(await q.stats(), { ready: 2, delayed: 0, inFlight: 0, dlq: 0 });
      await q.close();
      await cache.close();
    });
  });

  it('a call the stop cut off mid-run (close code 1001) fails unavailable and is not sent again; with no emulator back, a call not run fails within the connect timeout', async () => {
    await onRestartable(async (t) => {
      const { conn, ns } = t;
      let emu = t.emu;
      await conn.request('queue.create', { namespace: ns, queue: 'q', dialect: 'cache' });
      // A push that is still running when the stop's 500 ms are up: its outcome is unknown.
      const engine = emu.engine as unknown as { push: (...a: unknown[]) => Promise<unknown> };
      let running!: () => void;
      const started = new Promise<void>((r) => (running = r));
      engine.push = () => {
        running();
        return new Promise(() => {});
      };
      const cut = conn.request('push', { namespace: ns, queue: 'q', body: 1 }).then(() => null, (e: QuaysideError) => e);
      await started;
      await emu.close();
      const e = await cut;
      assert.ok(e instanceof QuaysideError);
      assert.equal(e.code, 'unavailable');
      assert.match(e.message, /lost the connection/);
      emu = await t.restart();
      const { counts } = await emu.engine.getQueue({ namespace: ns, queue: 'q' });
      assert.equal(counts.ready, 0, 'the cut-off push was not sent again');
      await conn.request('queue.get', { namespace: ns, queue: 'q' }); // connected again
      // Not run, and nobody comes back: it waits for an emulator as a new call would, then fails.
      const lone = conn.request('queue.get', { namespace: ns, queue: 'q' }).then(() => null, (e: QuaysideError) => e);
      await emu.close();
      const e2 = await lone;
      assert.ok(e2 instanceof QuaysideError);
      assert.equal(e2.code, 'unavailable');
      assert.match(e2.message, /cannot reach the emulator/, 'it was sent again, to no one');
      assert.equal(pendingOf(conn), 0);
    }, 300);
  });

  it('a call made once the stop closed the socket, before its close event, still leaves the calls not run to be sent again', async () => {
    await onRestartable(async (t) => {
      const { conn, ns } = t;
      await conn.request('queue.create', { namespace: ns, queue: 'q', dialect: 'cache' });
      // The socket's close event is held back, as when an answer and the close frame come in one
      // read and the caller makes its next call at once: that call finds the socket closed first.
      const ws = (conn as unknown as { ws: WebSocket }).ws;
      const emit = ws.emit.bind(ws);
      let closedNow!: () => void;
      const closed = new Promise<void>((r) => (closedNow = r));
      let heldClose: unknown[] | null = null;
      ws.emit = ((event: string, ...a: unknown[]) => {
        if (event !== 'close') return emit(event, ...a);
        heldClose = a;
        closedNow();
        return true;
      }) as typeof ws.emit;
      const outcome = (p: Promise<unknown>) => p.then(() => 'ok', (e: QuaysideError) => `${e.code}: ${e.message}`);
      const closing = t.emu.close();
      const unrun = outcome(conn.request('push', { namespace: ns, queue: 'q', body: 'unrun' }));
      await closed;
      const late = outcome(conn.request('push', { namespace: ns, queue: 'q', body: 'late' }));
      emit('close', ...heldClose!);
      await closing;
      const emu = await t.restart();
      // Before, the late call closed the socket with no code, and the unrun push failed "lost the connection".
      assert.deepEqual({ unrun: await unrun, late: await late }, { unrun: 'ok', late: 'ok' });
      const { counts } = await emu.engine.getQueue({ namespace: ns, queue: 'q' });
      assert.equal(counts.ready, 2);
    });
  });

  it('calls that make or name state of the connection (subscribe, unsubscribe, consumer attach) are not sent again on another: they fail unavailable', async () => {
    await onRestartable(async (t) => {
      const { conn, ns } = t;
      await conn.request('queue.create', { namespace: ns, queue: 'q', dialect: 'env' });
      await conn.request('consumer.set', { namespace: ns, queue: 'q', consumer: { appId: 'app' } });
      const { subscription } = await conn.request('subscribe', { namespace: ns });
      const outcome = (p: Promise<unknown>) => p.then(() => 'ok', (e: QuaysideError) => e.code);
      // On another connection, subscription ids start again: this unsubscribe would end whatever
      // took the same id there (a re-subscription made on reconnect), and an attach would attach twice.
      const closing = t.emu.close();
      const calls = {
        unsubscribe: outcome(conn.request('unsubscribe', { subscription })),
        subscribe: outcome(conn.request('subscribe', { namespace: ns })),
        attach: outcome(conn.request('consumer.attach', { namespace: ns, queue: 'q', appId: 'app' })),
        push: outcome(conn.request('push', { namespace: ns, queue: 'q', body: 1 })),
      };
      await closing;
      await t.restart();
      const got = Object.fromEntries(await Promise.all(Object.entries(calls).map(async ([k, p]) => [k, await p])));
      assert.deepEqual(got, { unsubscribe: 'unavailable', subscribe: 'unavailable', attach: 'unavailable', push: 'ok' });
    });
  });

  it('a wait the emulator ends by stopping fails unavailable, as a lost connection does; it never passes for "nothing came"', async () => {
    const emu = await startTestEmulator();
    const q = remote.queue({ url: emu.url, token: emu.token, id: fresh('jobs') });
    const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh('ns') });
    try {
      await q.stats(); // the queue exists, so the recv below is held
      await cache.queue('q').push(0);
      await cache.queue('q').pull(); // and this one too
      const recv = q.recv({ timeoutMs: 15_000 }).then(() => null, (e: QuaysideError) => e);
      const pull = cache.queue('q').pull({ waitMs: 15_000 }).then(() => null, (e: QuaysideError) => e);
      // A request sent after each on the same connection is answered once the pull before it was started (held).
      await q.stats();
      await cache.queue('q').stats();
      await emu.close();
      for (const e of [await recv, await pull]) {
        assert.ok(e instanceof QuaysideError, 'it failed');
        assert.equal(e.code, 'unavailable');
      }
    } finally {
      await q.close();
      await cache.close();
    }
  });
});

describe('clients: a peer that takes the upgrade and never answers hello', function () {
  it('fails each call unavailable within the connect timeout instead of holding it for ever', async () => {
    // Another WebSocket service on the port: it upgrades, answers pings, and says nothing.
    const wss = new WebSocket.Server({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    const conn = new Connection({ url: `ws://127.0.0.1:${(wss.address() as import('node:net').AddressInfo).port}`, token: 'qs_rw_x', connectTimeoutMs: 1000, heartbeatMs: 10_000 });
    const within = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still waiting after 10 s')), 10_000).unref())]);
    try {
      for (let i = 0; i < 2; i++) {
        const e = await within(conn.request('queue.list', {}).then(() => null, (err: QuaysideError) => err));
        assert.ok(e instanceof QuaysideError, String(e));
        assert.equal(e.code, 'unavailable');
        // (or, on a machine too loaded to finish the upgrade in time, did not complete it)
        assert.match(e.message, /did not (answer hello|complete the WebSocket upgrade) within 1000 ms/);
      }
      assert.equal(conn.isOpen, false);
    } finally {
      await conn.close();
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((r) => wss.close(() => r()));
    }
  });

  it('close() while hello waits: the call that waited for the dial was never sent, and says so; close() settles', async () => {
    const wss = new WebSocket.Server({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    let hellos = 0;
    wss.on('connection', (c) => c.on('message', () => hellos++));
    const conn = new Connection({ url: `ws://127.0.0.1:${(wss.address() as import('node:net').AddressInfo).port}`, token: 'qs_rw_x', connectTimeoutMs: 60_000 });
    const within = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still waiting after 10 s')), 10_000).unref())]);
    try {
      const push = conn.request('push', { namespace: 'n', queue: 'q', body: 1 }).then(() => null, (err: QuaysideError) => err);
      await until(() => hellos === 1, 'the hello sent', 10_000);
      await within(conn.close());
      const e = await within(push);
      assert.ok(e instanceof QuaysideError);
      assert.equal(e.code, 'unavailable');
      assert.equal(e.message, 'connection closed');
      assert.equal(conn.isOpen, false);
    } finally {
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((r) => wss.close(() => r()));
    }
  });
});

describe('clients: closing with writes on the wire', function () {
  const N = 200;
  /** Starts N pushes, closes while they are on their way, and says how each ended. */
  async function closeDuring(push: (i: number) => Promise<unknown>, close: () => Promise<void>, inMemory = false): Promise<{ resolved: number; rejected: QuaysideError[] }> {
    const outcomes = Array.from({ length: N }, (_, i) => push(i).then(() => null, (e: QuaysideError) => e));
    // Every frame written, no answer read yet; in memory, every call handed to the engine, whose
    // commit waits for the next setImmediate.
    if (inMemory) for (let i = 0; i < 50; i++) await Promise.resolve();
    else await new Promise((r) => setImmediate(r));
    await close();
    const ended = await Promise.all(outcomes);
    return { resolved: ended.filter((e) => e === null).length, rejected: ended.filter((e): e is QuaysideError => e !== null) };
  }

  it('a send on its way when its client closes gets its real answer: none applied is reported failed (cache, sync on a shared connection, in memory)', async () => {
    const emu = await startTestEmulator();
    const admin = createCache({ url: emu.url, token: emu.token, namespace: fresh('close') });
    const shared = new Connection({ url: emu.url, token: emu.token });
    try {
      // cache over its own connection
      const ns = fresh('close');
      const cache = createCache({ url: emu.url, token: emu.token, namespace: ns });
      const q = cache.queue('q');
      await q.stats(); // connected, so the pushes go out at once
      const c = await closeDuring((i) => q.push({ i }), () => cache.close());
      const depth = (await createCache({ ...emu, namespace: ns, transport: shared }).queue('q').stats()).depth;
      assert.ok(depth > 0, 'some pushes reached the emulator before the close');
      assert.equal(c.resolved, depth, `${c.rejected.length} rejected: ${c.rejected[0]?.message}`);

      // a sync handle over a shared connection: its close ends its own waits, not its sends
      const id = fresh('jobs');
      const h = remote.queue({ id, transport: shared });
      await h.stats();
      const s = await closeDuring((i) => h.send({ data: i }), () => h.close());
      const ready = (await remote.queue({ id, transport: shared }).stats()).ready;
      assert.ok(ready > 0);
      assert.equal(s.resolved, ready, `${s.rejected.length} rejected: ${s.rejected[0]?.message}`);

      // in memory (a handle's own view of the shared in-process session): every send was handed to
      // the engine, so every one is answered
      const mid = fresh('mem');
      const m = memory.queue({ id: mid });
      await m.stats();
      const r = await closeDuring((i) => m.send({ data: i }), () => m.close(), true);
      assert.equal(r.resolved, (await memory.queue({ id: mid }).stats()).ready);
      assert.equal(r.resolved, N);

      // a call still waiting for a connection was never sent: a handle's close() ends it at once
      const nowhere = new Connection({ url: 'ws://127.0.0.1:9', token: emu.token, connectTimeoutMs: 60_000 });
      const idle = remote.queue({ id: fresh('jobs'), transport: nowhere });
      const unsent = idle.send({ data: 1 }).then(() => null, (e: QuaysideError) => e);
      await new Promise((res) => setTimeout(res, 20));
      await idle.close();
      const gone = await Promise.race([unsent, new Promise<string>((res) => setTimeout(() => res('still waiting after 10 s'), 10_000).unref())]);
      assert.ok(gone instanceof QuaysideError, String(gone));
      assert.match(gone.message, /closed/);
      await nowhere.close();

      // and a held recv still ends at close, leasing nothing
      const w = remote.queue({ id: fresh('jobs'), transport: shared });
      await w.stats();
      const waiting = w.recv({ timeoutMs: 30_000 }).then(() => 'answered', (e: QuaysideError) => e.code);
      await new Promise((res) => setTimeout(res, 20));
      await w.close();
      assert.equal(await waiting, 'unavailable');
    } finally {
      await admin.close();
      await shared.close();
      await emu.close();
    }
  });
});

describe('clients: aborting a call', function () {
  it("a cache pull rejects with the signal's own reason, whatever it is (as fetch does); with none given, an AbortError", async () => {
    const emu = await startTestEmulator();
    const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh('abort') });
    try {
      const q = cache.queue('q');
      await q.stats(); // connected: the pulls below are held
      const reasons: unknown[] = ['mine', { why: 1 }, new RangeError('stop'), 0];
      for (const reason of reasons) {
        const ac = new AbortController();
        const pull = q.pull({ waitMs: 30_000, signal: ac.signal }).then(() => 'resolved', (e: unknown) => e);
        ac.abort(reason);
        assert.equal(await pull, reason);
      }
      const ac = new AbortController();
      const pull = q.pull({ waitMs: 30_000, signal: ac.signal }).then(() => 'resolved', (e: unknown) => e);
      ac.abort();
      assert.equal((await pull as Error).name, 'AbortError');
      assert.deepEqual(await q.stats().then((s) => s.inFlight), 0, 'nothing was leased');
    } finally {
      await cache.close();
      await emu.close();
    }
  });

  it('many waits on one signal (a pool of workers sharing one AbortController, as the seed writes it) put one listener on it, so Node warns of no leak; all end when it aborts', async () => {
    const emu = await startTestEmulator();
    const namespace = fresh('shared-signal');
    const cache = createCache({ url: emu.url, token: emu.token, namespace });
    const remoteQ = remote.queue({ id: fresh('jobs'), tenantId: namespace, url: emu.url, token: emu.token });
    const memoryQ = memory.queue({ id: 'jobs' });
    const project = fresh('p');
    await emu.engine.createQueue({ namespace: `${project}/dev`, queue: 'work', dialect: 'env' });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    const ac = new AbortController();
    const abortListeners = () => getEventListeners(ac.signal, 'abort').length;
    try {
      await cache.queue('q').stats(); // connected: the pulls below are held
      const waits: Promise<unknown>[] = [];
      for (let i = 0; i < 20; i++) {
        waits.push(cache.queue('q').consume(() => {}, { signal: ac.signal }));
        waits.push(remoteQ.recv({ timeoutMs: 60_000, signal: ac.signal }));
        waits.push(memoryQ.recv({ timeoutMs: 60_000, signal: ac.signal }));
      }
      const consumers = await Promise.all(Array.from({ length: 15 }, (_, i) => runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, project, environment: 'dev', queue: 'work', appId: `w${i}`, signal: ac.signal })));
      // Every remote wait is held by the emulator, so its listener is on the signal (the in-process ones were there first).
      await until(() => heldPulls(emu) >= 40, 'the held pulls');
      await new Promise((r) => setImmediate(r)); // a MaxListenersExceededWarning is emitted on a later tick
      assert.ok(abortListeners() <= 1, `${abortListeners()} abort listeners on the shared signal`);
      assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message), []);
      ac.abort();
      const ended = await Promise.all(waits.map((p) => p.then(() => 'resolved', () => 'rejected')));
      assert.equal(ended.length, 60, 'every wait ended');
      await Promise.all(consumers.map((c) => c.stop()));
      assert.equal(abortListeners(), 0, 'nothing is left on the signal');
    } finally {
      process.off('warning', onWarning);
      await cache.close();
      await remoteQ.close();
      await memoryQ.close();
      await emu.close();
    }
  });

  it('whenAborted: each wait is called once on abort, a wait taken back is not, and a callback that throws stops none of the others', async () => {
    const ac = new AbortController();
    const calls: string[] = [];
    const fn = () => calls.push('fn');
    const offA = whenAborted(ac.signal, fn);
    whenAborted(ac.signal, fn); // the same function twice is two waits
    const offB = whenAborted(ac.signal, () => calls.push('taken back'));
    whenAborted(ac.signal, () => {
      throw new Error('boom');
    });
    whenAborted(ac.signal, () => calls.push('after the throw'));
    offB();
    offB(); // twice is harmless
    assert.equal(getEventListeners(ac.signal, 'abort').length, 1);
    // Mocha's own handler would fail the test on the report: it is set aside while this one listens.
    const mochas = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    let thrown: unknown;
    try {
      const reported = new Promise<unknown>((resolve) => process.once('uncaughtException', resolve));
      ac.abort();
      assert.deepEqual(calls, ['fn', 'fn', 'after the throw']);
      thrown = await reported;
    } finally {
      for (const l of mochas) process.on('uncaughtException', l);
    }
    assert.equal((thrown as Error).message, 'boom', "reported as a listener's throw is");
    offA(); // after the abort: nothing to take back
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  });

  it('whenAborted: a wait that fired is let go, even while its take-back is still held (a RunningConsumer an app keeps)', async () => {
    const ac = new AbortController();
    // Only the callback holds the object; the take-back function is kept, as an app keeps its handle.
    const { gone, takeBack } = (() => {
      const obj = { big: new Array(1000).fill(0) };
      return { gone: new WeakRef(obj), takeBack: whenAborted(ac.signal, () => void obj.big) };
    })();
    whenAborted(ac.signal, () => {}); // another wait on the signal, never taken back
    ac.abort();
    await new Promise((r) => setImmediate(r)); // a WeakRef's target lives to the end of the job that made it
    gc();
    assert.equal(gone.deref(), undefined, 'the fired callback and what it held were collected');
    takeBack();
  });

  it('a listener of a signal that outlives many calls is let go by each call that ends (nothing piles up on the signal)', async () => {
    const emu = await startTestEmulator();
    const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh('long-signal') });
    const ac = new AbortController();
    try {
      const q = cache.queue('q');
      for (let i = 0; i < 30; i++) {
        await q.push(i);
        const [m] = await q.pull({ signal: ac.signal });
        await q.ack(m.receipt);
      }
      const waits = Array.from({ length: 12 }, () => q.pull({ waitMs: 1_000, signal: ac.signal }));
      assert.equal(getEventListeners(ac.signal, 'abort').length, 1);
      await emu.clock.advance(1_000);
      await Promise.all(waits);
      assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
    } finally {
      await cache.close();
      await emu.close();
    }
  });

  it('a call waiting for the emulator to come back ends as soon as its signal aborts, mid-dial, a first recv too; close() then ends the dial', async () => {
    const emu = await startTestEmulator();
    const { url, token, port } = emu;
    // A dial that is never answered lasts a minute here, far past the bound each step below is given.
    const conn = new Connection({ url, token, connectTimeoutMs: 60_000 });
    const q = remote.queue({ id: fresh('jobs'), transport: conn });
    const fresher = remote.queue({ id: fresh('jobs'), transport: conn }); // its first call would make its queue
    const cache = createCache({ namespace: fresh('ns'), transport: conn });
    await q.stats();
    await emu.close();
    // The port now takes each dial and never answers it.
    const dials: import('node:net').Socket[] = [];
    const silent = (await import('node:net')).createServer((sock) => {
      sock.on('data', () => {}); // read, so its end is seen
      dials.push(sock);
    });
    await new Promise<void>((r) => silent.listen(port, '127.0.0.1', r));
    const within = <T>(p: Promise<T>, what: string) =>
      Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} still waiting after 10 s`)), 10_000).unref())]);
    try {
      const ac = new AbortController();
      const recv = q.recv({ timeoutMs: 30_000, signal: ac.signal });
      const first = fresher.recv({ timeoutMs: 30_000, signal: ac.signal });
      const pull = cache.queue('q').pull({ waitMs: 30_000, signal: ac.signal }).then(() => 'resolved', (e: unknown) => e);
      await until(() => dials.length >= 1, 'the dial', 10_000);
      ac.abort('stop');
      assert.equal(await within(recv, 'recv'), null, 'an aborted recv is null');
      assert.equal(await within(first, 'a first recv'), null, 'an aborted first recv is null');
      assert.equal(await within(pull, 'pull'), 'stop');
      assert.ok(dials.every((d) => !d.destroyed), 'the dial still hangs');
      // Closed now: the dial in its handshake ends with it, and cannot come back open later.
      await conn.close();
      await until(() => dials.every((d) => d.destroyed), 'the dial ended by close()', 10_000);
      assert.equal(conn.isClosed(), true);
      assert.equal(conn.isOpen, false);
    } finally {
      for (const d of dials) d.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
      await q.close();
      await fresher.close();
      await conn.close();
    }
  });
});

describe('clients: a body is taken as it is when the call is made', function () {
  it('a body the caller changes right after the call is sent as it was, though the call waited for a connection, a queue or a schema (every face, over the emulator and in memory)', async () => {
    const emu = await startTestEmulator();
    const ns = fresh('taken');
    // Each send is a first call (its client dials, a sync handle makes its queue first) or waits on
    // a schema: the body changes in the turn the call was made. Before, each sent { n: 2 }.
    const cache = createCache({ url: emu.url, token: emu.token, namespace: ns });
    const env = createEnv({ url: emu.url, token: emu.token, project: fresh('p'), environment: 'dev' });
    const syncRemote = remote.queue({ url: emu.url, token: emu.token, id: fresh('jobs') });
    const schema = { parse: async (v: unknown) => v };
    const syncSchema = remote.queue({ url: emu.url, token: emu.token, id: fresh('jobs'), schema });
    const mem = memory.createMemoryQueues();
    const memQ = memory.queue({ id: fresh('jobs'), memory: mem });
    const memSchema = memory.queue({ id: fresh('jobs'), memory: mem, schema });
    const made = async (send: (body: { n: number }) => Promise<unknown>) => {
      const body = { n: 1 };
      const p = send(body);
      body.n = 2;
      await p;
    };
    try {
      const envNs = envNamespace(env.project, env.environment);
      await emu.engine.createQueue({ namespace: envNs, queue: 'orders', dialect: 'env' });
      await made((b) => cache.queue('q').push(b));
      const env2 = createEnv({ url: emu.url, token: emu.token, project: env.project, environment: 'dev' });
      await made((b) => env2.queue.send('orders', b));
      await made((b) => env.queue.sendBatch('orders', [{ body: b }]));
      await made((b) => syncRemote.send({ data: b }));
      await made((b) => syncSchema.send({ data: b }));
      await made((b) => memQ.send({ data: b }));
      await made((b) => memQ.send({ data: b })); // its queue made: the in-process transport's own turn
      await made((b) => memSchema.send({ data: b }));
      // The handle's own size bound is checked on what is sent, not on what the body became.
      const bounded = memory.queue({ id: fresh('jobs'), memory: mem, schema, limits: { payloadBytes: 200 } });
      const small = { s: 'small' };
      const sent = bounded.send({ data: small });
      small.s = 'x'.repeat(1000);
      await sent;
      assert.deepEqual((await bounded.recv({ wait: false }))!.data, { s: 'small' });
      await bounded.close();
      // A schema whose parse takes turns checks the body as taken: the check and what is stored agree.
      const slowCheck = { parse: async (v: unknown) => {
        await new Promise((r) => setImmediate(r));
        if ((v as { n: number }).n < 0) throw new Error('n must be >= 0');
        return v;
      } };
      const checked = memory.queue({ id: fresh('jobs'), memory: mem, schema: slowCheck });
      const bad = { n: -1 };
      const refused = checked.send({ data: bad }).then(() => 'sent', (e: QuaysideError) => e.code);
      bad.n = 1;
      assert.equal(await refused, 'invalid_argument');
      const good = { n: 1 };
      const accepted = checked.send({ data: good });
      good.n = -1;
      await accepted;
      assert.deepEqual((await checked.recv({ wait: false }))!.data, { n: 1 });
      assert.deepEqual(await checked.stats(), { ready: 0, delayed: 0, inFlight: 1, dlq: 0 });
      await checked.close();
      const bodies = [
        (await cache.queue('q').pull())[0].body,
        ...(await emu.engine.peek({ namespace: envNs, queue: 'orders' })).messages.map((m) => m.body),
        (await syncRemote.recv({ wait: false }))!.data,
        (await syncSchema.recv({ wait: false }))!.data,
        (await memQ.recv({ wait: false }))!.data,
        (await memQ.recv({ wait: false }))!.data,
        (await memSchema.recv({ wait: false }))!.data,
      ];
      assert.deepEqual(bodies, [{ n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }]);
      await env2.close();
    } finally {
      await Promise.all([cache.close(), env.close(), syncRemote.close(), syncSchema.close(), memQ.close(), memSchema.close()]);
      await mem.close();
      await emu.close();
    }
  });
});

describe('clients: bodies JSON cannot carry', function () {
  let emu: Emu;
  let conn: Connection;
  let cache: Cache;
  before(async () => {
    emu = await startTestEmulator();
    conn = new Connection({ url: emu.url, token: emu.token, client: 'edge-test' });
    cache = createCache({ namespace: fresh('json'), transport: conn });
  });
  after(async () => {
    await conn.close();
    await emu.close();
  });

  it('cache push of a BigInt or a circular object: invalid_argument, nothing pending, nothing sent', async () => {
    const q = cache.queue('bodies');
    await q.stats(); // connected, so any frame below would be a push
    const ops = await framesSentDuring(async () => {
      // Named where it sits, as NaN is: the value itself, the BigInt inside, the key that closes the cycle.
      for (const [body, where, reason] of [[10n, 'body', /BigInt/], [{ deep: [1n] }, 'body.deep[0]', /BigInt/], [{ a: { 'odd key': 2n } }, 'body.a["odd key"]', /BigInt/], [circular(), 'body.self', /circular/]] as const) {
        const e = await rejects(q.push(body));
        assert.equal(e.code, 'invalid_argument');
        assert.equal(e.message.startsWith(`push: ${where} is not JSON-serialisable: `), true, e.message);
        assert.equal(e.details?.field, 'body');
        assert.match(e.message, reason);
        assert.equal(pendingOf(conn), 0, 'a failed encode leaves nothing pending');
      }
    });
    assert.deepEqual(ops, [], 'nothing was sent');
    // What throws when it is looked at (a toJSON getter, a revoked Proxy, a Proxy whose keys throw)
    // is still invalid_argument, named as far as it can be.
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const throwing = (): never => {
      throw new Error('not today');
    };
    const bodies: [unknown, RegExp][] = [
      [{ a: { get toJSON() { return throwing(); } } }, /^push: body\.a is not JSON-serialisable: not today/],
      [{ get toJSON() { return throwing(); } }, /^push: body is not JSON-serialisable: not today/],
      [{ a: revoked.proxy }, /^push: body\.a is not JSON-serialisable: /],
      [{ a: new Proxy({}, { ownKeys: throwing }) }, /^push: body\.a is not JSON-serialisable: not today/],
      [{ toJSON: () => () => 1 }, /^body is not a JSON value: its toJSON\(\) returned a function, which JSON leaves out$/],
    ];
    for (const [body, says] of bodies) {
      const e = await rejects(q.push(body));
      assert.equal(e.code, 'invalid_argument', e.message);
      assert.match(e.message, says);
    }
    assert.equal((await q.stats()).depth, 0);
    await q.push('fine'); // the connection is still good
    assert.equal((await q.stats()).depth, 1);
    assert.equal(pendingOf(conn), 0);
  });

  it('cache push of a function or a symbol says the body is not a JSON value; undefined is still "needs a body"', async () => {
    const q = cache.queue('fn');
    for (const body of [() => 1, Symbol('s')]) {
      const e = await rejects(q.push(body));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /body is not a JSON value/);
    }
    assert.match((await rejects(q.push(undefined))).message, /needs a body/);
    assert.equal((await q.stats()).depth, 0);
  });

  it('what JSON would turn into null (NaN, Infinity, an undefined, function or symbol array element) is refused by every face naming where it sits; nothing is sent', async () => {
    const q = cache.queue('nonfinite');
    const env = createEnv({ project: fresh('nonfinite'), environment: 'dev', transport: conn });
    const s = remote.queue({ id: fresh('nonfinite'), transport: conn });
    await q.stats();
    await s.stats(); // set up, so that only a send could show below
    const ops = await framesSentDuring(async () => {
      for (const [call, re] of [
        [() => q.push(NaN), /^push: body is not a JSON value: it is NaN, which JSON would write as null/],
        [() => q.push([1, undefined]), /^push: body\[1\] is not a JSON value: it is undefined, which JSON would write as null/],
        [() => q.push({ jobs: [() => 1] }), /^push: body\.jobs\[0\] is not a JSON value: it is a function/],
        [() => s.send({ data: { tags: ['a', Symbol('b')] } }), /^send: data\.tags\[1\] is not a JSON value: it is a symbol/],
        [() => s.send({ data: 1, meta: { list: [undefined] } }), /^send: meta\.list\[0\] is not a JSON value: it is undefined/],
        // What a toJSON hands JSON is looked at too, and an invalid Date (which JSON writes as null).
        [() => q.push({ at: new Date('not a date') }), /^push: body\.at is not a JSON value: it is an invalid Date/],
        [() => q.push({ list: [{ toJSON: () => undefined }] }), /^push: body\.list\[0\] is not a JSON value: it is undefined/],
        [() => q.push({ a: { toJSON: () => ({ b: NaN }) } }), /^push: body\.a\.b is not a JSON value: it is NaN/],
        [() => q.push({ n: new Number(Infinity) }), /^push: body\.n is not a JSON value: it is Infinity/],
        [() => q.push({ a: [1, { b: Infinity }] }), /^push: body\.a\[1\]\.b is not a JSON value/],
        [() => q.push({ 'odd key': -Infinity }), /^push: body\["odd key"\] is not a JSON value/],
        [() => env.queue.send('jobs', { n: NaN }), /^push: body\.n is not a JSON value/],
        [() => env.queue.send('jobs', 1, { attributes: { score: NaN } }), /^push: attributes\.score is not a JSON value/],
        [() => env.queue.sendBatch('jobs', [{ body: 1 }, { body: [NaN] }]), /^push\.batch: messages\[1\]\.body\[0\] is not a JSON value/],
        [() => s.send({ data: { x: NaN } }), /^send: data\.x is not a JSON value/],
        [() => s.send({ data: 1, meta: { y: Infinity } }), /^send: meta\.y is not a JSON value/],
        [() => conn.request('push', { namespace: 'raw', queue: 'q', body: { deep: [[[NaN]]] } }), /^push: body\.deep\[0\]\[0\]\[0\] is not a JSON value/],
      ] as const) {
        const e = await rejects(call());
        assert.equal(e.code, 'invalid_argument', String(e));
        assert.match(e.message, re);
      }
    });
    assert.deepEqual(ops, [], 'nothing was sent');
    // A Date (written by its toJSON) and a null in a body are JSON, and go through. A property
    // that is undefined or a function is left out, as JSON.stringify (and every JSON SDK) does.
    await q.push({ at: new Date(0), none: null, n: 1.5, later: undefined, fn: () => 1 });
    assert.deepEqual((await q.pull())[0].body, { at: '1970-01-01T00:00:00.000Z', none: null, n: 1.5 });
  });

  it('a NaN deep inside a body is found and named (past the quick check\'s depth, and in a key that needs quoting)', async () => {
    let v: unknown = { 'a b': [NaN] };
    for (let i = 0; i < 300; i++) v = [v];
    const e = await rejects(cache.queue('deep-nan').push({ v }));
    assert.equal(e.code, 'invalid_argument');
    assert.match(e.message, new RegExp(`^push: body\\.v${'\\[0\\]'.repeat(300)}\\["a b"\\]\\[0\\] is not a JSON value`));
  });

  it('a body nested deeper than the stack allows is refused invalid_argument, not a bare RangeError', async () => {
    let deep: unknown = null;
    for (let i = 0; i < 12_000; i++) deep = [deep];
    const e = await rejects(cache.queue('deep').push(deep));
    assert.ok(e instanceof QuaysideError, String(e));
    assert.equal(e.code, 'invalid_argument');
  });

  it("a sync handle on the caller's own connection: close() ends its stream and its waiting recv, leases nothing, and leaves the connection to the others", async () => {
    const id = fresh('shared-close');
    const a = remote.queue({ id, transport: conn });
    const b = remote.queue({ id, transport: conn });
    await a.stats();
    const it = a.stream({ wait: true })[Symbol.asyncIterator]();
    const next = it.next();
    const waiting = a.recv({ timeoutMs: 60_000 }).then(() => 'answered', (e: QuaysideError) => e.code);
    await new Promise((r) => setTimeout(r, 20)); // both pulls are held on the server
    await a.close();
    assert.deepEqual(await next, { done: true, value: undefined });
    assert.equal(await waiting, 'unavailable');
    assert.equal((await rejects(a.send({ data: 'late' }))).code, 'unavailable');
    // The cancelled pulls took nothing: b (on the same connection, still open) gets what is sent.
    await b.send({ data: 'for b' });
    assert.equal((await b.recv({ wait: false }))?.data, 'for b');
    assert.deepEqual(await b.stats(), { ready: 0, delayed: 0, inFlight: 1, dlq: 0 });
  });

  it('cache.close() ends a running consume() after the batch in hand, whether its pull was held or its handler was running', async () => {
    for (const when of ['held', 'handling'] as const) {
      const c = createCache({ url: emu.url, token: emu.token, namespace: fresh('cache-close') });
      const q = c.queue('q');
      const seen: unknown[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      if (when === 'handling') await q.push(1);
      const running = q.consume(async (m) => {
        seen.push(m.body);
        await gate;
      }, { idleMs: 60_000 });
      if (when === 'handling') await until(() => seen.length === 1, 'the handler runs');
      else await new Promise((r) => setTimeout(r, 20)); // the pull is held
      await c.close();
      release();
      await running;
      await q.push(2); // the cache reconnects for other calls; the ended loop takes nothing
      assert.deepEqual(seen, when === 'handling' ? [1] : [], when);
      assert.equal((await q.stats()).depth, 1, when);
      await c.close();
    }
  });

  it('the engine, called in this process, refuses NaN, Infinity and array holes too (over the wire they cannot arrive)', async () => {
    const ns = fresh('nonfinite-engine');
    for (const [args, re] of [
      [{ body: { a: NaN } }, /^body\.a is not a JSON value/],
      [{ body: 1, meta: [Infinity] }, /^meta\[0\] is not a JSON value/],
      [{ body: { a: [undefined] } }, /^body\.a\[0\] is not a JSON value: it is undefined/],
    ] as const) {
      const e = await rejects(emu.engine.push({ namespace: ns, queue: 'q', create: 'cache', ...args }));
      assert.equal((e as QuaysideError).code, 'invalid_argument');
      assert.match(e.message, re);
    }
    const ok = await emu.engine.push({ namespace: ns, queue: 'q', create: 'cache', body: { a: null } });
    assert.equal(ok.deduped, false);
    assert.equal((await emu.engine.stats({ namespace: ns, queue: 'q' })).counts.depth, 1, 'only the good push was kept');
  });

  it('sync over the emulator: a BigInt in data or a cycle in meta is invalid_argument naming the field', async () => {
    const s = remote.queue({ id: fresh('json'), transport: conn });
    const e1 = await rejects(s.send({ data: 1n }));
    assert.equal(e1.code, 'invalid_argument');
    assert.match(e1.message, /^send: data is not JSON-serialisable: .*BigInt/); // the product's name, not the engine's body
    const e2 = await rejects(s.send({ data: 1, meta: circular() }));
    assert.equal(e2.code, 'invalid_argument');
    assert.match(e2.message, /^send: meta\.self is not JSON-serialisable: .*circular/);
    assert.match((await rejects(s.send({ data: { a: [1, { b: 2n }] } }))).message, /^send: data\.a\[1\]\.b is not JSON-serialisable: .*BigInt/);
    // meta is checked as JSON will write it: a Date or a boxed string would arrive as a string.
    for (const meta of [new Date(0), { toJSON: () => 5 }, new String('s'), { toJSON: () => [1] }]) {
      const e = await rejects(s.send({ data: 1, meta: meta as never }));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /^send: meta must be an object of JSON values, got (string|number|an array) \(as JSON writes it\)$/);
    }
    await s.send({ data: 1, meta: { toJSON: () => ({ k: 'v' }) } as never }); // what JSON writes is a record: fine
    // data whose toJSON gives nothing is refused in the product's words (it said "body is missing").
    const e3 = await rejects(s.send({ data: { toJSON: () => undefined } }));
    assert.equal(e3.message, 'data is not a JSON value: its toJSON() returned undefined, which JSON leaves out');
    assert.equal((await s.stats()).ready, 1);
    assert.equal((await s.recv({ wait: false }))?.ack !== undefined, true);
    assert.match((await rejects(s.send({ data: () => 1 }))).message, /data is not a JSON value/);
    assert.equal(pendingOf(conn), 0);
    assert.equal((await s.stats()).ready, 0);
  });

  it('quayside/sync/memory queue(): the same errors, nothing enqueued', async () => {
    try {
      const s = memory.queue({ id: fresh('json') });
      for (const [data, re] of [[10n, /data is not JSON-serialisable: .*BigInt/], [circular(), /data\.self is not JSON-serialisable: .*circular/], [() => 1, /data is not a JSON value/]] as const) {
        const e = await rejects(s.send({ data }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, re);
      }
      assert.match((await rejects(s.send({ data: undefined }))).message, /needs data/);
      assert.equal((await s.stats()).ready, 0);
      await s.send({ data: { ok: true } });
      assert.deepEqual((await s.recv({ wait: false }))?.data, { ok: true });
    } finally {
      await memory.resetMemory();
    }
  });

  it('normal calls send the same frames as before (cache: push; sync: queue.create then push)', async () => {
    const fresh1 = new Connection({ url: emu.url, token: emu.token });
    const s = remote.queue({ id: fresh('frames'), transport: fresh1 });
    try {
      const ops = await framesSentDuring(async () => {
        await createCache({ namespace: fresh('frames'), transport: fresh1 }).queue('q').push({ a: 1 });
        await s.send({ data: 1 });
        await s.stats();
      });
      assert.deepEqual(ops, ['hello', 'push', 'queue.create', 'push', 'stats']);
    } finally {
      await fresh1.close();
    }
  });
});

describe('clients: a sync handle with a read-only token', function () {
  let emu: Emu;
  const handles: SyncQueue[] = [];
  before(async () => {
    emu = await startTestEmulator();
  });
  after(async () => {
    for (const h of handles) await h.close();
    await emu.close();
  });
  function handle(o: Parameters<typeof remote.queue>[0]): SyncQueue {
    const h = remote.queue(o);
    handles.push(h);
    return h;
  }

  it('reads dlq() and stats() of an existing queue; send, recv and dlqRemove stay forbidden', async () => {
    const tenantId = fresh('tenant');
    const id = fresh('jobs');
    const rw = handle({ id, tenantId, delivery: { maxDeliveries: 1 }, url: emu.url, token: emu.token });
    await rw.send({ data: 'dies' });
    await rw.send({ data: 'waits' });
    const m = await rw.recv({ wait: false });
    assert.equal(await m!.nack({ reason: 'boom' }), true); // maxDeliveries 1: to the DLQ

    const token = await readOnlyToken(emu, tenantId);
    // Overrides that differ from the queue's are not applied (a read-only token cannot configure).
    const ro = handle({ id, tenantId, delivery: { maxDeliveries: 5 }, url: emu.url, token });
    const dlq = await ro.dlq();
    assert.deepEqual(dlq.map((e) => [e.data, e.reason]), [['dies', 'boom']]);
    assert.deepEqual(await ro.stats(), { ready: 1, delayed: 0, inFlight: 0, dlq: 1 });

    for (const p of [ro.send({ data: 'no' }), ro.recv({ wait: false }), ro.dlqRemove({ messageId: dlq[0].messageId })]) {
      const e = await rejects(p);
      assert.equal(e.code, 'forbidden');
    }
    // Nothing changed.
    assert.deepEqual(await rw.stats(), { ready: 1, delayed: 0, inFlight: 0, dlq: 1 });
    assert.equal((await rw.recv({ wait: false }))?.data, 'waits');
  });

  it('a queue that does not exist: reads fail not_found, writes fail forbidden, nothing is created', async () => {
    const tenantId = fresh('tenant');
    const token = await readOnlyToken(emu, tenantId);
    const ro = handle({ id: fresh('missing'), tenantId, url: emu.url, token });
    assert.equal((await rejects(ro.dlq())).code, 'not_found');
    assert.equal((await rejects(ro.stats())).code, 'not_found');
    assert.equal((await rejects(ro.send({ data: 1 }))).code, 'forbidden');
    assert.equal((await rejects(ro.recv({ wait: false }))).code, 'forbidden');
    assert.equal((await rejects(ro.stats())).code, 'not_found');
  });

  it('a token for another namespace is still forbidden for reads', async () => {
    const token = await readOnlyToken(emu, fresh('elsewhere'));
    const ro = handle({ id: fresh('jobs'), tenantId: fresh('tenant'), url: emu.url, token });
    assert.equal((await rejects(ro.stats())).code, 'forbidden');
  });
});

describe('clients: requests as large as a frame allows, and larger', function () {
  this.timeout(60_000);
  let emu: Emu;
  before(async () => {
    emu = await startTestEmulator();
  });
  after(async () => {
    await emu.close();
  });

  it('env sendBatch: 40 messages of 120 KB (4.8 MB) go through as over HTTP; a batch over 8 MiB is payload_too_large at once, nothing sent, and the connection keeps working', async () => {
    const project = fresh('big');
    const conn = new Connection({ url: emu.url, token: emu.token });
    try {
      await conn.request('queue.create', { namespace: `${project}/e`, queue: 's', dialect: 'env' });
      const env = createEnv({ project, environment: 'e', transport: conn });
      const batch = (n: number) => Array.from({ length: n }, (_, i) => ({ body: `${i}`.padEnd(120 * 1024, 'b') }));
      await env.queue.sendBatch('s', batch(40));
      const ops = await framesSentDuring(async () => {
        const e = await rejects(env.queue.sendBatch('s', batch(80)));
        assert.equal(e.code, 'payload_too_large');
        assert.match(e.message, /at most 8388608 bytes \(8 MiB\) per request: send fewer messages at once/);
        assert.ok((e.details as { size: number }).size > 8 * 1024 * 1024);
      });
      assert.deepEqual(ops, [], 'nothing was sent');
      assert.equal(pendingOf(conn), 0);
      const q = (await conn.request('queue.get', { namespace: `${project}/e`, queue: 's' })) as { counts: { ready: number } };
      assert.equal(q.counts.ready, 40, 'the first batch whole, nothing of the second');
      await env.queue.send('s', 'after');
    } finally {
      await conn.close();
    }
  });

  it('sync: payloadBytes may be set up to 4 MiB, and a 4 MiB message goes through over the emulator and in memory alike; more is refused the same way by both', async () => {
    const mem = memory.createMemoryQueues();
    const conn = new Connection({ url: emu.url, token: emu.token });
    try {
      const id = fresh('big');
      const data = 'd'.repeat(4 * 1024 * 1024 - 2 - 48); // with its envelope, exactly 4 MiB
      for (const q of [remote.queue({ id, transport: conn, limits: { payloadBytes: 4 * 1024 * 1024 } }), mem.queue({ id, limits: { payloadBytes: 4 * 1024 * 1024 } })]) {
        await q.send({ data });
        assert.equal(((await q.recv({ wait: false }))?.data as string).length, data.length);
        const over = await rejects(q.send({ data: data + 'x' }));
        assert.equal(over.code, 'payload_too_large');
      }
      const refused = await Promise.all([
        rejects(() => remote.queue({ id: fresh('big'), transport: conn, limits: { payloadBytes: 4 * 1024 * 1024 + 1 } })),
        rejects(() => mem.queue({ id: fresh('big'), limits: { payloadBytes: 4 * 1024 * 1024 + 1 } })),
      ]);
      for (const e of refused) {
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, /payloadBytes/);
      }
      assert.equal(refused[0].message, refused[1].message);
    } finally {
      await conn.close();
      await mem.close();
    }
  });

  it('the engine refuses a message size limit over 4 MiB from any caller (cache settings, queue.create)', async () => {
    const conn = new Connection({ url: emu.url, token: emu.token });
    try {
      const ns = fresh('big');
      const e = await rejects(conn.request('queue.create', { namespace: ns, queue: 'q', dialect: 'cache', policy: { maxPayloadBytes: 4 * 1024 * 1024 + 1 } }));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /maxPayloadBytes is at most 4194304 bytes/);
      assert.equal(((await conn.request('queue.list', { namespace: ns })) as { queues: unknown[] }).queues.length, 0, 'nothing created');
    } finally {
      await conn.close();
    }
  });
});

describe('clients: createEnv / createCache refuse an option they do not know', function () {
  let emu: Emu;
  before(async () => {
    emu = await startTestEmulator();
  });
  after(async () => {
    await emu.close();
  });

  it('a misspelt option is invalid_argument naming it, thrown before any connection; every documented option still works', async () => {
    const project = fresh('opts');
    const ops = await framesSentDuring(async () => {
      for (const make of [
        () => createEnv({ url: emu.url, token: emu.token, project, environment: 'dev', projectt: 'x' } as never),
        () => createCache({ url: emu.url, token: emu.token, namespace: project, namespce: 'x' } as never),
      ]) {
        assert.throws(make, (e: QuaysideError) => e instanceof QuaysideError && e.code === 'invalid_argument' && /"(projectt|namespce)"/.test(e.message));
      }
    });
    assert.deepEqual(ops, [], 'nothing was sent');
    // url, token, project / environment or namespace, and transport.
    const conn = new Connection({ url: emu.url, token: emu.token });
    try {
      await conn.request('queue.create', { namespace: `${project}/dev`, queue: 's', dialect: 'env' });
      const envs = [createEnv({ url: emu.url, token: emu.token, project, environment: 'dev' }), createEnv({ project, environment: 'dev', transport: conn })];
      for (const env of envs) await env.queue.send('s', 1);
      await envs[0].close();
      const caches = [createCache({ url: emu.url, token: emu.token, namespace: project }), createCache({ namespace: project, transport: conn })];
      for (const cache of caches) await cache.queue('c').push(1);
      await caches[0].close();
    } finally {
      await conn.close();
    }
  });

  it("the emulator handle's own keys are accepted, so an app's test may spread it: { ...emu, namespace }", async () => {
    const project = fresh('spread');
    const emuKeys = { ...emu };
    const cache = createCache({ ...emuKeys, namespace: project });
    await cache.queue('c').push(1);
    await cache.close();
    const conn = new Connection({ url: emu.url, token: emu.token });
    try {
      await conn.request('queue.create', { namespace: `${project}/dev`, queue: 's', dialect: 'env' });
    } finally {
      await conn.close();
    }
    const env = createEnv({ ...emuKeys, project, environment: 'dev' });
    await env.queue.send('s', 1);
    await env.close();
    const running = await runConsumer({ async queue() {} }, { ...emuKeys, project, environment: 'dev', queue: 's' });
    await running.stop();
    const q = remote.queue({ ...emuKeys, id: fresh('spread') });
    await q.send({ data: 1 });
    await q.close();
    // A key that is neither the call's nor the handle's is still refused.
    assert.throws(() => createCache({ ...emuKeys, namespace: project, namespce: 'x' } as never), (e: QuaysideError) => e.code === 'invalid_argument' && /namespce/.test(e.message));
  });
});

describe('clients: durations are rounded to whole milliseconds before their limits are checked', () => {
  it('seconds and ms just past a limit by less than half a millisecond are the limit; past by more are refused; below min as rounded is refused', () => {
    assert.equal(optSeconds(43200.0004, 'visibilitySeconds', { min: 0.001, max: 43200 }), 43_200_000);
    assert.throws(() => optSeconds(43200.0006, 'visibilitySeconds', { min: 0.001, max: 43200 }), /visibilitySeconds must be at most 43200 seconds, got 43200.0006/);
    assert.equal(optSeconds(1.2345, 'delaySeconds'), 1235);
    assert.throws(() => optSeconds(0.0004, 'visibilitySeconds', { min: 0.001 }), /at least 0.001 seconds/);
    assert.equal(optMs(999.4, 'leaseMs', { min: 1, max: 999 }), 999);
    assert.throws(() => optMs(999.6, 'leaseMs', { min: 1, max: 999 }), /at most 999 ms/);
    for (const bad of [NaN, Infinity, -1, '5', {}]) assert.throws(() => optMs(bad, 'x'), (e: { code?: string }) => e.code === 'invalid_argument');
  });
});
