import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { createCache, type Cache, type CacheMessage, type CacheQueue } from '../../../emulator/clients/cache';
import { createEnv } from '../../../emulator/clients/env';
import { queue as syncQueue } from '../../../emulator/clients/sync';
import { QuaysideError } from '../../../emulator/errors';
import { startEmulator } from '../../../emulator/emulator';
import { Connection } from '../../../emulator/clients/connection';
import { gc } from '../../helpers';
import { DAY, HOUR, SECOND, START, admin, bodyOfBytes, fresh, readOnlyToken, rejects, startTestEmulator, through, until, watchingFailures } from '../support';

// One test per statement of seeds/000 (the cache product), named after it. Time moves only by the
// emulator's virtual clock.

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

describe('conformance: cache (seeds/000)', function () {
  let emu: Emu;
  let cache: Cache;
  const open: Cache[] = [];

  before(async () => {
    emu = await startTestEmulator();
  });
  after(async () => {
    for (const c of open) await c.close();
    await emu.close();
  });
  beforeEach(() => {
    cache = createCache({ url: emu.url, token: emu.token, namespace: fresh('cache') });
    open.push(cache);
  });

  const handle = async (_body: unknown) => {};

  /** Pulls until a message is dead: each delivery's lease runs out. */
  async function expireAll(q: CacheQueue, times: number) {
    for (let i = 0; i < times; i++) {
      const got = await q.pull({ max: 1000 });
      assert.ok(got.length > 0, `delivery ${i + 1} got a message`);
      await emu.clock.advance(30 * SECOND);
    }
  }

  async function nackAll(q: CacheQueue, times: number) {
    for (let i = 0; i < times; i++) {
      const got = await q.pull({ max: 1000 });
      assert.ok(got.length > 0, `delivery ${i + 1} got a message`);
      for (const m of got) assert.equal(await q.nack(m.receipt), true);
    }
  }

  describe('cache.queue(name)', () => {
    it("cache.queue('name') returns a handle", () => {
      const q = cache.queue('name');
      assert.equal(q.name, 'name');
      for (const fn of ['push', 'pull', 'ack', 'nack', 'consume', 'deadLetters', 'replay', 'purgeDead'] as const) assert.equal(typeof q[fn], 'function');
    });

    it('one handle per name while the app holds it, and none kept for names it no longer uses', async () => {
      // Found by a leak probe: a cache that lived as long as a test suite kept a handle for every
      // queue name it was ever asked for (a name per test).
      const held = cache.queue('held');
      assert.equal(cache.queue('held'), held, 'asked again, the same handle');
      const dropped = (() => new WeakRef(cache.queue('dropped')))();
      await new Promise((r) => setImmediate(r)); // a WeakRef holds its target until the current job ends
      gc();
      assert.equal(dropped.deref(), undefined, 'nothing in the cache holds a handle the app let go');
      assert.equal(cache.queue('held'), held);
    });

    it('the queue exists as soon as you push to it', async () => {
      const q = cache.queue('jobs');
      assert.deepEqual(await q.pull(), []);
      assert.deepEqual(await q.deadLetters(), { messages: [], total: 0, next: null });
      const c = admin(emu);
      try {
        await assert.rejects(c.request('queue.get', { namespace: cache.namespace, queue: 'jobs' }), (e: QuaysideError) => e.code === 'not_found');
        await q.push({ a: 1 });
        const info = await c.request('queue.get', { namespace: cache.namespace, queue: 'jobs' });
        assert.equal(info.dialect, 'cache');
        assert.equal(info.policy.maxDeliveries, 5);
      } finally {
        await c.close();
      }
    });

    it('a pull that may wait (waitMs) on a queue nobody pushed to yet waits there for the first push, and ends empty at its deadline', async () => {
      const q = cache.queue('later');
      const other = createCache({ url: emu.url, token: emu.token, namespace: cache.namespace });
      open.push(other);
      const producer = other.queue('later');
      let settled: unknown[] | undefined;
      const held = q.pull({ waitMs: 5000 }).then((m) => (settled = m));
      // The pull made the (empty) queue to wait on it.
      const c = admin(emu);
      try {
        await until(async () => (await c.request('queue.list', { namespace: cache.namespace })).queues.length === 1, 'the queue made by the waiting pull');
      } finally {
        await c.close();
      }
      assert.equal(settled, undefined, 'still waiting, not answered [] at once');
      await producer.push({ n: 1 });
      const got = await held;
      assert.deepEqual(got.map((m) => (m as { body: unknown }).body), [{ n: 1 }]);
      // With nothing coming, it ends empty when the virtual clock passes its deadline.
      const waiting = cache.queue('never').pull({ waitMs: 5000 });
      await emu.clock.advance(5000);
      assert.deepEqual(await waiting, []);
    });

    it('the name scopes producers and consumers to the same work stream', async () => {
      const producer = cache.queue('stream');
      const consumer = createCache({ url: emu.url, token: emu.token, namespace: cache.namespace }).queue('stream');
      const other = cache.queue('other');
      const elsewhere = createCache({ url: emu.url, token: emu.token, namespace: fresh('cache') }).queue('stream');
      await producer.push({ n: 1 });
      assert.deepEqual(await other.pull(), []);
      assert.deepEqual(await elsewhere.pull(), []);
      const got = await consumer.pull();
      assert.deepEqual(got.map((m) => m.body), [{ n: 1 }]);
    });
  });

  describe('push()', () => {
    it('the push() example runs as written', async () => {
      // --- seed example, with `import { cache } from './cache'` replaced by createCache ---
      const q = cache.queue('emails');

      await q.push({ to: 'ada@example.com', template: 'welcome' });

      // Run it 30 seconds from now:
      await q.push({ to: 'ada@example.com', template: 'nudge' }, { delaySeconds: 30 });

      // Idempotent enqueue: a repeat dedupeKey within an hour enqueues nothing
      const first = await q.push({ orderId: 'o_123' }, { dedupeKey: 'charge:o_123' });
      const again = await q.push({ orderId: 'o_123' }, { dedupeKey: 'charge:o_123' });
      // again.id === first.id, again.deduped === true
      // --- end of example ---
      assert.equal(again.id, first.id);
      assert.equal(again.deduped, true);
      assert.equal(first.deduped, false);
      const now = await q.pull({ max: 10 });
      assert.deepEqual(now.map((m) => m.body), [{ to: 'ada@example.com', template: 'welcome' }, { orderId: 'o_123' }]);
    });

    it('push with delaySeconds runs it that many seconds from now', async () => {
      const q = cache.queue('later');
      await q.push({ template: 'nudge' }, { delaySeconds: 30 });
      assert.deepEqual(await q.pull(), []);
      await emu.clock.advance(29 * SECOND);
      assert.deepEqual(await q.pull(), []);
      await emu.clock.advance(1 * SECOND);
      assert.deepEqual((await q.pull()).map((m) => m.body), [{ template: 'nudge' }]);
    });

    it('delaySeconds may reach a week (the cache preset\'s maxDelayMs); beyond it is invalid_argument and enqueues nothing', async () => {
      const q = cache.queue('tomorrow');
      await q.push('in a day', { delaySeconds: 24 * 3600 });
      const err = await rejects(q.push('too late', { delaySeconds: 7 * 24 * 3600 + 1 }));
      assert.equal(err.code, 'invalid_argument');
      // In the caller's own terms: the option it passed, in seconds.
      assert.match(err.message, /^delaySeconds must be at most 604800 \(the queue's delay limit\), got 604801$/);
      assert.deepEqual(err.details, { field: 'delaySeconds' });
      assert.deepEqual([(await q.stats()).delayed, (await q.stats()).depth], [1, 1]);
      await emu.clock.advance(24 * HOUR);
      assert.deepEqual((await q.pull()).map((m) => m.body), ['in a day']);
    });

    it('a repeat dedupeKey within an hour enqueues nothing', async () => {
      const q = cache.queue('charges');
      const first = await q.push({ orderId: 'o_123' }, { dedupeKey: 'charge:o_123' });
      await emu.clock.advance(HOUR - SECOND);
      const again = await q.push({ orderId: 'o_123' }, { dedupeKey: 'charge:o_123' });
      assert.deepEqual(again, { id: first.id, deduped: true });
      assert.equal((await q.stats()).depth, 1);
      // The window starts at the first push and is not extended: after the hour the key is free.
      await emu.clock.advance(SECOND);
      const later = await q.push({ orderId: 'o_123' }, { dedupeKey: 'charge:o_123' });
      assert.equal(later.deduped, false);
      assert.notEqual(later.id, first.id);
    });

    it('a message body is any JSON value up to 256 KB', async () => {
      const q = cache.queue('bodies');
      for (const body of [null, 0, 'text', true, [1, 'a'], { nested: { deep: [1, 2, 3] } }]) await q.push(body);
      const got = await q.pull({ max: 10 });
      assert.deepEqual(got.map((m) => m.body), [null, 0, 'text', true, [1, 'a'], { nested: { deep: [1, 2, 3] } }]);
      await q.push(bodyOfBytes(256 * 1024));
      const e = await rejects(q.push(bodyOfBytes(256 * 1024 + 1)));
      assert.equal(e.code, 'payload_too_large');
      assert.equal(e.status, 413);
      assert.equal((await rejects(q.push(undefined))).code, 'invalid_argument');
    });

    it('on the free tier a namespace accepts 1,000 queue messages a day; the push after that answers 429 until midnight UTC', async () => {
      const free = await startTestEmulator({ freeTier: true });
      const c = createCache({ url: free.url, token: free.token, namespace: 'free' });
      try {
        const a = c.queue('a');
        const b = c.queue('b');
        for (let i = 0; i < 500; i++) await a.push(i);
        for (let i = 0; i < 500; i++) await b.push(i);
        const e = await rejects(a.push('one too many'));
        assert.equal(e.status, 429);
        assert.equal(e.code, 'quota_exceeded');
        const midnight = Date.UTC(2026, 0, 6);
        assert.equal(e.resetAt, midnight);
        // Another namespace has its own quota.
        await createCache({ url: free.url, token: free.token, namespace: 'other' }).queue('a').push(1);
        await free.clock.advance(midnight - START - SECOND);
        assert.equal((await rejects(b.push('still today'))).status, 429);
        await free.clock.advance(SECOND);
        assert.equal((await a.push('a new day')).deduped, false);
      } finally {
        await c.close();
        await free.close();
      }
    });
  });

  describe('pull / ack / nack', () => {
    it('pull() leases messages: each becomes invisible to other consumers for visibilitySeconds', async () => {
      const q = cache.queue('lease');
      await q.push({ n: 1 });
      const [m] = await q.pull({ visibilitySeconds: 10 });
      assert.equal(m.leaseUntil, emu.clock.now() + 10 * SECOND);
      const other = createCache({ url: emu.url, token: emu.token, namespace: cache.namespace }).queue('lease');
      assert.deepEqual(await other.pull(), []);
      await emu.clock.advance(9 * SECOND);
      assert.deepEqual(await other.pull(), []);
      await emu.clock.advance(1 * SECOND);
      const again = await other.pull();
      assert.equal(again[0].id, m.id);
      assert.equal(again[0].attempts, 2);
    });

    it('a receipt settles only through its own queue: another queue\'s handle (or another namespace\'s, or a queue never made) gets false and changes nothing', async () => {
      const jobs = cache.queue('own');
      const other = cache.queue('own-other');
      const foreign = createCache({ url: emu.url, token: emu.token, namespace: fresh('cache') });
      open.push(foreign);
      await jobs.push('j1');
      await jobs.push('j2');
      await other.push('o');
      await foreign.queue('own').push('f');
      const [m1, m2] = await jobs.pull({ max: 2 });
      assert.equal(await other.ack(m1.receipt), false);
      assert.equal(await foreign.queue('own').nack(m2.receipt), false);
      assert.equal(await cache.queue('never-made').ack(m1.receipt), false);
      const s = await jobs.stats();
      assert.deepEqual([s.ready, s.inFlight], [0, 2], 'both still leased');
      assert.equal(await jobs.ack(m1.receipt), true);
      assert.equal(await jobs.nack(m2.receipt), true);
    });

    it('what cannot be a receipt at all is invalid_argument, on a queue never made as on one that exists', async () => {
      const q = cache.queue('receipts-exist');
      await q.push('x');
      for (const handle of [q, cache.queue('receipts-never-made')]) {
        for (const bad of ['r'.repeat(201), '']) {
          assert.equal((await rejects(handle.ack(bad))).code, 'invalid_argument', `ack ${bad.length}`);
          assert.equal((await rejects(handle.nack(bad))).code, 'invalid_argument', `nack ${bad.length}`);
        }
      }
      assert.equal((await q.stats()).ready, 1);
    });

    it('a misspelt option is refused (invalid_argument, naming it) and changes nothing', async () => {
      const q = cache.queue('misspelt');
      const e = await rejects(q.push('now?', { delaySecond: 60 } as never));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /delaySecond/);
      assert.equal((await rejects(q.push('x', { dedupKey: 'k' } as never))).code, 'invalid_argument');
      assert.equal((await q.stats()).depth, 0, 'nothing was pushed');
      await q.push('y');
      assert.equal((await rejects(q.pull({ visibilityTimeout: 5 } as never))).code, 'invalid_argument');
      assert.equal((await q.stats()).inFlight, 0, 'nothing was leased');
      assert.equal((await rejects(q.deadLetters({ limt: 5 } as never))).code, 'invalid_argument');
      assert.equal((await rejects(q.replay({ id: ['m_1'] } as never))).code, 'invalid_argument');
      assert.equal((await rejects(q.purgeDead({ id: ['m_1'] } as never))).code, 'invalid_argument');
      assert.equal((await rejects(q.consume(() => undefined, { idle: 5 } as never))).code, 'invalid_argument');
      // ack and nack take a receipt only: a nack "with a delay" would otherwise retry at once.
      const [m] = await q.pull({ visibilitySeconds: 300 });
      // As JavaScript would call them: the types take a receipt only.
      const loose = q as unknown as Record<'ack' | 'nack', (receipt: string, o: unknown) => Promise<boolean>>;
      const nackDelay = await rejects(loose.nack(m.receipt, { delaySeconds: 60 }));
      assert.equal(nackDelay.code, 'invalid_argument');
      assert.match(nackDelay.message, /nack\(receipt\) takes no options, got option "delaySeconds"/);
      const ackOption = await rejects(loose.ack(m.receipt, { force: true }));
      assert.equal(ackOption.code, 'invalid_argument');
      assert.doesNotMatch(ackOption.message, /nack/, 'an ack is not told about nacks');
      // Finite in seconds, not in milliseconds: refused under the name it was given.
      assert.match((await rejects(q.push(1, { delaySeconds: 1e306 }))).message, /^delaySeconds is too large/);
      assert.equal((await rejects((q.stats as (x: unknown) => Promise<unknown>)({ x: 1 }))).code, 'invalid_argument');
      assert.deepEqual(await q.stats().then((st) => [st.ready, st.inFlight]), [0, 1], 'still leased: nothing was settled');
      assert.equal(await loose.nack(m.receipt, {}), true, 'an empty options object is no option');
    });

    it('null options are no options, as undefined is; options that are not an object are invalid_argument and change nothing', async () => {
      const q = cache.queue('null-options');
      const loose = q as unknown as Record<'push' | 'pull' | 'deadLetters' | 'consume', (...a: unknown[]) => Promise<unknown>>;
      await loose.push('a', null);
      await loose.push('b', undefined);
      assert.equal((await q.stats()).depth, 2);
      const [m] = (await loose.pull(null)) as CacheMessage[];
      assert.equal(m.body, 'a', 'a pull of one with the default lease');
      assert.equal((await q.stats()).inFlight, 1);
      assert.deepEqual(await loose.deadLetters(null), { messages: [], total: 0, next: null });
      for (const [call, args] of [
        ['push', ['c', 'soon']],
        ['pull', [5]],
        ['deadLetters', [[]]],
        ['consume', [() => undefined, true]],
      ] as const) {
        const e = await rejects(loose[call](...args));
        assert.equal(e.code, 'invalid_argument', `${call}(${JSON.stringify(args.at(-1))})`);
        assert.match(e.message, new RegExp(`^${call} options must be an object`));
      }
      assert.deepEqual(await q.stats().then((st) => [st.ready, st.inFlight]), [1, 1], 'nothing pushed or leased');
      // consume(handler, null) runs with the defaults (until the cache closes) and acks what it handled.
      assert.equal(await q.ack(m.receipt), true);
      let handled!: (body: unknown) => void;
      const got = new Promise((r) => (handled = r));
      const run = loose.consume(async (msg: CacheMessage) => handled(msg.body), null);
      assert.equal(await got, 'b');
      await cache.close();
      await run;
      assert.deepEqual(await q.stats().then((st) => [st.depth, st.inFlight]), [0, 0], 'handled and acked');
    });

    it('waitMs and idleMs beyond 20 minutes are refused in the unit they were given in (ms)', async () => {
      const q = cache.queue('wait-limit');
      const e = await rejects(q.pull({ waitMs: 3_600_000 }));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /^waitMs must be at most 1200000 ms, got 3600000$/);
      const i = await rejects(q.consume(() => undefined, { idleMs: 1_200_001 }));
      assert.match(i.message, /^idleMs must be at most 1200000 ms, got 1200001$/);
      assert.match((await rejects(q.pull({ waitMs: 'soon' } as never))).message, /^waitMs must be a number of ms, got/);
    });

    it('createCache (and the other clients) refuse a url or token that is not a string, or is empty, as invalid_argument', () => {
      for (const bad of [{ url: 5 }, { url: {} }, { token: 5 }]) {
        assert.throws(() => createCache({ namespace: 'n', ...bad } as never), { code: 'invalid_argument', message: /must be a string, got a (number|object)/ });
      }
      // An empty one is refused too (an unset variable read into it), not sent and answered 401 later.
      assert.throws(() => createCache({ namespace: 'n', token: '' }), { code: 'invalid_argument', message: /^token must not be empty; leave it out to use QUAYSIDE_TOKEN/ });
      assert.throws(() => createEnv({ project: 'p', environment: 'e', url: '' }), { code: 'invalid_argument', message: /^url must not be empty/ });
      assert.throws(() => syncQueue({ id: 'q', token: '' }), { code: 'invalid_argument', message: /^token must not be empty/ });
      // A transport that is not one is refused when the client is made, not as a TypeError at its first call.
      for (const transport of [{}, 5, { request: () => null }]) {
        const says = { code: 'invalid_argument', message: /^transport must be a Transport \(an object with request, onEvent, onReconnect and close\)/ };
        assert.throws(() => createCache({ namespace: 'n', transport } as never), says);
        assert.throws(() => createEnv({ project: 'p', environment: 'e', transport } as never), says);
        assert.throws(() => syncQueue({ id: 'q', transport } as never), says);
      }
    });

    it('you ack(receipt) to finish one', async () => {
      const q = cache.queue('ack');
      await q.push('done');
      const [m] = await q.pull();
      assert.equal(await q.ack(m.receipt), true);
      await emu.clock.advance(31 * SECOND);
      assert.deepEqual(await q.pull(), []);
      assert.deepEqual(await q.stats().then((s) => [s.depth, s.inFlight, s.dead]), [0, 0, 0]);
    });

    it('nack(receipt) releases it early for another attempt', async () => {
      const q = cache.queue('nack');
      await q.push('again');
      const [m] = await q.pull({ visibilitySeconds: 300 });
      assert.equal(await q.nack(m.receipt), true);
      const [back] = await q.pull();
      assert.equal(back.id, m.id);
      assert.equal(back.attempts, 2);
    });

    it('the pull / ack / nack example runs as written', async () => {
      const q = cache.queue('example');
      for (let i = 0; i < 12; i++) await q.push({ i, fail: i % 4 === 0 });
      const handled: number[] = [];
      const handle = async (body: any) => {
        if (body.fail) throw new Error('boom');
        handled.push(body.i);
      };
      // --- seed example ---
      // Pull up to 10, lease them for 30s:
      const messages = await q.pull({ max: 10, visibilitySeconds: 30 });

      for (const msg of messages) {
        try {
          await handle(msg.body);
          await q.ack(msg.receipt); // done — remove it
        } catch {
          await q.nack(msg.receipt); // failed — make it visible again to retry
        }
      }
      // --- end of example ---
      assert.equal(messages.length, 10);
      assert.deepEqual(handled, [1, 2, 3, 5, 6, 7, 9]);
      const s = await q.stats();
      assert.equal(s.depth, 5); // 3 nacked + the 2 not pulled
      assert.equal(s.inFlight, 0);
    });

    it('each pulled message carries its id, body, receipt, attempts, enqueue time and lease end', async () => {
      const q = cache.queue('fields');
      const t0 = emu.clock.now();
      const { id } = await q.push({ hello: 'world' }, { dedupeKey: 'k1' });
      await emu.clock.advance(5 * SECOND);
      const [m] = await q.pull({ visibilitySeconds: 45 });
      assert.equal(m.id, id);
      assert.deepEqual(m.body, { hello: 'world' });
      assert.equal(typeof m.receipt, 'string');
      assert.equal(m.attempts, 1);
      assert.equal(m.enqueuedAt, t0);
      assert.equal(m.leaseUntil, t0 + 5 * SECOND + 45 * SECOND);
      assert.equal(m.visibleUntil, m.leaseUntil);
      assert.equal(m.dedupeKey, 'k1');
    });
  });

  describe('the consume() convenience loop', () => {
    it('consume() pulls, hands each message to your handler, and auto-acks on return / auto-nacks on throw', async () => {
      const q = cache.queue('consume');
      await q.push({ ok: true });
      await q.push({ ok: false });
      const ac = new AbortController();
      const seen: [unknown, number][] = [];
      const run = q.consume(
        async (msg) => {
          seen.push([msg.body, msg.attempts]);
          if (seen.length === 3) ac.abort();
          if (!(msg.body as { ok: boolean }).ok) throw new Error('retry me');
        },
        { max: 10, signal: ac.signal, idleMs: 1000 },
      );
      await run;
      assert.deepEqual(seen, [[{ ok: true }, 1], [{ ok: false }, 1], [{ ok: false }, 2]]);
      // The third delivery threw too: it was nacked before the loop stopped.
      const s = await q.stats();
      assert.equal(s.inFlight, 0);
      assert.equal(s.depth, 1);
      const [left] = await q.pull();
      assert.deepEqual([left.body, left.attempts], [{ ok: false }, 3]);
    });

    it('onError hears a handler\'s throw; one that throws or rejects itself neither ends the loop nor leaves an unhandled rejection; one that is not a function is refused', async () => {
      const q = cache.queue('on-error');
      assert.equal((await rejects(q.consume(handle, { onError: 5 as never }))).code, 'invalid_argument');
      await q.push('a');
      await q.push('b');
      await watchingFailures(async ({ unhandled, logged }) => {
        const ac = new AbortController();
        const heard: unknown[] = [];
        let n = 0;
        await q.consume(
          async (m) => {
            if (++n === 2) ac.abort();
            throw new Error(`fail ${String(m.body)}`);
          },
          {
            signal: ac.signal,
            onError: (e, m) => {
              heard.push([(e as Error).message, m.body]);
              // The first time a rejected promise, the second a plain throw.
              if (heard.length === 1) return Promise.reject(new Error('onError rejected'));
              throw new Error('onError threw');
            },
          },
        );
        await new Promise((r) => setImmediate(r));
        assert.deepEqual(heard, [['fail a', 'a'], ['fail b', 'b']], 'the loop went on past the failing onError');
        assert.deepEqual(unhandled, []);
        assert.deepEqual(logged.map((a) => (a[1] as Error).message).sort(), ['onError rejected', 'onError threw']);
        const s = await q.stats();
        assert.deepEqual([s.depth, s.inFlight], [2, 0], 'both were nacked back');
      });
    });

    it('consume() loops until the signal aborts', async () => {
      const q = cache.queue('loop');
      const ac = new AbortController();
      const seen: unknown[] = [];
      let finished = false;
      const run = q.consume(async (m) => void seen.push(m.body), { signal: ac.signal, idleMs: 60_000 }).then(() => (finished = true));
      // Empty queue: the loop waits (a pull held by the server), it does not end.
      await q.push(1);
      await until(() => seen.length === 1, 'the first message');
      await emu.clock.advance(10 * 60 * SECOND);
      await q.push(2);
      await until(() => seen.length === 2, 'the second message');
      assert.equal(finished, false);
      ac.abort();
      await run;
      assert.equal(finished, true);
      assert.deepEqual(seen, [1, 2]);
    });

    it('idleMs: when the queue is empty it waits before polling again, without busy polling', async () => {
      const conn = new Connection({ url: emu.url, token: emu.token });
      let pulls = 0;
      const counting = through(conn, (op, args, o) => {
        if (op === 'pull') pulls++;
        return conn.request(op, args, o);
      });
      const q = createCache({ transport: counting, namespace: cache.namespace }).queue('idle');
      await q.push('warm-up'); // creates the queue
      await q.pull().then(([m]) => q.ack(m.receipt));
      pulls = 0;
      const ac = new AbortController();
      const seen: unknown[] = [];
      const run = q.consume(async (m) => void seen.push(m.body), { signal: ac.signal, idleMs: 30_000 });
      // The wait is held by the server: a push during it is delivered at once, and a delayed
      // message becomes due on the virtual clock and wakes it.
      await q.push('now');
      await until(() => seen.length === 1, 'the pushed message');
      await q.push('in 20s', { delaySeconds: 20 });
      await emu.clock.advance(20 * SECOND);
      await until(() => seen.length === 2, 'the delayed message');
      // One held pull before each message and one after the last: a loop that polled while the
      // queue was empty would have sent many more by the time the emulator saw no request for a while.
      await until(() => pulls >= 3, 'the pull after the last message');
      await emu.clock.advance(0);
      ac.abort();
      await run;
      await conn.close();
      assert.deepEqual(seen, ['now', 'in 20s']);
      assert.equal(pulls, 3);
    });

    it('idleMs: 0 does not spin: an empty pull is still held (100 ms), and a push is handed over at once', async () => {
      const conn = new Connection({ url: emu.url, token: emu.token });
      let pulls = 0;
      const counting = through(conn, (op, args, o) => {
        if (op === 'pull') pulls++;
        return conn.request(op, args, o);
      });
      const c = createCache({ transport: counting, namespace: cache.namespace });
      const q = c.queue('idle-zero');
      const ac = new AbortController();
      const seen: unknown[] = [];
      const run = q.consume(async (m) => void seen.push(m.body), { signal: ac.signal, idleMs: 0 });
      await until(() => pulls >= 1, 'the first pull');
      const first = Date.now();
      // advance() waits until no request has come for a few turns: a spinning loop would keep sending.
      await emu.clock.advance(50);
      // Each empty pull is held 100 ms of real time, however long this machine took meanwhile.
      const most = 2 + Math.floor((Date.now() - first) / 100);
      assert.ok(pulls <= most, `${pulls} pulls of an empty queue in ${Date.now() - first} ms (at most ${most})`);
      await q.push('now');
      await until(() => seen.length === 1, 'the pushed message');
      ac.abort();
      await run;
      await c.close();
    });

    it('cache.close() during a batch: close() does not wait for the handler, the batch is still finished and acked, and no connection is left open', async () => {
      const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
      const watcher = cache.queue('close-mid-batch');
      await watcher.stats(); // this test's own connection, open before the count
      const before = sockets();
      const c = createCache({ url: emu.url, token: emu.token, namespace: cache.namespace });
      const q = c.queue('close-mid-batch');
      for (let i = 0; i < 3; i++) await q.push(i);
      const seen: unknown[] = [];
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const run = q.consume(async (m) => {
        seen.push(m.body);
        if (seen.length === 1) await held;
      }, { max: 3 });
      await until(() => seen.length === 1, 'the first message of the batch');
      await c.close(); // resolves with the handler still waiting
      release();
      await run;
      assert.deepEqual(seen, [0, 1, 2], 'the whole batch was handled');
      const st = await watcher.stats();
      assert.deepEqual([st.depth, st.inFlight], [0, 0], 'and acked');
      await until(() => sockets() <= before, 'the connection the batch was settled over is closed');
    });

    it('an emulator that cannot be reached ends the batch in hand: the rest is not handled (it could not be acked) and goes back when its lease ends', async () => {
      const lone = await startEmulator({ clock: 'virtual' });
      const conn = new Connection({ url: lone.url, token: lone.token, connectTimeoutMs: 200 });
      const c = createCache({ transport: conn, namespace: 'outage' });
      const q = c.queue('jobs');
      for (let i = 0; i < 3; i++) await q.push(i);
      const seen: unknown[] = [];
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const ac = new AbortController();
      const run = q.consume(async (m) => {
        seen.push(m.body);
        if (seen.length === 1) await held;
      }, { max: 3, signal: ac.signal });
      await until(() => seen.length === 1, 'the first message of the batch');
      await lone.close();
      release();
      await until(async () => conn.isOpen === false, 'the connection lost');
      ac.abort();
      await run;
      assert.deepEqual(seen, [0], 'the two messages whose ack could not go out were not handed over');
      await c.close();
    });

    it('ac.abort() stops the loop cleanly: the batch in hand is finished, nothing stays leased', async () => {
      const q = cache.queue('clean');
      for (let i = 0; i < 5; i++) await q.push(i);
      const ac = new AbortController();
      const seen: unknown[] = [];
      await q.consume(
        async (m) => {
          seen.push(m.body);
          if (m.body === 1) ac.abort();
        },
        { max: 3, signal: ac.signal },
      );
      assert.deepEqual(seen, [0, 1, 2]);
      const s = await q.stats();
      assert.equal(s.inFlight, 0);
      assert.equal(s.depth, 2);
    });

    it('the consume() example runs as written', async () => {
      const q = cache.queue('consume-example');
      for (let i = 0; i < 3; i++) await q.push({ i });
      const seen: unknown[] = [];
      const handle = async (body: unknown) => {
        seen.push(body);
        if (seen.length === 3) ac.abort();
      };
      // --- seed example ---
      const ac = new AbortController();

      await q.consume(
        async (msg) => {
          await handle(msg.body); // return normally → auto-ack
          // throw            → auto-nack (retry)
        },
        {
          max: 10, // batch size per pull
          visibilitySeconds: 30, // lease per message
          idleMs: 1000, // wait when the queue is empty before polling again
          signal: ac.signal, // ac.abort() to stop the loop cleanly
        },
      );
      // --- end of example ---
      assert.deepEqual(seen, [{ i: 0 }, { i: 1 }, { i: 2 }]);
      assert.equal((await q.stats()).depth + (await q.stats()).inFlight, 0);
    });
  });

  describe('delivery, retries & the DLQ', () => {
    it('at-least-once: a handler that crashes after doing the work but before acking gets it redelivered', async () => {
      const q = cache.queue('crash');
      await q.push({ job: 1 });
      const [m] = await q.pull();
      // …the work is done, then the worker dies without acking.
      await emu.clock.advance(30 * SECOND);
      const [again] = await q.pull();
      assert.equal(again.id, m.id);
      assert.deepEqual(again.body, { job: 1 });
    });

    it('visibility timeout: a pulled message is hidden for visibilitySeconds (default 30s); not acked, it becomes visible again and attempts increments', async () => {
      const q = cache.queue('vis');
      await q.push('x');
      const [m] = await q.pull();
      assert.equal(m.leaseUntil - emu.clock.now(), 30 * SECOND);
      await emu.clock.advance(30 * SECOND - 1);
      assert.deepEqual(await q.pull(), []);
      await emu.clock.advance(1);
      const [again] = await q.pull();
      assert.equal(again.attempts, m.attempts + 1);
    });

    it('give slow work a longer lease', async () => {
      const q = cache.queue('slow');
      await q.push('slow');
      const [m] = await q.pull({ visibilitySeconds: 600 });
      await emu.clock.advance(599 * SECOND);
      assert.deepEqual(await q.pull(), []);
      assert.equal(await q.ack(m.receipt), true);
    });

    it("one receipt per delivery: once a lease runs out and the message goes to another consumer, the old receipt no longer acks or nacks it", async () => {
      const q = cache.queue('receipts');
      await q.push('shared');
      const [slow] = await q.pull();
      await emu.clock.advance(30 * SECOND);
      const [fast] = await q.pull();
      assert.notEqual(fast.receipt, slow.receipt);
      assert.equal(await q.ack(slow.receipt), false);
      assert.equal(await q.nack(slow.receipt), false);
      // The copy someone else is processing is untouched.
      assert.equal((await q.stats()).inFlight, 1);
      assert.equal(await q.ack(fast.receipt), true);
      // An expired receipt is stale even before anyone else pulls.
      await q.push('alone');
      const [m] = await q.pull({ visibilitySeconds: 5 });
      await emu.clock.advance(5 * SECOND);
      assert.equal(await q.ack(m.receipt), false);
    });

    it('after 5 deliveries that end in a nack or an expired lease, a message moves to the dead-letter queue instead of retrying forever', async () => {
      const q = cache.queue('dlq');
      await q.push('mixed');
      for (let i = 0; i < 4; i++) {
        const [m] = await q.pull();
        assert.equal(m.attempts, i + 1);
        if (i % 2 === 0) await q.nack(m.receipt);
        else await emu.clock.advance(30 * SECOND);
      }
      const [fifth] = await q.pull();
      assert.equal(fifth.attempts, 5);
      await q.nack(fifth.receipt);
      assert.deepEqual(await q.pull(), []);
      const dead = await q.deadLetters();
      assert.equal(dead.total, 1);
      assert.equal(dead.messages[0].attempts, 5);
    });

    it('a dead letter stays there for 14 days', async () => {
      const q = cache.queue('retention');
      await q.push('old');
      await nackAll(q, 5);
      assert.equal((await q.deadLetters()).total, 1);
      await emu.clock.advance(14 * DAY - 1);
      assert.equal((await q.deadLetters()).total, 1);
      await emu.clock.advance(1);
      assert.equal((await q.deadLetters()).total, 0);
    });

    it('idempotent enqueue: a dedupeKey on push and idempotent handlers cover both ends', async () => {
      const q = cache.queue('both-ends');
      const done = new Set<string>();
      await q.push({ orderId: 'o_9' }, { dedupeKey: 'charge:o_9' });
      await q.push({ orderId: 'o_9' }, { dedupeKey: 'charge:o_9' });
      const [m] = await q.pull();
      done.add((m.body as { orderId: string }).orderId); // the work, then a crash before ack
      await emu.clock.advance(30 * SECOND);
      const [again] = await q.pull();
      done.add((again.body as { orderId: string }).orderId);
      await q.ack(again.receipt);
      assert.deepEqual([...done], ['o_9']);
      assert.deepEqual(await q.pull(), []);
    });
  });

  describe('dead letters', () => {
    it('the dead letters example runs as written', async () => {
      const q = cache.queue('dead-example');
      for (let i = 0; i < 3; i++) await q.push({ i });
      await nackAll(q, 5);
      const lines: unknown[][] = [];
      const console = { log: (...a: unknown[]) => lines.push(a) };
      // --- seed example ---
      const { messages, total } = await q.deadLetters({ limit: 20 });
      for (const m of messages) console.log(m.id, m.reason, m.attempts, m.deadAt);

      await q.replay({ ids: [messages[0].id] }); // back on the queue, retries reset
      await q.replay(); // the oldest 100
      await q.purgeDead({ ids: [messages[1].id] }); // delete for good
      // --- end of example ---
      assert.equal(total, 3);
      assert.deepEqual(lines.map((l) => l[1]), ['nack', 'nack', 'nack']);
      assert.deepEqual(lines.map((l) => l[2]), [5, 5, 5]);
      assert.ok(lines.every((l) => typeof l[3] === 'number'));
      // replay() took the other two, so purgeDead found nothing left to purge.
      assert.equal((await q.deadLetters()).total, 0);
      assert.equal((await q.stats()).depth, 3);
    });

    it('deadLetters({ limit }) lists each message with its id, reason, attempts, deadAt and body, and the total', async () => {
      const q = cache.queue('list');
      for (let i = 0; i < 3; i++) await q.push({ i });
      await nackAll(q, 5);
      const page = await q.deadLetters({ limit: 2 });
      assert.equal(page.total, 3);
      assert.equal(page.messages.length, 2);
      const [m] = page.messages;
      assert.deepEqual(Object.keys(m).sort(), ['attempts', 'body', 'deadAt', 'enqueuedAt', 'id', 'lastError', 'reason'].sort());
      assert.deepEqual(m.body, { i: 0 });
      assert.equal(m.deadAt, emu.clock.now());
      const rest = await q.deadLetters({ limit: 2, cursor: page.next! });
      assert.deepEqual(rest.messages.map((x) => x.body), [{ i: 2 }]);
    });

    it('replay({ ids }) puts a message back on the queue with retries reset', async () => {
      const q = cache.queue('replay-ids');
      const a = await q.push('a');
      await q.push('b');
      await nackAll(q, 5);
      assert.deepEqual(await q.replay({ ids: [a.id] }), { replayed: 1 });
      const [m] = await q.pull({ max: 10 });
      assert.equal(m.id, a.id);
      assert.equal((await q.deadLetters()).total, 1);
    });

    it('replay() replays the oldest 100', async () => {
      const q = cache.queue('replay-all');
      for (let i = 0; i < 105; i++) await q.push(i);
      await nackAll(q, 5);
      assert.equal((await q.deadLetters()).total, 105);
      assert.deepEqual(await q.replay(), { replayed: 100 });
      const left = await q.deadLetters();
      assert.deepEqual(left.messages.map((m) => m.body), [100, 101, 102, 103, 104]);
    });

    it('purgeDead({ ids }) deletes for good; purgeDead() deletes them all', async () => {
      const q = cache.queue('purge');
      const ids = [];
      for (let i = 0; i < 4; i++) ids.push((await q.push(i)).id);
      await nackAll(q, 5);
      assert.deepEqual(await q.purgeDead({ ids: [ids[1]] }), { purged: 1 });
      assert.deepEqual((await q.deadLetters()).messages.map((m) => m.id), [ids[0], ids[2], ids[3]]);
      assert.deepEqual(await q.replay({ ids: [ids[1]] }), { replayed: 0 });
      // Ids are opaque: one that names no message, whatever its form, matches nothing.
      assert.deepEqual(await q.replay({ ids: ['does-not-exist', 'm_999999'] }), { replayed: 0 });
      assert.deepEqual(await q.purgeDead({ ids: ['does-not-exist'] }), { purged: 0 });
      assert.equal((await rejects(q.purgeDead({ ids: [42] as never }))).code, 'invalid_argument');
      assert.deepEqual(await q.purgeDead(), { purged: 3 });
      assert.equal((await q.deadLetters()).total, 0);
      assert.equal((await q.stats()).depth, 0);
    });

    it('reason is timeout when the last lease expired and nack when your handler gave it back', async () => {
      const q = cache.queue('reasons');
      await q.push('expired');
      await expireAll(q, 5);
      await q.push('nacked');
      await nackAll(q, 5);
      const { messages } = await q.deadLetters();
      assert.deepEqual(messages.map((m) => [m.body, m.reason]), [['expired', 'timeout'], ['nacked', 'nack']]);
    });

    it('a replayed message starts again at attempts: 1 on its next delivery', async () => {
      const q = cache.queue('attempts');
      const { id } = await q.push('again');
      await nackAll(q, 5);
      await q.replay({ ids: [id] });
      const [m] = await q.pull();
      assert.equal(m.attempts, 1);
      // …and gets its full 5 deliveries again.
      await q.nack(m.receipt);
      await nackAll(q, 4);
      assert.equal((await q.deadLetters()).total, 1);
    });

    it('replay and purge need a read-write token', async () => {
      const q = cache.queue('rw');
      await q.push('x');
      await nackAll(q, 5);
      const token = await readOnlyToken(emu, cache.namespace);
      const ro = createCache({ url: emu.url, token, namespace: cache.namespace });
      open.push(ro);
      const rq = ro.queue('rw');
      assert.equal((await rq.deadLetters()).total, 1); // listing is a read
      for (const [op, p] of [['replay', rq.replay()], ['purgeDead', rq.purgeDead()], ['push', rq.push('no')], ['pull', rq.pull()]] as const) {
        const e = await rejects(p);
        assert.equal(e.code, 'forbidden');
        assert.equal(e.status, 403);
        // In the cache API's words: the call the app made, not the emulator's operation (dead.replay).
        assert.equal(e.message, `${op}(): this token is read-only; ${op} needs a read-write token`);
      }
      assert.equal((await q.deadLetters()).total, 1);
    });

    it('each replay and purge is recorded in the audit log with who did it and how many messages it moved', async () => {
      const q = cache.queue('audit');
      for (let i = 0; i < 3; i++) await q.push(i);
      await nackAll(q, 5);
      const ids = (await q.deadLetters()).messages.map((m) => m.id);
      await q.replay({ ids: [ids[0]] });
      await q.purgeDead();
      // One that names no message is a replay all the same: recorded with count 0.
      assert.deepEqual(await q.replay({ ids: [] }), { replayed: 0 });
      assert.deepEqual(await q.purgeDead({ ids: [] }), { purged: 0 });
      const c = admin(emu);
      try {
        const { entries } = await c.request('audit.list', { namespace: cache.namespace, queue: 'audit' });
        const mine = entries.map((e) => [e.action, e.count, e.token]).sort();
        assert.deepEqual(mine, [['purge_dead', 0, 'admin'], ['purge_dead', 2, 'admin'], ['replay', 0, 'admin'], ['replay', 1, 'admin']]);
      } finally {
        await c.close();
      }
    });

    it('from a terminal, quayside dead <queue> --ns <namespace> lists them, and quayside replay / purge-dead act on them', async function () {
      this.timeout(30000);
      const q = cache.queue('jobs');
      await q.push({ job: 'cli' });
      await nackAll(q, 5);
      const run = promisify(execFile);
      const cli = path.resolve(__dirname, '../../../emulator/cli.ts');
      const tsx = path.resolve(__dirname, '../../../node_modules/.bin/tsx');
      const args = ['--ns', cache.namespace, '--url', emu.url, '--token', emu.token, '--json'];
      const listed = JSON.parse((await run(tsx, [cli, 'dead', 'jobs', ...args])).stdout);
      // The fields deadLetters() gives: id, reason, attempts, deadAt (and the body).
      const [dead] = (await q.deadLetters()).messages;
      assert.equal(listed.total, 1);
      assert.deepEqual(
        [listed.messages[0].id, listed.messages[0].reason, listed.messages[0].attempts, listed.messages[0].deadAt, listed.messages[0].body],
        [dead.id, 'nack', 5, dead.deadAt, { job: 'cli' }],
      );
      // --ids given empty is a usage error (64), never "all of them".
      // With --json the error is JSON on stderr.
      // So is an option the command does not take: a misspelt --delay must not push at once.
      for (const [cmd, what] of [
        [['replay', 'jobs', '--ids='], /--ids needs at least one message id/],
        [['purge-dead', 'jobs', '--ids', ''], /--ids needs/],
        [['dead', 'jobs', '--limit', '0'], /--limit must be a whole number ≥ 1/],
        [['peek', 'jobs', '--state', ''], /--state names no state/],
        [['push', 'jobs', '{"n":1}', '--dealy', '60000'], /unknown option --dealy for push/],
        [['replay', 'jobs', '--id', 'm_1'], /unknown option --id for replay/],
      ] as const) {
        const bad = await run(tsx, [cli, ...cmd, ...args]).then(() => null, (e: { code: number; stderr: string }) => e);
        assert.equal(bad?.code, 64, `${cmd.join(' ')} should be a usage error`);
        const { error } = JSON.parse(bad!.stderr) as { error: { code: string; message: string } };
        assert.equal(error.code, 'usage');
        assert.match(error.message, what);
      }
      assert.equal((await q.deadLetters()).total, 1);
      assert.equal((await q.stats()).depth, 0, 'the misspelt push pushed nothing');
      await run(tsx, [cli, 'replay', 'jobs', ...args]);
      assert.equal((await q.deadLetters()).total, 0);
      assert.equal((await q.stats()).depth, 1);
      // quayside audit shows who replayed: the token's name and id.
      const audit = await run(tsx, [cli, 'audit', ...args.filter((a) => a !== '--json')]);
      const [head, row] = audit.stdout.trim().split('\n');
      assert.match(head, /^AT\s+TOKEN\s+TOKEN ID\s+NAMESPACE\s+QUEUE\s+ACTION\s+COUNT$/);
      assert.match(row, new RegExp(`\\sadmin\\s+tok_[0-9a-f]{12}\\s+${cache.namespace}\\s+jobs\\s+replay\\s+1$`));
    });
  });

  describe('depth & lag', () => {
    it('queue depth, in-flight and dead-lettered counts refresh every time the queue is pushed to or pulled from', async () => {
      const q = cache.queue('counts');
      const c = admin(emu);
      const seen: { kind: string; depth: number; leased: number; dead: number }[] = [];
      c.onEvent((e) => {
        if (e.event === 'change' && e.counts && e.queue === 'counts') seen.push({ kind: e.kind, depth: e.counts.depth, leased: e.counts.leased, dead: e.counts.dead });
      });
      await c.request('subscribe', { namespace: cache.namespace });
      await q.push(1);
      await q.push(2);
      const [m] = await q.pull();
      await q.ack(m.receipt);
      await until(() => seen.some((s) => s.kind === 'acked'), 'the ack event');
      const s = await q.stats();
      assert.deepEqual([s.depth, s.inFlight, s.dead], [1, 0, 0]);
      assert.deepEqual(seen.filter((x) => x.kind !== 'queue_created').map((x) => [x.kind, x.depth, x.leased]), [['pushed', 1, 0], ['pushed', 2, 0], ['leased', 1, 1], ['acked', 1, 0]]);
      await c.close();
    });

    it("the last 24 hours in half-hour steps: the peak depth and the longest wait of the oldest message, as lag_history", async () => {
      const q = cache.queue('lag');
      await q.push('waits');
      await emu.clock.advance(45 * 60 * SECOND);
      await q.push('second');
      const s = await q.stats();
      assert.equal(s.lag_history.length, 48);
      for (let i = 1; i < 48; i++) assert.equal(s.lag_history[i].start - s.lag_history[i - 1].start, 30 * 60 * SECOND);
      assert.equal(s.lag_history[47].start % (30 * 60 * SECOND), 0);
      const last = s.lag_history[47];
      assert.equal(last.peakDepth, 2);
      assert.equal(last.maxWaitMs, 45 * 60 * SECOND);
    });

    it('a queue never pushed to has zero counts and 48 empty steps ending with the current one (as an idle queue shows)', async () => {
      const s = await cache.queue(fresh('never')).stats();
      assert.deepEqual([s.depth, s.ready, s.delayed, s.inFlight, s.dead, s.oldestReadyAgeMs], [0, 0, 0, 0, 0, 0]);
      assert.equal(s.lag_history.length, 48);
      const now = await emu.clock.now();
      assert.equal(s.lag_history[47].start, Math.floor(now / (30 * 60 * SECOND)) * 30 * 60 * SECOND);
      for (let i = 1; i < 48; i++) assert.equal(s.lag_history[i].start - s.lag_history[i - 1].start, 30 * 60 * SECOND);
      assert.ok(s.lag_history.every((st) => st.peakDepth === 0 && st.maxWaitMs === 0));
    });
  });

  describe('errors', () => {
    it('errors surface as QuaysideError with a stable code and status', async () => {
      const q = cache.queue('errors');
      for (const [p, field] of [
        [() => q.push(1, { delaySeconds: NaN }), 'delaySeconds'],
        [() => q.push(1, { delaySeconds: -1 }), 'delaySeconds'],
        [() => q.push(1, { delaySeconds: Infinity }), 'delaySeconds'],
        [() => q.pull({ visibilitySeconds: NaN }), 'visibilitySeconds'],
        [() => q.pull({ max: 0 }), 'max'],
      ] as const) {
        const e = await rejects(p);
        assert.ok(e instanceof QuaysideError);
        assert.equal(e.code, 'invalid_argument');
        assert.equal(e.status, 400);
        assert.match(e.message, new RegExp(field));
      }
      assert.equal((await q.stats()).depth, 0);
    });

    it('a call the emulator cannot answer fails with unavailable instead of hanging', async function () {
      this.timeout(15000);
      const c = createCache({ url: 'ws://127.0.0.1:9', namespace: 'x' });
      const e = await rejects(c.queue('q').push(1));
      assert.equal(e.code, 'unavailable');
      await c.close();
    });
  });
});
