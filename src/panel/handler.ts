// The host side of the queue panel: turns the webview's requests into emulator requests and
// forwards the queue's change events. No VS Code here: the few things that need the editor
// (a modal confirmation, a save dialog, a progress notification) come in through `PanelUi`,
// so this module is unit-tested with a fake Transport and a fake UI.

import type { ChangeEvent, Dialect, MessageState, MessageView, QueueRef, ServerEvent } from '../../emulator/protocol';
import type { Transport } from '../../emulator/clients/transport';
import type { Snapshot } from '../core/lifecycle';
import {
  ALL_STATES,
  MAX_PAGE_SIZE,
  isPanelRequest,
  type ExportFormat,
  type HostMessage,
  type PanelArgs,
  type PanelError,
  type PanelErrorCode,
  type PanelOpName,
  type PanelResult,
  type PanelTab,
} from './messages';
import { deadWords, plural } from '../core/wording';
import { validatePushForm } from './validate';
import { batchDebounce, type Debounced, type Timers } from '../core/debounce';
import { actOnAllDead, actOnSelectedDead, type DeadAction, type DeadUi } from '../core/deadLetters';

export interface SaveTarget {
  /** Where it went, for the user (a path). */
  label: string;
  write(text: string): Promise<void>;
}

export interface ProgressReporter {
  report(done: number, total: number | null): void;
  readonly cancelled: boolean;
}

/** What the handler needs from the editor. */
export interface PanelUi {
  /** A modal "are you sure": resolves true only when the user picked `action`. */
  confirm(message: string, detail: string, action: string): Promise<boolean>;
  /** A save dialog; undefined when the user cancelled. */
  chooseSaveTarget(opts: { suggestedName: string; format: ExportFormat }): Promise<SaveTarget | undefined>;
  /** Show progress while `task` runs (a notification in VS Code). */
  withProgress<T>(title: string, task: (progress: ProgressReporter) => Promise<T>): Promise<T>;
}

export interface PanelHandlerOptions {
  ref: QueueRef;
  /** The transport, or a getter (a restored panel may exist before the emulator is up). */
  transport: Transport | (() => Transport | undefined);
  ui: PanelUi;
  /** Send a message to the webview. */
  post(message: HostMessage): void;
  /** Change events within this window are sent as one. Default 200 ms. */
  debounceMs?: number;
  /** For tests: the timers of that window. */
  timers?: Timers;
}

type PendingChange = { kinds: string[]; ids: string[]; counts: ChangeEvent['counts']; at: number };

/** What open panels are told for a lifecycle state: up while running, else down and why. */
export function connectionNotice(s: Pick<Snapshot, 'state' | 'restartAt'>): { up: boolean; message?: string } {
  switch (s.state) {
    case 'running':
      return { up: true };
    case 'crashed':
      return { up: false, message: s.restartAt ? 'the emulator crashed; restarting it…' : 'the emulator crashed' };
    default:
      return { up: false, message: `the emulator is ${s.state}` };
  }
}

/** Batch sizes for the operations that loop. */
export const CHUNK = { push: 500, exportPage: 500, getConcurrency: 8 } as const;

export class PanelFailure extends Error {
  constructor(readonly code: PanelErrorCode, message: string) {
    super(message);
  }
}

export function toPanelError(e: unknown): PanelError {
  if (e && typeof e === 'object' && typeof (e as { code?: unknown }).code === 'string') {
    const code = (e as { code: string }).code as PanelErrorCode;
    const message = (e as { message?: unknown }).message;
    return { code, message: typeof message === 'string' && message ? message : code };
  }
  return { code: 'internal', message: e instanceof Error ? e.message : String(e) };
}

const cancelled = () => new PanelFailure('cancelled', 'Cancelled');
const bad = (message: string) => new PanelFailure('invalid_argument', message);

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

export class PanelHandler {
  readonly ref: QueueRef;
  private readonly getTransport: () => Transport | undefined;
  private readonly ui: PanelUi;
  private readonly post: (m: HostMessage) => void;

  private live: { transport: Transport; offEvent: () => void; offReconnect: () => void; subscription: string | null } | null = null;
  /** A throttle, not a pure debounce: a steady stream of events still sends one every window. */
  private readonly changes: Debounced<PendingChange>;
  private disposed = false;
  /** What the webview was last told while down (undefined: up). */
  private downMessage: string | undefined;
  private dialect: Dialect | undefined;
  /**
   * The queue was deleted (and not made again) since it was last read: told to a page that asks
   * for it, since a hidden panel's page is rebuilt when shown and missed the event.
   */
  private deletedSeen = false;
  /** A tab asked for while the webview was not loaded: the next `init` answers with it. */
  private pendingTab: PanelTab | undefined;

