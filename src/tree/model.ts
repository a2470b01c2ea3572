// The queue tree as data: which nodes exist, with which labels, descriptions, icons and
// contextValues, from protocol data. No VS Code here; `provider.ts` maps `NodeView`s to TreeItems.
// Updates come from the emulator's change events, never from polling.
import { LIMITS, type ChangeEvent, type Dialect, type MessageView, type QueueCounts, type QueueInfo, type ServerEvent } from '../../emulator/protocol';
import type { Transport } from '../../emulator/clients/transport';
import { formatDuration } from '../core/duration';
import { EmulatorClock, oldestWaitAt } from '../core/emulatorClock';
import { bodyPreview, deadAreaLabel, deadWords, formatCount, plural } from '../core/wording';

export type FolderKind = 'messages' | 'dead';

export type TreeNode =
  | { kind: 'namespace'; id: string; namespace: string }
  | { kind: 'queue'; id: string; namespace: string; queue: string }
  | { kind: 'folder'; id: string; namespace: string; queue: string; folder: FolderKind }
  | { kind: 'message'; id: string; namespace: string; queue: string; folder: FolderKind; messageId: string }
  | { kind: 'loadMore'; id: string; namespace: string; queue: string; folder: FolderKind }
  | { kind: 'error'; id: string; message: string };

export type QueueNode = Extract<TreeNode, { kind: 'queue' }>;
export type FolderNode = Extract<TreeNode, { kind: 'folder' }>;
export type MessageNode = Extract<TreeNode, { kind: 'message' }>;

/** The fixed contextValues that menus key on. */
export const CONTEXT = {
  namespace: 'quayside.namespace',
  queue: 'quayside.queue',
  queueWithDead: 'quayside.queue.dead',
  messages: 'quayside.messages',
  deadLetters: 'quayside.deadLetters',
  deadLettersEmpty: 'quayside.deadLetters.empty',
  messageLive: 'quayside.message.live',
  messageDead: 'quayside.message.dead',
  loadMore: 'quayside.loadMore',
  error: 'quayside.error',
} as const;

export interface NodeView {
  label: string;
  description?: string;
  tooltip?: string;
  contextValue: string;
  collapsible: 'none' | 'collapsed' | 'expanded';
  /** A codicon id, and a theme colour id for it. */
  icon?: { id: string; color?: string };
  /** The command a click runs (its arguments are the node). */
  command?: { command: string; title: string };
}

interface Page {
  messages: MessageView[];
  next: string | null;
  total: number;
  stale: boolean;
}

export interface TreeModelOptions {
  pageSize?: number;
  /** The local clock (tests); the emulator's time is derived from it (see EmulatorClock). */
  now?: () => number;
}

const SEP = '\u0000';
const key = (ns: string, q: string) => ns + SEP + q;
/** A folder node's id, from its queue's key. */
const folderIdOf = (k: string, f: FolderKind) => `folder:${k}${SEP}${f}`;

export function folderLabel(dialect: Dialect | undefined, folder: FolderKind): string {
  return folder === 'messages' ? 'Messages' : deadAreaLabel(dialect);
}

export function liveCount(c: QueueCounts): number {
  return c.ready + c.delayed + c.leased;
}

/** All four counts (tooltips, quick picks). */
/** `dialect`: env calls its dead letters failed (as its folder and panel do). */
export function countsDetail(c: QueueCounts, dialect?: Dialect): string {
  return `${formatCount(c.ready)} ready · ${formatCount(c.delayed)} delayed · ${formatCount(c.leased)} in flight · ${formatCount(c.dead)} ${deadWords(dialect).state}`;
}

/** The tree's short form: ready always, delayed / in flight / dead when there are any. */
export function countsDescription(c: QueueCounts, dialect?: Dialect): string {
  const parts = [`${formatCount(c.ready)} ready`];
  if (c.delayed) parts.push(`${formatCount(c.delayed)} delayed`);
  if (c.leased) parts.push(`${formatCount(c.leased)} in flight`);
  if (c.dead) parts.push(`${formatCount(c.dead)} ${deadWords(dialect).state}`);
  return parts.join(' · ');
}

