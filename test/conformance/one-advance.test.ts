import assert from 'node:assert/strict';
import { createCache } from '../../emulator/clients/cache';
import { createEnv, runConsumer } from '../../emulator/clients/env';
import { fresh, startTestEmulator, SECOND, MINUTE } from './support';
import { variants } from './sync/harness';

// One clock.advance that spans both a delivery (a delay ending, a batch's timeout) and the end of
// that delivery's lease. A handler that answers at once must be applied at the instant it was
// handed the message, as it would be on a real clock: before the advance ran past the lease's end,
// found the ack stale and delivered again. Many small advances and one large one end the same.

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

describe('conformance: one large advance over a delivery and its lease end', function () {
  this.timeout(20_000);
  let emu: Emu;
  beforeEach(async () => {
    emu = await startTestEmulator();
  });
  afterEach(() => emu.close());

  it('cache consume(): a delayed message handled once, its ack applied before the lease would end', async () => {
    const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh() });
    const q = cache.queue('jobs');
    const seen: number[] = [];
    const ac = new AbortController();
    const loop = q.consume(async (m) => void seen.push(m.attempts), { signal: ac.signal, visibilitySeconds: 30 });
    await q.push('x', { delaySeconds: 10 });
    await emu.clock.advance(45 * SECOND);
    assert.deepEqual(seen, [1], 'delivered once, at 10 s; not again at 40 s');
    const s = await q.stats();
    assert.deepEqual([s.ready, s.delayed, s.inFlight, s.dead], [0, 0, 0, 0], 'acked when the advance resolved');
    ac.abort();
    await loop;
    await cache.close();
  });

  it('cache: a handler that throws each time ends in the dead letters as nack after 5 deliveries, all in one advance', async () => {
    const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh() });
    const q = cache.queue('jobs');
    const seen: number[] = [];
    const ac = new AbortController();
    const loop = q.consume(async (m) => {
      seen.push(m.attempts);
      throw new Error('boom');
    }, { signal: ac.signal });
    await q.push('x', { delaySeconds: 10 });
    await emu.clock.advance(10 * MINUTE);
    assert.deepEqual(seen, [1, 2, 3, 4, 5]);
    const { messages } = await q.deadLetters();
    assert.deepEqual(messages.map((m) => [m.reason, m.attempts]), [['nack', 5]], 'each nack applied at once, none taken over by a lease end');
    ac.abort();
    await loop;
    await cache.close();
  });

  it('a pull the test reads only after the advance still loses its lease within it (the advance does not wait on it for long)', async () => {
    const cache = createCache({ url: emu.url, token: emu.token, namespace: fresh() });
    const q = cache.queue('jobs');
    await q.push('x', { delaySeconds: 10 });
    const held = q.pull({ waitMs: 60_000, visibilitySeconds: 30 });
    const started = Date.now();
    await emu.clock.advance(45 * SECOND);
    assert.ok(Date.now() - started < 5000, 'the advance moved on without the answer');
    const [m] = await held;
    assert.equal(m.attempts, 1);
    assert.equal(await q.ack(m.receipt), false, 'its lease ended at 40 s, inside the advance');
    const s = await q.stats();
    assert.deepEqual([s.ready, s.inFlight], [1, 0]);
    await cache.close();
  });

  it('env runConsumer: a handler that resolves at once gets one batch; nothing reaches the failed area', async () => {
    const scope = { project: fresh('p'), environment: 'dev' };
    const env = createEnv({ url: emu.url, token: emu.token, ...scope });
    const batches: number[][] = [];
    const made = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...scope, slug: 'jobs' }) });
    assert.equal(made.status, 201);
    const run = await runConsumer({ async queue(batch) { batches.push(batch.messages.map((m) => m.attempts)); } }, { url: emu.url, token: emu.token, ...scope, queue: 'jobs' });
    try {
      await env.queue.send('jobs', { n: 1 });
      // The batch goes at its 5 s timeout; its 30 s lease would end at 35 s, and again each 35 s.
      await emu.clock.advance(200 * SECOND);
      assert.deepEqual(batches, [[1]]);
      const res = await fetch(`${emu.httpUrl}/v1/queues?project=${scope.project}&environment=dev`, { headers: { authorization: `Bearer ${emu.token}` } });
      const [info] = (await res.json()).queues;
      assert.deepEqual([info.counts.failed, info.counts.inFlight, info.counts.ready], [0, 0, 0]);
    } finally {
      await run.stop();
      await env.close();
    }
  });

  for (const variant of variants) {
    it(`sync stream() on ${variant.name}: a delayed message acked once, the same as in small steps`, async () => {
      const h = await variant.make();
      try {
        for (const steps of [[45 * SECOND], Array.from({ length: 45 }, () => SECOND)]) {
          const q = h.queue({ id: fresh('q') });
          const seen: number[] = [];
          const ac = new AbortController();
          const consumer = (async () => {
            for await (const m of q.stream({ signal: ac.signal })) {
              seen.push(m.attempt);
              await m.ack();
            }
          })();
          await q.send({ data: 'x', delayMs: 10 * SECOND });
          for (const ms of steps) await h.advance(ms);
          assert.deepEqual(seen, [1], `${steps.length} step(s)`);
          const s = await q.stats();
          assert.deepEqual([s.ready, s.delayed, s.inFlight, s.dlq], [0, 0, 0, 0]);
          ac.abort();
          await consumer;
        }
      } finally {
        await h.close();
      }
    });
  }
});
