import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startEmulator, type Emulator } from '../../../emulator/emulator';
import { createEnv, runConsumer } from '../../../emulator/clients/env';
import { Connection } from '../../../emulator/clients/connection';
import { until } from '../support';

// runConsumer is a worker: it must outlive an emulator restart, and say so when the emulator it
// finds again refuses it, rather than wait in silence.

const ENV = path.resolve(__dirname, '../../../emulator/clients/env');

async function withQueue(body: (t: { dir: string; emu: Emulator; restart: (opts?: { token?: string; port?: number }) => Promise<Emulator> }) => Promise<void>): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-env-restart-'));
  let emu = await startEmulator({ dataDir: dir });
  const { port, token } = emu;
  const h = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const made = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: h, body: JSON.stringify({ project: 'p', environment: 'dev', slug: 'q' }) });
  assert.equal(made.status, 201);
  const restart = async (opts: { token?: string; port?: number } = {}) => {
    await emu.close();
    emu = await startEmulator({ dataDir: dir, port: opts.port ?? port, token: opts.token ?? token });
    return emu;
  };
  try {
    await body({ dir, emu, restart });
  } finally {
    await emu.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One message to p/dev/q, over a sender of its own. */
async function sendOne(emu: Emulator, token: string, body: string): Promise<void> {
  const sender = createEnv({ url: emu.url, token, project: 'p', environment: 'dev' });
  try {
    await sender.queue.send('q', body);
  } finally {
    await sender.close();
  }
}

/** A process whose only work is a runConsumer on p/dev/q: it prints `ready`, `got <body>` and `error <code>`. */
function spawnWorker(url: string, token: string): { out: () => string; exited: () => number | null | undefined; kill: () => void } {
  const script = `const { runConsumer } = require(${JSON.stringify(ENV)});
    runConsumer({ async queue(b) { for (const m of b.messages) console.log('got ' + JSON.stringify(m.body)); } },
      { url: ${JSON.stringify(url)}, token: ${JSON.stringify(token)}, project: 'p', environment: 'dev', queue: 'q', maxBatchSize: 1,
        onError: (e) => console.log('error ' + (e && e.code)) })
      .then(() => console.log('ready'), (e) => { console.log('failed ' + e.message); process.exit(2); });`;
  const child: ChildProcess = spawn(process.execPath, ['-r', 'tsx/cjs', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let exited: number | null | undefined;
  child.stdout!.on('data', (d) => (out += String(d)));
  child.on('exit', (code) => (exited = code));
  const killer = setTimeout(() => child.kill('SIGKILL'), 35_000);
  return {
    out: () => out,
    exited: () => exited,
    kill: () => {
      clearTimeout(killer);
      child.kill('SIGKILL');
    },
  };
}

/**
 * A TCP proxy to `port` whose stall() freezes every link open now (bytes stop both ways, nothing
 * is closed: a network that died without a word); links made after it forward as before.
 */
async function stallingProxy(port: number): Promise<{ url: string; links: () => number; stall: () => void; close: () => Promise<void> }> {
  const open = new Set<net.Socket>();
  const frozen = new Set<net.Socket>();
  let links = 0;
  const server = net.createServer((inbound) => {
    links++;
    const upstream = net.connect(port, '127.0.0.1');
    for (const [from, to] of [[inbound, upstream], [upstream, inbound]] as const) {
      open.add(from);
      from.on('data', (d) => void (frozen.has(from) || to.write(d)));
      from.on('error', () => to.destroy());
      from.on('close', () => to.destroy());
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `ws://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    links: () => links,
    stall: () => {
      for (const sock of open) frozen.add(sock);
    },
    close: async () => {
      for (const sock of open) sock.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('env: runConsumer across emulator restarts', function () {
  this.timeout(40_000);

  it('a worker process whose only work is runConsumer stays alive while the emulator is down, and consumes once it is back', async () => {
    await withQueue(async ({ emu, restart }) => {
      const { port, token, url } = emu;
      const w = spawnWorker(url, token);
      let hold: net.Server | null = null;
      try {
        await until(() => w.out().includes('ready') || w.exited() !== undefined, 'the worker attached', 20_000);
        assert.ok(w.out().includes('ready'), w.out());
        // Down: the port is held by a listener that takes each dial and drops it, so the worker's
        // reconnect attempts are seen (a worker that had exited would make none).
        await emu.close();
        let dials = 0;
        hold = net.createServer((s) => {
          dials++;
          s.destroy();
        });
        await new Promise<void>((r) => hold!.listen(port, '127.0.0.1', r));
        await until(() => dials >= 2 || w.exited() !== undefined, 'the worker dialled again twice', 15_000);
        assert.equal(w.exited(), undefined, `the worker exited (code ${w.exited()}) while the emulator was down`);
        await new Promise<void>((r) => hold!.close(() => r()));
        hold = null;
        const back = await restart();
        await sendOne(back, token, 'after the restart');
        await until(() => w.out().includes('got "after the restart"') || w.exited() !== undefined, 'the worker got the message sent after the restart', 20_000);
        assert.ok(w.out().includes('got "after the restart"'), w.out());
        assert.ok(!w.out().includes('error '), w.out());
      } finally {
        hold?.close();
        w.kill();
      }
    });
  });

  it('an emulator back with other tokens is reported once through onError; back with the run\'s token, it consumes again', async () => {
    await withQueue(async ({ emu, restart }) => {
      const { token } = emu;
      const errors: { code?: string; message: string }[] = [];
      const seen: unknown[] = [];
      const run = await runConsumer(
        { async queue(b) { for (const m of b.messages) seen.push(m.body); } },
        { url: emu.url, token, project: 'p', environment: 'dev', queue: 'q', maxBatchSize: 1, onError: (e) => errors.push(e as never) },
      );
      try {
        // Back with a new token (as `quayside start --memory` makes one): every reconnect is refused.
        let dials = 0;
        await emu.close();
        const other = await startEmulator({ port: emu.port, memory: true, token: 'qs_rw_another', log: (l) => void (l.startsWith('connection opened') && dials++) });
        try {
          await until(() => errors.length > 0, 'the refusal reported', 15_000);
          assert.equal(errors[0].code, 'unauthorized');
          assert.match(errors[0].message, /not known to this emulator/);
          // Still retrying, and not said again: two more dials, each refused at its hello.
          const reportedAt = dials;
          await until(() => dials >= reportedAt + 2, 'two more reconnects', 15_000);
          assert.equal(errors.length, 1, JSON.stringify(errors));
        } finally {
          await other.close();
        }
        // Started again with the run's token, on its data: the run attaches and consumes again.
        const back = await restart();
        await sendOne(back, token, 'back');
        await until(() => seen.includes('back'), 'consumed after the right token came back', 20_000);
        assert.equal(errors.length, 1, JSON.stringify(errors));
        // Refused again after that: said again, once.
        await back.close();
        const again = await startEmulator({ port: back.port, memory: true, token: 'qs_rw_another' });
        try {
          await until(() => errors.length > 1, 'the second refusal reported', 15_000);
          assert.equal(errors[1].code, 'unauthorized');
        } finally {
          await again.close();
        }
        await restart();
      } finally {
        await run.stop();
      }
    });
  });

  it('a consumer on a link that died without a word finds out by its heartbeat, dials again and gets the next batch', async () => {
    await withQueue(async ({ emu }) => {
      const proxy = await stallingProxy(emu.port);
      const conn = new Connection({ url: proxy.url, token: emu.token, heartbeatMs: 50 });
      const seen: unknown[] = [];
      const run = await runConsumer({ async queue(b) { for (const m of b.messages) seen.push(m.body); } }, { project: 'p', environment: 'dev', queue: 'q', maxBatchSize: 1, transport: conn });
      try {
        assert.equal(proxy.links(), 1);
        proxy.stall();
        // Idle (no request waits), yet the silent link is cut and dialled again.
        await until(() => proxy.links() >= 2 && conn.isOpen, 'a new link', 15_000);
        await until(async () => (await fetch(`${emu.httpUrl}/healthz`).then((r) => r.json()) as { connections: number }).connections === 1, 'the old link gone from the emulator', 15_000);
        await sendOne(emu, emu.token, 'after the stall');
        await until(() => seen.includes('after the stall'), 'the batch over the new link', 15_000);
      } finally {
        await run.stop();
        await conn.close();
        await proxy.close();
      }
    });
  });

  it('stop() on a link that died without a word ends within a dial\'s wait, not after the heartbeat cuts it', async () => {
    await withQueue(async ({ emu }) => {
      const proxy = await stallingProxy(emu.port);
      const conn = new Connection({ url: proxy.url, token: emu.token, heartbeatMs: 600_000 });
      const run = await runConsumer({ async queue() {} }, { project: 'p', environment: 'dev', queue: 'q', transport: conn });
      try {
        proxy.stall();
        const stopped = await Promise.race([run.stop().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 15_000).unref())]);
        assert.equal(stopped, true, 'stop() was still waiting on the dead link after 15 s');
      } finally {
        await conn.close();
        await proxy.close();
      }
    });
  });

  it('a worker whose queue was deleted lets its process end once the emulator stops (nothing is left to attach)', async () => {
    await withQueue(async ({ emu }) => {
      const { url, token } = emu;
      const w = spawnWorker(url, token);
      try {
        await until(() => w.out().includes('ready') || w.exited() !== undefined, 'the worker attached', 20_000);
        const h = { authorization: `Bearer ${token}` };
        const list = (await (await fetch(`${emu.httpUrl}/v1/queues?project=p&environment=dev`, { headers: h })).json()) as { queues: { id: string }[] };
        assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${list.queues[0].id}`, { method: 'DELETE', headers: h })).status, 200);
        await until(() => w.out().includes('error not_found'), 'the worker told of the deletion', 10_000);
        await emu.close();
        await until(() => w.exited() !== undefined, 'the worker process ended', 15_000);
        assert.equal(w.exited(), 0);
      } finally {
        w.kill();
      }
    });
  });
});
