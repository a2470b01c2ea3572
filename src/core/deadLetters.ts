// Replaying or purging dead letters (the selected ones, or "all"), for the panel and the commands
// alike. "All" means the ones a confirmation counted: their ids are listed before it is shown and
// only those are acted on, so a message dead-lettered while the modal was open is left, and said to
// be. No VS Code here: the editor's part (a modal, progress) comes in through `DeadUi`, so both
// callers share one flow and one wording.
import type { Dialect, QueueRef } from '../../emulator/protocol';
import type { Transport } from '../../emulator/clients/transport';
import { deadWords, plural, qname } from './wording';

/** `dead.list` pages hold at most 1000 (docs/protocol.md). */
export const DEAD_LIST_PAGE = 1000;
/**
 * Ids per `dead.replay` / `dead.purge` request: the protocol's most (10,000 ids are about 100 KB of
 * frame), so a replay or purge of up to that many is one transaction and one audit entry, as from
 * the CLI or the HTTP API; more is done (and audited) 10,000 at a time.
 */
export const IDS_PER_REQUEST = 10_000;

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

/** What the flows below need from the editor: the palette and the panel each supply their own. */
export interface DeadUi {
  /** A modal "are you sure": true only when the user picked `button`. */
  confirm(question: string, detail: string, button: string): Promise<boolean>;
  /** A progress notification while `task` runs; `task` reports to (and checks for cancelling on) the sink it gets. */
  withProgress<T>(title: string, task: (progress: DeadProgress) => Promise<T>): Promise<T>;
  /** Each step, labelled ('Listing', 'Replaying', …), notification or not: the panel tells its webview. */
  progress?(label: string, done: number, total: number): void;
  /** A quiet indicator while the ids are listed (the palette's status bar). */
  listing?<T>(title: string, task: () => Promise<T>): Promise<T>;
}

/** Undefined when the user said no. `listed`: how many the confirmation counted (0: none, nothing asked). */
export type DeadAllResult = { listed: number; done: number; arrived?: number } | undefined;

/**
 * Replay or purge "all": list the ids, confirm with their count (none: nothing to ask), then act on
 * just those with progress; `arrived` as for actOnListed.
 */
export async function actOnAllDead(t: Transport, ref: QueueRef, action: DeadAction, dialect: Dialect | undefined, ui: DeadUi): Promise<DeadAllResult> {
  const w = deadWords(dialect);
  const name = qname(ref);
  const replay = action === 'replay';
  // Listing is said only when it takes several pages (one is too quick to show).
  const list = () => listDeadIds(t, ref, { report: (done, total) => void (total > DEAD_LIST_PAGE && ui.progress?.('Listing', done, total)) });
  const ids = ui.listing ? await ui.listing(`Listing ${w.many} of ${name}`, list) : await list();
  if (ids.length === 0) return { listed: 0, done: 0 };
  const one = ids.length === 1;
  const ok = await ui.confirm(
    `${replay ? 'Replay' : 'Purge'} ${one ? 'the' : 'all'} ${plural(ids.length, w.one, w.many)} of ${name}?`,
    replay ? `${one ? 'It goes' : 'They go'} back to the queue as ${one ? 'a ready message' : 'ready messages'} with ${one ? 'its' : 'their'} attempts reset.` : gone(one),
    replay ? 'Replay All' : 'Purge All',
  );
  if (!ok) return undefined;
  const label = replay ? 'Replaying' : 'Purging';
  const r = await ui.withProgress(`${label} ${w.many} of ${name}`, (progress) => actOnListed(t, ref, action, ids, sink(ui, label, progress)));
  return { listed: ids.length, ...r };
}

/** A purge's warning, for one message or several. */
const gone = (one: boolean) => `${one ? 'It is' : 'They are'} deleted for good. This cannot be undone.`;

/**
 * Replay or discard the given dead letters. A discard is confirmed first (a replay loses nothing);
 * a progress notification only when it takes several requests. Undefined when the user said no.
 */
export async function actOnSelectedDead(
  t: Transport,
  ref: QueueRef,
  action: DeadAction,
  ids: readonly string[],
  dialect: Dialect | undefined,
  ui: DeadUi,
): Promise<{ done: number } | undefined> {
  const w = deadWords(dialect);
  const unique = [...new Set(ids)];
  const what = plural(unique.length, w.one, w.many);
  const name = qname(ref);
  if (action === 'purge' && !(await ui.confirm(`Discard ${what} from ${name}?`, gone(unique.length === 1), 'Discard'))) return undefined;
  const label = action === 'replay' ? 'Replaying' : 'Discarding';
  const run = async (progress?: DeadProgress) => ({ done: (await actOnDeadIds(t, ref, action, unique, sink(ui, label, progress))).done });
  return unique.length > IDS_PER_REQUEST ? ui.withProgress(`${label} ${what} of ${name}`, run) : run();
}

/** A run's progress to the notification (if any) and to `ui.progress`. */
function sink(ui: DeadUi, label: string, notification?: DeadProgress): DeadProgress {
  return {
    cancelled: () => !!notification?.cancelled?.(),
    report: (done, total) => {
      notification?.report?.(done, total);
      ui.progress?.(label, done, total);
    },
  };
}
