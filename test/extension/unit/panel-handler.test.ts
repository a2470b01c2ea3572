import assert from 'node:assert/strict';
import { QuaysideError } from '../../../emulator/errors';
import { SwitchingTransport } from '../../../src/core/switching';
import { PanelHandler, connectionNotice, type PanelUi, type SaveTarget } from '../../../src/panel/handler';
import type { HostMessage, PanelEvent, PanelResponse } from '../../../src/panel/messages';
import { FakeTransport } from '../webview/fake-transport';
import { IDS_PER_REQUEST } from '../../../src/core/deadLetters';

class FakeUi implements PanelUi {
  answer = true;
  confirms: { message: string; detail: string; action: string }[] = [];
  saved: { name: string; text: string }[] = [];
  saveCancelled = false;
  progressTitles: string[] = [];
  reports: [number, number | null][] = [];
  cancelAfter = Infinity;
  /** Runs while the modal is "open": what the user does not see happen meanwhile. */
  whileConfirming?: () => void;

  async confirm(message: string, detail: string, action: string) {
    this.confirms.push({ message, detail, action });
    this.whileConfirming?.();
    return this.answer;
  }
  saveAsked = 0;
  async chooseSaveTarget(opts: { suggestedName: string }): Promise<SaveTarget | undefined> {
    this.saveAsked++;
    if (this.saveCancelled) return undefined;
    return { label: `/tmp/${opts.suggestedName}`, write: async (text) => void this.saved.push({ name: opts.suggestedName, text }) };
  }
  async withProgress<T>(title: string, task: (p: { report(d: number, t: number | null): void; readonly cancelled: boolean }) => Promise<T>) {
    this.progressTitles.push(title);
    const ui = this;
    return task({
      report: (d, t) => void ui.reports.push([d, t]),
      get cancelled() {
        return ui.reports.length >= ui.cancelAfter;
      },
    });
  }
}

/** The handler's throttle timers, fired by hand. */
function manualTimers() {
  const pending = new Set<() => void>();
  return {
    set: (fn: () => void) => (pending.add(fn), fn),
    clear: (t: unknown) => void pending.delete(t as () => void),
    get count() {
      return pending.size;
    },
    fireAll() {
      const due = [...pending];
      pending.clear();
      for (const fn of due) fn();
    },
  };
}

function setup(opts: { debounceMs?: number; timers?: ReturnType<typeof manualTimers> } = {}) {
  const t = new FakeTransport();
  const ui = new FakeUi();
  const posted: HostMessage[] = [];
  const handler = new PanelHandler({ ref: { namespace: 'demo', queue: 'jobs' }, transport: t, ui, post: (m) => posted.push(m), debounceMs: opts.debounceMs ?? 20, timers: opts.timers });
  const responses = () => posted.filter((m): m is PanelResponse => m.type === 'response');
  const events = () => posted.filter((m): m is PanelEvent => m.type === 'event');
  return { t, ui, posted, handler, responses, events };
}

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
const fillDead = (t: FakeTransport, n: number) =>
  Array.from({ length: n }, (_, i) => t.add({ body: { i }, state: 'dead', attempts: 5, deadAt: t.now - 1000, deadReason: 'nack', lastError: 'boom' }));

