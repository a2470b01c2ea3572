// Scenario 7, Quayside alone: the product faces (the `sync` dialect's recv/ack loop, the `env`
// push consumer) and the extension's tree refresh and queue-panel page load against a queue of
// 100,000 messages. Each part runs only when the code it needs exists; otherwise it leaves a
// "not measured yet" row saying why.
//
// The extension parts run the extension's own vscode-free code (src/tree/model.ts, the model
// behind the tree view; src/panel/handler.ts, the host side of the panel's webview) over a real
// connection, so they measure the emulator round trips and the model work, not VS Code's
// rendering.
import fs from 'node:fs';
import path from 'node:path';
import { BUILD, ROOT, median, now, preloadInBatches, type Sample } from '../lib';
import { QuaysideTarget, loadBuilt } from './quayside';

export interface FacesContext {
  counts: { seq: number; consume: number; depthLevels: number[] };
  runs: number;
  smoke: boolean;
  record: (scenario: string, target: string, metric: string, unit: string, value: number, extra?: { count?: number; note?: string }) => void;
  recordSample: (scenario: string, target: string, s: Sample, note?: string) => void;
  notes: string[];
  unmeasured: Record<string, string>;
}

/* eslint-disable @typescript-eslint/no-explicit-any */
const built = (rel: string) => fs.existsSync(path.join(BUILD, rel));
const src = (rel: string) => fs.existsSync(path.join(ROOT, rel));

function preloadRaw(conn: any, namespace: string, queue: string, n: number): Promise<void> {
  return preloadInBatches(n, 0, (bodies) => conn.request('push.batch', { namespace, queue, messages: bodies.map((body) => ({ body })) }));
}

