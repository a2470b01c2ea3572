// A small thumbnail worker on the sync dialect: jobs are sent with an idempotency key, a worker
// streams them, touches the lease for slow ones and nacks failures. Its test runs it over the
// emulator ('quayside/sync') and in-process ('quayside/sync/memory').
import type { SyncQueue } from 'quayside/sync';

export interface Job {
  imageId: string;
  sizes: number[];
}

export const enqueue = (q: SyncQueue, job: Job) => q.send({ data: job, idempotencyKey: `thumb:${job.imageId}` });

/** Processes jobs until the signal aborts (or the queue is empty with wait: false). */
export async function work(q: SyncQueue, render: (job: Job) => Promise<void>, opts: { signal?: AbortSignal; wait?: boolean } = {}) {
  let done = 0;
  for await (const msg of q.stream<Job>({ signal: opts.signal, wait: opts.wait ?? true })) {
    try {
      if (msg.data.sizes.length > 3) await msg.touch({ leaseMs: 120_000 }); // a big job: ask for more time
      await render(msg.data);
      await msg.ack();
      done++;
    } catch (error) {
      await msg.nack({ delayMs: 3000, reason: 'render_failed', error });
    }
  }
  return done;
}
