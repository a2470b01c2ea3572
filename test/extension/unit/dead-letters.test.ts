// "All" dead letters as the panel and the palette's Replay / Purge Dead Letters do it: list the ids
// for the confirmation, then act on exactly those, in chunks within the protocol's limits.
import assert from 'node:assert/strict';
import { DEAD_LIST_PAGE, IDS_PER_REQUEST, actOnAllDead, actOnDeadIds, actOnListed, actOnSelectedDead, listDeadIds, type DeadProgress, type DeadUi } from '../../../src/core/deadLetters';
import { arrivedNote } from '../../../src/core/wording';
import { FakeTransport } from '../webview/fake-transport';

const ref = { namespace: 'demo', queue: 'jobs' };
const fillDead = (t: FakeTransport, n: number) => Array.from({ length: n }, (_, i) => t.add({ body: { i }, state: 'dead', deadAt: t.now, deadReason: 'nack' }).id);

describe('extension: acting on all dead letters', () => {
  it('lists every dead letter id, page by page within the protocol limit, and reports each page', async () => {
    const t = new FakeTransport();
    const ids = fillDead(t, 2345);
    t.add({ body: 'live' });
    const reports: [number, number][] = [];
    assert.deepEqual(await listDeadIds(t, ref, { report: (d, n) => void reports.push([d, n]) }), ids);
    assert.deepEqual(t.callsOf('dead.list').map((c) => [c.args.limit, c.args.cursor]), [[DEAD_LIST_PAGE, undefined], [DEAD_LIST_PAGE, 'c1000'], [DEAD_LIST_PAGE, 'c2000']]);
    assert.deepEqual(reports, [[1000, 2345], [2000, 2345], [2345, 2345]]);
    assert.deepEqual(await listDeadIds(new FakeTransport(), ref), []);
  });

  it('purges exactly the given ids in chunks of at most the 10,000-id limit (one request, one audit entry, for up to that many), skipping ones no longer dead', async () => {
    const t = new FakeTransport();
    const ids = fillDead(t, 12_000);
    const r = await actOnDeadIds(t, ref, 'purge', [...ids, 'msg_gone', ids[0]]);
    assert.deepEqual(r, { done: 12_000, finished: true });
    const sizes = t.callsOf('dead.purge').map((c) => c.args.ids.length);
    assert.deepEqual(sizes, [10_000, 2_001]);
    assert.equal(sizes.reduce((a, b) => a + b), 12_001, 'every id once (duplicates dropped)');
    assert.equal(t.counts().dead, 0);
  });

  it('stops between chunks when cancelled, and says it did not finish', async () => {
    const t = new FakeTransport();
    const ids = fillDead(t, 2 * IDS_PER_REQUEST + 200);
    let chunks = 0;
    const r = await actOnDeadIds(t, ref, 'replay', ids, { report: () => void chunks++, cancelled: () => chunks >= 2 });
    assert.deepEqual(r, { done: 2 * IDS_PER_REQUEST, finished: false });
    assert.equal(t.counts().dead, 200);
  });

  it('a dead letter that arrives between the listing and the act is left, and counted as arrived', async () => {
    for (const action of ['purge', 'replay'] as const) {
      const t = new FakeTransport();
      fillDead(t, 3);
      const listed = await listDeadIds(t, ref);
      // Dead-lettered while the confirmation is open.
      const late = fillDead(t, 1)[0];
      assert.deepEqual(await actOnListed(t, ref, action, listed), { done: 3, arrived: 1 });
      assert.deepEqual(t.messages.filter((m) => m.state === 'dead').map((m) => m.id), [late]);
      assert.ok(t.callsOf(action === 'purge' ? 'dead.purge' : 'dead.replay').every((c) => Array.isArray(c.args.ids)), 'only by ids, never "all"');
    }
    const t = new FakeTransport();
    assert.deepEqual(await actOnListed(t, ref, 'purge', fillDead(t, 2)), { done: 2, arrived: 0 });
  });

  it('says what arrived in words: "; 1 more arrived and was left"', () => {
    assert.equal(arrivedNote(0), '');
    assert.equal(arrivedNote(undefined), '');
    assert.equal(`purged 3${arrivedNote(1)}`, 'purged 3; 1 more arrived and was left');
    assert.equal(arrivedNote(1200), '; 1,200 more arrived and were left');
  });
});

/** The editor's part, recorded: what was asked, what progress was shown, and where. */
class FakeDeadUi implements DeadUi {
  answer = true;
  confirms: { question: string; detail: string; button: string }[] = [];
  titles: string[] = [];
  /** Reports to the notification sink. */
  notified: [number, number][] = [];
  /** Reports to `progress` (the panel's webview), labelled. */
  steps: [string, number, number][] = [];
  /** Runs while the modal is "open". */
  whileConfirming?: () => void;
  listing?: DeadUi['listing'];

  async confirm(question: string, detail: string, button: string) {
    this.confirms.push({ question, detail, button });
    this.whileConfirming?.();
    return this.answer;
  }
  async withProgress<T>(title: string, task: (progress: DeadProgress) => Promise<T>) {
    this.titles.push(title);
    return task({ report: (d, n) => void this.notified.push([d, n]) });
  }
  progress(label: string, done: number, total: number) {
    this.steps.push([label, done, total]);
  }
}