/** "1 attempt", "0 attempts", "5 attempts" (the tree's and the palette's pick lists). */
export function attemptsText(n: number): string {
  return n === 1 ? '1 attempt' : `${n} attempts`;
}

export function messageDescription(m: MessageView, now: number, dialect?: Dialect): string {
  const tries = attemptsText(m.attempts);
  switch (m.state) {
    case 'ready':
      return `ready · ${tries}`;
    case 'delayed':
      return `delayed ${formatDuration(Math.max(0, m.visibleAt - now))} · ${tries}`;
    case 'leased':
      return `in flight${m.leaseUntil ? ` (${formatDuration(Math.max(0, m.leaseUntil - now))} left)` : ''} · ${tries}`;
    case 'dead':
      return `${deadWords(dialect).state}${m.deadReason ? ` · ${m.deadReason}` : ''} · ${tries}`;
  }
}

/** Namespaces and queues alike: case aside, numbers as numbers (`9-items` before `10-items`). */
const NAMES = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
function byName(a: string, b: string): number {
  return NAMES.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

export function messageTooltip(m: MessageView, dialect?: Dialect): string {
  const dead = deadWords(dialect).state;
  const lines = [
    `id: ${m.id}`,
    `state: ${m.state === 'dead' ? dead : m.state === 'leased' ? 'in flight' : m.state}`,
    `attempts: ${m.attempts}`,
    `enqueued: ${new Date(m.enqueuedAt).toISOString()}`,
  ];
  if (m.state === 'delayed') lines.push(`visible at: ${new Date(m.visibleAt).toISOString()}`);
  if (m.leaseUntil) lines.push(`lease until: ${new Date(m.leaseUntil).toISOString()}`);
  if (m.deadAt) lines.push(`${dead} since: ${new Date(m.deadAt).toISOString()}`);
  if (m.deadReason) lines.push(`reason: ${m.deadReason}`);
  if (m.lastError) lines.push(`last error: ${m.lastError}`);
  if (m.dedupeKey) lines.push(`dedupe key: ${m.dedupeKey}`);
  lines.push(`size: ${m.sizeBytes} bytes`, '', bodyPreview(m.body, 400));
  return lines.join('\n');
}

const STATE_ICON: Record<MessageView['state'], { id: string; color?: string }> = {
  ready: { id: 'circle-filled', color: 'charts.green' },
  delayed: { id: 'clock', color: 'charts.yellow' },
  leased: { id: 'sync', color: 'charts.blue' },
  dead: { id: 'error', color: 'list.errorForeground' },
};

/** Which folders a change of this kind touches. */
function foldersFor(kind: ChangeEvent['kind']): FolderKind[] {
  switch (kind) {
    case 'dead':
    case 'replayed':
    case 'purged':
      return ['messages', 'dead'];
    default:
      return ['messages'];
  }
}

export interface ChangeEffect {
  /** The whole tree must be asked again (queues appeared or went). */
  root: boolean;
  /** Nodes whose rendering or children changed. */
  nodes: TreeNode[];
}

export class TreeModel {
  private transport: Transport | undefined;
  private queues = new Map<string, QueueInfo>();
  /** When each queue's counts were taken (the emulator's time), so the oldest wait can grow from there. */
  private countsAt = new Map<string, number>();
  private pages = new Map<string, Page>();
  /**
   * How often each folder's contents were reported changed, and how often everything was forgotten:
   * a peek answered across either may predate the change, so its page is kept as stale.
   */
  private folderEdits = new Map<string, number>();
  private generation = 0;
  /**
   * Which change event last set each queue's counts (a running number): a queue list read while
   * such an event came keeps the event's counts, which are as new as the list's or newer (an
   * event's counts are taken once its commit stands, and a list read in that commit is answered
   * after its events went out).
   */
  private changeSeq = 0;
  private countsSeq = new Map<string, number>();
  /** Each namespace's queues, sorted by name, rebuilt when the set of queues changes (not per render). */
  private sorted: Map<string, QueueInfo[]> | null = null;
  private nodes = new Map<string, TreeNode>();
  /** Each folder's message nodes, so a folder drops those it no longer shows without a walk of every node. */
  private folderMessages = new Map<string, Set<string>>();
  private loadedRoot = false;
  private rootError: string | undefined;
  readonly pageSize: number;
  /** What "delayed 4 s" and "30 s left" count from: the emulator's time, which may be virtual. */
  readonly clock: EmulatorClock;

  constructor(opts: TreeModelOptions = {}) {
    this.pageSize = opts.pageSize ?? 50;
    this.clock = new EmulatorClock(opts.now);
  }

  private now(): number {
    return this.clock.now();
  }

  /** A new emulator (or none): forget everything. */
  setTransport(t: Transport | undefined): void {
    this.transport = t;
    this.queues.clear();
    this.countsAt.clear();
    this.sorted = null;
    this.reset();
    this.loadedRoot = false;
  }

  /**
   * The same emulator, read again (a refresh, a new subscription, a gap): every folder is peeked
   * again, and the next queue list replaces the counts. The queues stay meanwhile, so a change
   * event that comes before that list updates its queue instead of asking for yet another list.
   */
  reset(): void {
    this.pages.clear();
    this.folderEdits.clear();
    this.countsSeq.clear();
    this.generation++;
    this.rootError = undefined;
  }

  get hasTransport(): boolean {
    return !!this.transport;
  }

  /** True once the queue list was loaded and holds nothing. */
  get isEmpty(): boolean {
    return this.loadedRoot && !this.rootError && this.queues.size === 0;
  }

  deadTotal(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.counts.dead;
    return n;
  }

  /** The dialects of a namespace's queues, one per queue (as far as the tree has read them). */
  dialectsIn(namespace: string): Dialect[] {
    return this.queuesIn(namespace).map((q) => q.dialect);
  }

  /** The view's badge tooltip: dead letters and env failed messages each in their own words. */
  deadTooltip(): string {
    let dead = 0;
    let failed = 0;
    for (const q of this.queues.values()) {
      if (q.dialect === 'env') failed += q.counts.dead;
      else dead += q.counts.dead;
    }
    const said = (n: number, w: ReturnType<typeof deadWords>) => (n ? [plural(n, w.one, w.many)] : []);
    return [...said(dead, deadWords(undefined)), ...said(failed, deadWords('env'))].join(', ');
  }

  queueInfo(namespace: string, queue: string): QueueInfo | undefined {
    return this.queues.get(key(namespace, queue));
  }

  private queuesIn(namespace: string): QueueInfo[] {
    return this.byNamespace().get(namespace) ?? [];
  }

  private byNamespace(): Map<string, QueueInfo[]> {
    if (this.sorted) return this.sorted;
    this.sorted = new Map();
    for (const q of [...this.queues.values()].sort((a, b) => byName(a.name, b.name))) {
      const list = this.sorted.get(q.namespace);
      if (list) list.push(q);
      else this.sorted.set(q.namespace, [q]);
    }
    return this.sorted;
  }

  /** The messages shown under a folder (its loaded pages). */
  loadedMessages(namespace: string, queue: string, folder: FolderKind): MessageView[] {
    return this.pages.get(this.folderId(namespace, queue, folder))?.messages ?? [];
  }

  // ---- nodes (stable objects per id: VS Code refreshes by identity) -------------------------------

  private node<N extends TreeNode>(n: N): N {
    const existing = this.nodes.get(n.id);
    if (existing) return existing as N;
    this.nodes.set(n.id, n);
    return n;
  }
  private folderId(ns: string, q: string, f: FolderKind): string {
    return folderIdOf(key(ns, q), f);
  }
  namespaceNode(namespace: string) {
    return this.node({ kind: 'namespace' as const, id: `ns:${namespace}`, namespace });
  }
  queueNode(namespace: string, queue: string) {
    return this.node({ kind: 'queue' as const, id: `queue:${key(namespace, queue)}`, namespace, queue });
  }
  folderNode(namespace: string, queue: string, folder: FolderKind) {
    return this.node({ kind: 'folder' as const, id: this.folderId(namespace, queue, folder), namespace, queue, folder });
  }
  private messageNode(namespace: string, queue: string, folder: FolderKind, messageId: string) {
    const n = this.node({ kind: 'message' as const, id: `msg:${key(namespace, queue)}${SEP}${folder}${SEP}${messageId}`, namespace, queue, folder, messageId });
    const folderId = this.folderId(namespace, queue, folder);
    const shown = this.folderMessages.get(folderId);
    if (shown) shown.add(n.id);
    else this.folderMessages.set(folderId, new Set([n.id]));
    return n;
  }
  private loadMoreNode(namespace: string, queue: string, folder: FolderKind) {
    return this.node({ kind: 'loadMore' as const, id: `more:${key(namespace, queue)}${SEP}${folder}`, namespace, queue, folder });
  }

  /** The parent of a node (for TreeView.reveal). */
  parent(n: TreeNode): TreeNode | undefined {
    switch (n.kind) {
      case 'namespace':
      case 'error':
        return undefined;
      case 'queue':
        return this.namespaceNode(n.namespace);
      case 'folder':
        return this.queueNode(n.namespace, n.queue);
      case 'message':
      case 'loadMore':
        return this.folderNode(n.namespace, n.queue, n.folder);
    }
  }

  // ---- children ------------------------------------------------------------------------------

  async children(n?: TreeNode): Promise<TreeNode[]> {
    const t = this.transport;
    if (!t) return [];
    if (!n) {
      try {
        await this.loadQueues();
      } catch (e) {
        this.rootError = (e as Error).message;
        return [this.node({ kind: 'error' as const, id: 'error:root', message: `Cannot list the queues: ${this.rootError}` })];
      }
      const namespaces = [...this.byNamespace().keys()].sort(byName);
      return namespaces.map((ns) => this.namespaceNode(ns));
    }
    switch (n.kind) {
      case 'namespace':
        return this.queuesIn(n.namespace).map((q) => this.queueNode(q.namespace, q.name));
      case 'queue':
        return [this.folderNode(n.namespace, n.queue, 'messages'), this.folderNode(n.namespace, n.queue, 'dead')];
      case 'folder': {
        const id = n.id;
        let page = this.pages.get(id);
        if (!page || page.stale) {
          const before = this.editsOf(id);
          try {
            // As many as were shown (in one peek, so at most the protocol's largest page): a change
            // must not take back the pages "Load more" added.
            page = await this.fetchPage(n, undefined, Math.min(Math.max(this.pageSize, page?.messages.length ?? 0), LIMITS.maxPageSize));
          } catch (e) {
            return [this.node({ kind: 'error' as const, id: `error:${id}`, message: `Cannot peek: ${(e as Error).message}` })];
          }
          // A change event (or a gap) that came while the peek was on its way: shown now, read
          // again at the next render, which that change asks for. A queue gone meanwhile keeps no page.
          if (this.editsOf(id) !== before) page.stale = true;
          if (this.queues.has(key(n.namespace, n.queue))) {
            this.pages.set(id, page);
            this.forgetMessagesNotIn(n, page);
          }
        }
        const out: TreeNode[] = page.messages.map((m) => this.messageNode(n.namespace, n.queue, n.folder, m.id));
        if (page.next) out.push(this.loadMoreNode(n.namespace, n.queue, n.folder));
        return out;
      }
      default:
        return [];
    }
  }

  private editsOf(folderId: string): string {
    return `${this.generation}:${this.folderEdits.get(folderId) ?? 0}`;
  }

  /** A folder changed: a peek of it on its way reads stale (see editsOf). */
  private edited(folderId: string): void {
    this.folderEdits.set(folderId, (this.folderEdits.get(folderId) ?? 0) + 1);
  }

  private async loadQueues(): Promise<void> {
    const t = this.transport;
    if (!t) return;
    const asked = this.changeSeq;
    const { queues } = await t.request('queue.list', {});
    const seen = new Set<string>();
    for (const q of queues) {
      const k = key(q.namespace, q.name);
      seen.add(k);
      const held = this.queues.get(k);
      // A change event that came while the list was on its way has counts as new as the list's or newer.
      // (A reset clears the marks, so only events that came after it can win over a list.)
      if (held && held.id === q.id && (this.countsSeq.get(k) ?? 0) > asked) q.counts = held.counts;
      else this.countsAt.set(k, this.now());
      this.queues.set(k, q);
    }
    const gone = [...this.queues.keys()].filter((k) => !seen.has(k));
    if (gone.length) this.forgetQueues(new Set(gone));
    this.sorted = null;
    this.loadedRoot = true;
    this.rootError = undefined;
  }

  /** A fresh first page replaces the folder's pages: nodes of messages no longer shown go, so a busy queue's folder does not grow the map for the whole session. */
  private forgetMessagesNotIn(n: { namespace: string; queue: string; folder: FolderKind }, page: Page): void {
    const folderId = this.folderId(n.namespace, n.queue, n.folder);
    const nodes = this.folderMessages.get(folderId);
    if (!nodes) return;
    const prefix = `msg:${key(n.namespace, n.queue)}${SEP}${n.folder}${SEP}`;
    const shown = new Set(page.messages.map((m) => prefix + m.id));
    for (const id of nodes) {
      if (shown.has(id)) continue;
      nodes.delete(id);
      this.nodes.delete(id);
    }
  }

  /** Queues gone from the list, in one pass over the nodes (each node knows its queue). */
  private forgetQueues(gone: Set<string>): void {
    for (const k of gone) {
      this.queues.delete(k);
      this.countsAt.delete(k);
      this.countsSeq.delete(k);
      for (const f of ['messages', 'dead'] as const) {
        const id = folderIdOf(k, f);
        this.pages.delete(id);
        this.folderMessages.delete(id);
        this.folderEdits.delete(id);
      }
    }
    const namespaces = new Set([...this.queues.values()].map((q) => q.namespace));
    for (const [id, n] of this.nodes) {
      if (n.kind === 'error') continue;
      if (n.kind === 'namespace' ? !namespaces.has(n.namespace) : gone.has(key(n.namespace, n.queue))) this.nodes.delete(id);
    }
  }

  private async fetchPage(n: { namespace: string; queue: string; folder: FolderKind }, cursor: string | undefined, limit = this.pageSize): Promise<Page> {
    const t = this.transport;
    if (!t) throw new Error('the emulator is not running');
    const states = n.folder === 'dead' ? (['dead'] as const) : (['ready', 'delayed', 'leased'] as const);
    const args = { namespace: n.namespace, queue: n.queue, states: [...states], limit, ...(cursor ? { cursor } : {}) };
    const r = await t.request('peek', args);
    return { messages: r.messages, next: r.next, total: r.total, stale: false };
  }

  /** Fetch the next page of a folder; resolves to the folder node to refresh. */
  async loadMore(n: { namespace: string; queue: string; folder: FolderKind }): Promise<TreeNode> {
    const folder = this.folderNode(n.namespace, n.queue, n.folder);
    const page = this.pages.get(folder.id);
    if (!page || !page.next) return folder;
    const more = await this.fetchPage(n, page.next);
    const seen = new Set(page.messages.map((m) => m.id));
    page.messages.push(...more.messages.filter((m) => !seen.has(m.id)));
    page.next = more.next;
    page.total = more.total;
    return folder;
  }

  message(n: MessageNode): MessageView | undefined {
    return this.pages.get(this.folderId(n.namespace, n.queue, n.folder))?.messages.find((m) => m.id === n.messageId);
  }

  // ---- rendering -----------------------------------------------------------------------------

  view(n: TreeNode): NodeView {
    switch (n.kind) {
      case 'namespace': {
        const qs = this.queuesIn(n.namespace);
        const dead = qs.reduce((s, q) => s + q.counts.dead, 0);
        // In the queues' own word when they share a dialect (an env project's: "failed").
        const dialects = new Set(qs.map((q) => q.dialect));
        const word = deadWords(dialects.size === 1 ? qs[0].dialect : undefined).state;
        return {
          label: n.namespace,
          description: `${qs.length} ${qs.length === 1 ? 'queue' : 'queues'}${dead ? ` · ${formatCount(dead)} ${word}` : ''}`,
          tooltip: `Namespace ${n.namespace}`,
          contextValue: CONTEXT.namespace,
          collapsible: 'expanded',
          icon: { id: 'folder-library' },
        };
      }
      case 'queue': {
        const q = this.queueInfo(n.namespace, n.queue);
        const c = q?.counts;
        const dead = (c?.dead ?? 0) > 0;
        return {
          label: n.queue,
          description: c ? countsDescription(c, q?.dialect) : undefined,
          tooltip: q
            ? [
                `${q.namespace}/${q.name} (${q.dialect})`,
                c ? countsDetail(c, q.dialect) : '',
                c && c.ready > 0 ? this.waitLine(c, key(n.namespace, n.queue)) : '',
                q.consumer ? `consumer app: ${q.consumer.appId}` : '',
              ]
                .filter(Boolean)
                .join('\n')
            : undefined,
          contextValue: dead ? CONTEXT.queueWithDead : CONTEXT.queue,
          collapsible: 'collapsed',
          icon: dead ? { id: 'warning', color: 'list.warningForeground' } : { id: 'inbox' },
        };
      }
      case 'folder': {
        const q = this.queueInfo(n.namespace, n.queue);
        const c = q?.counts;
        if (n.folder === 'messages') {
          return {
            label: folderLabel(q?.dialect, 'messages'),
            description: c ? formatCount(liveCount(c)) : undefined,
            contextValue: CONTEXT.messages,
            collapsible: 'collapsed',
            icon: { id: 'mail' },
          };
        }
        const dead = c?.dead ?? 0;
        return {
          label: folderLabel(q?.dialect, 'dead'),
          description: c ? formatCount(dead) : undefined,
          contextValue: dead > 0 ? CONTEXT.deadLetters : CONTEXT.deadLettersEmpty,
          collapsible: 'collapsed',
          icon: dead > 0 ? { id: 'warning', color: 'list.warningForeground' } : { id: 'archive' },
        };
      }
      case 'message': {
        const m = this.message(n);
        if (!m) return { label: n.messageId, contextValue: n.folder === 'dead' ? CONTEXT.messageDead : CONTEXT.messageLive, collapsible: 'none' };
        const dialect = this.queueInfo(n.namespace, n.queue)?.dialect;
        return {
          label: bodyPreview(m.body),
          description: `${messageDescription(m, this.now(), dialect)} · ${m.id}`,
          tooltip: messageTooltip(m, dialect),
          contextValue: m.state === 'dead' ? CONTEXT.messageDead : CONTEXT.messageLive,
          collapsible: 'none',
          icon: STATE_ICON[m.state],
          command: { command: 'quayside.showMessage', title: 'Show Message' },
        };
      }
      case 'loadMore': {
        const page = this.pages.get(this.folderId(n.namespace, n.queue, n.folder));
        const shown = page?.messages.length ?? 0;
        return {
          label: 'Load more…',
          description: page ? `${formatCount(shown)} of ${formatCount(page.total)} shown` : undefined,
          contextValue: CONTEXT.loadMore,
          collapsible: 'none',
          icon: { id: 'ellipsis' },
          command: { command: 'quayside.loadMore', title: 'Load More' },
        };
      }
      case 'error':
        return { label: n.message, contextValue: CONTEXT.error, collapsible: 'none', icon: { id: 'error', color: 'list.errorForeground' } };
    }
  }

  /**
   * "oldest ready message waiting 33 s (since 21:14:05 UTC)": VS Code keeps a tooltip once shown
   * until the item is drawn again, so the instant says it too.
   */
  private waitLine(c: QueueCounts, k: string): string {
    const now = this.now();
    const wait = oldestWaitAt(c, this.countsAt.get(k) ?? now, now);
    return `oldest ready message waiting ${formatDuration(wait)} (since ${new Date(now - wait).toISOString().slice(11, 19)} UTC)`;
  }

  // ---- live updates --------------------------------------------------------------------------

  /** Apply one server event to the cached state; says what to refresh. */
  apply(e: ServerEvent): ChangeEffect {
    if (e.event === 'clock') return this.clockMoved(e.now);
    // Change events were dropped on the way (the connection fell behind): what is cached may be
    // stale anywhere, so read it all again, as after a reconnect.
    if (e.event === 'gap') {
      this.reset();
      return { root: true, nodes: [] };
    }
    if (e.event !== 'change') return { root: false, nodes: [] };
    const k = key(e.namespace, e.queue);
    if (e.kind === 'queue_created' || e.kind === 'queue_deleted') {
      // Another queue under this name from now on: what its folders showed was the old one's
      // (a peek on its way now reads stale, and a folder loaded earlier is peeked again).
      for (const f of ['messages', 'dead'] as const) {
        const id = this.folderId(e.namespace, e.queue, f);
        this.edited(id);
        this.pages.delete(id);
      }
      return { root: true, nodes: [] };
    }
    if (e.kind === 'queue_updated') return { root: true, nodes: [] };
    const q = this.queues.get(k);
    if (!q) return { root: true, nodes: [] };
    const deadBefore = q.counts.dead;
    if (e.counts) {
      q.counts = e.counts;
      this.countsAt.set(k, e.at);
      this.countsSeq.set(k, ++this.changeSeq);
    }
    const nodes: TreeNode[] = [];
    for (const f of foldersFor(e.kind)) {
      const id = this.folderId(e.namespace, e.queue, f);
      this.edited(id);
      const page = this.pages.get(id);
      if (page) page.stale = true;
    }
    // The namespace's description (its dead total) changes only when dead does; refreshing it
    // refreshes the queue below it too.
    if (q.counts.dead !== deadBefore) nodes.push(this.namespaceNode(e.namespace));
    else nodes.push(this.queueNode(e.namespace, e.queue));
    return { root: false, nodes };
  }

  /**
   * A virtual clock was advanced: the loaded folders' times ("delayed 4 s") are re-rendered from the
   * cached pages (what changed state comes as change events). A system clock's event changes nothing.
   */
  private clockMoved(now: number): ChangeEffect {
    if (!this.clock.virtual) return { root: false, nodes: [] };
    this.clock.observe(now);
    const nodes: TreeNode[] = [];
    for (const n of this.nodes.values()) if (n.kind === 'folder' && this.pages.has(n.id)) nodes.push(n);
    return { root: false, nodes };
  }

  /** Merge many effects into the smallest set of refreshes. */
  static merge(effects: ChangeEffect[]): ChangeEffect {
    if (effects.some((e) => e.root)) return { root: true, nodes: [] };
    const byId = new Map<string, TreeNode>();
    for (const e of effects) for (const n of e.nodes) byId.set(n.id, n);
    // A namespace refresh covers its queues.
    const namespaces = new Set([...byId.values()].filter((n) => n.kind === 'namespace').map((n) => (n as { namespace: string }).namespace));
    const nodes = [...byId.values()].filter((n) => n.kind === 'namespace' || !namespaces.has((n as { namespace: string }).namespace));
    return { root: false, nodes };
  }
}
