// Which open message documents to read again after change events, coalesced. No VS Code here: the
// documents come in through `openDocuments` and the re-read goes out through `refresh`.
import type { QueueRef, ServerEvent } from '../../emulator/protocol';
import type { Transport } from '../../emulator/clients/transport';
import { batchDebounce, type Timers } from './debounce';

export type MessageAddress = QueueRef & { id: string };

/**
 * Does this event concern the message shown at `r`? (Events without ids, e.g. a purge, may; so
 * does a `gap`: changes dropped on the way may have named it.)
 */
export function eventTouches(ev: ServerEvent, r: MessageAddress): boolean {
  if (ev.event === 'gap') return true;
  if (ev.event !== 'change' || ev.namespace !== r.namespace || ev.queue !== r.queue) return false;
  return ev.kind === 'queue_deleted' || !ev.ids || ev.ids.length === 0 || ev.ids.includes(r.id);
}

export interface RefreshOptions<U> {
  transport: Pick<Transport, 'onEvent'>;
  /** The message documents open now. */
  openDocuments: () => Iterable<{ uri: U; message: MessageAddress }>;
  /** Read this document again (each re-read is a `message.get`). */
  refresh: (uri: U) => void;
  /** Tells documents apart (a Uri's string). */
  key: (uri: U) => string;
  /** At most one re-read per document per window. Default 200 ms. */
  waitMs?: number;
  timers?: Timers;
}

/**
 * Every subscription on the connection delivers its own copy of an event (the tree's, each panel's),
 * and a busy queue sends many: a document is read again once per window, however many named it.
 */
export function refreshOnChanges<U>(o: RefreshOptions<U>): { dispose(): void } {
  const due = batchDebounce<U>(
    o.waitMs ?? 200,
    (uris) => {
      const once = new Map(uris.map((u) => [o.key(u), u]));
      for (const u of once.values()) o.refresh(u);
    },
    o.timers,
  );
  const off = o.transport.onEvent((ev) => {
    if (ev.event !== 'change' && ev.event !== 'gap') return;
    for (const d of o.openDocuments()) if (eventTouches(ev, d.message)) due.add(d.uri);
  });
  return {
    dispose() {
      off();
      due.cancel();
    },
  };
}