describe('extension: the shared replay / purge flow (palette and panel)', () => {
  it('all, nothing dead: nothing is asked and nothing acted on', async () => {
    for (const action of ['replay', 'purge'] as const) {
      const t = new FakeTransport();
      t.add({ body: 'live' });
      const ui = new FakeDeadUi();
      assert.deepEqual(await actOnAllDead(t, ref, action, 'cache', ui), { listed: 0, done: 0 });
      assert.equal(ui.confirms.length, 0);
      assert.equal(ui.titles.length, 0);
      assert.equal(t.callsOf('dead.replay').length + t.callsOf('dead.purge').length, 0);
    }
  });

  it('all, declined: undefined, and nothing acted on', async () => {
    for (const action of ['replay', 'purge'] as const) {
      const t = new FakeTransport();
      fillDead(t, 3);
      const ui = new FakeDeadUi();
      ui.answer = false;
      assert.equal(await actOnAllDead(t, ref, action, 'cache', ui), undefined);
      assert.equal(ui.confirms.length, 1);
      assert.equal(ui.titles.length, 0);
      assert.equal(t.callsOf('dead.replay').length + t.callsOf('dead.purge').length, 0);
      assert.equal(t.counts().dead, 3);
    }
  });

  it('all, accepted: one wording per action, acts on exactly the listed ids with progress, and reports what arrived meanwhile', async () => {
    for (const action of ['replay', 'purge'] as const) {
      const t = new FakeTransport();
      const listed = fillDead(t, 3);
      const ui = new FakeDeadUi();
      let late = '';
      ui.whileConfirming = () => (late = fillDead(t, 1)[0]);
      assert.deepEqual(await actOnAllDead(t, ref, action, 'cache', ui), { listed: 3, done: 3, arrived: 1 });
      assert.deepEqual(t.callsOf(action === 'replay' ? 'dead.replay' : 'dead.purge').flatMap((c) => c.args.ids), listed);
      assert.deepEqual(t.messages.filter((m) => m.state === 'dead').map((m) => m.id), [late]);
      assert.deepEqual(
        ui.confirms,
        action === 'replay'
          ? [{ question: 'Replay all 3 dead letters of demo/jobs?', detail: 'They go back to the queue as ready messages with their attempts reset.', button: 'Replay All' }]
          : [{ question: 'Purge all 3 dead letters of demo/jobs?', detail: 'They are deleted for good. This cannot be undone.', button: 'Purge All' }],
      );
      assert.deepEqual(ui.titles, [action === 'replay' ? 'Replaying dead letters of demo/jobs' : 'Purging dead letters of demo/jobs']);
      assert.deepEqual(ui.notified, [[3, 3]]);
      // One page listed: too quick to say.
      assert.deepEqual(ui.steps, [[action === 'replay' ? 'Replaying' : 'Purging', 3, 3]]);
    }
  });

  it('all: an env queue is asked about "failed messages"; listing over several pages is reported, and a quiet listing indicator wraps it', async () => {
    const t = new FakeTransport();
    fillDead(t, 1);
    const ui = new FakeDeadUi();
    await actOnAllDead(t, ref, 'purge', 'env', ui);
    assert.equal(ui.confirms[0].question, 'Purge the 1 failed message of demo/jobs?');
    assert.equal(ui.confirms[0].detail, 'It is deleted for good. This cannot be undone.');

    const t2 = new FakeTransport();
    fillDead(t2, 1200);
    const ui2 = new FakeDeadUi();
    const listed: string[] = [];
    ui2.listing = async <T>(title: string, task: () => Promise<T>) => (listed.push(title), task());
    assert.equal((await actOnAllDead(t2, ref, 'replay', 'cache', ui2))?.done, 1200);
    assert.deepEqual(listed, ['Listing dead letters of demo/jobs']);
    assert.equal(ui2.confirms[0].question, 'Replay all 1,200 dead letters of demo/jobs?');
    assert.deepEqual(ui2.steps.filter((s) => s[0] === 'Listing'), [['Listing', 1000, 1200], ['Listing', 1200, 1200]]);
  });

  it('selected: a replay is not confirmed, a discard is (declined: nothing acted on); progress only when it takes several requests', async () => {
    const t = new FakeTransport();
    const ids = fillDead(t, IDS_PER_REQUEST + 100);
    const ui = new FakeDeadUi();
    assert.deepEqual(await actOnSelectedDead(t, ref, 'replay', [ids[0], ids[1], ids[0]], 'cache', ui), { done: 2 });
    assert.equal(ui.confirms.length, 0);
    assert.equal(ui.titles.length, 0, 'one request: no notification');
    assert.deepEqual(ui.steps, [['Replaying', 2, 2]]);

    ui.answer = false;
    assert.equal(await actOnSelectedDead(t, ref, 'purge', [ids[2]], 'cache', ui), undefined);
    assert.equal(t.callsOf('dead.purge').length, 0);
    assert.deepEqual(ui.confirms, [{ question: 'Discard 1 dead letter from demo/jobs?', detail: 'It is deleted for good. This cannot be undone.', button: 'Discard' }]);

    ui.answer = true;
    const rest = ids.slice(2);
    assert.deepEqual(await actOnSelectedDead(t, ref, 'purge', rest, 'env', ui), { done: rest.length });
    const n = rest.length.toLocaleString('en-US');
    assert.equal(ui.confirms[1].question, `Discard ${n} failed messages from demo/jobs?`);
    assert.deepEqual(ui.titles, [`Discarding ${n} failed messages of demo/jobs`]);
    assert.deepEqual(ui.notified, [[IDS_PER_REQUEST, rest.length], [rest.length, rest.length]]);
    assert.deepEqual(t.callsOf('dead.purge').flatMap((c) => c.args.ids), rest);
    assert.equal(t.counts().dead, 0);
  });
});
