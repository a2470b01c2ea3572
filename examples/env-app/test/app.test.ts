import assert from 'node:assert/strict';
import path from 'node:path';
import { startEmulator, type VirtualEmulator } from 'quayside/emulator';
import { createEnv, runConsumer, type Env, type RunningConsumer } from 'quayside/env';
import app from '../app';

async function until(cond: () => boolean, ms = 5000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('examples/env-app', () => {
  let emu: VirtualEmulator;
  let env: Env;
  let consumer: RunningConsumer;
  const charges = new Map<string, number>();
  const flaky = new Set<string>(['o_flaky']);

  before(async () => {
    // The queue is declared in the app's quayside.json, which the emulator applies as `quayside start` does.
    emu = await startEmulator({ memory: true, clock: 'virtual', config: path.join(__dirname, '..', 'quayside.json') });
    env = createEnv({ url: emu.url, token: emu.token, project: 'shop', environment: 'dev' });
    consumer = await runConsumer(app, { url: emu.url, token: emu.token, project: 'shop', environment: 'dev', queue: 'orders', maxBatchSize: 2, env: { charges, flaky } });
  });
  after(async () => {
    await consumer.stop();
    await env.close();
    await emu.close();
  });

  const post = (order: unknown) => app.fetch(new Request('http://app/orders', { method: 'POST', body: JSON.stringify(order) }), { queue: env.queue, charges });

  it('an order posted twice is charged once', async () => {
    assert.equal((await post({ id: 'o_1', amount: 5 })).status, 202);
    assert.equal((await post({ id: 'o_1', amount: 5 })).status, 202);
    assert.equal((await post({ id: 'o_2', amount: 7 })).status, 202);
    await until(() => charges.size === 2);
    assert.deepEqual([...charges], [['o_1', 5], ['o_2', 7]]);
  });

  it('a retried order is charged after its delay', async () => {
    await post({ id: 'o_flaky', amount: 3 });
    const clock = emu.clock;
    await clock.advance(5000); // a batch of one goes after maxBatchTimeoutMs; the handler retries it
    await clock.advance(9_999); // the retry delay (10 s) has not ended yet
    assert.equal(charges.has('o_flaky'), false, 'not charged before its retry delay ended');
    await clock.advance(1 + 5000); // ready again, and its batch of one goes after maxBatchTimeoutMs
    await until(() => charges.has('o_flaky'));
    assert.equal(charges.get('o_flaky'), 3);
  });

  it('a bad order is refused before anything is sent', async () => {
    assert.equal((await post({ amount: 1 })).status, 400);
  });
});
