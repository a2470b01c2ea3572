import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fresh, heldPulls, startTestEmulator, until } from './support';
import { envNamespace } from '../../emulator/http/env-naming';
import { createCache } from '../../emulator/clients/cache';
import * as remote from '../../emulator/clients/sync';

// The clients in a script of their own, against an emulator in another process: nothing else keeps
// Node running. A script that is done must end without a close() (as with the products' own SDKs),
// and a call still waiting, a consume loop or a runConsumer must hold the process open.

const CLIENTS = path.resolve(__dirname, '../../emulator/clients');

type Emu = Awaited<ReturnType<typeof startTestEmulator>>;

function runScript(emu: Emu, body: string): Promise<{ code: number | null; out: string }> {
  const code = [
    `const { createCache } = require(${JSON.stringify(`${CLIENTS}/cache`)});`,
    `const { createEnv, runConsumer } = require(${JSON.stringify(`${CLIENTS}/env`)});`,
    `const { queue } = require(${JSON.stringify(`${CLIENTS}/sync`)});`,
    `(async () => {\n${body}\n})().catch((e) => { console.log('threw', e.code, e.message); process.exitCode = 2; });`,
  ].join('\n');
  const env = { ...process.env, QUAYSIDE_URL: emu.url, QUAYSIDE_TOKEN: emu.token };
  return new Promise((resolve) => {
    // A hang is a kill at the timeout: code null.
    execFile(process.execPath, ['-r', 'tsx/cjs', '-e', code], { timeout: 20_000, env }, (err, stdout) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, out: stdout.trim() });
    });
  });
}

/** Push consumers attached to the engine (private; read only to know that a child's runConsumer is in). */
function attached(emu: Emu): number {
  let n = 0;
  for (const q of (emu.engine as unknown as { consumers: { byQueue: Map<number, { attachments: unknown[] }> } }).consumers.byQueue.values()) n += q.attachments.length;
  return n;
}

/** An env queue `orders` of a fresh project's `dev` environment. */
async function ordersQueue(emu: Emu): Promise<{ project: string; ns: string }> {
  const project = fresh('p');
  const ns = envNamespace(project, 'dev');
  await emu.engine.createQueue({ namespace: ns, queue: 'orders', dialect: 'env' });
  return { project, ns };
}

describe('clients in a script of their own', function () {
  this.timeout(90_000);
  let emu: Emu;
  before(async () => {
    emu = await startTestEmulator();
  });
  after(() => emu.close());

  it('a script that pushed, pulled and acked ends without close(), with each face (cache, env, sync)', async () => {
    const ns = fresh('proc');
    const { project } = await ordersQueue(emu);
    const runs = await Promise.all([
      runScript(emu, `
        const q = createCache({ namespace: ${JSON.stringify(ns)} }).queue('jobs');
        await q.push({ n: 1 });
        const [m] = await q.pull();
        console.log('cache', JSON.stringify(m.body), await q.ack(m.receipt));`),
      runScript(emu, `
        const env = createEnv({ project: ${JSON.stringify(project)}, environment: 'dev' });
        console.log('env', typeof (await env.queue.send('orders', { n: 1 })).id);`),
      runScript(emu, `
        const q = queue({ id: ${JSON.stringify(fresh('jobs'))} });
        await q.send({ data: 1 });
        const m = await q.recv({ wait: false });
        console.log('sync', m.data, await m.ack());`),
    ]);
    assert.deepEqual(runs.map((r) => [r.out, r.code]), [['cache {"n":1} true', 0], ['env string', 0], ['sync 1 true', 0]]);
  });

  it('a consume loop on an empty queue, and a waiting recv, hold the process until a message comes', async () => {
    const ns = fresh('proc');
    const id = fresh('jobs');
    const before = heldPulls(emu);
    const child = runScript(emu, `
      const ac = new AbortController();
      const q = createCache({ namespace: ${JSON.stringify(ns)} }).queue('jobs');
      const s = queue({ id: ${JSON.stringify(id)} });
      const recv = s.recv({ timeoutMs: 15000 });
      await q.consume(async (m) => { console.log('consumed', m.body); ac.abort(); }, { idleMs: 15000, signal: ac.signal });
      const m = await recv;
      console.log('received', m && m.data, await m.ack());`);
    // Both waits are held by the emulator before anything is sent to them.
    await until(() => heldPulls(emu) >= before + 2, 'the child to wait', 15_000);
    const cache = createCache({ url: emu.url, token: emu.token, namespace: ns });
    const s = remote.queue({ url: emu.url, token: emu.token, id });
    await cache.queue('jobs').push('one');
    await s.send({ data: 'two' });
    const r = await child;
    await cache.close();
    await s.close();
    assert.deepEqual([r.out.split('\n'), r.code], [['consumed one', 'received two true'], 0]);
  });

  it('a runConsumer whose queue is deleted lets the process end: it will get nothing more', async () => {
    const { project, ns } = await ordersQueue(emu);
    const before = attached(emu);
    const child = runScript(emu, `
      await runConsumer({ async queue() {} }, { project: ${JSON.stringify(project)}, environment: 'dev', queue: 'orders',
        onError: (e) => console.log('onError', e.code) });
      console.log('running');`);
    await until(() => attached(emu) > before, 'the consumer to attach', 15_000);
    await emu.engine.deleteQueue({ namespace: ns, queue: 'orders' });
    const r = await child;
    // Before, its event listener held the socket: the process waited for ever (killed: code null).
    // (The drop may be told before runConsumer resolves: the delete can beat the attach's answer.)
    assert.deepEqual([r.out.split('\n').sort(), r.code], [['onError not_found', 'running'], 0]);
  });

  it('a runConsumer holds the process until it is stopped', async () => {
    const { project, ns } = await ordersQueue(emu);
    const before = attached(emu);
    const child = runScript(emu, `
      let gotBatch;
      const got = new Promise((r) => (gotBatch = r));
      const run = await runConsumer({ async queue(batch) {
        console.log('batch', batch.messages.map((m) => m.body).join(','));
        gotBatch();
      } }, { project: ${JSON.stringify(project)}, environment: 'dev', queue: 'orders', maxBatchTimeoutMs: 0 });
      console.log('running');
      await got;
      await run.stop();`);
    await until(() => attached(emu) > before, 'the consumer to attach', 15_000);
    await new Promise((r) => setTimeout(r, 300)); // a child that would exit idle has had its chance
    await emu.engine.push({ namespace: ns, queue: 'orders', body: 'go' });
    const r = await child;
    assert.deepEqual([r.out.split('\n').sort(), r.code], [['batch go', 'running'], 0]);
  });
});