  constructor(opts: PanelHandlerOptions) {
    this.ref = { namespace: opts.ref.namespace, queue: opts.ref.queue };
    const t = opts.transport;
    this.getTransport = typeof t === 'function' ? t : () => t;
    this.ui = opts.ui;
    this.post = opts.post;
    this.changes = batchDebounce(opts.debounceMs ?? 200, (batch) => this.postChanges(batch), opts.timers);
  }

  /** Handle one message from the webview; posts the response. Never throws. */
  async handleMessage(raw: unknown): Promise<void> {
    if (!isPanelRequest(raw)) return;
    const { requestId } = raw;
    try {
      const result = await this.dispatch(raw.op, raw.args as never, requestId);
      if (!this.disposed) this.post({ type: 'response', requestId, ok: true, result });
    } catch (e) {
      const error = toPanelError(e);
      if (error.code === 'unavailable') {
        // The lifecycle's reason when it gave one: a page rebuilt while down (a tab shown again
        // after a crash) learns it from this answer, and must say "crashed", as a page that saw it
        // happen does, not the transport's bare "not running".
        if (this.downMessage !== undefined) error.message = this.downMessage;
        else this.setDown(error.message, false);
      }
      if (!this.disposed) this.post({ type: 'response', requestId, ok: false, error });
    }
  }

  /** Run one request (the typed core of handleMessage). */
  async dispatch<K extends PanelOpName>(op: K, args: PanelArgs<K>, requestId = ''): Promise<PanelResult<K>> {
    if (this.disposed) throw new PanelFailure('unavailable', 'The panel was closed');
    const t = this.transport();
    this.ensureLive(t);
    const a = (args ?? {}) as Record<string, unknown>;
    const run = async (): Promise<unknown> => {
      switch (op) {
        case 'init': {
          const [queue, clock] = await Promise.all([
            t.request('queue.get', this.ref).catch((e) => {
              // Said before the not_found answer, so the page says why it is not there.
              if (toPanelError(e).code === 'not_found' && this.deletedSeen && !this.disposed) this.post({ type: 'event', event: 'deleted' });
              throw e;
            }),
            t.request('clock.now', {}).catch(() => ({ now: Date.now(), mode: 'system' as const })),
          ]);
          this.dialect = queue.dialect;
          this.deletedSeen = false;
          const tab = this.pendingTab;
          this.pendingTab = undefined;
          return { ref: this.ref, queue, now: clock.now, clock: clock.mode, ...(tab ? { tab } : {}) };
        }
        case 'peek':
          return this.peek(t, a);
        case 'message.get':
          return this.getMessage(t, a);
        case 'dead.list': {
          const limit = this.limit(a.limit);
          const cursor = typeof a.cursor === 'string' && a.cursor ? a.cursor : undefined;
          return t.request('dead.list', { ...this.ref, limit, ...(cursor ? { cursor } : {}) });
        }
        case 'push':
          return this.push(t, a, requestId);
        case 'dead.replay':
          return this.actOnDead(t, 'replay', a, requestId);
        case 'dead.purge':
          return this.actOnDead(t, 'purge', a, requestId);
        case 'purge':
          return this.purgeLive(t);
        case 'stats':
          return t.request('stats', this.ref);
        case 'audit.list': {
          const limit = typeof a.limit === 'number' && a.limit > 0 ? Math.min(Math.floor(a.limit), 1000) : 100;
          return t.request('audit.list', { ...this.ref, limit });
        }
        case 'export':
          return this.export(t, a, requestId);
        default:
          throw bad(`Unknown request: ${String(op)}`);
      }
    };
    const result = await run();
    this.setUp();
    return result as PanelResult<K>;
  }

  /**
   * Show a tab: `loaded` says whether the webview is live to be told now; otherwise the tab goes
   * with the answer to its next `init` (a new panel, or a hidden one that reloads when revealed).
   */
  showTab(tab: PanelTab, loaded: boolean): void {
    if (this.disposed) return;
    if (loaded) {
      this.pendingTab = undefined;
      this.post({ type: 'event', event: 'show', tab });
    } else this.pendingTab = tab;
  }

