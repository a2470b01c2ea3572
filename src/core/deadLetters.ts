// Replaying or purging "all" dead letters, for the panel and the commands alike. "All" means the
// ones a confirmation counted: their ids are listed before it is shown and only those are acted on,
// so a message dead-lettered while the modal was open is left, and said to be. No VS Code here.
import type { QueueRef } from '../../emulator/protocol';
import type { Transport } from '../../emulator/clients/transport';

/** `dead.list` pages hold at most 1000 (docs/protocol.md). */
export const DEAD_LIST_PAGE = 1000;
/** Ids per `dead.replay` / `dead.purge` request: well within the protocol's 10,000 and a frame. */
export const IDS_PER_REQUEST = 500;

export type DeadAction = 'replay' | 'purge';

export interface DeadProgress {
  /** After each page listed or chunk done. */
  report?(done: number, total: number): void;
  /** Checked before each request: stop early (what was done stays done). */
  cancelled?(): boolean;
}

/** The ids of every dead letter of the queue now, oldest first (paging through `dead.list`). */
export async function listDeadIds(t: Transport, ref: QueueRef, progress: DeadProgress = {}): Promise<string[]> {
  const ids = new Set<string>();
  let cursor: string | undefined;
  for (;;) {
    if (progress.cancelled?.()) break;
    const page = await t.request('dead.list', { ...ref, limit: DEAD_LIST_PAGE, ...(cursor ? { cursor } : {}) });
    for (const m of page.messages) ids.add(m.id);
    progress.report?.(ids.size, Math.max(page.total, ids.size));
    if (!page.next || page.messages.length === 0) break;
    cursor = page.next;
  }
  return [...ids];
}

/**
 * Replay or purge exactly `ids` (chunked), skipping any that are no longer dead. `finished`: every
 * chunk was sent (false when cancelled part-way).
 */
export async function actOnDeadIds(
  t: Transport,
  ref: QueueRef,
  action: DeadAction,
  ids: readonly string[],
  progress: DeadProgress = {},
): Promise<{ done: number; finished: boolean }> {
  const unique = [...new Set(ids)];
  let done = 0;
  for (let i = 0; i < unique.length; i += IDS_PER_REQUEST) {
    if (progress.cancelled?.()) return { done, finished: false };
    const part = unique.slice(i, i + IDS_PER_REQUEST);
    done += action === 'replay' ? (await t.request('dead.replay', { ...ref, ids: part })).replayed : (await t.request('dead.purge', { ...ref, ids: part })).purged;
    progress.report?.(i + part.length, unique.length);
  }
  return { done, finished: true };
}

/**
 * Act on every dead letter in `ids` (listed for a confirmation), then count what is dead now: after
 * a finished run those arrived after the listing and were left. `arrived` is undefined when cancelled.
 */
export async function actOnListed(
  t: Transport,
  ref: QueueRef,
  action: DeadAction,
  ids: readonly string[],
  progress: DeadProgress = {},
): Promise<{ done: number; arrived?: number }> {
  const r = await actOnDeadIds(t, ref, action, ids, progress);
  if (!r.finished) return { done: r.done };
  const { total } = await t.request('dead.list', { ...ref, limit: 1 });
  return { done: r.done, arrived: total };
}