describe('panel handler (host side of the queue panel)', () => {
  it('init says which clock the emulator runs; a virtual clock\'s advance is passed on to the webview', async () => {
    const { handler, t, events } = setup();
    t.clockMode = 'virtual';
    const init = await handler.dispatch('init', {});
    assert.equal(init.clock, 'virtual');
    assert.equal(init.now, t.now);
    t.advanceClock(30_000);
    assert.deepEqual(events().filter((e) => e.event === 'clock'), [{ type: 'event', event: 'clock', now: t.now }]);
  });

  it('answers a request with { requestId, ok: true, result } and a failure with { ok: false, error: { code, message } }', async () => {
    const { handler, responses, t } = setup();
    await handler.handleMessage({ type: 'request', requestId: 'a1', op: 'init', args: {} });
    const r = responses()[0];
    assert.equal(r.requestId, 'a1');
    assert.equal(r.ok, true);
    assert.equal((r as any).result.queue.name, 'jobs');
    t.failNext.set('peek', new QuaysideError('forbidden', 'read-only token'));
    await handler.handleMessage({ type: 'request', requestId: 'a2', op: 'peek', args: { states: ['ready'], limit: 10 } });
    assert.deepEqual(responses()[1], { type: 'response', requestId: 'a2', ok: false, error: { code: 'forbidden', message: 'read-only token' } });
    // Not a request: ignored, nothing posted.
    await handler.handleMessage({ hello: 1 });
    await handler.handleMessage({ type: 'request', op: 'peek' });
    assert.equal(responses().length, 2);
    handler.dispose();
  });

  it('pages with peek: passes states, search and cursor, clamps the page size, never loads everything', async () => {
    const { handler, t } = setup();
    for (let i = 0; i < 250; i++) t.add({ body: { n: i, tag: i % 2 ? 'odd' : 'even' } });
    const p1 = await handler.dispatch('peek', { states: ['ready', 'dead'], search: '"odd"', limit: 5000 });
    const call = t.callsOf('peek')[0].args;
    assert.deepEqual(call, { namespace: 'demo', queue: 'jobs', states: ['ready', 'dead'], limit: 200, search: '"odd"' });
    assert.equal(p1.messages.length, 125);
    assert.equal(p1.total, 125);
    const p2 = await handler.dispatch('peek', { states: ['ready'], limit: 100, cursor: 'c100' });
    assert.equal(t.callsOf('peek')[1].args.cursor, 'c100');
    assert.equal(p2.messages[0].body && (p2.messages[0].body as any).n, 100);
    // Unknown states are dropped; none left means every state.
    await handler.dispatch('peek', { states: ['bogus' as any], limit: 0 });
    assert.deepEqual(t.callsOf('peek')[2].args.states, ['ready', 'delayed', 'leased', 'dead']);
    assert.equal(t.callsOf('peek')[2].args.limit, 1);
    // The search goes as typed, spaces and all, as the CLI's --search does; empty is none.
    const spaced = await handler.dispatch('peek', { states: ['ready'], search: ' odd', limit: 10 });
    assert.equal(t.callsOf('peek')[3].args.search, ' odd');
    assert.equal(spaced.total, 0, 'no body holds " odd"');
    await handler.dispatch('peek', { states: ['ready'], search: '', limit: 10 });
    assert.equal(t.callsOf('peek')[4].args.search, undefined);
    handler.dispose();
  });

  it('message.get returns the message, or null when it is gone', async () => {
    const { handler, t } = setup();
    const m = t.add({ body: { a: 1 }, attributes: { k: 'v' } });
    assert.deepEqual((await handler.dispatch('message.get', { id: m.id }))?.attributes, { k: 'v' });
    assert.equal(await handler.dispatch('message.get', { id: 'nope' }), null);
    handler.dispose();
  });

  it('push: refuses bad JSON and bad fields before sending anything', async () => {
    const { handler, t } = setup();
    const base = { body: '{"a":1}', delaySeconds: '', dedupeKey: '', attributes: '', count: '' };
    for (const bad of [
      { body: '{"a":' },
      { body: '' },
      { delaySeconds: '-1' },
      { delaySeconds: 'soon' },
      { attributes: '[1,2]' },
      { attributes: '{x}' },
      { count: '0' },
      { count: '2.5' },
      { count: '100001' },
    ]) {
      await assert.rejects(handler.dispatch('push', { ...base, ...bad }), (e: any) => e.code === 'invalid_argument', JSON.stringify(bad));
    }
    assert.equal(t.callsOf('push').length + t.callsOf('push.batch').length, 0);
    handler.dispose();
  });

  it('push: one message with delay, dedupe key and attributes', async () => {
    const { handler, t } = setup();
    const r = await handler.dispatch('push', { body: '{"order": 42}', delaySeconds: '1.5', dedupeKey: ' k1 ', attributes: '{"source":"panel"}', count: '1' });
    assert.equal(r.sent, 1);
    // The key as typed: the emulator matches keys exactly, so a trimmed one would not dedupe against the app's own ' k1 '.
    assert.deepEqual(t.callsOf('push')[0].args, { namespace: 'demo', queue: 'jobs', body: { order: 42 }, delayMs: 1500, dedupeKey: ' k1 ', attributes: { source: 'panel' } });
    assert.equal(t.messages[0].state, 'delayed');
    handler.dispose();
  });

  it('push ×N: sends in batches and reports progress', async () => {
    const { handler, t, ui, events } = setup();
    const r = await handler.dispatch('push', { body: '"x"', delaySeconds: '', dedupeKey: '', attributes: '', count: '1200' }, 'req9');
    assert.equal(r.sent, 1200);
    assert.deepEqual(t.callsOf('push.batch').map((c) => c.args.messages.length), [500, 500, 200]);
    assert.equal(t.messages.length, 1200);
    assert.equal(ui.progressTitles.length, 1);
    assert.deepEqual(ui.reports.at(-1), [1200, 1200]);
    const progress = events().filter((e) => e.event === 'progress');
    assert.ok(progress.length >= 3);
    assert.equal((progress.at(-1) as any).requestId, 'req9');
    // A small ×N needs no progress notification.
    await handler.dispatch('push', { body: '1', delaySeconds: '', dedupeKey: '', attributes: '', count: '3' });
    assert.equal(ui.progressTitles.length, 1);
    handler.dispose();
  });

  it('push ×N refused part-way (a full queue): what earlier batches sent is reported as sent, with why the rest was not', async () => {
    const { handler, t } = setup();
    const full = new QuaysideError('queue_full', 'queue "jobs" is full (maxDepth 600)');
    t.failNth.set('push.batch', { n: 2, error: full });
    const r = await handler.dispatch('push', { body: '"x"', delaySeconds: '', dedupeKey: '', attributes: '', count: '1200' });
    assert.deepEqual([r.sent, r.deduped, r.stopped], [500, 0, 'queue "jobs" is full (maxDepth 600)']);
    assert.equal(t.messages.length, 500);
    // Refused at the first batch, nothing was sent: an error, as for one message.
    t.failNth.set('push.batch', { n: 1, error: full });
    await assert.rejects(handler.dispatch('push', { body: '"x"', delaySeconds: '', dedupeKey: '', attributes: '', count: '1200' }), /full/);
    handler.dispose();
  });

  it('dead.replay with ids replays exactly those (no confirmation needed)', async () => {
    const { handler, t, ui } = setup();
    const dead = fillDead(t, 4);
    const r = await handler.dispatch('dead.replay', { ids: [dead[0].id, dead[2].id, dead[0].id] });
    assert.equal(r.replayed, 2);
    assert.deepEqual(t.callsOf('dead.replay')[0].args.ids, [dead[0].id, dead[2].id]);
    assert.equal(ui.confirms.length, 0);
    assert.equal(t.counts().dead, 2);
    await assert.rejects(handler.dispatch('dead.replay', { ids: [] }), (e: any) => e.code === 'invalid_argument');
    handler.dispose();
  });

  it('replay all lists the dead letters page by page, confirms with their count, then replays those ids (one request for up to 10,000: one audit entry), with progress', async () => {
    const { handler, t, ui, events } = setup();
    const dead = fillDead(t, 1200);
    ui.answer = false;
    await assert.rejects(handler.dispatch('dead.replay', { all: true }), (e: any) => e.code === 'cancelled');
    assert.equal(t.callsOf('dead.replay').length, 0);
    assert.match(ui.confirms[0].message, /^Replay all 1,200 dead letters of demo\/jobs\?$/);
    // Pages within the protocol's limit (1000), following the cursor.
    assert.deepEqual(t.callsOf('dead.list').map((c) => [c.args.limit, c.args.cursor]), [[1000, undefined], [1000, 'c1000']]);
    ui.answer = true;
    const r = await handler.dispatch('dead.replay', { all: true }, 'req7');
    assert.deepEqual(r, { replayed: 1200 });
    assert.equal(t.counts().dead, 0);
    const calls = t.callsOf('dead.replay');
    assert.deepEqual(calls.map((c) => c.args.ids.length), [1200]);
    assert.deepEqual(calls.flatMap((c) => c.args.ids), dead.map((m) => m.id));
    assert.ok(calls.every((c) => c.args.max === undefined), 'never "the oldest N": only the listed ids');
    assert.deepEqual(ui.reports.at(-1), [1200, 1200]);
    const labels = new Set(events().filter((e) => e.event === 'progress' && e.requestId === 'req7').map((e) => (e as any).label));
    assert.deepEqual([...labels], ['Listing', 'Replaying']);
    handler.dispose();
  });

  it('replay all: cancelled part-way, it keeps what it did and claims nothing about arrivals', async () => {
    const { handler, t, ui } = setup();
    fillDead(t, IDS_PER_REQUEST + 200);
    ui.cancelAfter = 1;
    assert.deepEqual(await handler.dispatch('dead.replay', { all: true }), { replayed: IDS_PER_REQUEST });
    assert.equal(t.counts().dead, 200);
    handler.dispose();
  });

  for (const op of ['dead.purge', 'dead.replay'] as const) {
    it(`${op} all acts only on the dead letters its confirmation counted: one dead-lettered while the modal is open is left, and said to be`, async () => {
      const { handler, t, ui } = setup();
      const counted = fillDead(t, 3).map((m) => m.id);
      let late = '';
      ui.whileConfirming = () => (late = fillDead(t, 1)[0].id);
      const r = await handler.dispatch(op, { all: true });
      assert.match(ui.confirms[0].message, /all 3 dead letters of demo\/jobs\?$/);
      assert.deepEqual(r, op === 'dead.purge' ? { purged: 3, arrived: 1 } : { replayed: 3, arrived: 1 });
      assert.deepEqual(t.callsOf(op).flatMap((c) => c.args.ids), counted);
      assert.deepEqual(t.messages.filter((m) => m.state === 'dead').map((m) => m.id), [late]);
      handler.dispose();
    });
  }

  it('an env queue\'s confirmations and progress say "failed messages", as its panel and tree do', async () => {
    const { handler, t, ui } = setup();
    t.dialect = 'env';
    const dead = fillDead(t, 3);
    await handler.dispatch('init', {});
    await handler.dispatch('dead.purge', { ids: [dead[0].id] });
    await handler.dispatch('dead.replay', { all: true });
    fillDead(t, 1);
    await handler.dispatch('dead.purge', { all: true });
    await handler.dispatch('purge', {});
    assert.deepEqual(
      ui.confirms.map((c) => c.message),
      ['Discard 1 failed message from demo/jobs?', 'Replay all 2 failed messages of demo/jobs?', 'Purge the 1 failed message of demo/jobs?', 'Purge 2 live messages from jobs?'],
    );
    assert.match(ui.confirms[3].detail, /\(failed messages stay\)/);
    assert.deepEqual(ui.progressTitles, ['Replaying failed messages of demo/jobs', 'Purging failed messages of demo/jobs', 'Purging jobs']);
    await assert.rejects(handler.dispatch('dead.replay', { ids: [] }), (e: any) => e.message === 'Select the failed messages to replay');
    handler.dispose();
  });

  it('discard selected and purge all are confirmed with a modal first; "no" sends nothing', async () => {
    const { handler, t, ui } = setup();
    const dead = fillDead(t, 3);
    ui.answer = false;
    await assert.rejects(handler.dispatch('dead.purge', { ids: [dead[0].id] }), (e: any) => e.code === 'cancelled');
    await assert.rejects(handler.dispatch('dead.purge', { all: true }), (e: any) => e.code === 'cancelled');
    await assert.rejects(handler.dispatch('purge', {}), (e: any) => e.code === 'cancelled');
    assert.equal(t.callsOf('dead.purge').length + t.callsOf('purge').length, 0);
    assert.equal(ui.confirms.length, 3);
    assert.deepEqual(ui.confirms.map((c) => c.action), ['Discard', 'Purge All', 'Purge']);
    ui.answer = true;
    assert.equal((await handler.dispatch('dead.purge', { ids: [dead[0].id] })).purged, 1);
    assert.deepEqual(t.callsOf('dead.purge')[0].args, { namespace: 'demo', queue: 'jobs', ids: [dead[0].id] });
    assert.deepEqual(await handler.dispatch('dead.purge', { all: true }), { purged: 2 });
    assert.deepEqual(t.callsOf('dead.purge')[1].args.ids, [dead[1].id, dead[2].id]);
    // Nothing dead: nothing to ask about.
    assert.deepEqual(await handler.dispatch('dead.purge', { all: true }), { purged: 0 });
    assert.equal(ui.confirms.length, 5);
    t.add({ body: 1 });
    assert.equal((await handler.dispatch('purge', {})).purged, 1);
    assert.equal(t.callsOf('purge')[0].args.confirm, 'jobs');
    handler.dispose();
  });

  it('stats and audit.list go to the queue', async () => {
    const { handler, t } = setup();
    t.makeLag((i) => ({ peakDepth: i, maxWaitMs: i * 1000 }));
    const s = await handler.dispatch('stats', {});
    assert.equal(s.lagHistory.length, 48);
    await handler.dispatch('audit.list', {});
    assert.deepEqual(t.callsOf('audit.list')[0].args, { namespace: 'demo', queue: 'jobs', limit: 100 });
    handler.dispose();
  });

  it('exports every matching message as NDJSON by paging through peek', async () => {
    const { handler, t, ui } = setup();
    for (let i = 0; i < 1234; i++) t.add({ body: { i } });
    fillDead(t, 3);
    const r = await handler.dispatch('export', { format: 'ndjson', states: ['ready'] });
    assert.equal(r.exported, 1234);
    assert.match(r.target, /demo-jobs-.*\.ndjson$/);
    const lines = ui.saved[0].text.trimEnd().split('\n');
    assert.equal(lines.length, 1234);
    assert.deepEqual(JSON.parse(lines[1233]).body, { i: 1233 });
    assert.deepEqual(t.callsOf('peek').map((c) => c.args.cursor), [undefined, 'c500', 'c1000']);
    handler.dispose();
  });

  it('exports selected messages as a JSON array, skipping ones that are gone; cancelling the dialog does nothing', async () => {
    const { handler, t, ui } = setup();
    const a = t.add({ body: { a: 1 } });
    const b = t.add({ body: { b: 2 } });
    const r = await handler.dispatch('export', { format: 'json', ids: [a.id, 'gone', b.id] });
    assert.equal(r.exported, 2);
    const arr = JSON.parse(ui.saved[0].text);
    assert.deepEqual(arr.map((m: any) => m.id), [a.id, b.id]);
    ui.saveCancelled = true;
    const before = t.calls.length;
    await assert.rejects(handler.dispatch('export', { format: 'json', ids: [a.id] }), (e: any) => e.code === 'cancelled');
    assert.deepEqual(t.calls.slice(before).map((c) => c.op), ['queue.get'], 'nothing read but a look that the queue is there');
    // With the emulator down, it says so before asking for a file.
    const asked = ui.saveAsked;
    t.down = true;
    await assert.rejects(handler.dispatch('export', { format: 'json', ids: [a.id] }), (e: any) => e.code === 'unavailable');
    assert.equal(ui.saveAsked, asked, 'no file asked for');
    t.down = false;
    await assert.rejects(handler.dispatch('export', { format: 'xml' as any }), (e: any) => e.code === 'invalid_argument');
    handler.dispose();
  });

  it('subscribes to the queue and forwards its change events, debounced into one', async () => {
    const { handler, t, events } = setup({ debounceMs: 30 });
    await handler.dispatch('init', {});
    await tick();
    assert.deepEqual(t.callsOf('subscribe')[0].args, { namespace: 'demo', queue: 'jobs' });
    t.add({ body: 1, id: 'm1' });
    t.emitChange('pushed', ['m1']);
    t.emitChange('leased', ['m1']);
    t.emitChange('acked', ['m1']);
    t.emitChange('pushed', ['x'], { namespace: 'demo', queue: 'other' }); // another queue: ignored
    await tick(60);
    const changed = events().filter((e) => e.event === 'changed');
    assert.equal(changed.length, 1);
    assert.deepEqual((changed[0] as any).kinds, ['pushed', 'leased', 'acked']);
    assert.deepEqual((changed[0] as any).ids, ['m1']);
    assert.equal((changed[0] as any).counts.ready, 1);
    // queue_deleted is its own event.
    t.emitChange('queue_deleted');
    assert.ok(events().some((e) => e.event === 'deleted'));
    handler.dispose();
  });

  it('a queue deleted while a change waits in the throttle: only `deleted` is sent (the late change would read as the queue being back)', async () => {
    const timers = manualTimers();
    const { handler, t, events } = setup({ timers });
    await handler.dispatch('init', {});
    await tick();
    t.emitChange('pushed', ['m1']);
    assert.equal(timers.count, 1);
    t.emitChange('queue_deleted');
    assert.equal(timers.count, 0, 'the throttle timer is cancelled');
    timers.fireAll();
    assert.deepEqual(events(), [{ type: 'event', event: 'deleted' }]);
    // Created again: its changes flow as before.
    t.emitChange('queue_created');
    timers.fireAll();
    assert.deepEqual((events().at(-1) as any).kinds, ['queue_created']);
    handler.dispose();
  });

  it('ignores copies of events meant for other subscriptions on the same connection', async () => {
    const { handler, t, events } = setup({ debounceMs: 10 });
    await handler.dispatch('init', {});
    await tick();
    await t.request('subscribe', { namespace: 'demo' }); // e.g. the tree's subscription
    t.emitChange('pushed', ['a']);
    await tick(30);
    assert.equal(events().filter((e) => e.event === 'changed').length, 1);
    handler.dispose();
  });

  it('a gap in its subscription\'s events (the connection fell behind) makes the webview read the queue again; another subscription\'s gap does not', async () => {
    const { handler, t, events } = setup({ debounceMs: 10 });
    await handler.dispatch('init', {});
    await tick();
    await t.request('subscribe', { namespace: 'elsewhere' }); // another subscription on the connection
    t.emitGap();
    await tick(30);
    const changed = events().filter((e) => e.event === 'changed');
    assert.equal(changed.length, 1, 'one refresh, for its own subscription\'s gap');
    assert.deepEqual((changed[0] as any).kinds, ['gap']);
    handler.dispose();
  });

  it('a gap before its subscription\'s id is known may be its own: the webview reads the queue again', async () => {
    const { handler, t, events } = setup({ debounceMs: 10 });
    t.latencyMs = 40; // the subscribe is on its way: no id yet
    const init = handler.dispatch('init', {});
    await tick(5);
    t.emitGap('s_unknown');
    await init;
    await tick(60);
    assert.deepEqual(events().filter((e) => e.event === 'changed').map((e: any) => e.kinds), [['gap']]);
    handler.dispose();
  });

  it('resubscribes after a reconnect and tells the webview; unsubscribes on dispose', async () => {
    const { handler, t, events } = setup({ debounceMs: 10 });
    await handler.dispatch('init', {});
    await tick();
    t.failNext.set('peek', new QuaysideError('unavailable', 'cannot reach the emulator'));
    await handler.handleMessage({ type: 'request', requestId: 'x', op: 'peek', args: { states: ['ready'], limit: 10 } });
    assert.deepEqual(events().find((e) => e.event === 'connection'), { type: 'event', event: 'connection', state: 'down', message: 'cannot reach the emulator' });
    t.reconnect();
    await tick(30);
    assert.equal(t.callsOf('subscribe').length, 2);
    assert.equal(t.subscriptionCount, 1);
    assert.ok(events().some((e) => e.event === 'connection' && e.state === 'up'));
    assert.ok(events().some((e) => e.event === 'changed' && e.kinds.includes('reconnected')));
    handler.dispose();
    await tick();
    assert.equal(t.subscriptionCount, 0);
    assert.equal(t.listenerCount, 0);
  });

  it('with no transport yet (a panel restored before the emulator is up) it answers unavailable, then picks the transport up', async () => {
    let transport: FakeTransport | undefined;
    const posted: HostMessage[] = [];
    const handler = new PanelHandler({ ref: { namespace: 'demo', queue: 'jobs' }, transport: () => transport, ui: new FakeUi(), post: (m) => posted.push(m) });
    await handler.handleMessage({ type: 'request', requestId: '1', op: 'init', args: {} });
    assert.equal((posted.find((m) => m.type === 'response') as any).error.code, 'unavailable');
    transport = new FakeTransport();
    await handler.handleMessage({ type: 'request', requestId: '2', op: 'init', args: {} });
    assert.equal((posted.filter((m) => m.type === 'response')[1] as any).ok, true);
    assert.ok(posted.some((m) => m.type === 'event' && m.event === 'connection' && m.state === 'up'));
    handler.dispose();
  });

  it('is told the emulator stopped (again when the reason changes) or runs again (once), and what the lifecycle states mean for it', async () => {
    const { handler, events, responses, t } = setup();
    t.failNext.set('stats', new QuaysideError('unavailable', 'the Quayside emulator is not running'));
    handler.setConnection(false, 'the emulator is stopping');
    handler.setConnection(false, 'the emulator is stopped');
    handler.setConnection(false, 'the emulator is stopped');
    handler.setConnection(true);
    handler.setConnection(true);
    handler.setConnection(false, 'the emulator crashed; restarting it…');
    handler.setConnection(false, 'the emulator crashed');
    // The webview's retry fails meanwhile: its generic reason does not replace the lifecycle's.
    await handler.handleMessage({ type: 'request', requestId: 'r', op: 'stats', args: {} });
    assert.equal((responses()[0] as any).error.code, 'unavailable');
    assert.deepEqual(events(), [
      { type: 'event', event: 'connection', state: 'down', message: 'the emulator is stopping' },
      { type: 'event', event: 'connection', state: 'down', message: 'the emulator is stopped' },
      { type: 'event', event: 'connection', state: 'up' },
      { type: 'event', event: 'connection', state: 'down', message: 'the emulator crashed; restarting it…' },
      { type: 'event', event: 'connection', state: 'down', message: 'the emulator crashed' },
    ]);
    assert.deepEqual(connectionNotice({ state: 'running' }), { up: true });
    assert.deepEqual(connectionNotice({ state: 'stopping' }), { up: false, message: 'the emulator is stopping' });
    assert.deepEqual(connectionNotice({ state: 'crashed', restartAt: 5 }), { up: false, message: 'the emulator crashed; restarting it…' });
    assert.deepEqual(connectionNotice({ state: 'crashed' }), { up: false, message: 'the emulator crashed' });
    handler.dispose();
  });

  it('a page loaded while the emulator is down (a background tab shown again after a crash) is given the lifecycle\'s reason, not a bare "not running"', async () => {
    const posted: any[] = [];
    // As the extension wires it: the switching transport is always there, and with nothing behind it fails unavailable.
    const handler = new PanelHandler({ ref: { namespace: 'demo', queue: 'jobs' }, transport: () => new SwitchingTransport(), ui: new FakeUi(), post: (m) => posted.push(m) });
    handler.setConnection(false, 'the emulator crashed');
    await handler.handleMessage({ type: 'request', requestId: '1', op: 'init', args: {} });
    assert.deepEqual((posted.find((m) => m.type === 'response') as any).error, { code: 'unavailable', message: 'the emulator crashed' });
    handler.setConnection(false, 'the emulator crashed; restarting it…');
    await handler.handleMessage({ type: 'request', requestId: '2', op: 'init', args: {} });
    assert.equal((posted.filter((m) => m.type === 'response')[1] as any).error.message, 'the emulator crashed; restarting it…');
    handler.dispose();
  });

  it('a tab asked for before the webview loads comes with the next init only; a loaded webview is told at once', async () => {
    const { handler, events } = setup();
    handler.showTab('audit', false);
    assert.equal(events().length, 0);
    assert.equal((await handler.dispatch('init', {})).tab, 'audit');
    assert.equal((await handler.dispatch('init', {})).tab, undefined);
    handler.showTab('metrics', true);
    assert.deepEqual(events().at(-1), { type: 'event', event: 'show', tab: 'metrics' });
    assert.equal((await handler.dispatch('init', {})).tab, undefined);
    handler.dispose();
  });

  it('an unknown op is an invalid_argument error', async () => {
    const { handler, responses } = setup();
    await handler.handleMessage({ type: 'request', requestId: 'z', op: 'drop.tables', args: {} });
    assert.equal((responses()[0] as any).error.code, 'invalid_argument');
    handler.dispose();
  });
});
