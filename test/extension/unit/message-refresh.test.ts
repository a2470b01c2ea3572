// Open message documents are read again after change events: once per document per window, however
// many subscriptions deliver a copy of an event.
import { strict as assert } from 'assert';
import type { ChangeEvent } from '../../../emulator/protocol';
import { eventTouches, refreshOnChanges } from '../../../src/core/messageRefresh';
import { ScriptedTransport, change } from './ext-fakes';

function manualTimers() {
  const pending = new Map<number, { fn: () => void; ms: number }>();
  let next = 0;
  return {
    set: (fn: () => void, ms: number) => (pending.set(++next, { fn, ms }), next),
    clear: (t: unknown) => void pending.delete(t as number),
    get delays() {
      return [...pending.values()].map((t) => t.ms);
    },
    fireAll() {
      const due = [...pending.values()];
      pending.clear();
      for (const t of due) t.fn();
    },
  };
}

const named = (kind: ChangeEvent['kind'], ids: string[], subscription = 'sub1', q = 'q'): ChangeEvent => ({ ...change('ns', q, kind, null), ids, subscription });

describe('extension: message documents follow change events (coalesced)', () => {
  function setup() {
    const t = new ScriptedTransport();
    const timers = manualTimers();
    const open = [
      { uri: 'doc:a', message: { namespace: 'ns', queue: 'q', id: 'a' } },
      { uri: 'doc:b', message: { namespace: 'ns', queue: 'q', id: 'b' } },
    ];
    const refreshed: string[] = [];
    const watch = refreshOnChanges({ transport: t, openDocuments: () => open, refresh: (u) => refreshed.push(u), key: (u) => u, waitMs: 200, timers });
    return { t, timers, open, refreshed, watch };
  }

  it('reads a document once per window, however many copies and events name it', () => {
    const { t, timers, refreshed, watch } = setup();
    // Three subscriptions (the tree's, two panels') each deliver the lease and the ack of `a`.
    for (const kind of ['leased', 'acked'] as const) for (const sub of ['sub1', 'sub2', 'sub3']) t.emit(named(kind, ['a'], sub));
    t.emit(named('pushed', ['x'])); // another message
    t.emit(named('pushed', ['a'], 'sub1', 'other')); // another queue
    assert.deepEqual(refreshed, [], 'nothing before the window ends');
    assert.deepEqual(timers.delays, [200]);
    timers.fireAll();
    assert.deepEqual(refreshed, ['doc:a']);
    // The next window: a purge (no ids) concerns every open document of the queue, once each.
    t.emit(named('purged', []));
    t.emit(named('purged', [], 'sub2'));
    t.emit(named('acked', ['b']));
    timers.fireAll();
    assert.deepEqual(refreshed, ['doc:a', 'doc:a', 'doc:b']);
    watch.dispose();
  });

  it('a gap (changes dropped on the way) reads every open document again, once', () => {
    const { t, timers, refreshed, watch } = setup();
    t.emit({ event: 'gap', subscription: 'sub1' });
    t.emit({ event: 'gap', subscription: 'sub2' });
    timers.fireAll();
    assert.deepEqual(refreshed, ['doc:a', 'doc:b']);
    watch.dispose();
  });

  it('dispose stops listening and drops a pending re-read', () => {
    const { t, timers, refreshed, watch } = setup();
    t.emit(named('acked', ['a']));
    watch.dispose();
    timers.fireAll();
    t.emit(named('acked', ['a']));
    timers.fireAll();
    assert.deepEqual(refreshed, []);
  });

  it('which events concern a message', () => {
    const at = { namespace: 'ns', queue: 'q', id: 'a' };
    assert.equal(eventTouches(named('acked', ['a']), at), true);
    assert.equal(eventTouches(named('acked', ['b']), at), false);
    assert.equal(eventTouches(named('purged', []), at), true);
    assert.equal(eventTouches(named('queue_deleted', ['z']), at), true);
    assert.equal(eventTouches(named('acked', ['a'], 'sub1', 'other'), at), false);
  });
});
