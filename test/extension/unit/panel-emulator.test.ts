// The panel's host handler against the real emulator (startEmulator + the WebSocket Connection).
// One emulator for the file; each test opens its own queue and handler and sets up what it reads.
import assert from 'node:assert/strict';
import { startEmulator, type VirtualEmulator } from '../../../emulator/emulator';
import { Connection } from '../../../emulator/clients/connection';
import { CHUNK, PanelHandler, type PanelUi } from '../../../src/panel/handler';
import type { HostMessage } from '../../../src/panel/messages';

/** Poll `check` until it returns true, or fail after `ms` (a bound, not a fixed sleep). */
async function until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('panel handler against the real emulator', function () {
  this.timeout(20_000);
  let emu: VirtualEmulator;
  let conn: Connection;
  const handlers: PanelHandler[] = [];

  /** A fresh queue in namespace shop with its own handler, posted messages and saved files. */
  async function panelFor(queue: string) {
    const ref = { namespace: 'shop', queue };
    await conn.request('queue.create', { ...ref, dialect: 'cache' });
    const posted: HostMessage[] = [];
    const saved: string[] = [];
    const ui: PanelUi = {
      confirm: async () => true,
      chooseSaveTarget: async () => ({ label: 'mem', write: async (t) => void saved.push(t) }),
      withProgress: (_t, task) => task({ report() {}, cancelled: false }),
    };
    const handler = new PanelHandler({ ref, transport: conn, ui, post: (m) => posted.push(m), debounceMs: 20 });
    handlers.push(handler);
    return { ref, handler, posted, saved };
  }

  before(async () => {
    emu = await startEmulator({ clock: 'virtual' });
    conn = new Connection({ url: emu.url, token: emu.token, client: 'panel-test' });
  });
  afterEach(() => {
    for (const h of handlers.splice(0)) h.dispose();
  });
  after(async () => {
    await conn?.close();
    await emu?.close();
  });

  it('init, push (one and ×N), peek with states, search and cursor, message.get', async () => {
    const { handler } = await panelFor('orders');
    const init = await handler.dispatch('init', {});
    assert.equal(init.queue.name, 'orders');
    assert.equal(init.now, emu.clock.now());
    const one = await handler.dispatch('push', { body: '{"orderId": "ord-1", "customer": "ada"}', delaySeconds: '', dedupeKey: 'k1', attributes: '{"source":"panel"}', count: '' });
    assert.equal(one.sent, 1);
    const again = await handler.dispatch('push', { body: '{"orderId": "ord-1b"}', delaySeconds: '', dedupeKey: 'k1', attributes: '', count: '' });
    assert.equal(again.deduped, 1);
    assert.equal(again.ids[0], one.ids[0]);
    const many = await handler.dispatch('push', { body: '{"orderId": "bulk", "customer": "grace"}', delaySeconds: '', dedupeKey: '', attributes: '', count: '120' });
    assert.equal(many.sent, 120);
    await handler.dispatch('push', { body: '"later"', delaySeconds: '60', dedupeKey: '', attributes: '', count: '' });

    const p1 = await handler.dispatch('peek', { states: ['ready', 'delayed', 'leased', 'dead'], limit: 50 });
    assert.equal(p1.total, 122);
    assert.equal(p1.messages.length, 50);
    assert.ok(p1.next);
    const p3 = await handler.dispatch('peek', { states: ['ready', 'delayed', 'leased', 'dead'], limit: 50, cursor: (await handler.dispatch('peek', { states: ['ready', 'delayed', 'leased', 'dead'], limit: 50, cursor: p1.next! })).next! });
    assert.equal(p3.messages.length, 22);
    assert.equal(p3.next, null);
    const delayed = await handler.dispatch('peek', { states: ['delayed'], limit: 50 });
    assert.deepEqual(delayed.messages.map((m) => m.body), ['later']);
    const found = await handler.dispatch('peek', { states: ['ready'], search: 'ada', limit: 50 });
    assert.equal(found.total, 1);
    const m = await handler.dispatch('message.get', { id: one.ids[0] });
    assert.deepEqual(m?.attributes, { source: 'panel' });
    assert.equal(m?.dedupeKey, 'k1');
    assert.equal(await handler.dispatch('message.get', { id: 'm_999999' }).catch((e) => e.code), null);
  });

  it('dead letters: list, replay selected, discard selected, replay all, purge all; audited', async () => {
    const { ref, handler } = await panelFor('dead-letters');
    await conn.request('push.batch', { ...ref, messages: Array.from({ length: 6 }, (_, i) => ({ body: { n: i } })) });
    const pulled = await conn.request('pull', { ...ref, max: 6 });
    assert.equal(pulled.messages.length, 6);
    for (const d of pulled.messages) assert.equal((await conn.request('nack', { receipt: d.receipt, dead: true, error: 'boom' })).ok, true);
    const dead = await handler.dispatch('dead.list', { limit: 50 });
    assert.equal(dead.total, 6);
    const d0 = await handler.dispatch('message.get', { id: dead.messages[0].id });
    assert.equal(d0?.state, 'dead');
    assert.equal(d0?.lastError, 'boom');
    assert.ok(d0?.deadReason);
    assert.equal((await handler.dispatch('dead.replay', { ids: [dead.messages[0].id] })).replayed, 1);
    assert.equal((await handler.dispatch('dead.purge', { ids: [dead.messages[1].id] })).purged, 1);
    assert.equal((await handler.dispatch('dead.replay', { all: true })).replayed, 4); // the 4 left
    const pulled2 = await conn.request('pull', { ...ref, max: 2 });
    for (const d of pulled2.messages) await conn.request('nack', { receipt: d.receipt, dead: true });
    assert.equal((await handler.dispatch('dead.purge', { all: true })).purged, 2);
    const audit = await handler.dispatch('audit.list', {});
    assert.deepEqual(audit.entries.map((e) => e.action).sort(), ['purge_dead', 'purge_dead', 'replay', 'replay']);
  });

  it('stats has 48 half-hour lag steps; export pages through everything', async () => {
    const { ref, handler, saved } = await panelFor('exports');
    // More than two export pages, in every state the export reads.
    const n = CHUNK.exportPage * 2 + 7;
    const ids: string[] = [];
    for (let i = 0; i < n; i += 1000) {
      const r = await conn.request('push.batch', { ...ref, messages: Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ body: { n: i + j } })) });
      ids.push(...r.results.map((x) => x.id));
    }
    ids.push((await conn.request('push', { ...ref, body: 'later', delayMs: 60_000 })).id);
    const pulled = await conn.request('pull', { ...ref, max: 2 });
    await conn.request('nack', { receipt: pulled.messages[0].receipt, dead: true }); // one dead, one leased
    const s = await handler.dispatch('stats', {});
    assert.equal(s.lagHistory.length, 48);
    assert.equal(s.lagHistory[1].start - s.lagHistory[0].start, 30 * 60_000);
    assert.deepEqual([s.counts.delayed, s.counts.leased, s.counts.dead], [1, 1, 1]);
    const r = await handler.dispatch('export', { format: 'ndjson' });
    assert.equal(r.exported, n + 1);
    assert.equal(r.exported, s.counts.ready + s.counts.delayed + s.counts.leased + s.counts.dead);
    const lines = saved.at(-1)!.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string });
    assert.equal(lines.length, r.exported);
    assert.deepEqual(lines.map((m) => m.id).sort(), [...ids].sort(), 'every message exactly once');
  });

  it('forwards the queue’s change events to the webview', async () => {
    const { ref, handler, posted } = await panelFor('live');
    // The first request subscribes; its round trip is the barrier (the connection is in order).
    await handler.dispatch('init', {});
    await conn.request('push', { ...ref, body: 'later', delayMs: 60_000 });
    await conn.request('push', { ...ref, body: { live: true } });
    await emu.clock.advance(61_000); // the delayed message becomes ready too
    const changed = () => posted.filter((m) => m.type === 'event' && m.event === 'changed') as Extract<HostMessage, { event: 'changed' }>[];
    await until('a forwarded change with kind pushed and both messages ready', () => {
      const c = changed();
      return c.flatMap((m) => m.kinds).includes('pushed') && c.at(-1)?.counts?.ready === 2;
    });
    const kinds = changed().flatMap((m) => m.kinds);
    assert.ok(kinds.includes('pushed'), kinds.join());
  });

  it('purge of live messages', async () => {
    const { ref, handler } = await panelFor('purge');
    await conn.request('push.batch', { ...ref, messages: Array.from({ length: 5 }, (_, i) => ({ body: { n: i } })) });
    await conn.request('push', { ...ref, body: 'later', delayMs: 60_000 });
    const pulled = await conn.request('pull', { ...ref, max: 2 });
    await conn.request('nack', { receipt: pulled.messages[0].receipt, dead: true });
    const before = (await handler.dispatch('stats', {})).counts;
    assert.deepEqual([before.ready, before.delayed, before.leased, before.dead], [3, 1, 1, 1]);
    const r = await handler.dispatch('purge', {});
    assert.equal(r.purged, 5, 'ready, delayed and leased');
    const after = (await handler.dispatch('stats', {})).counts;
    assert.deepEqual([after.ready, after.delayed, after.leased, after.dead], [0, 0, 0, 1], 'dead letters stay');
  });
});
