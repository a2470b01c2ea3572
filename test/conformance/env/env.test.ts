import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmulator } from '../../../emulator/emulator';
import { createCache } from '../../../emulator/clients/cache';
import { createEnv, runConsumer, type ConsumerApp, type Env, type MessageBatch, type RunningConsumer } from '../../../emulator/clients/env';
import { QuaysideError } from '../../../emulator/errors';
import { Connection } from '../../../emulator/clients/connection';
import { DAY, SECOND, admin, fresh, httpCall, rejects, startTestEmulator, through, until, watchingFailures } from '../support';

// One test per statement of seeds/001 (the env product), named after it; the HTTP API over real
// HTTP (fetch). Time moves only by the emulator's virtual clock.

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

describe('conformance: env (seeds/001)', function () {
  let emu: Emu;
  let project: string;
  const environment = 'dev';
  let env: Env;
  const running: RunningConsumer[] = [];

  const api = (method: string, path: string, body?: unknown, token = emu.token) => httpCall(emu, method, path, body, token);
  const createQueue = async (slug: string, settings: Record<string, unknown> = {}, p = project) => {
    const r = await api('POST', '/v1/queues', { project: p, environment, slug, ...settings });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body as { id: string; slug: string };
  };
  const consume = async (app: ConsumerApp<any, any>, slug: string, o: Record<string, unknown> = {}) => {
    const c = await runConsumer(app, { url: emu.url, token: emu.token, project, environment, queue: slug, onError: () => {}, ...o });
    running.push(c);
    return c;
  };

  /** A connection for a run whose detach a test waits on: `detached()` is true once the emulator answered it. */
  const watchingDetach = () => {
    const conn = new Connection({ url: emu.url, token: emu.token });
    let answered = false;
    const transport = through(conn, (op, args, o) => {
      const answer = conn.request(op, args, o);
      if (op === 'consumer.detach') void answer.then(() => (answered = true), () => {});
      return answer;
    });
    return { conn, transport, detached: () => answered };
  };

  before(async () => {
    emu = await startTestEmulator();
  });
  after(async () => {
    for (const c of running) await c.stop();
    await emu.close();
  });
  beforeEach(() => {
    project = fresh('proj');
    env = createEnv({ url: emu.url, token: emu.token, project, environment });
  });
  afterEach(async () => {
    for (const c of running.splice(0)) await c.stop();
    await env.close();
  });

  describe('queues', () => {
    it('one message is processed by one consumer (work distribution)', async () => {
      await createQueue('work');
      for (let i = 0; i < 30; i++) await env.queue.send('work', i);
      const seen: number[][] = [[], []];
      for (const i of [0, 1]) await consume({ async queue(b: MessageBatch<number>) { for (const m of b.messages) seen[i].push(m.body); } }, 'work', { maxConcurrency: 2 });
      await until(() => seen[0].length + seen[1].length === 30, 'all 30');
      assert.deepEqual([...seen[0], ...seen[1]].sort((a, b) => a - b), [...Array(30).keys()]);
    });

    it('a queue delivers either to a consumer app (push) or to callers that pull it over the data API — never both', async () => {
      const q = await createQueue('either');
      await env.queue.send('either', 'x');
      assert.equal((await api('POST', `/v1/queues/${q.id}/receive`, {})).body.messages.length, 1);
      await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker' });
      assert.equal((await api('POST', `/v1/queues/${q.id}/receive`, {})).status, 409);
    });

    it('queues are created in the console (or the management API); apps only send and consume', async () => {
      const e = await rejects(env.queue.send('never-created', { id: 1 }));
      assert.equal(e.code, 'not_found');
      assert.equal((await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues.length, 0);
      await createQueue('never-created');
      await env.queue.send('never-created', { id: 1 });
    });
  });

  describe('send from an app', () => {
    it('any app can send to any queue in its own project and environment, by slug — no binding to set up', async () => {
      await createQueue('a');
      await createQueue('b');
      const other = createEnv({ url: emu.url, token: emu.token, project, environment });
      await other.queue.send('a', 1);
      await env.queue.send('b', 2);
      await other.close();
      const list = (await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues;
      assert.deepEqual(list.map((q: any) => [q.slug, q.counts.depth]).sort(), [['a', 1], ['b', 1]]);
    });

    it('the send example runs as written', async () => {
      await createQueue('orders');
      // --- seed example ---
      await env.queue.send('orders', { id: 1 });
      await env.queue.send('orders', { id: 2 }, { delaySeconds: 30 });
      await env.queue.sendBatch('orders', [{ body: { id: 3 } }, { body: { id: 4 }, delaySeconds: 5 }]);
      // --- end of example ---
      const q = (await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues[0];
      const peek = (await api('GET', `/v1/queues/${q.id}/messages`)).body.messages;
      assert.deepEqual(peek.map((m: any) => [m.body.id, m.state]), [[1, 'ready'], [2, 'delayed'], [3, 'ready'], [4, 'delayed']]);
      await emu.clock.advance(5 * SECOND);
      const after5 = (await api('GET', `/v1/queues/${q.id}/messages`)).body.messages;
      assert.deepEqual(after5.map((m: any) => m.state), ['ready', 'delayed', 'ready', 'ready']);
    });

    it('sendBatch is all or nothing', async () => {
      const q = await createQueue('batch', { maxDepth: 3 });
      const e = await rejects(env.queue.sendBatch('batch', [{ body: 1 }, { body: 2 }, { body: 3 }, { body: 4 }]));
      assert.equal(e.code, 'queue_full');
      assert.equal((await rejects(env.queue.sendBatch('batch', [{ body: 1 }, { body: 2, delaySeconds: NaN }]))).code, 'invalid_argument');
      // A misspelt option names the item it is in.
      const typo = await rejects(env.queue.sendBatch('batch', [{ body: 1 }, { body: 2, delaySecond: 1 } as never]));
      assert.match(typo.message, /^unknown sendBatch messages\[1\] option "delaySecond"; expected one of contentType, delaySeconds, attributes, dedupId, body$/);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
    });

    it('sendBatch takes the batch\'s delaySeconds for the messages that set none; other options are refused', async () => {
      const q = await createQueue('batch-delay');
      for (const bad of [{ delaySecond: 30 }, 'garbage', { delaySeconds: -1 }, { delaySeconds: 13 * 3600 }]) {
        const e = await rejects(env.queue.sendBatch('batch-delay', [{ body: 1 }], bad as never));
        assert.equal(e.code, 'invalid_argument', JSON.stringify(bad));
      }
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0, 'nothing was sent');
      await env.queue.sendBatch('batch-delay', [{ body: 'a' }, { body: 'b', delaySeconds: 5 }, { body: 'c', delaySeconds: 0 }], { delaySeconds: 30 });
      const states = async () => (await api('GET', `/v1/queues/${q.id}/messages`)).body.messages.map((m: any) => [m.body, m.state]);
      assert.deepEqual(await states(), [['a', 'delayed'], ['b', 'delayed'], ['c', 'ready']]);
      await emu.clock.advance(5 * SECOND);
      assert.deepEqual(await states(), [['a', 'delayed'], ['b', 'ready'], ['c', 'ready']]);
      await emu.clock.advance(25 * SECOND);
      assert.deepEqual(await states(), [['a', 'ready'], ['b', 'ready'], ['c', 'ready']]);
    });

    it('the slug is resolved within the app\'s scope; a queue elsewhere is reported as not found', async () => {
      const elsewhere = fresh('proj');
      await createQueue('theirs', {}, elsewhere);
      assert.equal((await rejects(env.queue.send('theirs', 1))).code, 'not_found');
      const staging = createEnv({ url: emu.url, token: emu.token, project, environment: 'staging' });
      await createQueue('mine');
      assert.equal((await rejects(staging.queue.send('mine', 1))).code, 'not_found');
      await staging.close();
    });

    it('send options: contentType, delaySeconds, attributes, dedupId and encoding', async () => {
      await createQueue('opts');
      const a = await env.queue.send('opts', { j: 1 }, { attributes: { kind: 'j' }, dedupId: 'd1' });
      const again = await env.queue.send('opts', { j: 1 }, { dedupId: 'd1' });
      assert.equal(again.id, a.id);
      await env.queue.send('opts', 'plain', { contentType: 'text' });
      await env.queue.send('opts', new Uint8Array([1, 2, 255]), { contentType: 'bytes' });
      assert.equal((await rejects(env.queue.send('opts', 5, { contentType: 'text' }))).code, 'invalid_argument');
      // v8: a structured-cloneable value (a Map, a Date, a typed array, a BigInt) arrives as itself.
      const cloned = { when: new Date(0), seen: new Map([['a', 1n]]), raw: new Uint16Array([7]) };
      await env.queue.send('opts', cloned, { contentType: 'v8' });
      assert.equal((await rejects(env.queue.send('opts', { f: () => 1 }, { contentType: 'v8' }))).code, 'invalid_argument');
      assert.equal((await rejects(env.queue.send('opts', 5, { contentType: '' as never }))).code, 'invalid_argument');
      // Another label (a MIME type) is kept as given; the body is JSON.
      await env.queue.send('opts', { m: 1 }, { contentType: 'application/json' });
      const got: any[] = [];
      await consume({ async queue(b) { for (const m of b.messages) got.push([m.body, m.contentType, m.attributes]); } }, 'opts', { maxBatchSize: 5 });
      await until(() => got.length === 5, 'five messages');
      assert.deepEqual(got, [[{ j: 1 }, 'json', { kind: 'j' }], ['plain', 'text', {}], [new Uint8Array([1, 2, 255]), 'bytes', {}], [cloned, 'v8', {}], [{ m: 1 }, 'application/json', {}]]);
    });

    it('there are no per-org/per-app send quotas — a send is bounded by the queue\'s maxDepth/maxBytes and refused with queue full at capacity', async () => {
      await createQueue('full', { maxDepth: 2 });
      await createQueue('bytes', { maxBytes: 20 });
      for (let i = 0; i < 2; i++) await env.queue.send('full', i);
      const e = await rejects(env.queue.send('full', 3));
      assert.equal(e.code, 'queue_full');
      await env.queue.send('bytes', 'x'.repeat(10));
      assert.equal((await rejects(env.queue.send('bytes', 'x'.repeat(10)))).code, 'queue_full');
      // Well past any free-tier style count, an unbounded queue keeps accepting.
      await createQueue('unbounded');
      await env.queue.sendBatch('unbounded', Array.from({ length: 1000 }, (_, i) => ({ body: i })));
      await env.queue.sendBatch('unbounded', Array.from({ length: 200 }, (_, i) => ({ body: i })));
    });
  });

  describe('consume with an app', () => {
    it('set one app as the queue\'s consumer: the host batches messages and calls that app\'s queue(batch, env, ctx) handler', async () => {
      const q = await createQueue('consumed');
      for (let i = 0; i < 3; i++) await env.queue.send('consumed', i);
      const calls: { queue: string; bodies: number[]; hasEnv: boolean; hasCtx: boolean }[] = [];
      await consume({ async queue(batch: MessageBatch<number>, e: any, ctx: any) { calls.push({ queue: batch.queue, bodies: batch.messages.map((m) => m.body), hasEnv: typeof e.queue.send === 'function', hasCtx: typeof ctx.waitUntil === 'function' }); } }, 'consumed', { appId: 'worker' });
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.consumer.appId, 'worker');
      await emu.clock.advance(5 * SECOND);
      await until(() => calls.length === 1, 'one batch');
      assert.deepEqual(calls, [{ queue: 'consumed', bodies: [0, 1, 2], hasEnv: true, hasCtx: true }]);
      await until(async () => (await api('GET', `/v1/queues/${q.id}`)).body.counts.depth === 0, 'acked');
    });

    it('runConsumer takes the app module as require() hands over an `export default { queue }` ({ default: app }); anything else is invalid_argument', async () => {
      await createQueue('module');
      await env.queue.send('module', 'm');
      const seen: unknown[] = [];
      const app = { async queue(b: MessageBatch) { for (const m of b.messages) seen.push(m.body); } };
      await consume({ default: app } as never, 'module', { maxBatchSize: 1 });
      await until(() => seen.length === 1, 'the default export was called');
      assert.deepEqual(seen, ['m']);
      for (const bad of [{}, { default: {} }, { queue: 5 }, null]) {
        assert.equal((await rejects(runConsumer(bad as never, { url: emu.url, token: emu.token, project, environment, queue: 'module' }))).code, 'invalid_argument', JSON.stringify(bad));
      }
    });

    it('runConsumer: an onError that is not a function is refused; one that rejects is logged, not an unhandled rejection, and delivery goes on', async () => {
      await createQueue('on-error');
      assert.equal((await rejects(runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, project, environment, queue: 'on-error', onError: 'log' as never }))).code, 'invalid_argument');
      await watchingFailures(async ({ unhandled, logged }) => {
        const handled: unknown[] = [];
        const c = await consume({ async queue(b: MessageBatch) { for (const m of b.messages) handled.push(m.body); throw new Error('handler'); } }, 'on-error', {
          maxBatchSize: 1,
          maxBatchTimeoutMs: 0,
          onError: async () => { throw new Error('onError rejected'); },
        });
        await env.queue.send('on-error', 1);
        await until(() => handled.length >= 1 && logged.length >= 1, 'the batch failed and onError\'s rejection was logged');
        await env.queue.send('on-error', 2);
        await until(() => handled.includes(2), 'delivery went on');
        await c.stop();
        await new Promise((r) => setImmediate(r));
        assert.deepEqual(unhandled, []);
        assert.equal((logged[0][1] as Error).message, 'onError rejected');
      });
    });

    it('dedupId is checked under its own name: one over 512 characters is refused naming dedupId', async () => {
      await createQueue('dedup-name');
      const e = await rejects(env.queue.send('dedup-name', 1, { dedupId: 'd'.repeat(513) }));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /^dedupId must be at most 512 characters/);
      const b = await rejects(env.queue.sendBatch('dedup-name', [{ body: 1 }, { body: 2, dedupId: 'd'.repeat(513) }]));
      assert.match(b.message, /dedupId must be at most 512 characters/);
      assert.match((await rejects(env.queue.send('dedup-name', 1, { dedupId: 'd\ud800' }))).message, /^dedupId must be well-formed Unicode/);
    });

    it('only the app set as the queue\'s consumer is called: one replaced (by the console or another runConsumer) gets no more batches', async () => {
      const q = await createQueue('switch');
      const seen: Record<string, unknown[]> = { first: [], second: [] };
      const app = (name: string) => ({ async queue(b: MessageBatch) { for (const m of b.messages) seen[name].push(m.body); } });
      await consume(app('first'), 'switch', { appId: 'first', maxBatchSize: 1 });
      await env.queue.send('switch', 1);
      await until(() => seen.first.length === 1, 'the first app gets its batch');
      // The console makes another app the consumer: the running one is no longer called.
      assert.equal((await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'elsewhere', maxBatchSize: 1 })).status, 200);
      await env.queue.send('switch', 2);
      await emu.clock.advance(10 * SECOND);
      assert.deepEqual(seen.first, [1]);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.ready, 1, 'it waits for its own app');
      // A second runConsumer makes its app the consumer: it gets every batch from then on.
      await consume(app('second'), 'switch', { appId: 'second', maxBatchSize: 1 });
      for (const n of [3, 4, 5]) await env.queue.send('switch', n);
      await until(() => seen.second.length === 4, 'the second app gets all four');
      assert.deepEqual([seen.first, [...seen.second].sort()], [[1], [2, 3, 4, 5]]);
    });

    it('the consumer example runs as written', async () => {
      await createQueue('example');
      await env.queue.send('example', { ok: 1 });
      await env.queue.send('example', { fail: true });
      const processed: unknown[] = [];
      const meta: unknown[] = [];
      const process = async (body: any) => {
        processed.push(body);
        if (body.fail) throw new Error('nope');
      };
      const router = { handle: () => new Response('ok') };
      // --- seed example (export default → const app) ---
      const app = {
        async queue(batch: MessageBatch, env: unknown) {
          for (const msg of batch.messages) {
            try {
              await process(msg.body); // msg.id, msg.attempts, msg.attributes, msg.timestamp
              meta.push([msg.id, msg.attempts, msg.attributes, msg.timestamp instanceof Date]);
              msg.ack();
            } catch {
              msg.retry({ delaySeconds: 30 });
            }
          }
        },
        fetch: (req: Request, env: unknown, ctx: unknown) => router.handle(),
      };
      // --- end of example ---
      await consume(app, 'example', { maxBatchSize: 2 });
      await until(() => processed.length === 2, 'first batch');
      await emu.clock.advance(29 * SECOND);
      assert.equal(processed.length, 2);
      await emu.clock.advance(1 * SECOND);
      await emu.clock.advance(5 * SECOND); // the retried message is a batch of one: it goes after maxBatchTimeoutMs
      await until(() => processed.length === 3, 'the retry');
      assert.deepEqual(processed, [{ ok: 1 }, { fail: true }, { fail: true }]);
      assert.deepEqual((meta[0] as unknown[]).slice(1), [1, {}, true]);
    });

    it('a message you neither ack() nor retry() is acked when the handler resolves', async () => {
      const q = await createQueue('implicit-ack');
      await env.queue.send('implicit-ack', 1);
      let calls = 0;
      await consume({ async queue() { calls++; } }, 'implicit-ack', { maxBatchSize: 1 });
      await until(() => calls === 1, 'one call');
      await until(async () => (await api('GET', `/v1/queues/${q.id}`)).body.counts.depth === 0, 'acked');
      await emu.clock.advance(60 * SECOND);
      assert.equal(calls, 1);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.inFlight, 0);
    });

    it('a handler that throws retries the whole batch; explicit ack()/retry() made before the throw stand', async () => {
      await createQueue('throws');
      for (let i = 0; i < 3; i++) await env.queue.send('throws', i);
      const deliveries: [number, number][] = [];
      await consume({
        async queue(b: MessageBatch<number>) {
          for (const m of b.messages) deliveries.push([m.body, m.attempts]);
          if (b.messages[0].attempts === 1) {
            b.messages[0].ack(); // stands
            throw new Error('batch failed');
          }
        },
      }, 'throws', { maxBatchSize: 3 });
      await until(() => deliveries.length === 3, 'first delivery');
      await emu.clock.advance(5 * SECOND); // 2 retried messages: a partial batch
      await until(() => deliveries.length === 5, 'redelivery');
      assert.deepEqual(deliveries, [[0, 1], [1, 1], [2, 1], [1, 2], [2, 2]]);
    });

    it('a redelivered message arrives with attempts + 1', async () => {
      await createQueue('attempts');
      await env.queue.send('attempts', 'x');
      const seen: number[] = [];
      await consume({ async queue(b) { seen.push(b.messages[0].attempts); if (seen.length < 3) b.retryAll(); } }, 'attempts', { maxBatchSize: 1 });
      await until(() => seen.length === 3, 'three deliveries');
      assert.deepEqual(seen, [1, 2, 3]);
    });

    it('batch settings — maxBatchSize, maxBatchTimeoutMs, maxConcurrency, visibilityMs — are set with the consumer', async () => {
      const q = await createQueue('settings');
      await consume({ async queue() {} }, 'settings', { appId: 'w', maxBatchSize: 7, maxBatchTimeoutMs: 1234, maxConcurrency: 3, visibilityMs: 9000 });
      assert.deepEqual((await api('GET', `/v1/queues/${q.id}`)).body.consumer, { appId: 'w', maxBatchSize: 7, maxBatchTimeoutMs: 1234, maxConcurrency: 3, visibilityMs: 9000 });
    });

    it("a consumer set without visibilityMs leases for the queue's own visibilityMs", async () => {
      const q = await createQueue('long-lease', { visibilityMs: 60 * SECOND });
      await env.queue.send('long-lease', 'slow');
      const attempts: number[] = [];
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r)); // let go at the end, so stop() has nothing in hand
      await consume({ queue: async (b: MessageBatch) => { attempts.push(b.messages[0].attempts); await held; } }, 'long-lease', { maxBatchSize: 1 });
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.consumer.visibilityMs, 60 * SECOND);
      await emu.clock.advance(0);
      await until(() => attempts.length === 1, 'the first delivery');
      await emu.clock.advance(59 * SECOND);
      assert.deepEqual(attempts, [1], 'still leased after 59 s');
      await emu.clock.advance(1 * SECOND);
      await until(() => attempts.length === 2, 'the second delivery, after 60 s');
      assert.deepEqual(attempts, [1, 2]);
      release();
    });

    it('a batch is delivered when it reaches maxBatchSize messages or its oldest message is maxBatchTimeoutMs old', async () => {
      await createQueue('timing');
      const sizes: number[] = [];
      await consume({ async queue(b) { sizes.push(b.messages.length); } }, 'timing', { maxBatchSize: 4, maxBatchTimeoutMs: 2000 });
      for (let i = 0; i < 4; i++) await env.queue.send('timing', i);
      await until(() => sizes.length === 1, 'the full batch');
      await env.queue.send('timing', 'a');
      await emu.clock.advance(1000);
      await env.queue.send('timing', 'b');
      await emu.clock.advance(999);
      assert.deepEqual(sizes, [4]);
      await emu.clock.advance(1);
      await until(() => sizes.length === 2, 'the partial batch');
      assert.deepEqual(sizes, [4, 2]);
    });

    it('at most maxConcurrency batches are in flight per queue', async () => {
      await createQueue('concurrency');
      let inFlight = 0;
      let peak = 0;
      let done = 0;
      const gates: (() => void)[] = [];
      await consume({
        async queue() {
          inFlight++;
          peak = Math.max(peak, inFlight);
          await new Promise<void>((r) => gates.push(r));
          inFlight--;
          done++;
        },
      }, 'concurrency', { maxBatchSize: 1, maxConcurrency: 2 });
      for (let i = 0; i < 5; i++) await env.queue.send('concurrency', i);
      await until(() => gates.length === 2, 'two batches');
      assert.equal(inFlight, 2);
      while (done < 5) {
        await until(() => gates.length > 0, 'a batch');
        gates.shift()!();
        await until(() => gates.length > 0 || done === 5, 'the next');
      }
      assert.equal(peak, 2);
    });

    it('a run that stops keeps its batch\'s slot until the batch is done: another run of the app does not go past maxConcurrency', async () => {
      await createQueue('stop-slot');
      const gates = new Map<string, () => void>();
      const runs: Record<string, RunningConsumer> = {};
      const got: string[] = [];
      for (const name of ['a', 'b']) {
        runs[name] = await consume({
          queue: (batch: MessageBatch) => new Promise<void>((r) => {
            got.push(`${name}:${String(batch.messages[0].body)}`);
            gates.set(name, r);
          }),
        }, 'stop-slot', { maxBatchSize: 1, maxBatchTimeoutMs: 0, maxConcurrency: 1 });
      }
      await env.queue.send('stop-slot', 1);
      await until(() => got.length === 1, 'the first batch');
      const holder = got[0].split(':')[0];
      const stopping = runs[holder].stop();
      await env.queue.send('stop-slot', 2);
      await emu.clock.advance(0); // everything due has been sent
      assert.deepEqual(got, [`${holder}:1`], 'no second batch while the stopping run still has one in hand');
      gates.get(holder)!();
      await stopping;
      const other = holder === 'a' ? 'b' : 'a';
      await until(() => got.length === 2, 'the second batch, once the slot is free');
      assert.equal(got[1], `${other}:2`);
      gates.get(other)!();
    });

    it('a batch the emulator sent before it took stop()\'s detach is handled, not left leased to nobody', async () => {
      const q = await createQueue('stop-race');
      const conn = new Connection({ url: emu.url, token: emu.token });
      let releaseDetach!: () => void;
      const detachHeld = new Promise<void>((r) => (releaseDetach = r));
      let detachSent = false;
      // The detach waits here, so a message sent meanwhile is delivered to the stopping run.
      const slowDetach = through(conn, async (op, args, o) => {
        if (op === 'consumer.detach') {
          detachSent = true;
          await detachHeld;
        }
        return conn.request(op, args, o);
      });
      const seen: unknown[] = [];
      const c = await runConsumer({ async queue(b: MessageBatch) { for (const m of b.messages) seen.push(m.body); } }, { transport: slowDetach, project, environment, queue: 'stop-race', maxBatchSize: 1, maxBatchTimeoutMs: 0 });
      const stopping = c.stop();
      await until(() => detachSent, 'stop() sent its detach');
      await env.queue.send('stop-race', 'raced');
      await until(() => seen.length === 1, 'the raced batch is handled');
      releaseDetach();
      await stopping;
      await conn.close();
      const peek = (await api('GET', `/v1/queues/${q.id}/messages`)).body.messages;
      assert.deepEqual(peek, [], 'acked, not left leased');
    });

    it('a batch whose acks cannot reach the emulator does not also wait out consumer.done: its slot frees at the lease end', async () => {
      await createQueue('unreachable');
      const conn = new Connection({ url: emu.url, token: emu.token });
      const sent: string[] = [];
      // Acks fail as they do while the emulator is down; everything else goes through.
      const down = through(conn, async (op, args, o) => {
        sent.push(op);
        if (op === 'ack') throw new QuaysideError('unavailable', 'cannot reach the emulator');
        return conn.request(op, args, o);
      });
      let handled = 0;
      const c = await runConsumer({ async queue() { handled++; } }, { transport: down, project, environment, queue: 'unreachable', maxBatchSize: 1, maxBatchTimeoutMs: 0 });
      await env.queue.send('unreachable', 1);
      await until(() => sent.includes('ack'), 'the ack was tried');
      await c.stop();
      await conn.close();
      assert.equal(handled, 1);
      assert.equal(sent.includes('consumer.done'), false, 'no consumer.done after an unreachable ack');
    });

    it('stop() after the emulator closed sends no detach (the emulator let the attachment go with the connection) and so does not wait for a reconnect', async () => {
      const own = await startTestEmulator();
      const conn = new Connection({ url: own.url, token: own.token });
      const sent: string[] = [];
      const recorded = through(conn, (op, args, o) => (sent.push(op), conn.request(op, args, o)));
      const r = await fetch(`${own.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${own.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'p', environment: 'e', slug: 'gone' }) });
      assert.equal(r.status, 201);
      const c = await runConsumer({ async queue() {} }, { transport: recorded, project: 'p', environment: 'e', queue: 'gone' });
      await own.close();
      await until(() => !conn.isOpen, 'the client saw the connection close');
      await c.stop();
      await conn.close();
      assert.deepEqual(sent, ['consumer.set', 'consumer.attach'], 'nothing after the emulator went away');
    });

    it('ctx.waitUntil keeps work going after the handler resolves; stop() waits for it', async () => {
      const q = await createQueue('wait-until');
      await env.queue.send('wait-until', 1);
      const { conn, transport: watched, detached } = watchingDetach();
      let handled = false;
      let finishWork!: () => void;
      const work = new Promise<void>((r) => (finishWork = r));
      const c = await consume({
        async queue(_b, _e, ctx) {
          ctx.waitUntil(work);
          handled = true;
        },
      }, 'wait-until', { maxBatchSize: 1, transport: watched });
      await until(() => handled, 'the handler ran and resolved');
      let stopped = false;
      const stopping = c.stop().then(() => (stopped = true));
      await until(detached, 'stop() detached the run');
      // One more round trip: a stop that did not wait for the work would have ended by now.
      await api('GET', `/v1/queues/${q.id}/messages`);
      assert.equal(stopped, false, 'stop() waits for the work handed to waitUntil');
      finishWork();
      await stopping;
      await conn.close();
      const peek = await api('GET', `/v1/queues/${q.id}/messages`);
      assert.deepEqual(peek.body.messages, [], 'acked once the handler resolved');
    });

    it('stop() waits for a batch in hand until its lease ends, not for a handler that never returns', async () => {
      const q = await createQueue('hung');
      await env.queue.send('hung', 'stuck');
      let calls = 0;
      const { conn, transport, detached } = watchingDetach();
      const c = await consume({ queue: () => { calls++; return new Promise(() => {}); } }, 'hung', { maxBatchSize: 1, visibilityMs: 10 * SECOND, transport });
      await emu.clock.advance(0);
      await until(() => calls === 1, 'the batch in hand');
      let stopped = false;
      const stopping = c.stop().then(() => (stopped = true));
      await until(detached, 'stop() detached the run');
      await api('GET', `/v1/queues/${q.id}/messages`); // a round trip: a stop that did not wait would have ended
      assert.equal(stopped, false, 'within its lease the batch is waited for');
      await emu.clock.advance(10 * SECOND); // the lease ends: the emulator times the batch out
      await stopping;
      await conn.close();
      assert.equal(calls, 1);
      const peek = await api('GET', `/v1/queues/${q.id}/messages`);
      assert.deepEqual(peek.body.messages.map((m: { body: unknown; state: string; attempts: number }) => [m.body, m.state, m.attempts]), [['stuck', 'ready', 1]]);
    });

    it('stop() waits for a hung batch no longer than its lease in real time either, on a virtual clock nobody advances', async () => {
      const q = await createQueue('hung-still');
      await env.queue.send('hung-still', 'stuck');
      let calls = 0;
      const c = await consume({ queue: () => { calls++; return new Promise(() => {}); } }, 'hung-still', { maxBatchSize: 1, visibilityMs: 300 });
      await emu.clock.advance(0);
      await until(() => calls === 1, 'the batch in hand');
      await c.stop(); // before the real-time bound, this waited for an advance that never came
      const peek = await api('GET', `/v1/queues/${q.id}/messages`);
      // The emulator's clock did not move: the batch is still leased there, and comes back when it does.
      assert.deepEqual(peek.body.messages.map((m: { state: string; attempts: number }) => [m.state, m.attempts]), [['leased', 1]]);
      await emu.clock.advance(300);
      const later = await api('GET', `/v1/queues/${q.id}/messages`);
      assert.deepEqual(later.body.messages.map((m: { state: string; attempts: number }) => [m.state, m.attempts]), [['ready', 1]]);
    });

    it('stop() after the emulator went down waits for a hung batch no longer than its lease in real time (its clock cannot be asked)', async () => {
      const own = await startTestEmulator();
      try {
        // The clock moved on before, as a test's may: an hour ahead of the wall clock.
        await own.clock.advance(Math.max(0, Date.now() - own.clock.now()) + 3600 * SECOND);
        const r = await httpCall(own, 'POST', '/v1/queues', { project, environment, slug: 'down' }, own.token);
        assert.equal(r.status, 201, JSON.stringify(r.body));
        let calls = 0;
        const c = await runConsumer({ queue: () => { calls++; return new Promise(() => {}); } }, { url: own.url, token: own.token, project, environment, queue: 'down', maxBatchSize: 1, visibilityMs: 300, onError: () => {} });
        const sender = createEnv({ url: own.url, token: own.token, project, environment });
        await sender.queue.send('down', 'stuck');
        await own.clock.advance(0);
        await until(() => calls === 1, 'the batch in hand');
        await sender.close();
        await own.close();
        // Before, the emulator's time was taken as the wall clock's here, an hour short of the lease
        // end, and stop() waited that hour.
        await c.stop();
        assert.equal(calls, 1);
      } finally {
        await own.close();
      }
    });

    it('runConsumer stops when its signal aborts', async () => {
      await createQueue('signal');
      // The abort alone must detach the run: the test never calls stop() before it looks.
      const { conn, transport: watched, detached } = watchingDetach();
      const ac = new AbortController();
      const seen: unknown[] = [];
      await consume({ async queue(b) { for (const m of b.messages) seen.push(m.body); } }, 'signal', { maxBatchSize: 1, signal: ac.signal, transport: watched });
      await env.queue.send('signal', 1);
      await until(() => seen.length === 1, 'one message');
      ac.abort();
      await until(detached, 'the abort detached the run');
      await env.queue.send('signal', 2);
      await emu.clock.advance(10 * SECOND);
      assert.deepEqual(seen, [1], 'nothing delivered after the abort');
      await conn.close();
    });

    it('a signal that outlives many runs is let go by each run that stops (one for a whole suite)', async () => {
      // Found by a leak probe: each stopped run kept its abort listener, and with it its connection.
      await createQueue('one-signal');
      const suite = new AbortController();
      const listening = () => getEventListeners(suite.signal, 'abort').length;
      for (let i = 0; i < 5; i++) {
        const c = await runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, project, environment, queue: 'one-signal', signal: suite.signal, onError: () => {} });
        assert.equal(listening(), 1, 'the running one listens');
        await c.stop();
        assert.equal(listening(), 0, `run ${i + 1} let go when it stopped`);
      }
    });

    it('env.queue inside the handler sends within the same project and environment', async () => {
      await createQueue('in');
      await createQueue('out');
      await env.queue.send('in', 'ping');
      await consume({ async queue(b, e: any) { for (const m of b.messages) await e.queue.send('out', `${m.body}-pong`); } }, 'in', { maxBatchSize: 1 });
      const got: unknown[] = [];
      await consume({ async queue(b) { for (const m of b.messages) got.push(m.body); } }, 'out', { maxBatchSize: 1 });
      await until(() => got.length === 1, 'the pong');
      assert.deepEqual(got, ['ping-pong']);
    });

    it('a consumer whose queue is deleted is told once, through onError (not_found), instead of going quiet', async () => {
      const q = await createQueue('doomed');
      const errors: QuaysideError[] = [];
      await consume({ async queue() {} }, 'doomed', { onError: (e: QuaysideError) => errors.push(e) });
      assert.equal((await api('DELETE', `/v1/queues/${q.id}`)).status, 200);
      await until(() => errors.length === 1, 'told');
      assert.equal(errors[0].code, 'not_found');
      assert.match(errors[0].message, /^queue "doomed" was deleted, and this consumer with it/);
      // The slug made again is a new queue with no consumer app: a send waits for a receive.
      const again = await createQueue('doomed');
      await env.queue.send('doomed', 'x');
      assert.equal((await api('GET', `/v1/queues/${again.id}`)).body.consumer, null);
      assert.equal((await api('POST', `/v1/queues/${again.id}/receive`, {})).body.messages.length, 1);
      assert.equal(errors.length, 1, 'told once');
    });

    for (const when of ['while it is connected', 'while the emulator is down']) {
      it(`a run whose queue was deleted ${when} is told once and never attaches again, not even to a queue made again and given its app`, async function () {
        this.timeout(30000);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-env-'));
        let e1 = await startEmulator({ dataDir: dir });
        const { port, token } = e1;
        const h = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
        // Once more on a socket error: fetch may reuse a kept-alive socket of the emulator closed before.
        const call = (method: string, p: string, body?: unknown): Promise<Response> => {
          const go = () => fetch(`${e1.httpUrl}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
          return go().catch(go);
        };
        const q = (await (await call('POST', '/v1/queues', { project: 'p', environment: 'dev', slug: 'q' })).json()) as { id: string };
        const seen: unknown[] = [];
        const errors: QuaysideError[] = [];
        const c = await runConsumer({ async queue(b) { for (const m of b.messages) seen.push(m.body); } }, { url: e1.url, token, project: 'p', environment: 'dev', queue: 'q', maxBatchSize: 1, onError: (e) => void errors.push(e as QuaysideError) });
        try {
          if (when === 'while it is connected') {
            await call('DELETE', `/v1/queues/${q.id}`);
            await until(() => errors.length === 1, 'told');
            await e1.close();
          } else {
            // Deleted through an emulator on another port, which the run cannot reach.
            await e1.close();
            const other = await startEmulator({ dataDir: dir });
            await fetch(`${other.httpUrl}/v1/queues/${q.id}`, { method: 'DELETE', headers: h });
            await other.close();
          }
          e1 = await startEmulator({ dataDir: dir, port, token });
          await until(() => errors.length === 1, 'told');
          assert.equal(errors[0].code, 'not_found');
          assert.match(errors[0].message, /^queue "q" was deleted, and this consumer with it/);
          const again = (await (await call('POST', '/v1/queues', { project: 'p', environment: 'dev', slug: 'q' })).json()) as { id: string };
          await call('PUT', `/v1/queues/${again.id}/consumer`, { appId: 'local', maxBatchSize: 1, maxBatchTimeoutMs: 0 });
          await call('POST', `/v1/queues/${again.id}/messages`, { body: 'after' });
          await new Promise((r) => setTimeout(r, 500));
          assert.deepEqual(seen, [], 'the dropped run took nothing from the queue made again');
          assert.equal(errors.length, 1, 'told once');
        } finally {
          await c.stop();
          await e1.close();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      });
    }

    /** An emulator on a data directory with queue p/dev/q, a runConsumer on it and a sender; restart() brings it back on the same port. */
    async function onRestartableQueue(appId: string, body: (t: { http: () => string; h: Record<string, string>; qId: string; seen: unknown[]; sender: Env; restart: () => Promise<void> }) => Promise<void>) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-env-'));
      let e1 = await startEmulator({ dataDir: dir });
      const { port, token } = e1;
      const h = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const q = (await (await fetch(`${e1.httpUrl}/v1/queues`, { method: 'POST', headers: h, body: JSON.stringify({ project: 'p', environment: 'dev', slug: 'q' }) })).json()) as { id: string };
      const seen: unknown[] = [];
      const c = await runConsumer({ async queue(b) { for (const m of b.messages) seen.push(m.body); } }, { url: e1.url, token, project: 'p', environment: 'dev', queue: 'q', appId, maxBatchSize: 1 });
      const sender = createEnv({ url: e1.url, token, project: 'p', environment: 'dev' });
      const restart = async () => {
        await e1.close();
        e1 = await startEmulator({ dataDir: dir, port, token });
      };
      try {
        await body({ http: () => e1.httpUrl, h, qId: q.id, seen, sender, restart });
      } finally {
        await c.stop();
        await sender.close();
        await e1.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }

    it('after a reconnect runConsumer attaches again but does not take back a queue the console gave another app', async function () {
      this.timeout(30000);
      await onRestartableQueue('mine', async ({ http, h, qId, seen, sender, restart }) => {
        const setApp = (appId: string) => fetch(`${http()}/v1/queues/${qId}/consumer`, { method: 'PUT', headers: h, body: JSON.stringify({ appId, maxBatchSize: 1 }) });
        const appNow = async () => ((await (await fetch(`${http()}/v1/queues/${qId}`, { headers: h })).json()) as any).consumer.appId;
        await setApp('console-choice');
        await restart();
        await sender.queue.send('q', 'while replaced');
        // Both connections are back (the sender's, and the consumer's, which attaches again at once).
        await until(async () => ((await (await fetch(`${http()}/healthz`)).json()) as any).connections >= 2, 'the consumer reconnected', 10000);
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(await appNow(), 'console-choice', 'the reconnect did not make "mine" the consumer again');
        assert.deepEqual(seen, []);
        // Attached all along: made the consumer again, it gets the message.
        await setApp('mine');
        await until(() => seen.length === 1, 'delivered once "mine" is the consumer again', 10000);
      });
    });

    it('runConsumer re-attaches after the emulator restarts', async function () {
      this.timeout(30000);
      await onRestartableQueue('local', async ({ seen, sender, restart }) => {
        await sender.queue.send('q', 'before');
        await until(() => seen.length === 1, 'before');
        await restart();
        await sender.queue.send('q', 'after');
        await until(() => seen.length === 2, 'after the restart', 20000);
        assert.deepEqual(seen, ['before', 'after']);
      });
    });

    it('a batch still in its handler across a restart keeps its place in maxConcurrency: the next batch waits for it', async function () {
      this.timeout(30000);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-env-'));
      let e1 = await startEmulator({ dataDir: dir });
      const { port, token } = e1;
      const h = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      await fetch(`${e1.httpUrl}/v1/queues`, { method: 'POST', headers: h, body: JSON.stringify({ project: 'p', environment: 'dev', slug: 'q' }) });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const started: unknown[] = [];
      let running = 0;
      let most = 0;
      const c = await runConsumer({
        async queue(b) {
          started.push(b.messages[0].body);
          most = Math.max(most, ++running);
          if (b.messages[0].body === 'one') await gate;
          running--;
        },
      }, { url: e1.url, token, project: 'p', environment: 'dev', queue: 'q', maxBatchSize: 1, maxConcurrency: 1, visibilityMs: 60_000 });
      const sender = createEnv({ url: e1.url, token, project: 'p', environment: 'dev' });
      try {
        await sender.queue.send('q', 'one');
        await until(() => started.length === 1, '"one" is in its handler');
        await e1.close();
        e1 = await startEmulator({ dataDir: dir, port, token });
        await sender.queue.send('q', 'two');
        // The consumer is connected again, and "two" is ready; still "one" holds the only slot.
        await until(async () => ((await (await fetch(`${e1.httpUrl}/healthz`)).json()) as any).connections >= 2, 'the consumer reconnected', 10000);
        await new Promise((r) => setTimeout(r, 300));
        assert.deepEqual(started, ['one'], '"two" did not start while "one" was still in its handler');
        release();
        await until(() => started.length === 2, '"two" once "one" finished', 10000);
        assert.equal(most, 1, 'never two handlers at once');
        // "one" was acked on the new connection: nothing is left.
        await until(async () => (await sender.queue.send('q', 'three'), true), 'sent');
        await until(() => started.length === 3, '"three"', 10000);
      } finally {
        release();
        await c.stop();
        await sender.close();
        await e1.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('the failed area (no dead-letter queue)', () => {
    it('there is no -dlq queue: after its last retry (maxRetries) a message moves to the failed area instead of being dropped', async () => {
      const q = await createQueue('failing', { maxRetries: 2 });
      await env.queue.send('failing', 'bad');
      let calls = 0;
      await consume({ async queue() { calls++; throw new Error('always'); } }, 'failing', { maxBatchSize: 1 });
      await until(() => calls === 3, 'three deliveries (1 + maxRetries 2)');
      await until(async () => (await api('GET', `/v1/queues/${q.id}`)).body.counts.failed === 1, 'failed');
      const list = (await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues;
      assert.deepEqual(list.map((x: any) => x.slug), ['failing']);
      const failed = (await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages;
      assert.deepEqual(failed.map((m: any) => [m.body, m.state, m.attempts, m.reason]), [['bad', 'failed', 3, 'retry']]);
      // What the handler threw is kept, so the failed area says why.
      assert.equal(failed[0].lastError, 'always');
    });

    it('the failed area shows the last failure, also when the last throw carried no text', async () => {
      const q = await createQueue('last-error', { maxRetries: 1 });
      await env.queue.send('last-error', 'bad');
      let calls = 0;
      await consume({ async queue() { if (++calls === 1) throw new Error('first failure'); throw null; } }, 'last-error', { maxBatchSize: 1, maxBatchTimeoutMs: 0 });
      await until(async () => (await api('GET', `/v1/queues/${q.id}`)).body.counts.failed === 1, 'failed');
      const failed = (await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages;
      assert.equal(failed[0].lastError, 'threw null');
    });

    it('the failed area keeps a message for the queue\'s retention (max 14 days)', async () => {
      const q = await createQueue('retention', { maxRetries: 0, retentionSeconds: 3600 });
      assert.equal((await api('POST', '/v1/queues', { project, environment, slug: 'too-long', retentionSeconds: 14 * 24 * 3600 + 1 })).status, 400);
      await env.queue.send('retention', 'x');
      const [m] = (await api('POST', `/v1/queues/${q.id}/receive`, {})).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: m.leaseId }] });
      assert.equal((await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages.length, 1);
      await emu.clock.advance(3600 * SECOND);
      assert.equal((await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages.length, 0);
      const d = await createQueue('default-retention', { maxRetries: 0 });
      assert.equal((await api('GET', `/v1/queues/${d.id}`)).body.retentionSeconds, 14 * DAY / 1000);
    });

    it('a last lease that ends in the very millisecond the retention does: dropped, not kept another retention as failed', async () => {
      for (const [slug, maxRetries] of [['tie-last', 0], ['tie-more', 3]] as const) {
        const q = await createQueue(slug, { maxRetries, retentionSeconds: 60 });
        await env.queue.send(slug, 'x');
        const [m] = (await api('POST', `/v1/queues/${q.id}/receive`, { visibilityMs: 60_000 })).body.messages;
        await emu.clock.advance(60 * SECOND);
        assert.deepEqual((await api('GET', `/v1/queues/${q.id}/messages`)).body.messages, [], slug);
        assert.deepEqual((await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages, [], slug);
        assert.deepEqual((await api('POST', `/v1/queues/${q.id}/ack`, { acks: [m.leaseId] })).body, { acked: 0, retried: 0, stale: 1 });
      }
    });

    it('a retention changed with PATCH holds for the messages already queued and failed, counted from when each was sent or failed', async () => {
      const q = await createQueue('re-retain', { maxRetries: 0 });
      await env.queue.send('re-retain', 'old');
      const [m] = (await api('POST', `/v1/queues/${q.id}/receive`, {})).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: m.leaseId }] }); // failed at 0 s
      await emu.clock.advance(120 * SECOND);
      await env.queue.send('re-retain', 'young'); // sent at 120 s
      // Shorter: what is now older than it goes at once, the rest when it reaches it.
      const patched = await api('PATCH', `/v1/queues/${q.id}`, { retentionSeconds: 100 });
      assert.equal(patched.status, 200);
      assert.deepEqual([patched.body.counts.depth, patched.body.counts.dead], [1, 0], 'the failed message of 120 s went with the answer');
      await emu.clock.advance(99 * SECOND);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 1);
      await emu.clock.advance(1 * SECOND);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0, 'dropped at 100 s of age');
      // Longer: a message is kept past the retention it was sent under.
      await env.queue.send('re-retain', 'kept');
      await api('PATCH', `/v1/queues/${q.id}`, { retentionSeconds: 600 });
      await emu.clock.advance(599 * SECOND);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 1);
      await emu.clock.advance(1 * SECOND);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
    });

    it('the failed area is internal — not listed, not bindable, not configurable, and deleted with the queue', async () => {
      const q = await createQueue('internal', { maxRetries: 0 });
      await env.queue.send('internal', 'x');
      const [m] = (await api('POST', `/v1/queues/${q.id}/receive`, {})).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: m.leaseId }] });
      const list = (await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues;
      assert.equal(list.length, 1);
      assert.equal((await rejects(env.queue.send('internal-dlq', 1))).code, 'not_found');
      assert.equal((await api('DELETE', `/v1/queues/${q.id}`)).status, 200);
      assert.equal((await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).status, 404);
      await createQueue('internal');
      const again = (await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues[0];
      assert.equal(again.counts.failed, 0);
    });

    it('the failed area is listed in the order messages failed, oldest first (as retry-failed takes them)', async () => {
      const q = await createQueue('fail-order', { maxRetries: 0 });
      await env.queue.send('fail-order', 'first sent');
      await env.queue.send('fail-order', 'second sent');
      const [a, b] = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 2 })).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: b.leaseId }] });
      await emu.clock.advance(10_000); // within the 30 s lease
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: a.leaseId }] })).body, { acked: 0, retried: 1, stale: 0 });
      const failed = (await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages;
      assert.deepEqual(failed.map((m: any) => m.body), ['second sent', 'first sent']);
      assert.ok(failed[0].failedAt < failed[1].failedAt);
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/retry-failed`, { max: 1 })).body, { retried: 1 });
      assert.deepEqual((await api('GET', `/v1/queues/${q.id}/messages`)).body.messages.map((m: any) => m.body), ['second sent']);
    });

    it('messages that fail in the same millisecond are listed (and retried) in the order they failed, not by id', async () => {
      const q = await createQueue('fail-order-tie', { maxRetries: 0 });
      await env.queue.send('fail-order-tie', 'first sent');
      await env.queue.send('fail-order-tie', 'second sent');
      const [a, b] = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 2 })).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: b.leaseId }] });
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: a.leaseId }] }); // no clock step between
      const failed = (await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages;
      assert.deepEqual(failed.map((m: any) => m.body), ['second sent', 'first sent']);
      assert.equal(failed[0].failedAt, failed[1].failedAt);
      // Paged one at a time, the order holds across the cursor.
      const c = admin(emu);
      try {
        const ref = { namespace: `${project}/${environment}`, queue: 'fail-order-tie', limit: 1 };
        const first = await c.request('dead.list', ref);
        const second = await c.request('dead.list', { ...ref, cursor: first.next ?? undefined });
        assert.deepEqual([...first.messages, ...second.messages].map((m) => m.body), ['second sent', 'first sent']);
        assert.equal(second.next, null);
      } finally {
        await c.close();
      }
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/retry-failed`, { max: 1 })).body, { retried: 1 });
      assert.deepEqual((await api('GET', `/v1/queues/${q.id}/messages`)).body.messages.map((m: any) => m.body), ['second sent']);
    });

    it('GET /v1/queues/{qId}/messages?failed=1 peeks the failed area', async () => {
      const q = await createQueue('peek-failed', { maxRetries: 0 });
      await env.queue.send('peek-failed', { a: 1 });
      await env.queue.send('peek-failed', { b: 2 });
      const r = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 1 })).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: r[0].leaseId }] });
      const failed = (await api('GET', `/v1/queues/${q.id}/messages?failed=1`)).body.messages;
      assert.deepEqual(failed.map((m: any) => m.body), [{ a: 1 }]);
      const live = (await api('GET', `/v1/queues/${q.id}/messages`)).body.messages;
      assert.deepEqual(live.map((m: any) => m.body), [{ b: 2 }]);
      assert.deepEqual((await api('GET', `/v1/queues/${q.id}/messages?failed=false`)).body.messages.map((m: any) => m.body), [{ b: 2 }]);
      assert.deepEqual((await api('GET', `/v1/queues/${q.id}/messages?failed=true`)).body.messages.map((m: any) => m.body), [{ a: 1 }]);
      // A value that is not a yes or a no is refused, not read as "no".
      const bad = await api('GET', `/v1/queues/${q.id}/messages?failed=banana`);
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_argument');
      assert.match(bad.body.error.message, /failed must be 1, 0, true or false/);
      // Peeking leases nothing.
      assert.equal((await api('POST', `/v1/queues/${q.id}/receive`, {})).body.messages.length, 1);
    });

    it('POST /v1/queues/{qId}/retry-failed { max? } moves failed messages back into the queue with fresh attempts', async () => {
      const q = await createQueue('retry-failed', { maxRetries: 0 });
      for (let i = 0; i < 3; i++) await env.queue.send('retry-failed', i);
      const got = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 3 })).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: got.map((m: any) => ({ leaseId: m.leaseId })) });
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/retry-failed`, { max: 2 })).body, { retried: 2 });
      const back = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 10 })).body.messages;
      assert.deepEqual(back.map((m: any) => [m.body, m.attempts]), [[0, 1], [1, 1]]);
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/retry-failed`, {})).body, { retried: 1 });
    });

    it('POST /v1/queues/{qId}/purge { confirm, failed? } purges the queue (or the failed area)', async () => {
      const q = await createQueue('purge', { maxRetries: 0 });
      for (let i = 0; i < 3; i++) await env.queue.send('purge', i);
      await env.queue.send('purge', 'later', { delaySeconds: 60 });
      const [m] = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 1 })).body.messages;
      await api('POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: m.leaseId }] });
      await api('POST', `/v1/queues/${q.id}/receive`, { max: 1 }); // one leased
      const wrong = await api('POST', `/v1/queues/${q.id}/purge`, { confirm: 'nope' });
      assert.equal(wrong.status, 400);
      assert.equal((await api('POST', `/v1/queues/${q.id}/purge`, { confirm: 'purge', failed: 'yes' })).status, 400);
      // failed: 1 as well as true, as ?failed=1 takes it.
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/purge`, { confirm: 'purge', failed: 1 })).body, { purged: 1 });
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/purge`, { confirm: 'purge' })).body, { purged: 3 });
      const counts = (await api('GET', `/v1/queues/${q.id}`)).body.counts;
      assert.deepEqual([counts.depth, counts.inFlight, counts.failed], [0, 0, 0]);
    });
  });

  describe('pull over the data API instead of a consumer app', () => {
    it('clear a queue\'s consumer (PUT …/consumer { appId: null }) and it becomes a pull queue: callers receive, ack, retry and extend leases over the data API', async () => {
      const q = await createQueue('pull');
      await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker' });
      assert.equal((await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: null })).body.consumer, null);
      for (let i = 0; i < 3; i++) await env.queue.send('pull', i, { attributes: { n: i } });
      const r = await api('POST', `/v1/queues/${q.id}/receive`, { max: 3, visibilityMs: 10_000 });
      assert.equal(r.status, 200);
      const [a, b, c] = r.body.messages;
      assert.deepEqual(Object.keys(a).sort(), ['attempts', 'attributes', 'body', 'contentType', 'id', 'leaseExpiresAt', 'leaseId', 'timestamp'].sort());
      assert.equal(a.leaseExpiresAt, emu.clock.now() + 10_000);
      const ext = await api('POST', `/v1/queues/${q.id}/extend`, { leaseId: c.leaseId, visibilityMs: 60_000 });
      assert.deepEqual(ext.body, { leaseExpiresAt: emu.clock.now() + 60_000 });
      const acked = await api('POST', `/v1/queues/${q.id}/ack`, { acks: [a.leaseId], retries: [{ leaseId: b.leaseId, delaySeconds: 5 }] });
      assert.deepEqual(acked.body, { acked: 1, retried: 1, stale: 0 });
      await emu.clock.advance(10_000);
      const stale = await api('POST', `/v1/queues/${q.id}/ack`, { acks: [a.leaseId] });
      assert.deepEqual(stale.body, { acked: 0, retried: 0, stale: 1 });

      const again = (await api('POST', `/v1/queues/${q.id}/receive`, { max: 10 })).body.messages;
      assert.deepEqual(again.map((m: any) => [m.body, m.attempts]), [[1, 2]]);
      assert.equal((await api('POST', `/v1/queues/${q.id}/extend`, { leaseId: a.leaseId, visibilityMs: 1000 })).status, 409);
      // { leaseId } in acks as retries have it; extend needs its visibilityMs (DESIGN lists it, not as optional).
      const d = again[0];
      const bare = await api('POST', `/v1/queues/${q.id}/extend`, { leaseId: d.leaseId });
      assert.equal(bare.status, 400);
      assert.match(bare.body.error.message, /visibilityMs is required/);
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/extend`, { leaseId: d.leaseId, visibilityMs: 30_000 })).body, { leaseExpiresAt: emu.clock.now() + 30_000 });
      assert.equal((await api('POST', `/v1/queues/${q.id}/ack`, { acks: [{ leaseId: d.leaseId, extra: 1 }] })).status, 400);
      assert.deepEqual((await api('POST', `/v1/queues/${q.id}/ack`, { acks: [{ leaseId: d.leaseId }] })).body, { acked: 1, retried: 0, stale: 0 });
    });

    it('PUT …/consumer { appId: null } with a batch setting is refused (400): a pull queue keeps none', async () => {
      const q = await createQueue('null-app');
      await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker' });
      const r = await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: null, maxBatchSize: 500 });
      assert.equal(r.status, 400);
      assert.equal(r.body.error.code, 'invalid_argument');
      assert.match(r.body.error.message, /maxBatchSize/);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.consumer.appId, 'worker', 'nothing changed');
    });

    it('an appId with half a surrogate pair is refused, over PUT and by runConsumer, and the queue keeps its consumer', async () => {
      const q = await createQueue('lone-app');
      await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: null });
      const put = await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'x\ud800' });
      assert.equal(put.status, 400);
      assert.equal(put.body.error.code, 'invalid_argument');
      assert.match(put.body.error.message, /appId/);
      await assert.rejects(consume({ async queue() {} }, 'lone-app', { appId: 'worker\ud800' }), { code: 'invalid_argument' });
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.consumer, null, 'still a pull queue');
      assert.equal((await api('POST', `/v1/queues/${q.id}/receive`, {})).status, 200);
    });

    it('a queue that still has a consumer app refuses receive with 409', async () => {
      const q = await createQueue('has-consumer');
      await consume({ async queue() {} }, 'has-consumer');
      const r = await api('POST', `/v1/queues/${q.id}/receive`, {});
      assert.equal(r.status, 409);
      assert.equal(r.body.error.code, 'conflict');
      // The answer says how to pull (the app set by runConsumer stays after stop(), as a deployed one does).
      assert.equal(r.body.error.message, `queue "has-consumer" has a consumer app (local); it delivers by push and refuses pulls; PUT /v1/queues/${q.id}/consumer { "appId": null } makes it a pull queue`);
    });
  });

  // Not statements of the seed: docs/dialects.md's argument checks. An option a call does not know is
  // refused naming it, before anything is sent or set, and a queue of another dialect is not an env queue.
  describe('argument checks (docs/dialects.md)', () => {
    it('runConsumer refuses an option it does not know, naming it, and sets no consumer', async () => {
      const q = await createQueue('typo');
      const e = await rejects(runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, project, environment, queue: 'typo', maxBatchSise: 5 } as never));
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /"maxBatchSise"/);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.consumer, null);
      // Every documented option is still taken.
      const ac = new AbortController();
      await consume({ async queue() {} }, 'typo', { appId: 'w', maxBatchSize: 5, maxBatchTimeoutMs: 100, maxConcurrency: 2, visibilityMs: 1000, env: { x: 1 }, signal: ac.signal });
      assert.deepEqual((await api('GET', `/v1/queues/${q.id}`)).body.consumer, { appId: 'w', maxBatchSize: 5, maxBatchTimeoutMs: 100, maxConcurrency: 2, visibilityMs: 1000 });
    });

    /** A retry() the handler makes with `bad` throws (caught) as `says`; had it settled, the 30 s retry after it would be ignored. */
    async function refusedRetry(slug: string, bad: object, says: RegExp): Promise<void> {
      await createQueue(slug);
      await env.queue.send(slug, 'x');
      const errors: unknown[] = [];
      const attempts: number[] = [];
      await consume({
        async queue(b: MessageBatch) {
          const m = b.messages[0];
          attempts.push(m.attempts);
          if (m.attempts > 1) return;
          try {
            m.retry(bad as never);
          } catch (e) {
            errors.push(e);
          }
          m.retry({ delaySeconds: 30 });
        },
      }, slug, { maxBatchSize: 1 });
      await until(() => attempts.length >= 1, 'the first delivery');
      assert.equal(errors.length, 1);
      assert.ok(errors[0] instanceof QuaysideError);
      assert.equal((errors[0] as QuaysideError).code, 'invalid_argument');
      assert.match((errors[0] as QuaysideError).message, says);
      await emu.clock.advance(29 * SECOND);
      assert.deepEqual(attempts, [1]);
      await emu.clock.advance(1 * SECOND + 5 * SECOND); // the delay, then the batch timeout of a batch of one
      await until(() => attempts.length === 2, 'the delayed retry');
    }

    it('msg.retry() with an option it does not know throws invalid_argument naming it, and settles nothing', async () => {
      await refusedRetry('retry-typo', { delaySecond: 30 }, /"delaySecond"/);
    });

    it('batch.retryAll() with an option it does not know throws the same way: uncaught, it reaches onError and the batch is retried as for any throw', async () => {
      await createQueue('retry-all-typo');
      await env.queue.send('retry-all-typo', 'x');
      const errors: unknown[] = [];
      const attempts: number[] = [];
      await consume({
        async queue(b: MessageBatch) {
          attempts.push(b.messages[0].attempts);
          if (b.messages[0].attempts === 1) b.retryAll({ delaySecond: 30 } as never);
        },
      }, 'retry-all-typo', { maxBatchSize: 1, onError: (e: unknown) => errors.push(e) });
      await until(() => errors.length === 1, 'the error');
      assert.equal((errors[0] as QuaysideError).code, 'invalid_argument');
      assert.match((errors[0] as QuaysideError).message, /"delaySecond"/);
      await emu.clock.advance(5 * SECOND); // no delay: back after the batch timeout
      await until(() => attempts.length === 2, 'the retry');
    });

    it('ack() and ackAll() take no options: ack({ delaySeconds }) meant as a retry throws and acks nothing', async () => {
      await createQueue('ack-typo');
      await env.queue.send('ack-typo', 'x');
      const errors: unknown[] = [];
      const attempts: number[] = [];
      await consume({
        async queue(b: MessageBatch) {
          attempts.push(b.messages[0].attempts);
          if (b.messages[0].attempts > 1) return;
          // As an untyped (JavaScript) caller makes them; TypeScript refuses them already.
          const withArg = (f: () => void) => f as (o: unknown) => void;
          for (const call of [() => withArg(b.messages[0].ack)({ delaySeconds: 30 }), () => withArg(b.ackAll)({ delaySeconds: 30 })]) {
            try {
              call();
            } catch (e) {
              errors.push(e);
            }
          }
          // Had either call acked, this retry would be ignored and the message gone.
          b.messages[0].retry();
        },
      }, 'ack-typo', { maxBatchSize: 1 });
      await until(() => attempts.length >= 1, 'the first delivery');
      assert.deepEqual(errors.map((e) => [(e as QuaysideError).code, (e as QuaysideError).message]), [
        ['invalid_argument', 'unknown ack option "delaySeconds"; ack() takes none'],
        ['invalid_argument', 'unknown ackAll option "delaySeconds"; ackAll() takes none'],
      ]);
      await emu.clock.advance(5 * SECOND);
      await until(() => attempts.length === 2, 'the retry');
      assert.deepEqual(attempts, [1, 2]);
    });

    it('a project or environment over 100 characters is refused with a message that names the limit', async () => {
      for (const o of [{ project: 'p'.repeat(101), environment }, { project, environment: 'e'.repeat(101) }]) {
        assert.throws(() => createEnv({ url: emu.url, token: emu.token, ...o }), (e: QuaysideError) => e.code === 'invalid_argument' && /at most 100 characters/.test(e.message));
        const e = await rejects(runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, ...o, queue: 'q' }));
        assert.match(e.message, /at most 100 characters/);
      }
    });

    it('delays are whole seconds and consumer timings whole ms, as over HTTP: a fraction is refused by both doors alike, and nothing is sent or set', async () => {
      const q = await createQueue('fractions');
      const httpSend = await api('POST', `/v1/queues/${q.id}/messages`, { body: 1, delaySeconds: 0.0004 });
      assert.equal(httpSend.status, 400);
      const said = httpSend.body.error.message as string;
      assert.equal(said, 'delaySeconds must be a whole number from 0 to 43200, got 0.0004');
      // 0.0004 would have rounded to no delay at all; 43200.0004 to the limit.
      for (const delaySeconds of [0.0004, 1.5, 43200.0004]) {
        const e = await rejects(env.queue.send('fractions', 1, { delaySeconds }));
        assert.equal(e.code, 'invalid_argument');
        assert.equal(e.message, `delaySeconds must be a whole number from 0 to 43200, got ${delaySeconds}`);
        assert.equal((await rejects(env.queue.sendBatch('fractions', [{ body: 1, delaySeconds }]))).code, 'invalid_argument');
        assert.equal((await rejects(env.queue.sendBatch('fractions', [{ body: 1 }], { delaySeconds }))).code, 'invalid_argument');
      }
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
      // Whole values still go, up to the limit.
      await env.queue.send('fractions', 1, { delaySeconds: 43200 });
      assert.equal((await rejects(env.queue.send('fractions', 1, { delaySeconds: 43201 }))).code, 'invalid_argument');

      for (const bad of [{ maxBatchTimeoutMs: 0.4 }, { visibilityMs: 1.4 }]) {
        const put = await api('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'w', ...bad });
        assert.equal(put.status, 400, JSON.stringify(bad));
        const e = await rejects(runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, project, environment, queue: 'fractions', ...bad }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, new RegExp(`^${Object.keys(bad)[0]} must be a whole number from`));
        assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.consumer, null);
      }
    });

    it('a retry delay is whole seconds too: retry({ delaySeconds: 0.5 }) throws and settles nothing', async () => {
      await refusedRetry('retry-fraction', { delaySeconds: 0.5 }, /^delaySeconds must be a whole number from 0 to 43200, got 0\.5$/);
    });

    it('a project, environment or slug the namespace rules refuse is named as the caller named it, by the library as over HTTP', async () => {
      for (const [o, field] of [[{ project: 'sh\top', environment }, 'project'], [{ project, environment: 'dev\n' }, 'environment'], [{ project, environment: 'd\ud800' }, 'environment']] as const) {
        assert.throws(() => createEnv({ url: emu.url, token: emu.token, ...o }), (e: QuaysideError) => e.code === 'invalid_argument' && e.message.startsWith(`${field} must`), JSON.stringify(o));
        const h = await api('POST', '/v1/queues', { ...o, slug: 'q' });
        assert.equal(h.status, 400);
        assert.ok((h.body.error.message as string).startsWith(`${field} must`), h.body.error.message);
      }
      const long = 's'.repeat(201);
      const e = await rejects(env.queue.send(long, 1));
      assert.equal(e.message, 'slug must be at most 200 characters');
      assert.equal((await api('POST', '/v1/queues', { project, environment, slug: long })).body.error.message, 'slug must be at most 200 characters');
      assert.equal((await rejects(env.queue.send('a\u0007b', 1))).message, 'slug must not contain control characters');
    });

    it('attributes do not count toward the 128 KB body limit or maxBytes', async () => {
      const q = await createQueue('attrs', { maxBytes: 10 });
      const attributes = { note: 'a'.repeat(200 * 1024) };
      await env.queue.send('attrs', 'x', { attributes });
      const http = await api('POST', `/v1/queues/${q.id}/messages`, { body: 'y', attributes });
      assert.equal(http.status, 201);
      const got = (await api('GET', `/v1/queues/${q.id}`)).body.counts;
      assert.deepEqual([got.depth, got.bytes], [2, 6]);
    });

    it('a bytes body counts the bytes sent, not their base64: 128 KB of bytes fit, one more is payload_too_large', async () => {
      const q = await createQueue('raw', { maxBytes: 200 * 1024 });
      await env.queue.send('raw', new Uint8Array(128 * 1024).fill(7), { contentType: 'bytes' });
      const e = await rejects(env.queue.send('raw', new Uint8Array(128 * 1024 + 1), { contentType: 'bytes' }));
      assert.equal(e.code, 'payload_too_large');
      assert.match(e.message, /body is 131073 bytes; the limit of queue "raw" is 131072 bytes/);
      // Over HTTP too, and the counts hold the bytes.
      const http = await api('POST', `/v1/queues/${q.id}/messages`, { body: Buffer.from('hello').toString('base64'), contentType: 'bytes' });
      assert.equal(http.status, 201);
      assert.equal((await api('GET', `/v1/queues/${q.id}`)).body.counts.bytes, 128 * 1024 + 5);
      // A push by any other way than the env client must carry base64 too, else its size means nothing.
      const e2 = await rejects(emu.engine.push({ namespace: `${project}/${environment}`, queue: 'raw', body: '!'.repeat(170_000), contentType: 'bytes' }));
      assert.equal((e2 as { code?: string }).code, 'invalid_argument');
      assert.match(e2.message, /body must be base64 text with contentType "bytes"/);
    });

    it('a queue of another dialect in the same project and environment is not found for send, sendBatch and runConsumer, as a missing slug', async () => {
      const cache = createCache({ url: emu.url, token: emu.token, namespace: `${project}/${environment}` });
      try {
        await cache.queue('cq').push(1);
        assert.equal((await rejects(env.queue.send('cq', 2))).code, 'not_found');
        assert.equal((await rejects(env.queue.sendBatch('cq', [{ body: 3 }]))).code, 'not_found');
        assert.equal((await rejects(runConsumer({ async queue() {} }, { url: emu.url, token: emu.token, project, environment, queue: 'cq' }))).code, 'not_found');
        // Nothing reached the cache queue, and the env API does not see it.
        assert.equal((await cache.queue('cq').stats()).depth, 1);
        assert.deepEqual((await api('GET', `/v1/queues?project=${project}&environment=${environment}`)).body.queues, []);
      } finally {
        await cache.close();
      }
    });
  });
});