  /** The emulator stopped or came back (the extension follows the lifecycle): tell the webview. */
  setConnection(up: boolean, message = 'the emulator is not running'): void {
    if (up) this.setUp();
    else {
      this.deletedSeen = false; // the emulator that comes back may be another one
      this.setDown(message);
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.changes.cancel();
    this.dropLive();
  }

  // ---- requests ----------------------------------------------------------------------------

  private transport(): Transport {
    const t = this.getTransport();
    if (!t) throw new PanelFailure('unavailable', 'The Quayside emulator is not running');
    return t;
  }

  private limit(v: unknown): number {
    const n = typeof v === 'number' && Number.isFinite(v) ? Math.floor(v) : 50;
    return Math.max(1, Math.min(MAX_PAGE_SIZE, n));
  }

  private states(v: unknown): MessageState[] {
    if (v === undefined) return [...ALL_STATES];
    if (!isStringArray(v)) throw bad('states must be a list of states');
    const s = ALL_STATES.filter((x) => v.includes(x));
    return s.length ? s : [...ALL_STATES];
  }

  /** As typed (spaces are part of what is searched for, as `quayside peek --search` takes them); empty is none. */
  private search(v: unknown): string | undefined {
    return typeof v === 'string' && v !== '' ? v : undefined;
  }

  private peek(t: Transport, a: Record<string, unknown>) {
    const cursor = typeof a.cursor === 'string' && a.cursor ? a.cursor : undefined;
    const search = this.search(a.search);
    return t.request('peek', {
      ...this.ref,
      states: this.states(a.states),
      limit: this.limit(a.limit),
      ...(cursor ? { cursor } : {}),
      ...(search ? { search } : {}),
    });
  }

  private async getMessage(t: Transport, a: Record<string, unknown>): Promise<MessageView | null> {
    if (typeof a.id !== 'string' || !a.id) throw bad('id is required');
    try {
      return await t.request('message.get', { ...this.ref, id: a.id });
    } catch (e) {
      if (toPanelError(e).code === 'not_found') return null;
      throw e;
    }
  }

  private async push(t: Transport, a: Record<string, unknown>, requestId: string) {
    const form = {
      body: String(a.body ?? ''),
      delaySeconds: String(a.delaySeconds ?? ''),
      dedupeKey: String(a.dedupeKey ?? ''),
      attributes: String(a.attributes ?? ''),
      count: String(a.count ?? ''),
    };
    const v = validatePushForm(form);
    if (!v.ok) throw bad(Object.values(v.errors)[0] ?? 'Invalid message');
    const { body, delayMs, dedupeKey, attributes, count } = v.plan;
    const input = {
      body,
      ...(delayMs !== undefined ? { delayMs } : {}),
      ...(dedupeKey !== undefined ? { dedupeKey } : {}),
      ...(attributes !== undefined ? { attributes } : {}),
    };
    if (count === 1) {
      const r = await t.request('push', { ...this.ref, ...input });
      return { sent: r.deduped ? 0 : 1, deduped: r.deduped ? 1 : 0, ids: [r.id] };
    }
    const work = async (progress?: ProgressReporter) => {
      const ids: string[] = [];
      let sent = 0;
      let deduped = 0;
      for (let i = 0; i < count; i += CHUNK.push) {
        if (progress?.cancelled) break;
        const n = Math.min(CHUNK.push, count - i);
        let r;
        try {
          r = await t.request('push.batch', { ...this.ref, messages: Array.from({ length: n }, () => input) });
        } catch (e) {
          // Each chunk is all or nothing, the whole Send is not: what earlier chunks sent stays sent.
          if (i === 0) throw e;
          return { sent, deduped, ids, stopped: (e as Error).message };
        }
        for (const x of r.results) {
          if (ids.length < 1000) ids.push(x.id);
          if (x.deduped) deduped++;
          else sent++;
        }
        progress?.report(i + n, count);
        this.progress(requestId, i + n, count, 'Sending');
      }
      return { sent, deduped, ids };
    };
    if (count <= CHUNK.push) return work();
    return this.ui.withProgress(`Sending ${plural(count, 'message')} to ${this.ref.queue}`, work);
  }

  /**
   * Replay / discard the selected dead letters or replay / purge them all: the flow and its wording
   * are core/deadLetters' (shared with the commands); "no" to its confirmation is a cancelled request.
   */
  private async actOnDead(t: Transport, action: DeadAction, a: Record<string, unknown>, requestId: string) {
    const ui = this.deadUi(requestId);
    let r;
    if (a.all === true) r = await actOnAllDead(t, this.ref, action, this.dialect, ui);
    else {
      if (!isStringArray(a.ids) || a.ids.length === 0) throw bad(`Select the ${this.words().many} to ${action === 'replay' ? 'replay' : 'discard'}`);
      r = await actOnSelectedDead(t, this.ref, action, a.ids, this.dialect, ui);
    }
    if (!r) throw cancelled();
    const arrived = 'arrived' in r && r.arrived ? { arrived: r.arrived } : {};
    return action === 'replay' ? { replayed: r.done, ...arrived } : { purged: r.done, ...arrived };
  }

  /** The editor's part of a dead-letter run: this panel's modal and notification, and progress to the webview. */
  private deadUi(requestId: string): DeadUi {
    return {
      confirm: (question, detail, button) => this.ui.confirm(question, detail, button),
      withProgress: (title, task) => this.ui.withProgress(title, (p) => task({ report: (done, total) => p.report(done, total), cancelled: () => p.cancelled })),
      progress: (label, done, total) => this.progress(requestId, done, total, label),
    };
  }

  private async purgeLive(t: Transport) {
    const { counts } = await t.request('stats', this.ref);
    const live = counts.ready + counts.delayed + counts.leased;
    const ok = await this.ui.confirm(
      `Purge ${plural(live, 'live message')} from ${this.ref.queue}?`,
      `Ready, delayed and leased messages are deleted for good (${this.words().many} stay). This cannot be undone.`,
      'Purge',
    );
    if (!ok) throw cancelled();
    return this.ui.withProgress(`Purging ${this.ref.queue}`, async () => {
      const r = await t.request('purge', { ...this.ref, confirm: this.ref.queue });
      return { purged: r.purged };
    });
  }

  private async export(t: Transport, a: Record<string, unknown>, requestId: string) {
    const format: ExportFormat = a.format === 'ndjson' ? 'ndjson' : 'json';
    if (a.format !== 'json' && a.format !== 'ndjson') throw bad('format must be json or ndjson');
    const ids = a.ids === undefined ? undefined : isStringArray(a.ids) ? [...new Set(a.ids)] : undefined;
    if (a.ids !== undefined && (!ids || ids.length === 0)) throw bad('Select the messages to export');
    const stamp = new Date().toISOString().replace(/[:]/g, '-').replace(/\..*$/, '');
    const base = `${this.ref.namespace}-${this.ref.queue}`.replace(/[^A-Za-z0-9._-]+/g, '_');
    // The emulator and the queue first: a file asked for, then not written, would be for nothing.
    await t.request('queue.get', this.ref);
    const target = await this.ui.chooseSaveTarget({ suggestedName: `${base}-${stamp}.${format}`, format });
    if (!target) throw cancelled();

    const out: MessageView[] = [];
    const title = ids ? `Exporting ${plural(ids.length, 'message')}` : `Exporting ${this.ref.queue}`;
    let stopped = false;
    await this.ui.withProgress(title, async (progress) => {
      if (ids) {
        let next = 0;
        let done = 0;
        const found: (MessageView | null)[] = new Array(ids.length).fill(null);
        const worker = async () => {
          while (next < ids.length && !progress.cancelled) {
            const i = next++;
            found[i] = await this.getMessage(t, { id: ids[i] });
            done++;
            if (done % 50 === 0 || done === ids.length) {
              progress.report(done, ids.length);
              this.progress(requestId, done, ids.length, 'Exporting');
            }
          }
        };
        await Promise.all(Array.from({ length: Math.min(CHUNK.getConcurrency, ids.length) }, worker));
        for (const m of found) if (m) out.push(m);
      } else {
        const states = this.states(a.states);
        const search = this.search(a.search);
        let cursor: string | undefined;
        for (;;) {
          if (progress.cancelled) break;
          const page = await t.request('peek', {
            ...this.ref,
            states,
            limit: CHUNK.exportPage,
            ...(cursor ? { cursor } : {}),
            ...(search ? { search } : {}),
          });
          out.push(...page.messages);
          progress.report(out.length, page.total);
          this.progress(requestId, out.length, page.total, 'Exporting');
          if (!page.next || page.messages.length === 0) break;
          cursor = page.next;
        }
      }
      stopped = progress.cancelled;
    });
    if (stopped) throw cancelled();
    const text = format === 'ndjson' ? out.map((m) => JSON.stringify(m)).join('\n') + (out.length ? '\n' : '') : JSON.stringify(out, null, 2) + '\n';
    await target.write(text);
    return { exported: out.length, target: target.label };
  }

  /** The queue's words for its dead letters ("failed messages" for env), known from `init`. */
  private words() {
    return deadWords(this.dialect);
  }

  private progress(requestId: string, done: number, total: number | null, label: string) {
    if (requestId && !this.disposed) this.post({ type: 'event', event: 'progress', requestId, done, total, label });
  }

  // ---- live updates ------------------------------------------------------------------------

  private ensureLive(t: Transport) {
    if (this.disposed || (this.live && this.live.transport === t)) return;
    this.dropLive();
    this.deletedSeen = false; // seen on another emulator, which may not be the one this reaches
    const live: NonNullable<PanelHandler['live']> = {
      transport: t,
      subscription: null,
      offEvent: t.onEvent((ev) => this.onServerEvent(ev)),
      offReconnect: t.onReconnect(() => {
        this.deletedSeen = false; // the emulator back may be another one
        this.subscribe(live);
        this.setUp();
        this.changes.add({ kinds: ['reconnected'], ids: [], counts: null, at: Date.now() });
      }),
    };
    this.live = live;
    this.subscribe(live);
  }

  private subscribe(live: NonNullable<PanelHandler['live']>) {
    live.transport.request('subscribe', { ...this.ref }).then(
      (r) => {
        if (this.live === live && !this.disposed) live.subscription = r.subscription;
        else live.transport.request('unsubscribe', { subscription: r.subscription }).catch(() => {});
      },
      () => {
        // Not reachable now: the next request or a reconnect subscribes again.
        if (this.live === live) {
          live.offEvent();
          live.offReconnect();
          this.live = null;
        }
      },
    );
  }

  private dropLive() {
    const live = this.live;
    this.live = null;
    if (!live) return;
    live.offEvent();
    live.offReconnect();
    if (live.subscription) live.transport.request('unsubscribe', { subscription: live.subscription }).catch(() => {});
  }

  private onServerEvent(ev: ServerEvent) {
    if (ev.event === 'clock' && !this.disposed) this.post({ type: 'event', event: 'clock', now: ev.now });
    // Changes of this panel's subscription were dropped (the connection fell behind): read it all
    // again. Before its subscription's id is known any gap may be its own.
    if (ev.event === 'gap' && !this.disposed && this.live && (this.live.subscription === null || this.live.subscription === ev.subscription)) {
      this.changes.add({ kinds: ['gap'], ids: [], counts: null, at: Date.now() });
    }
    if (ev.event !== 'change' || this.disposed) return;
    if (ev.namespace !== this.ref.namespace || ev.queue !== this.ref.queue) return;
    // Several subscriptions on one connection (the tree's, another panel's) each get a copy.
    if (this.live?.subscription && ev.subscription !== this.live.subscription) return;
    if (ev.kind === 'queue_created') this.deletedSeen = false;
    if (ev.kind === 'queue_deleted') {
      this.deletedSeen = true;
      // A change still waiting in the throttle is about the queue that is gone: sent after `deleted`,
      // it would read as the queue being back.
      this.changes.cancel();
      this.post({ type: 'event', event: 'deleted' });
      return;
    }
    this.changes.add({ kinds: [ev.kind], ids: ev.ids ?? [], counts: ev.counts, at: ev.at });
  }

  private postChanges(batch: PendingChange[]) {
    if (this.disposed) return;
    const kinds = new Set<string>();
    const ids = new Set<string>();
    let counts: ChangeEvent['counts'] = null;
    let at = 0;
    for (const c of batch) {
      for (const k of c.kinds) kinds.add(k);
      for (const id of c.ids) if (ids.size < 1000) ids.add(id);
      // The time the counts were taken (the emulator's): a `reconnected` entry's local time is not it.
      if (c.counts) {
        counts = c.counts;
        at = c.at;
      } else if (!counts) at = Math.max(at, c.at);
    }
    this.post({ type: 'event', event: 'changed', kinds: [...kinds], ids: [...ids], counts, at });
  }

  /**
   * Tell the webview it is down, and again when the lifecycle's reason changes (stopping → stopped,
   * restarting → gave up). A failed request (`replace` false) only says so when it was up: its
   * generic "not running" must not hide the lifecycle's reason.
   */
  private setDown(message: string, replace = true) {
    if (this.downMessage !== undefined && (!replace || this.downMessage === message)) return;
    this.downMessage = message;
    if (!this.disposed) this.post({ type: 'event', event: 'connection', state: 'down', message });
  }

  private setUp() {
    if (this.downMessage === undefined) return;
    this.downMessage = undefined;
    if (!this.disposed) this.post({ type: 'event', event: 'connection', state: 'up' });
  }
}
