import assert from 'node:assert/strict';
import { startEmulator, type Emulator } from 'quayside/emulator';
import { queue as remoteQueue } from 'quayside/sync';
import { createMemoryQueues } from 'quayside/sync/memory';
import { enqueue, work, type Job } from '../worker';

describe('examples/sync-app', () => {
  let emu: Emulator;
  before(async () => {
    emu = await startEmulator({ memory: true, clock: 'virtual' });
  });
  after(() => emu.close());

  it('renders each image once, however often it is enqueued (emulator)', async () => {
    const q = remoteQueue({ id: 'thumbs', url: emu.url, token: emu.token });
    await enqueue(q, { imageId: 'a', sizes: [64] });
    await enqueue(q, { imageId: 'a', sizes: [64] });
    await enqueue(q, { imageId: 'b', sizes: [64, 128, 256, 512] });
    const rendered: string[] = [];
    assert.equal(await work(q, async (j) => void rendered.push(j.imageId), { wait: false }), 2);
    assert.deepEqual(rendered, ['a', 'b']);
    await q.close();
  });

  it('a failing render goes to the DLQ after maxDeliveries (in memory, virtual clock)', async () => {
    const mem = createMemoryQueues({ clock: 'virtual' });
    const q = mem.queue({ id: 'thumbs', delivery: { maxDeliveries: 2 } });
    await enqueue(q, { imageId: 'broken', sizes: [1] });
    const fail = async (_j: Job) => {
      throw new Error('corrupt image');
    };
    await work(q, fail, { wait: false });
    await mem.clock.advance(3000); // the nack delay
    await work(q, fail, { wait: false });
    const dlq = await q.dlq();
    assert.deepEqual(dlq.map((d) => [d.reason, d.attempts, d.lastError]), [['render_failed', 2, 'corrupt image']]);
    await mem.close();
  });
});
