import assert from 'node:assert/strict';
import { EVENT_IDS_MAX, coalesce, type PendingEvent } from '../../emulator/engine/events';
import { rng } from '../../scripts/seeded-random';

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

  it('a live purge (no ids) and a purge of dead letters (ids) in one commit stay two events, in either order', () => {
    // Found by a probe that followed the events: the live purge joined the dead-letter purge's event
    // (or that one joined it), and the messages the live purge deleted read as still waiting.
    assert.deepEqual(shape(coalesce([change(1, 'purged', 'm_1'), change(1, 'purged')])), ['1:purged[m_1]', '1:purged[]']);
    assert.deepEqual(shape(coalesce([change(1, 'purged'), change(1, 'purged', 'm_1')])), ['1:purged[]', '1:purged[m_1]']);
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

  it('random commits: read in order, the events leave every message, and every change that names none, where the changes did', () => {
    // The order that matters: for each message, its last change; and where that falls against each
    // change naming no message (a live purge or a queue event may concern any message).
    const kinds: PendingEvent['kind'][] = ['pushed', 'leased', 'acked', 'requeued', 'dead', 'replayed', 'extended', 'purged'];
    const blind: PendingEvent['kind'][] = ['ready', 'purged', 'queue_updated'];
    const story = (events: PendingEvent[]) => {
      const last = new Map<string, { kind: string; at: number }>();
      const barriers: number[] = [];
      events.forEach((e, i) => {
        const prev = events[i - 1];
        // A run of one kind naming no message says one thing (the run is merged into one event).
        if (e.ids.length === 0 && !(prev && prev.ids.length === 0 && prev.kind === e.kind)) barriers.push(i);
        for (const id of e.ids) last.set(id, { kind: e.kind, at: i });
      });
      // For each message: its last kind and how many barriers came before its last change.
      return new Map([...last].map(([id, l]) => [id, `${l.kind}@${barriers.filter((b) => b < l.at).length}`]));
    };
    for (let seed = 1; seed <= 300; seed++) {
      const r = rng(seed);
      const changes: PendingEvent[] = [];
      for (let n = 1 + Math.floor(r() * 40); n > 0; n--) {
        const queueId = 1 + Math.floor(r() * 2);
        if (r() < 0.1) changes.push(change(queueId, blind[Math.floor(r() * blind.length)]));
        else changes.push(change(queueId, kinds[Math.floor(r() * kinds.length)], ...Array.from({ length: 1 + Math.floor(r() * 3) }, () => `m_${queueId}_${Math.floor(r() * 6)}`)));
      }
      const got = coalesce(changes);
      for (const queueId of [1, 2]) {
        const mine = (es: PendingEvent[]) => es.filter((e) => e.queueId === queueId);
        assert.deepEqual(story(mine(got)), story(mine(changes)), `seed ${seed}, queue ${queueId}: ${shape(mine(changes)).join(' ')} → ${shape(mine(got)).join(' ')}`);
        assert.equal(mine(got).filter((e) => e.ids.length === 0).length, mine(changes).filter((c, i, all) => c.ids.length === 0 && !(i > 0 && all[i - 1].kind === c.kind && all[i - 1].ids.length === 0)).length, `seed ${seed}: every run of changes naming no message is one event`);
      }
      assert.ok(got.length <= changes.length);
    }
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
