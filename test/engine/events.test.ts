import assert from 'node:assert/strict';
import { EVENT_IDS_MAX, coalesce, type PendingEvent } from '../../emulator/engine/events';

// How one commit's changes become the events subscribers get (emulator/engine/events.ts).

const change = (queueId: number, kind: PendingEvent['kind'], ...ids: string[]): PendingEvent => ({ queueId, kind, ids, ns: 'ns', name: `q${queueId}` });
const shape = (events: PendingEvent[]) => events.map((e) => `${e.queueId}:${e.kind}[${e.ids.join(',')}]`);

describe('engine: events of one commit', () => {
  it('changes to different messages merge by kind however they interleave', () => {
    const got = coalesce([change(1, 'acked', 'm_1'), change(1, 'pushed', 'm_9'), change(1, 'acked', 'm_2'), change(1, 'pushed', 'm_10')]);
    assert.deepEqual(shape(got), ['1:acked[m_1,m_2]', '1:pushed[m_9,m_10]']);
  });

  it('a message changed again keeps its place: leased, requeued, leased again is three events', () => {
    const got = coalesce([change(1, 'leased', 'm_1'), change(1, 'requeued', 'm_2'), change(1, 'leased', 'm_2')]);
    assert.deepEqual(shape(got), ['1:leased[m_1]', '1:requeued[m_2]', '1:leased[m_2]']);
  });

  it('a change joins its kind only if no later event of the queue names one of its messages', () => {
    // m_3 is in the later requeued event, so a lease of m_3 and m_4 together cannot move before it.
    const got = coalesce([change(1, 'leased', 'm_1'), change(1, 'requeued', 'm_3'), change(1, 'leased', 'm_4', 'm_3')]);
    assert.deepEqual(shape(got), ['1:leased[m_1]', '1:requeued[m_3]', '1:leased[m_4,m_3]']);
  });

  it('changes that name no message join only the queue\'s last event', () => {
    const queue = coalesce([change(1, 'queue_updated'), change(1, 'pushed', 'm_1'), change(1, 'queue_updated'), change(1, 'queue_updated')]);
    assert.deepEqual(shape(queue), ['1:queue_updated[]', '1:pushed[m_1]', '1:queue_updated[]']);
    const ready = coalesce([change(1, 'ready'), change(1, 'leased', 'm_1'), change(1, 'ready')]);
    assert.deepEqual(shape(ready), ['1:ready[]', '1:leased[m_1]', '1:ready[]']);
  });

  it('nothing after a change that names no message joins an event before it (a live purge, a queue deleted and made again)', () => {
    const purge = coalesce([change(1, 'pushed', 'm_1'), change(1, 'purged'), change(1, 'pushed', 'm_2')]);
    assert.deepEqual(shape(purge), ['1:pushed[m_1]', '1:purged[]', '1:pushed[m_2]']);
    const remade = coalesce([change(1, 'pushed', 'm_1'), change(1, 'queue_deleted'), change(1, 'queue_created'), change(1, 'pushed', 'm_2')]);
    assert.deepEqual(shape(remade), ['1:pushed[m_1]', '1:queue_deleted[]', '1:queue_created[]', '1:pushed[m_2]']);
  });

  it('a message changed again after its kind\'s event is full gets an event of its own, so its last change is said', () => {
    const others = Array.from({ length: EVENT_IDS_MAX }, (_, i) => change(1, 'acked', `m_${i + 10}`));
    const got = coalesce([change(1, 'leased', 'm_1'), ...others, change(1, 'acked', 'm_1'), change(1, 'acked', 'm_5000')]);
    assert.deepEqual(got.map((e) => [e.kind, e.ids.length]), [['leased', 1], ['acked', EVENT_IDS_MAX], ['acked', 2]]);
    assert.deepEqual(got[2].ids, ['m_1', 'm_5000']);
  });

  it('queues are apart: a change to one never holds back or joins another\'s', () => {
    const got = coalesce([change(1, 'pushed', 'm_1'), change(2, 'pushed', 'm_2'), change(1, 'acked', 'm_1'), change(2, 'pushed', 'm_3'), change(1, 'pushed', 'm_4')]);
    assert.deepEqual(shape(got), ['1:pushed[m_1,m_4]', '2:pushed[m_2,m_3]', '1:acked[m_1]']);
  });

  it(`an event names at most ${EVENT_IDS_MAX} messages, from a change of 300,000 as from many merged`, () => {
    const many = Array.from({ length: 300_000 }, (_, i) => `m_${i}`);
    const all = { ...change(1, 'purged'), ids: many };
    const [one] = coalesce([all]);
    assert.deepEqual(one.ids, many.slice(0, EVENT_IDS_MAX));
    const merged = coalesce(many.slice(0, 2500).map((id) => change(1, 'purged', id)));
    assert.deepEqual(shape(merged).length, 1);
    assert.deepEqual(merged[0].ids, many.slice(0, EVENT_IDS_MAX));
    const big = coalesce([change(1, 'purged', 'm_x'), all]);
    assert.equal(big[0].ids.length, EVENT_IDS_MAX, 'joined without spreading 300,000 arguments');
  });
});
