// The messages between the queue panel's webview and the extension host.
// Imported by both sides (the host handler and the webview bundle): types and tiny pure helpers only,
// nothing that needs Node or VS Code.

import type {
  AuditEntry,
  Dialect,
  ErrorCode,
  LagStep,
  MessageState,
  MessageView,
  QueueCounts,
  QueueInfo,
  QueueRef,
} from '../../emulator/protocol';

export type { AuditEntry, LagStep, MessageState, MessageView, QueueCounts, QueueInfo, QueueRef };

/** The webview panel's viewType (its serializer restores open panels once the extension is active). */
export const QUEUE_PANEL_VIEW_TYPE = 'quayside.queuePanel';

export const ALL_STATES: readonly MessageState[] = ['ready', 'delayed', 'leased', 'dead'];
export const PAGE_SIZES = [25, 50, 100, 200] as const;
export const MAX_PAGE_SIZE = 200;
export const MAX_PUSH_COUNT = 10_000;

export type ExportFormat = 'json' | 'ndjson';

/** The panel's tabs; the host can ask for one (Show Audit Log, Show Depth and Lag Chart). */
export const PANEL_TABS = ['messages', 'dead', 'push', 'metrics', 'audit'] as const;
export type PanelTab = (typeof PANEL_TABS)[number];

export function isPanelTab(v: unknown): v is PanelTab {
  return typeof v === 'string' && (PANEL_TABS as readonly string[]).includes(v);
}

/** The push form as the user typed it: the host validates it again (see validate.ts). */
export interface PushForm {
  /** The body, as JSON text. */
  body: string;
  /** Delay in seconds, as typed ('' = none). */
  delaySeconds: string;
  /** '' = none. */
  dedupeKey: string;
  /** A JSON object as text ('' = none). */
  attributes: string;
  /** How many copies to send, as typed ('' = 1). */
  count: string;
}

/** Every request the webview can make: its arguments and its result. */
export interface PanelOps {
  /**
   * The queue, its counts and the emulator's clock (it may be virtual); the first request a webview
   * makes. `tab`: a tab the host asked for while the webview was not loaded (shown once).
   */
  init: { args: Record<string, never>; result: { ref: QueueRef; queue: QueueInfo; now: number; clock: 'system' | 'virtual'; tab?: PanelTab } };
  /** One page of messages in any state (server-side paging: never loads everything). */
  peek: {
    args: { states: MessageState[]; search?: string; cursor?: string; limit: number };
    result: { messages: MessageView[]; next: string | null; total: number };
  };
  /** One message, fresh; `null` when it is gone (acked, purged). */
  'message.get': { args: { id: string }; result: MessageView | null };
  /** One page of dead letters. */
  'dead.list': { args: { cursor?: string; limit: number }; result: { messages: MessageView[]; next: string | null; total: number } };
  /** `stopped`: a later chunk of a Send ×N was refused (queue full, quota) after earlier ones were sent. */
  push: { args: PushForm; result: { sent: number; deduped: number; ids: string[]; stopped?: string } };
  /**
   * Replay the given dead letters, or all of them (asks first when `all`). `all` acts on the ones
   * its confirmation counted; `arrived`: how many were dead-lettered after that and left.
   */
  'dead.replay': { args: { ids: string[] } | { all: true }; result: { replayed: number; arrived?: number } };
  /** Discard the given dead letters, or purge them all (asks first); `arrived` as for `dead.replay`. */
  'dead.purge': { args: { ids: string[] } | { all: true }; result: { purged: number; arrived?: number } };
  /** Purge the live messages (ready, delayed, leased) (asks first). */
  purge: { args: Record<string, never>; result: { purged: number } };
  stats: { args: Record<string, never>; result: { counts: QueueCounts; lagHistory: LagStep[]; now: number } };
  'audit.list': { args: { limit?: number }; result: { entries: AuditEntry[] } };
  /** Save messages to a file the user picks: the given ids, or every message matching the filter. */
  export: {
    args: { format: ExportFormat; ids?: string[]; states?: MessageState[]; search?: string };
    result: { exported: number; target: string };
  };
}

export type PanelOpName = keyof PanelOps;
export type PanelArgs<K extends PanelOpName> = PanelOps[K]['args'];
export type PanelResult<K extends PanelOpName> = PanelOps[K]['result'];

/** `cancelled`: the user said no to a confirmation or a save dialog; nothing was done. */
export type PanelErrorCode = ErrorCode | 'cancelled';

export interface PanelError {
  code: PanelErrorCode;
  message: string;
}

/** Webview → host. */
export type PanelRequest = {
  [K in PanelOpName]: { type: 'request'; requestId: string; op: K; args: PanelArgs<K> };
}[PanelOpName];

/** Host → webview: the answer to one request. */
export type PanelResponse<R = unknown> =
  | { type: 'response'; requestId: string; ok: true; result: R }
  | { type: 'response'; requestId: string; ok: false; error: PanelError };

/** Host → webview: things that happened on their own. */
export type PanelEvent =
  /** The queue changed (debounced: several server events in one). */
  | { type: 'event'; event: 'changed'; kinds: string[]; ids: string[]; counts: QueueCounts | null; at: number }
  /** A long operation's progress. */
  | { type: 'event'; event: 'progress'; requestId: string; done: number; total: number | null; label: string }
  /** The emulator went away, or came back. */
  | { type: 'event'; event: 'connection'; state: 'up' | 'down'; message?: string }
  /** The queue was deleted. */
  | { type: 'event'; event: 'deleted' }
  /** Show this tab (the host opened the panel on it). */
  | { type: 'event'; event: 'show'; tab: PanelTab }
  /** The emulator's virtual clock was advanced to `now`. */
  | { type: 'event'; event: 'clock'; now: number };

export type HostMessage = PanelResponse | PanelEvent;

/** What the webview keeps with `vscode.setState` (and the serializer gets back after a reload). */
export interface PanelState {
  ref: QueueRef;
  /** The queue's dialect once read: a page rebuilt after the queue went still names its dead letters as it did. */
  dialect?: Dialect;
  tab?: PanelTab;
  states?: MessageState[];
  search?: string;
  pageSize?: number;
}

export function isPanelRequest(m: unknown): m is PanelRequest {
  if (typeof m !== 'object' || m === null) return false;
  const r = m as Record<string, unknown>;
  return r.type === 'request' && typeof r.requestId === 'string' && typeof r.op === 'string';
}

export function isQueueRef(v: unknown): v is QueueRef {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  return typeof r.namespace === 'string' && typeof r.queue === 'string' && r.queue.length > 0;
}
