import type { ChangeEvent } from '../protocol';

/** A change to one queue, on its way to subscribers once its commit stands. */
export interface PendingEvent {
  queueId: number;
  kind: ChangeEvent['kind'];
  ids: string[];
  ns: string;
  name: string;
}

/** The most ids one `change` event names (protocol.md, Events). */
export const EVENT_IDS_MAX = 1000;

/**
 * A commit's changes as the events subscribers get: few, and in an order that tells each
 * message's story right.
 *
 * A change joins the queue's latest event of its kind when no later event of that queue names any
 * of its messages: pushes and acks of different messages merge into two events however they
 * interleave, while a message leased, nacked and leased again stays three events in that order.
 * Changes that name no message (a delay ended, a live purge, queue events) join only the queue's
 * last event, and no later change joins an event before them.
 */
export function coalesce(changes: readonly PendingEvent[]): PendingEvent[] {
  const out: PendingEvent[] = [];
  const queues = new Map<number, { last: number; byKind: Map<PendingEvent['kind'], number>; namedAt: Map<string, number> }>();
  for (const c of changes) {
    let q = queues.get(c.queueId);
    if (!q) queues.set(c.queueId, (q = { last: -1, byKind: new Map(), namedAt: new Map() }));
    const k = q.byKind.get(c.kind);
    const named = q.namedAt;
    // A full event drops what joins it: a message changed earlier in this commit gets an event of
    // its own instead, or its last change would go unsaid.
    const full = k !== undefined && out[k].ids.length >= EVENT_IDS_MAX;
    // Only alike changes merge: a live purge (no ids) and a purge of dead letters (ids) are both
    // `purged`, and merged, the empty ids that say "every live message" would be lost.
    const joins =
      k !== undefined &&
      (out[k].ids.length === 0) === (c.ids.length === 0) &&
      (k === q.last || (c.ids.length > 0 && c.ids.every((id) => (named.get(id) ?? -1) <= k))) &&
      !(full && c.ids.some((id) => named.has(id)));
    let at: number;
    if (joins) {
      at = k;
      // A loop, not push(...ids): a commit may move 100,000s of messages, past the stack's reach.
      const ids = out[at].ids;
      for (let i = 0; i < c.ids.length && ids.length < EVENT_IDS_MAX; i++) ids.push(c.ids[i]);
    } else {
      at = out.length;
      out.push({ ...c, ids: c.ids.slice(0, EVENT_IDS_MAX) });
      // A change that names no message (a live purge, a queue deleted or made) may concern any of
      // them: nothing after it joins an event before it.
      if (c.ids.length === 0) q.byKind.clear();
      q.byKind.set(c.kind, at);
      q.last = at;
    }
    for (const id of c.ids) named.set(id, at);
  }
  return out;
}
