// "All" dead letters as the panel and the palette's Replay / Purge Dead Letters do it: list the ids
// for the confirmation, then act on exactly those, in chunks within the protocol's limits.
import assert from 'node:assert/strict';
import { DEAD_LIST_PAGE, IDS_PER_REQUEST, actOnDeadIds, actOnListed, listDeadIds } from '../../../src/core/deadLetters';
import { arrivedNote } from '../../../src/panel/messages';
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

  it('purges exactly the given ids in chunks far inside the 10,000-id limit, skipping ones no longer dead', async () => {
    const t = new FakeTransport();
    const ids = fillDead(t, 12_000);
    const r = await actOnDeadIds(t, ref, 'purge', [...ids, 'msg_gone', ids[0]]);
    assert.deepEqual(r, { done: 12_000, finished: true });
    const sizes = t.callsOf('dead.purge').map((c) => c.args.ids.length);
    assert.ok(sizes.every((n) => n <= IDS_PER_REQUEST && n <= 10_000), String(sizes));
    assert.equal(sizes.reduce((a, b) => a + b), 12_001, 'every id once (duplicates dropped)');
    assert.equal(t.counts().dead, 0);
  });

  it('stops between chunks when cancelled, and says it did not finish', async () => {
    const t = new FakeTransport();
    const ids = fillDead(t, 1200);
    let chunks = 0;
    const r = await actOnDeadIds(t, ref, 'replay', ids, { report: () => void chunks++, cancelled: () => chunks >= 2 });
    assert.deepEqual(r, { done: 1000, finished: false });
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