export async function runQuaysideFaces(ctx: FacesContext): Promise<void> {
  const haveSync = built('emulator/clients/sync.js');
  const haveEnv = built('emulator/clients/env.js') && built('emulator/http/env-naming.js');
  const haveTree = src('src/tree/model.ts');
  const havePanel = src('src/panel/handler.ts');
  if (!haveSync) ctx.unmeasured['sync recv/ack loop'] = 'not measured yet: emulator/clients/sync.ts does not exist';
  if (!haveEnv) ctx.unmeasured['env push consumer'] = 'not measured yet: emulator/clients/env.ts does not exist';
  if (!haveTree) ctx.unmeasured['extension tree refresh'] = 'not measured yet: src/tree/model.ts does not exist';
  if (!havePanel) ctx.unmeasured['webview page load'] = 'not measured yet: src/panel/handler.ts does not exist';
  if (!haveSync && !haveEnv && !haveTree && !havePanel) return;

  const n = ctx.counts.consume;
  const deep = ctx.smoke ? 10_000 : 100_000;
  const t = new QuaysideTarget();
  await t.start();
  try {
    const conn: any = t.conn;
    for (let run = 1; run <= ctx.runs; run++) {
      if (haveSync) {
        const sync = loadBuilt<typeof import('../../emulator/clients/sync')>('emulator/clients/sync.js');
        for (const loops of [1, 16]) {
          const id = `sync-${loops}-${run}`;
          await conn.request('queue.create', { namespace: 'default', queue: id, dialect: 'sync', ifNotExists: true });
          await preloadRaw(conn, 'default', id, n);
          const q = sync.queue({ id, url: t.url, token: t.token });
          await q.stats(); // opens the connection and makes sure of the queue
          let done = 0;
          const t0 = now();
          await Promise.all(
            Array.from({ length: loops }, async () => {
              while (done < n) {
                const m = await q.recv({ wait: false });
                if (!m) break;
                await m.ack();
                done++;
              }
            }),
          );
          const seconds = (now() - t0) / 1000;
          await q.close();
          ctx.recordSample(`face.sync.${loops}`, 'quayside', { rate: done / seconds, count: done, seconds }, `sync dialect: recv() + msg.ack() loop, ${loops} loop(s) on one connection`);
          await conn.request('queue.delete', { namespace: 'default', queue: id });
        }
      }
      if (haveEnv) {
        const env = loadBuilt<typeof import('../../emulator/clients/env')>('emulator/clients/env.js');
        const { envNamespace } = loadBuilt<typeof import('../../emulator/http/env-naming')>('emulator/http/env-naming.js');
        const configs = [
          { label: 'defaults (maxBatchSize 10, maxConcurrency 1)', key: 'default', opts: {} },
          { label: 'maxBatchSize 100, maxConcurrency 4', key: 'b100c4', opts: { maxBatchSize: 100, maxConcurrency: 4 } },
        ];
        for (const cfg of configs) {
          const project = 'bench';
          const environment = `run${run}`;
          const slug = `env-${cfg.key}`;
          const namespace = envNamespace(project, environment);
          await conn.request('queue.create', { namespace, queue: slug, dialect: 'env', ifNotExists: true });
          await preloadRaw(conn, namespace, slug, n);
          let got = 0;
          let finish!: (ms: number) => void;
          const finished = new Promise<number>((r) => (finish = r));
          const t0 = now();
          const consumer = await env.runConsumer(
            {
              async queue(batch: any) {
                got += batch.messages.length;
                if (got >= n) finish(now());
              },
            },
            { url: t.url, token: t.token, project, environment, queue: slug, ...cfg.opts },
          );
          const t1 = await Promise.race([finished, new Promise<number>((_, rej) => setTimeout(() => rej(new Error(`env consumer got ${got} of ${n} in 120 s`)), 120_000))]);
          await consumer.stop();
          const seconds = (t1 - t0) / 1000;
          ctx.recordSample(`face.env.${cfg.key}`, 'quayside', { rate: got / seconds, count: got, seconds }, `env push consumer (runConsumer), ${cfg.label}`);
          await conn.request('queue.delete', { namespace, queue: slug });
        }
      }
    }

    if (haveTree || havePanel) {
      const name = 'ui-deep';
      await conn.request('queue.create', { namespace: 'bench', queue: name, dialect: 'cache', ifNotExists: true });
      await preloadRaw(conn, 'bench', name, deep);
      const reps = ctx.smoke ? 3 : 10;
      const depthNote = `${deep.toLocaleString('en-US')} messages queued`;
      for (let run = 1; run <= ctx.runs; run++) {
        if (haveTree) {
          // eslint-disable-next-line @typescript-eslint/no-require-imports
          const { TreeModel } = require(path.join(ROOT, 'src', 'tree', 'model.ts')) as typeof import('../../src/tree/model');
          const times: number[] = [];
          for (let i = 0; i < reps; i++) {
            const t0 = now();
            // What a refresh does: list the queues, expand namespace → queue → messages folder
            // (the first page), and render every node's view.
            const model = new TreeModel();
            model.setTransport(conn);
            const roots = await model.children();
            for (const ns of roots) {
              model.view(ns);
              for (const qn of await model.children(ns)) {
                model.view(qn);
                if ((qn as { queue?: string }).queue !== name) continue;
                for (const folder of await model.children(qn)) {
                  model.view(folder);
                  for (const m of await model.children(folder)) model.view(m);
                }
              }
            }
            times.push(now() - t0);
          }
          ctx.record('ext.tree', 'quayside', 'ms', 'ms', median(times), { note: `tree refresh: queue list + expand to the first page of messages, ${depthNote} (median of ${reps})` });
        }
        if (havePanel) {
          // eslint-disable-next-line @typescript-eslint/no-require-imports
          const { PanelHandler } = require(path.join(ROOT, 'src', 'panel', 'handler.ts')) as typeof import('../../src/panel/handler');
          const times: number[] = [];
          for (let i = 0; i < reps; i++) {
            const h = new PanelHandler({
              ref: { namespace: 'bench', queue: name },
              transport: conn,
              ui: { confirm: async () => false, chooseSaveTarget: async () => undefined, withProgress: (_title, task) => task({ report() {}, cancelled: false } as never) },
              post: () => {},
            });
            const t0 = now();
            // What the webview asks for when it loads: init, then the first page of the messages tab.
            await h.dispatch('init', {} as never);
            await h.dispatch('peek', { states: ['ready', 'delayed', 'leased', 'dead'], limit: 50 });
            times.push(now() - t0);
            h.dispose();
          }
          ctx.record('ext.webview', 'quayside', 'ms', 'ms', median(times), { note: `queue panel page load, host side (init + first page of 50; no rendering), ${depthNote} (median of ${reps})` });
        }
      }
    }
  } finally {
    await t.stop();
  }
}
