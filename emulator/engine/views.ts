import type { Delivery, MessageState, MessageView } from '../protocol';
import { DEAD, LEASED, type MessageRow, type QueueRow } from '../store/boundary';

// Public ids and receipts. A receipt is the row id plus the delivery's lease token: checking it is a
// primary-key look-up, and a new delivery's token makes every older receipt stale.

export const messageId = (rowId: number): string => `m_${rowId}`;

export function parseMessageId(id: unknown): number | null {
  if (typeof id !== 'string') return null;
  const m = /^m_([1-9][0-9]{0,15})$/.exec(id);
  return m ? Number(m[1]) : null;
}

export const receiptOf = (rowId: number, token: number): string => `r_${rowId}_${token}`;

export function parseReceipt(r: unknown): { id: number; token: number } | null {
  if (typeof r !== 'string') return null;
  const m = /^r_([1-9][0-9]{0,15})_([0-9]{1,16})$/.exec(r);
  return m ? { id: Number(m[1]), token: Number(m[2]) } : null;
}

export interface Extra {
  dedupeKey?: string;
  attributes?: Record<string, unknown>;
  contentType?: string;
  orderingKey?: string;
  meta?: unknown;
}

export function stateOf(row: MessageRow, now: number): MessageState {
  if (row.state === DEAD) return 'dead';
  if (row.state === LEASED) return 'leased';
  return row.visible_at > now ? 'delayed' : 'ready';
}

export function toView(q: QueueRow, row: MessageRow, now: number): MessageView {
  const extra: Extra = row.extra ? (JSON.parse(row.extra) as Extra) : {};
  return {
    id: messageId(row.id),
    namespace: q.ns,
    queue: q.name,
    state: stateOf(row, now),
    body: JSON.parse(row.body),
    attempts: row.attempts,
    enqueuedAt: row.enqueued_at,
    visibleAt: row.visible_at,
    leaseUntil: row.state === LEASED ? row.lease_until : null,
    dedupeKey: extra.dedupeKey ?? null,
    attributes: extra.attributes ?? null,
    contentType: extra.contentType ?? null,
    orderingKey: extra.orderingKey ?? null,
    meta: extra.meta ?? null,
    sizeBytes: row.size,
    deadAt: row.dead_at,
    deadReason: row.dead_reason,
    lastError: row.last_error,
  };
}

/**
 * A claimed row as its consumer gets it: the view (whose leaseUntil is the new lease) and the
 * receipt that settles it. Built in place: spreading the view into a new object cost 2.5 µs a
 * message in consume + ack.
 */
export function toDelivery(q: QueueRow, row: MessageRow, now: number, token: number): Delivery {
  const d = toView(q, row, now) as Delivery;
  d.receipt = receiptOf(row.id, token);
  return d;
}
