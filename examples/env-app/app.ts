// A small order app on the env dialect: its fetch handler takes orders and sends them to the
// "orders" queue; its queue handler charges them.
import type { ConsumerEnv, MessageBatch } from 'quayside/env';

export interface Order {
  id: string;
  amount: number;
}

export interface AppEnv extends ConsumerEnv {
  charges: Map<string, number>;
  /** Fails for these order ids (to show retries). */
  flaky?: Set<string>;
}

export default {
  async fetch(req: Request, env: AppEnv): Promise<Response> {
    const order = (await req.json()) as Order;
    if (!order.id || typeof order.amount !== 'number') return new Response('bad order', { status: 400 });
    await env.queue.send('orders', order, { dedupId: `order:${order.id}`, attributes: { kind: 'order' } });
    return new Response(null, { status: 202 });
  },

  async queue(batch: MessageBatch<Order>, env: AppEnv): Promise<void> {
    for (const msg of batch.messages) {
      if (env.flaky?.has(msg.body.id) && msg.attempts === 1) {
        msg.retry({ delaySeconds: 10 });
        continue;
      }
      env.charges.set(msg.body.id, (env.charges.get(msg.body.id) ?? 0) + msg.body.amount);
      msg.ack();
    }
  },
};
