// The queue panel's webview script (bundled by scripts/build-panel.js into media/panel/dist/panel.js).
// It talks to the extension only through postMessage (typed in ../messages.ts) and renders every piece
// of message data as text.

import { EmulatorClock, oldestWaitAt } from '../../core/emulatorClock';
import {
  ALL_STATES,
  PAGE_SIZES,
  PANEL_TABS,
  isPanelTab,
  type HostMessage,
  type MessageState,
  type MessageView,
  type PanelArgs,
  type PanelError,
  type PanelEvent,
  type PanelOpName,
  type PanelRequest,
  type PanelResult,
  type PanelState,
  type PanelTab,
  type QueueCounts,
  type QueueInfo,
  type QueueRef,
  type LagStep,
  type AuditEntry,
  type PushForm,
} from '../messages';
import { isDialect } from '../../../emulator/protocol';
import { arrivedNote, bodyPreview, capital, deadAreaLabel, deadNoun, deadWords } from '../../core/wording';
import { validatePushForm, type FieldErrors } from '../validate';
import { renderChart } from './chart';
import { $, $input, clear, h, replace, show } from './dom';
import { duration, isoTime, jsonBlock, num, relative, relativeShort, shortId, waitTime } from './format';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();

// ---- requests -------------------------------------------------------------------------------

class RequestError extends Error {
  constructor(readonly code: PanelError['code'], message: string) {
    super(message);
  }
}

// A hidden panel's page is destroyed and reloaded when shown again, while the host may still
// answer the old page's requests: each page load numbers its requests under its own prefix.
const pageId = Math.random().toString(36).slice(2, 10);
let nextRequest = 1;
const pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: RequestError) => void; op: string }>();
const progressListeners = new Map<string, (e: Extract<PanelEvent, { event: 'progress' }>) => void>();

function request<K extends PanelOpName>(op: K, args: PanelArgs<K>, onProgress?: (e: Extract<PanelEvent, { event: 'progress' }>) => void): Promise<PanelResult<K>> {
  const requestId = `${pageId}-${nextRequest++}`;
  const msg = { type: 'request', requestId, op, args } as PanelRequest;
  if (onProgress) progressListeners.set(requestId, onProgress);
  return new Promise<PanelResult<K>>((resolve, reject) => {
    pending.set(requestId, { resolve: resolve as (v: unknown) => void, reject, op });
    vscode.postMessage(msg);
  }).finally(() => progressListeners.delete(requestId));
}

window.addEventListener('message', (ev: MessageEvent) => {
  const m = ev.data as HostMessage;
  if (!m || typeof m !== 'object') return;
  if (m.type === 'response') {
    const p = pending.get(m.requestId);
    if (!p) return;
    pending.delete(m.requestId);
    if (m.ok) p.resolve(m.result);
    else p.reject(new RequestError(m.error.code, m.error.message));
  } else if (m.type === 'event') onHostEvent(m);
});

// ---- state ----------------------------------------------------------------------------------

interface Paged {
  cursors: (string | undefined)[];
  index: number;
  page: { messages: MessageView[]; next: string | null; total: number } | null;
  selected: Set<string>;
  detailId: string | null;
  seq: number;
  loading: boolean;
}

const body = document.body;
const saved = (vscode.getState() ?? {}) as Partial<PanelState>;
const ref: QueueRef = { namespace: body.dataset.namespace ?? '', queue: body.dataset.queue ?? '' };

const st = {
  queue: null as QueueInfo | null,
  /** The queue's dialect: read with it, or saved by the page this one replaces (the queue may be gone since). */
  dialect: isDialect(saved.dialect) ? saved.dialect : undefined,
  counts: null as QueueCounts | null,
  /** When the counts were taken (the emulator's time): the oldest wait grows from there. */
  countsAt: 0,
  tab: (isPanelTab(saved.tab) ? saved.tab : 'messages') as PanelTab,
  states: new Set<MessageState>(Array.isArray(saved.states) && saved.states.length ? saved.states.filter((x) => ALL_STATES.includes(x)) : ALL_STATES),
  search: typeof saved.search === 'string' ? saved.search : '',
  pageSize: PAGE_SIZES.includes(saved.pageSize as (typeof PAGE_SIZES)[number]) ? (saved.pageSize as number) : 50,
  msg: { cursors: [undefined], index: 0, page: null, selected: new Set(), detailId: null, seq: 0, loading: false } as Paged,
  dead: { cursors: [undefined], index: 0, page: null, selected: new Set(), detailId: null, seq: 0, loading: false } as Paged,
  lag: null as LagStep[] | null,
  audit: null as AuditEntry[] | null,
  /** The emulator's time: a virtual one stands still between advances. */
  clock: new EmulatorClock(),
  down: false,
  deleted: false,
};

const now = () => st.clock.now();

/** The selected states, in their usual order. */
const statesList = () => ALL_STATES.filter((x) => st.states.has(x));

function persist() {
  const state: PanelState = { ref, tab: st.tab, states: statesList(), search: st.search, pageSize: st.pageSize, ...(st.dialect ? { dialect: st.dialect } : {}) };
  vscode.setState(state);
}

// ---- toast / banner -------------------------------------------------------------------------

let toastTimer: ReturnType<typeof setTimeout> | undefined;
function toast(text: string, kind: 'info' | 'error' | 'progress' = 'info', sticky = false) {
  const el = $('toast');
  el.textContent = text;
  el.className = `toast ${kind}`;
  if (toastTimer) clearTimeout(toastTimer);
  if (!sticky) toastTimer = setTimeout(() => show(el, false), kind === 'error' ? 7000 : 3500);
}

/** `asked`: the user's own action (a button), which always says why it did nothing. */
function fail(e: unknown, what: string, asked = false) {
  if (e instanceof RequestError) {
    if (e.code === 'cancelled') {
      show($('toast'), false);
      return;
    }
    // The banner says it (and the retries while down would toast every few seconds); a reason
    // the host gave stays (a retry's "not running" says less).
    if (e.code === 'unavailable') {
      if (!st.down) setDown(e.message);
      if (asked) toast(`${what}: ${e.message}`, 'error');
      return;
    }
    toast(`${what}: ${e.message}`, 'error');
  } else toast(`${what}: ${e instanceof Error ? e.message : String(e)}`, 'error');
}

function setDown(message: string) {
  st.down = true;
  $('banner-text').textContent = `Emulator not reachable — ${message}`;
  show($('banner'), true);
  $('live').classList.add('off');
}

function setUp() {
  if (!st.down) return;
  st.down = false;
  if (!st.deleted) show($('banner'), false);
  $('live').classList.remove('off');
}

setInterval(() => {
  if (st.down && !st.deleted && !initRun) void init();
}, 5000);

// ---- header ---------------------------------------------------------------------------------

const STATE_LABEL: Record<MessageState, string> = { ready: 'Ready', delayed: 'Delayed', leased: 'Leased', dead: 'Dead' };
/** A state's name as this queue's dialect says it (env: "Failed" for dead). */
const stateLabel = (s: MessageState) => (s === 'dead' ? words().short : STATE_LABEL[s]);

function renderCounts() {
  const c = st.counts;
  const el = $('counts');
  if (!c) {
    clear(el);
    renderStateChips(); // without the counts of a queue that is gone
    return;
  }
  const item = (cls: string, label: string, value: string, title: string) =>
    h('span', { class: `count ${cls}`, title }, h('span', { class: 'label' }, label), h('span', { class: 'value' }, value));
  replace(el,
    item('ready', 'Ready', num(c.ready), 'Ready to be delivered'),
    item('delayed', 'Delayed', num(c.delayed), 'Not visible until their delay ends'),
    item('leased', 'In flight', num(c.leased), 'Leased by a consumer'),
    item('dead', words().short, num(c.dead), capital(words().where)),
    item('wait', 'Oldest wait', oldestWait(), 'How long the oldest ready message has waited'));
  $('dead-pill').textContent = c.dead ? num(c.dead) : '';
  renderStateChips();
  if (st.tab === 'metrics') renderCards();
}

/**
 * A relative time ("5 s ago", "visible in 4 s") that runs: the ticker below rewrites its text from
 * the emulator's time, so a list nobody reloads does not stand still.
 */
function rel(at: number, prefix = '', long = false): HTMLElement {
  return h('span', { 'data-at': at, 'data-prefix': prefix, 'data-long': long ? '1' : null }, relText(at, prefix, long));
}

function relText(at: number, prefix: string, long: boolean): string {
  return long ? `${isoTime(at)} (${relative(at, now())})` : `${prefix}${relativeShort(at, now())}`;
}

function refreshRelTimes() {
  document.querySelectorAll<HTMLElement>('[data-at]').forEach((el) => {
    el.textContent = relText(Number(el.dataset.at), el.dataset.prefix ?? '', el.dataset.long === '1');
  });
}

/** The oldest ready message's wait now (ms), or null with no counts: it grows between changes (a backlog nobody touches sends none). */
function waitNow(): number | null {
  return st.counts ? oldestWaitAt(st.counts, st.countsAt, now()) : null;
}

function oldestWait(): string {
  const w = waitNow();
  return w === null ? '—' : waitTime(w);
}

function setCounts(c: QueueCounts, at: number) {
  st.counts = c;
  st.countsAt = at;
  renderCounts();
}

// The waits shown run with a system clock; only their text changes (the chips keep their focus).
function refreshWaits() {
  const text = oldestWait();
  document.querySelectorAll('.count.wait .value, .card.wait.oldest .card-value').forEach((el) => (el.textContent = text));
  const longest = document.querySelector('.card.wait.longest .card-value');
  if (longest) longest.textContent = waitTime(longestWait());
}

/** The 24 hours' longest wait, with the one still running (the history has it as of its last reading). */
function longestWait(): number {
  const recorded = (st.lag ?? []).reduce((m, x) => Math.max(m, x.maxWaitMs), 0);
  return Math.max(recorded, waitNow() ?? 0);
}

setInterval(() => {
  if (st.clock.virtual || st.down) return;
  if (st.counts?.ready) refreshWaits();
  refreshRelTimes();
}, 1000);

function renderStateChips() {
  const el = $('state-filter');
  const c = st.counts;
  // Each chip is updated in place: the one a keyboard user toggled keeps the focus (Space again
  // toggles it back), also when counts arrive.
  for (const s of ALL_STATES) {
    let chip = el.querySelector<HTMLButtonElement>(`button[data-state="${s}"]`);
    if (!chip) chip = el.appendChild(h('button', { type: 'button', class: `chip state-${s}`, 'data-state': s }));
    chip.setAttribute('aria-pressed', st.states.has(s) ? 'true' : 'false');
    replace(chip, stateLabel(s), c ? h('span', { class: 'chip-count' }, num(c[s])) : null);
  }
}

// ---- tabs -----------------------------------------------------------------------------------

function setTab(tab: PanelTab, load = true) {
  st.tab = tab;
  for (const t of PANEL_TABS) {
    const b = $(`tab-${t}`);
    b.setAttribute('aria-selected', t === tab ? 'true' : 'false');
    // One Tab stop for the tab list (the selected tab); the arrow keys move between tabs.
    b.tabIndex = t === tab ? 0 : -1;
    show($(`view-${t}`), t === tab);
  }
  persist();
  if (load) void refreshTab();
}

async function refreshTab() {
  // A queue that is gone has nothing to load (each tab would toast not_found over the banner).
  if (st.deleted) return;
  switch (st.tab) {
    case 'messages':
      return loadPage('msg');
    case 'dead':
      return loadPage('dead');
    case 'metrics':
      return loadStats();
    case 'audit':
      return loadAudit();
    default:
      return;
  }
}

// ---- messages list --------------------------------------------------------------------------

function stateBadge(s: MessageState) {
  return h('span', { class: `badge state-${s}` }, stateLabel(s));
}

function whenCell(m: MessageView) {
  if (m.state === 'leased' && m.leaseUntil) return h('span', { title: `Lease ends ${isoTime(m.leaseUntil)}` }, rel(m.leaseUntil, 'lease ends '));
  if (m.state === 'delayed') return h('span', { title: isoTime(m.visibleAt) }, rel(m.visibleAt, 'visible '));
  if (m.state === 'dead' && m.deadAt) return h('span', { title: isoTime(m.deadAt) }, rel(m.deadAt, `${words().state} `));
  return h('span', { title: isoTime(m.visibleAt) }, 'visible');
}

function resetPaging(p: Paged) {
  p.cursors = [undefined];
  p.index = 0;
}

function setLoading(which: 'msg' | 'dead', on: boolean) {
  const p = which === 'msg' ? st.msg : st.dead;
  p.loading = on;
  // Paging buttons wait for the page in flight: the next cursor comes with it.
  if (on) {
    ($(`${which}-prev`) as HTMLButtonElement).disabled = true;
    ($(`${which}-next`) as HTMLButtonElement).disabled = true;
  } else {
    ($(`${which}-prev`) as HTMLButtonElement).disabled = p.index === 0;
    ($(`${which}-next`) as HTMLButtonElement).disabled = !p.page?.next;
  }
}

/** Loads the current page of one list ('msg': the live messages, 'dead': the dead letters). */
async function loadPage(which: 'msg' | 'dead'): Promise<void> {
  const p = which === 'msg' ? st.msg : st.dead;
  const tab = which === 'msg' ? 'messages' : 'dead';
  const seq = ++p.seq;
  setLoading(which, true);
  try {
    const cursor = p.cursors[p.index];
    const page =
      which === 'msg'
        ? await request('peek', { states: statesList(), search: st.search || undefined, cursor, limit: st.pageSize })
        : await request('dead.list', { cursor, limit: st.pageSize });
    if (seq !== p.seq) return;
    if (page.messages.length === 0 && p.index > 0) {
      // The page emptied under us (acked, purged): go back one.
      p.index--;
      return loadPage(which);
    }
    p.page = page;
    p.cursors[p.index + 1] = page.next ?? undefined;
    p.cursors.length = p.index + 2;
    if (which === 'msg') renderMessages();
    else renderDead();
    setUp();
    if (p.detailId && st.tab === tab) void loadDetail(tab, p.detailId, false);
  } catch (e) {
    if (seq === p.seq) fail(e, `Could not list ${which === 'msg' ? 'messages' : words().many}`);
  } finally {
    if (seq === p.seq) setLoading(which, false);
  }
}

function renderMessages() {
  const p = st.msg;
  const page = p.page;
  const rows = $('msg-rows');
  if (!page) return;
  replace(rows, page.messages.map((m) => {
    const tr = h('tr', { 'data-id': m.id, tabindex: 0, class: m.id === p.detailId ? 'active' : null },
      h('td', { class: 'check' }, h('input', { type: 'checkbox', 'data-id': m.id, 'aria-label': `Select ${m.id}`, checked: p.selected.has(m.id) })),
      h('td', { class: 'id mono', title: m.id }, shortId(m.id)),
      h('td', null, stateBadge(m.state)),
      h('td', { class: 'body-col mono' }, h('span', { class: 'body-preview' }, bodyPreview(m.body, 140))),
      h('td', { class: 'num' }, num(m.attempts)),
      h('td', { title: isoTime(m.enqueuedAt) }, rel(m.enqueuedAt)),
      h('td', null, whenCell(m)));
    return tr;
  }));
  const empty = $('msg-empty');
  const filtered = st.search || st.states.size < ALL_STATES.length;
  empty.textContent = st.deleted ? 'No queue to list.' : filtered ? 'No message matches the filter.' : 'The queue is empty. Push a test message from the Push tab.';
  show(empty, page.messages.length === 0);
  const start = p.index * st.pageSize;
  $('msg-range').textContent = page.messages.length
    ? `${num(start + 1)}–${num(start + page.messages.length)} of ${num(page.total)}`
    : `0 of ${num(page.total)}`;
  ($('msg-prev') as HTMLButtonElement).disabled = p.index === 0;
  ($('msg-next') as HTMLButtonElement).disabled = !page.next;
  syncSelection('msg');
}

function syncSelection(which: 'msg' | 'dead') {
  const p = which === 'msg' ? st.msg : st.dead;
  const ids = p.page?.messages.map((m) => m.id) ?? [];
  const all = $input(`${which}-select-page`);
  const onPage = ids.filter((id) => p.selected.has(id)).length;
  all.checked = ids.length > 0 && onPage === ids.length;
  all.indeterminate = onPage > 0 && onPage < ids.length;
  const n = p.selected.size;
  if (which === 'msg') {
    const b = $('msg-export-selected') as HTMLButtonElement;
    b.disabled = n === 0;
    b.textContent = n ? `Export selected (${num(n)})` : 'Export selected';
  } else {
    const r = $('dead-replay-selected') as HTMLButtonElement;
    const d = $('dead-discard-selected') as HTMLButtonElement;
    r.disabled = d.disabled = n === 0;
    r.textContent = n ? `Replay selected (${num(n)})` : 'Replay selected';
    d.textContent = n ? `Discard selected (${num(n)})` : 'Discard selected';
    $('dead-selection').textContent = n ? `${num(n)} selected` : '';
  }
}

// ---- detail ---------------------------------------------------------------------------------

function field(label: string, value: Node | string | null | undefined, cls?: string) {
  if (value === null || value === undefined || value === '') return null;
  return [h('dt', null, label), h('dd', { class: cls ?? null }, value)];
}

function timeNode(at: number | null) {
  if (!at) return null;
  return h('span', { title: isoTime(at) }, rel(at, '', true));
}

function renderDetail(target: HTMLElement, m: MessageView | null, id: string) {
  if (!m) {
    replace(target, h('div', { class: 'placeholder' }, `Message ${id} is gone (acked, replayed or purged).`));
    return;
  }
  const actions = h('div', { class: 'detail-actions' });
  if (m.state === 'dead') {
    actions.appendChild(h('button', { type: 'button', 'data-action': 'replay-one', 'data-id': m.id }, 'Replay'));
    actions.appendChild(h('button', { type: 'button', class: 'danger secondary', 'data-action': 'discard-one', 'data-id': m.id }, 'Discard'));
  }
  actions.appendChild(h('button', { type: 'button', class: 'secondary', 'data-action': 'export-one', 'data-id': m.id }, 'Export'));
  actions.appendChild(h('button', { type: 'button', class: 'secondary', 'data-action': 'copy-body', 'data-id': m.id }, 'Copy body'));
  replace(target,
    h('div', { class: 'detail-head' }, h('span', { class: 'mono detail-id' }, m.id), stateBadge(m.state)),
    actions,
    h('dl', { class: 'facts' },
      field('Attempts', num(m.attempts)),
      field('Enqueued', timeNode(m.enqueuedAt)),
      // A leased or dead message is not visible now: its time says when it last became so.
      field(m.state === 'delayed' ? 'Visible at' : m.state === 'ready' ? 'Visible since' : 'Became visible', timeNode(m.visibleAt)),
      field('Lease ends', timeNode(m.leaseUntil)),
      field(`${words().short} since`, timeNode(m.deadAt)),
      field(`${words().short} reason`, m.deadReason, 'reason'),
      field('Dedupe key', m.dedupeKey, 'mono'),
      field('Content type', m.contentType, 'mono'),
      field('Ordering key', m.orderingKey, 'mono'),
      field('Size', `${num(m.sizeBytes)} bytes`)),
    m.lastError ? [h('h3', null, 'Last error'), h('pre', { class: 'last-error' }, m.lastError)] : null,
    h('h3', null, 'Body'),
    jsonBlock(m.body, 'json body-json'),
    h('h3', null, 'Attributes'),
    m.attributes && Object.keys(m.attributes).length ? jsonBlock(m.attributes, 'json attributes-json') : h('div', { class: 'muted' }, 'none'),
    m.meta !== null && m.meta !== undefined ? [h('h3', null, 'Meta'), jsonBlock(m.meta)] : null);
  detailCache.set(m.id, m);
}

const detailCache = new Map<string, MessageView>();

async function loadDetail(which: 'messages' | 'dead', id: string, loading = true) {
  const p = which === 'messages' ? st.msg : st.dead;
  const target = $(which === 'messages' ? 'detail' : 'dead-detail');
  p.detailId = id;
  $(which === 'messages' ? 'msg-rows' : 'dead-rows').querySelectorAll('tr').forEach((tr) => tr.classList.toggle('active', tr.getAttribute('data-id') === id));
  if (loading) {
    const fromPage = p.page?.messages.find((m) => m.id === id);
    if (fromPage) renderDetail(target, fromPage, id);
  }
  try {
    const m = await request('message.get', { id });
    if (p.detailId !== id) return;
    renderDetail(target, m, id);
  } catch (e) {
    fail(e, 'Could not load the message');
  }
}

// ---- dead letters ---------------------------------------------------------------------------

/** env queues call their dead letters "failed" (as the tree does). */
const isEnv = () => st.dialect === 'env';
const words = () => deadWords(st.dialect);

function renderDeadArea() {
  $('dead-label').textContent = deadAreaLabel(st.dialect);
  $('dead-since-head').textContent = `${words().short} since`;
  $('dead-detail').setAttribute('aria-label', `${capital(words().one)} detail`);
  // Only the first hint: once a detail was shown (or said the message is gone) it stays.
  const hint = document.getElementById('dead-hint');
  if (hint) hint.textContent = `Select a ${words().one} to see why it failed.`;
}

function renderDead() {
  const p = st.dead;
  const page = p.page;
  if (!page) return;
  // Forget selected ids that are no longer dead letters on this page's refresh only when gone entirely.
  replace($('dead-rows'), page.messages.map((m) =>
    h('tr', { 'data-id': m.id, tabindex: 0, class: m.id === p.detailId ? 'active' : null },
      h('td', { class: 'check' }, h('input', { type: 'checkbox', 'data-id': m.id, 'aria-label': `Select ${m.id}`, checked: p.selected.has(m.id) })),
      h('td', { class: 'id mono', title: m.id }, shortId(m.id)),
      h('td', null, h('span', { class: 'reason' }, m.deadReason ?? '—')),
      h('td', { class: m.lastError ? 'error-col' : 'error-col none', title: m.lastError ?? '' }, m.lastError ?? ''),
      h('td', { class: 'num' }, num(m.attempts)),
      h('td', { title: m.deadAt ? isoTime(m.deadAt) : '' }, m.deadAt ? rel(m.deadAt) : ''),
      h('td', { class: 'body-col mono' }, h('span', { class: 'body-preview' }, bodyPreview(m.body, 140))))));
  const empty = $('dead-empty');
  empty.textContent = isEnv() ? 'No failed messages. Messages land here when their retries run out.' : 'No dead letters. Messages land here when their deliveries run out.';
  show(empty, page.messages.length === 0);
  const start = p.index * st.pageSize;
  $('dead-range').textContent = page.messages.length ? `${num(start + 1)}–${num(start + page.messages.length)} of ${num(page.total)}` : `0 of ${num(page.total)}`;
  ($('dead-prev') as HTMLButtonElement).disabled = p.index === 0;
  ($('dead-next') as HTMLButtonElement).disabled = !page.next;
  ($('dead-replay-all') as HTMLButtonElement).disabled = page.total === 0;
  ($('dead-purge-all') as HTMLButtonElement).disabled = page.total === 0;
  syncSelection('dead');
}

async function busy<T>(button: HTMLButtonElement | null, label: string, run: () => Promise<T>): Promise<T | undefined> {
  const old = button?.textContent ?? '';
  if (button) {
    button.disabled = true;
    button.textContent = label;
    button.classList.add('busy');
  }
  try {
    return await run();
  } finally {
    if (button) {
      button.textContent = old;
      button.disabled = false;
      button.classList.remove('busy');
    }
  }
}

const onProgress = (e: Extract<PanelEvent, { event: 'progress' }>) =>
  toast(e.total ? `${e.label} ${num(e.done)} of ${num(e.total)}…` : `${e.label} ${num(e.done)}…`, 'progress', true);

async function replay(ids: string[] | 'all', button: HTMLButtonElement | null) {
  try {
    const r = await busy(button, 'Replaying…', () => request('dead.replay', ids === 'all' ? { all: true } : { ids }, onProgress));
    if (!r) return;
    toast(`Replayed ${num(r.replayed)} ${r.replayed === 1 ? 'message' : 'messages'}${arrivedNote(r.arrived)}.`);
    if (ids === 'all') st.dead.selected.clear();
    else for (const id of ids) st.dead.selected.delete(id);
    scheduleRefresh(0);
  } catch (e) {
    fail(e, 'Replay failed', true);
  }
}

async function discard(ids: string[] | 'all', button: HTMLButtonElement | null) {
  try {
    const r = await busy(button, ids === 'all' ? 'Purging…' : 'Discarding…', () => request('dead.purge', ids === 'all' ? { all: true } : { ids }, onProgress));
    if (!r) return;
    toast(`${ids === 'all' ? 'Purged' : 'Discarded'} ${num(r.purged)} ${deadNoun(st.dialect, r.purged)}${arrivedNote(r.arrived)}.`);
    if (ids === 'all') st.dead.selected.clear();
    else for (const id of ids) st.dead.selected.delete(id);
    scheduleRefresh(0);
  } catch (e) {
    fail(e, ids === 'all' ? 'Purge failed' : 'Discard failed', true);
  }
}

async function exportMessages(ids: string[] | null, button: HTMLButtonElement | null) {
  const format = ($('msg-export-format') as HTMLSelectElement).value === 'ndjson' ? 'ndjson' : 'json';
  try {
    const r = await busy(button, 'Exporting…', () =>
      request('export', ids ? { format, ids } : { format, states: statesList(), search: st.search || undefined }, onProgress));
    if (r) toast(`Exported ${num(r.exported)} ${r.exported === 1 ? 'message' : 'messages'} to ${r.target}`);
  } catch (e) {
    fail(e, 'Export failed', true);
  }
}

// ---- push -----------------------------------------------------------------------------------

const PUSH_FIELDS: (keyof PushForm)[] = ['body', 'delaySeconds', 'dedupeKey', 'attributes', 'count'];
const PUSH_INPUT: Record<keyof PushForm, string> = { body: 'push-body', delaySeconds: 'push-delay', dedupeKey: 'push-dedupe', attributes: 'push-attributes', count: 'push-count' };

function readPushForm(): PushForm {
  const v = (k: keyof PushForm) => ($(PUSH_INPUT[k]) as HTMLInputElement | HTMLTextAreaElement).value;
  return { body: v('body'), delaySeconds: v('delaySeconds'), dedupeKey: v('dedupeKey'), attributes: v('attributes'), count: v('count') };
}

function showPushErrors(errors: FieldErrors, only?: (keyof PushForm)[]) {
  for (const k of only ?? PUSH_FIELDS) {
    const msg = errors[k] ?? '';
    $(`push-${k}-error`).textContent = msg;
    const input = $(PUSH_INPUT[k]);
    input.classList.toggle('invalid', !!msg);
    if (msg) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  }
}

function validatePush(only?: (keyof PushForm)[]) {
  const v = validatePushForm(readPushForm(), { maxDelayMs: st.queue?.policy.maxDelayMs });
  showPushErrors(v.ok ? {} : v.errors, only);
  return v;
}

async function sendPush() {
  const v = validatePush();
  const result = $('push-result');
  if (!v.ok) {
    result.textContent = 'Not sent: fix the fields marked in red.';
    result.className = 'error-text';
    const first = PUSH_FIELDS.find((k) => v.errors[k]);
    if (first) $(PUSH_INPUT[first]).focus();
    return;
  }
  const button = $('push-send') as HTMLButtonElement;
  result.textContent = '';
  try {
    const r = await busy(button, v.plan.count > 1 ? `Sending ${num(v.plan.count)}…` : 'Sending…', () => request('push', readPushForm(), onProgress));
    if (!r) return;
    result.className = r.stopped ? 'error-text' : 'ok-text';
    const parts = [r.stopped ? `Sent ${num(r.sent)} of ${num(v.plan.count)} messages` : `Sent ${num(r.sent)} ${r.sent === 1 ? 'message' : 'messages'}`];
    if (r.deduped) parts.push(`${num(r.deduped)} deduplicated (the key was already used)`);
    result.textContent = r.stopped ? `${parts.join(', ')}, then not sent: ${r.stopped}` : `${parts.join(', ')}.${r.ids.length === 1 ? ` id ${r.ids[0]}` : ''}`;
    show($('toast'), false);
    scheduleRefresh(0);
  } catch (e) {
    result.className = 'error-text';
    result.textContent = e instanceof RequestError ? `Not sent: ${e.message}` : `Not sent: ${String(e)}`;
  }
}

// ---- metrics / audit ------------------------------------------------------------------------

/** Who an audit entry's token is: an id; none for the emulator's own work (quayside.json at start, in-process engine calls); none also in entries older than token ids. */
function tokenTitle(e: { token: string; tokenId?: string | null }): string {
  if (e.tokenId) return `token ${e.tokenId}`;
  return e.token === 'system' ? 'the emulator itself (quayside.json at start, or an in-process engine call)' : 'recorded before token ids';
}

function renderCards() {
  const c = st.counts;
  const lag = st.lag ?? [];
  const peak = lag.reduce((m, x) => Math.max(m, x.peakDepth), 0);
  const card = (label: string, value: string, sub: string, cls = '') => h('div', { class: `card ${cls}` }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), h('div', { class: 'card-sub' }, sub));
  replace($('metric-cards'),
    card('Depth', c ? num(c.depth) : '—', c ? `${num(c.ready)} ready · ${num(c.delayed)} delayed` : '', 'depth'),
    card('In flight', c ? num(c.leased) : '—', 'leased now'),
    card(words().short, c ? num(c.dead) : '—', words().where, 'dead'),
    card('Oldest wait', oldestWait(), 'of a ready message', 'wait oldest'),
    card('24 h peak depth', num(peak), 'highest in a half hour', 'depth'),
    card('24 h longest wait', waitTime(longestWait()), 'of the oldest message', 'wait longest'));
}

async function loadStats() {
  try {
    const r = await request('stats', {});
    st.clock.observe(r.now);
    st.lag = r.lagHistory;
    setCounts(r.counts, r.now);
    renderCards();
    renderChart($('chart'), $('chart-tip'), r.lagHistory);
    setUp();
  } catch (e) {
    fail(e, 'Could not load metrics');
  }
}

/** An audit entry's action in this queue's words (env: "Purge failed messages"). */
function actionLabel(action: string): string {
  const labels: Record<string, string> = { replay: 'Replay', purge_dead: `Purge ${words().many}`, purge: 'Purge live messages', delete_queue: 'Delete queue', expire: 'Expired by a shorter limit' };
  return labels[action] ?? action;
}

async function loadAudit() {
  try {
    const r = await request('audit.list', { limit: 200 });
    st.audit = r.entries;
    const entries = [...r.entries].sort((a, b) => b.at - a.at || b.id - a.id);
    replace($('audit-rows'), entries.map((e) =>
      h('tr', null,
        h('td', { title: isoTime(e.at) }, `${isoTime(e.at)} · ${relative(e.at, now())}`),
        h('td', null, h('span', { class: `action action-${e.action}` }, actionLabel(e.action))),
        h('td', { class: 'num' }, num(e.count)),
        // The name is the creator's label; the id tells apart tokens that share one.
        h('td', { title: tokenTitle(e) }, e.token, e.tokenId ? h('span', { class: 'mono muted' }, ` ${e.tokenId}`) : null),
        h('td', { class: 'muted' }, e.detail ?? ''))));
    show($('audit-empty'), entries.length === 0);
    setUp();
  } catch (e) {
    fail(e, 'Could not load the audit log');
  }
}

// ---- live -----------------------------------------------------------------------------------

let refreshTimer: ReturnType<typeof setTimeout> | undefined;
/**
 * A throttle, not a debounce: a pending refresh is kept, so a queue that stays busy still refreshes
 * every `ms`. Only an immediate refresh (0, after the user's own action) replaces a pending one.
 */
function scheduleRefresh(ms = 300) {
  if (refreshTimer) {
    if (ms > 0) return;
    clearTimeout(refreshTimer);
  }
  refreshTimer = setTimeout(() => {
    refreshTimer = undefined;
    void refreshTab();
  }, ms);
}

function onHostEvent(e: PanelEvent) {
  switch (e.event) {
    case 'changed':
      if (st.deleted) {
        // Only a creation brings it back (recreated under the same name): start over. Anything
        // else is a late word about the deleted queue.
        if (!e.kinds.includes('queue_created')) return;
        showBack();
        void init();
        return;
      }
      if (e.counts) setCounts(e.counts, e.at);
      // Its settings changed (a shorter maxDelayMs, another consumer), or changes were lost on the
      // way (`gap`): read the queue again.
      if (e.kinds.includes('queue_updated') || e.kinds.includes('gap')) void init();
      $('live').classList.add('pulse');
      setTimeout(() => $('live').classList.remove('pulse'), 600);
      scheduleRefresh();
      return;
    case 'progress':
      progressListeners.get(e.requestId)?.(e);
      return;
    case 'connection':
      if (e.state === 'down') setDown(e.message ?? 'disconnected');
      // Back (perhaps a new emulator): reload the queue as well as the list.
      else void init();
      return;
    case 'deleted':
      toldDeleted = true;
      showGone(DELETED);
      return;
    case 'show':
      setTab(e.tab);
      return;
    case 'clock':
      // Times are relative to it ("visible in 4 s"); what changed state comes as `changed`.
      if (!st.clock.virtual) return;
      st.clock.observe(e.now);
      refreshWaits(); // the oldest wait grew by the advance
      refreshRelTimes();
      scheduleRefresh();
      return;
    default: {
      // Every event is handled above: a new kind of PanelEvent fails to compile here.
      const unhandled: never = e;
      return unhandled;
    }
  }
}

const DELETED = 'This queue was deleted.';

/**
 * The queue is not there (deleted, or not on the emulator that runs now): what was shown of it
 * goes, and only its creation brings the panel back (see `changed`).
 */
function showGone(text: string) {
  st.deleted = true;
  st.counts = null;
  renderCounts();
  $('dead-pill').textContent = '';
  for (const [p, render, detail] of [[st.msg, renderMessages, 'detail'], [st.dead, renderDead, 'dead-detail']] as const) {
    p.seq++; // a page still on its way is of the queue that is gone
    p.page = { messages: [], total: 0, next: null };
    p.selected.clear();
    p.detailId = null;
    resetPaging(p);
    render();
    replace($(detail), h('div', { class: 'placeholder' }, 'No message selected.'));
  }
  st.lag = null;
  st.audit = null;
  renderCards();
  clear($('chart'));
  clear($('audit-rows'));
  $('banner-text').textContent = text;
  show($('banner-retry'), false);
  show($('banner'), true);
  $('live').classList.add('off');
}

/** Back from `showGone`: the queue is there again (created, or on the emulator that has it). */
function showBack() {
  st.deleted = false;
  show($('banner'), false);
  show($('banner-retry'), true);
  $('live').classList.remove('off');
}

let initRun: Promise<boolean> | null = null;
let initAgain = false;
/**
 * (Re)load the queue and the visible tab. One at a time: asked again while one runs (the host posts
 * `up` just before it answers the very init that brought it back) it waits for that one, and runs
 * again only if that one failed.
 */
async function init(): Promise<void> {
  if (initRun) {
    initAgain = true;
    await initRun;
    return;
  }
  initAgain = false;
  initRun = loadQueue();
  const ok = await initRun;
  initRun = null;
  if (!ok && initAgain) await init();
}

/** `deleted` came while the current init ran: the host says so before its not_found answer. */
let toldDeleted = false;

async function loadQueue(): Promise<boolean> {
  toldDeleted = false;
  try {
    const r = await request('init', {});
    st.queue = r.queue;
    if (st.dialect !== r.queue.dialect) {
      st.dialect = r.queue.dialect;
      persist();
    }
    st.counts = r.queue.counts;
    st.countsAt = r.now;
    st.clock.setMode(r.clock);
    st.clock.observe(r.now);
    $('queue-dialect').textContent = r.queue.dialect;
    $('queue-dialect').title = `${r.queue.dialect} dialect · lease ${duration(r.queue.policy.leaseMs)} · ${r.queue.policy.maxDeliveries} deliveries before ${r.queue.dialect === 'env' ? 'it fails' : 'dead'}`;
    renderDeadArea();
    renderCounts();
    if (st.deleted) showBack(); // back on the emulator that has it
    setUp();
    // The host opened the panel on a tab (Show Audit Log, Show Depth and Lag Chart).
    if (r.tab && r.tab !== st.tab) setTab(r.tab);
    else await refreshTab();
    return true;
  } catch (e) {
    // (Another emulator may have taken over, without this queue: nothing of the last one's stays.)
    // Not when the host just said `deleted` (to a page rebuilt since the delete): that says why.
    if (e instanceof RequestError && e.code === 'not_found') {
      if (!toldDeleted) showGone(`Queue ${ref.queue} not found in ${ref.namespace || 'the default namespace'}.`);
    }
    else fail(e, 'Could not open the queue');
    return false;
  }
}

// ---- wiring ---------------------------------------------------------------------------------

/** Narrow, the detail sits under the list (panel.css): a row opened by a click or Enter scrolls it into sight. */
const NARROW = window.matchMedia('(max-width: 1100px)');

function rowClicks(which: 'msg' | 'dead') {
  const p = which === 'msg' ? st.msg : st.dead;
  const tbody = $(`${which}-rows`);
  const open = (id: string) => {
    void loadDetail(which === 'msg' ? 'messages' : 'dead', id);
    if (NARROW.matches) $(which === 'msg' ? 'detail' : 'dead-detail').scrollIntoView({ block: 'nearest' });
  };
  tbody.addEventListener('click', (ev) => {
    const t = ev.target as HTMLElement;
    const tr = t.closest('tr');
    const id = tr?.getAttribute('data-id');
    if (!id) return;
    if (t instanceof HTMLInputElement && t.type === 'checkbox') {
      if (t.checked) p.selected.add(id);
      else p.selected.delete(id);
      syncSelection(which);
      return;
    }
    if (t.closest('td.check')) return;
    open(id);
  });
  tbody.addEventListener('keydown', (ev) => {
    const tr = (ev.target as HTMLElement).closest('tr');
    if (!tr) return;
    if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      const id = tr.getAttribute('data-id');
      if (id) open(id);
    } else if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      const next = (ev.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling) as HTMLElement | null;
      if (next) {
        next.focus();
        const id = next.getAttribute('data-id');
        if (id) void loadDetail(which === 'msg' ? 'messages' : 'dead', id);
      }
    }
  });
  $input(`${which}-select-page`).addEventListener('change', (ev) => {
    const on = (ev.target as HTMLInputElement).checked;
    for (const m of p.page?.messages ?? []) on ? p.selected.add(m.id) : p.selected.delete(m.id);
    tbody.querySelectorAll<HTMLInputElement>('input[type=checkbox]').forEach((box) => (box.checked = on));
    syncSelection(which);
  });
  $(`${which}-prev`).addEventListener('click', () => {
    if (p.index > 0 && !p.loading) {
      p.index--;
      void loadPage(which);
    }
  });
  $(`${which}-next`).addEventListener('click', () => {
    if (p.page?.next && !p.loading) {
      p.index++;
      p.cursors[p.index] = p.page.next;
      void loadPage(which);
    }
  });
}

function detailClicks(id: string) {
  $(id).addEventListener('click', (ev) => {
    const b = (ev.target as HTMLElement).closest('button[data-action]') as HTMLButtonElement | null;
    if (!b) return;
    const mid = b.getAttribute('data-id') ?? '';
    switch (b.getAttribute('data-action')) {
      case 'replay-one':
        return void replay([mid], b);
      case 'discard-one':
        return void discard([mid], b);
      case 'export-one':
        return void exportMessages([mid], b);
      case 'copy-body': {
        const m = detailCache.get(mid);
        if (m) void navigator.clipboard?.writeText(JSON.stringify(m.body, null, 2)).then(() => toast('Body copied.'), () => toast('Could not copy.', 'error'));
        return;
      }
    }
  });
}

function wire() {
  for (const t of PANEL_TABS) $(`tab-${t}`).addEventListener('click', () => setTab(t));
  // The tab list as the ARIA tabs pattern has it: Left / Right (wrapping), Home and End select and focus.
  document.querySelector('[role=tablist]')!.addEventListener('keydown', (ev) => {
    const e = ev as KeyboardEvent;
    const i = PANEL_TABS.indexOf(st.tab);
    const n = PANEL_TABS.length;
    const to = { ArrowRight: (i + 1) % n, ArrowLeft: (i - 1 + n) % n, Home: 0, End: n - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    setTab(PANEL_TABS[to]);
    $(`tab-${PANEL_TABS[to]}`).focus();
  });
  $('state-filter').addEventListener('click', (ev) => {
    const b = (ev.target as HTMLElement).closest('button[data-state]');
    if (!b) return;
    const s = b.getAttribute('data-state') as MessageState;
    if (st.states.has(s)) {
      if (st.states.size === 1) return; // keep at least one
      st.states.delete(s);
    } else st.states.add(s);
    renderStateChips();
    resetPaging(st.msg);
    persist();
    void loadPage('msg');
  });
  const search = $input('search');
  search.value = st.search;
  let searchTimer: ReturnType<typeof setTimeout> | undefined;
  search.addEventListener('input', () => {
    if (searchTimer) clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      // As typed, as `quayside peek --search` takes it: a case-sensitive part of the body.
      st.search = search.value;
      resetPaging(st.msg);
      persist();
      void loadPage('msg');
    }, 250);
  });
  const size = $('msg-page-size') as HTMLSelectElement;
  replace(size, PAGE_SIZES.map((n) => h('option', { value: n, selected: n === st.pageSize }, String(n))));
  size.addEventListener('change', () => {
    st.pageSize = Number(size.value);
    resetPaging(st.msg);
    resetPaging(st.dead);
    persist();
    void refreshTab();
  });
  rowClicks('msg');
  rowClicks('dead');
  detailClicks('detail');
  detailClicks('dead-detail');
  $('msg-export-selected').addEventListener('click', (ev) => void exportMessages([...st.msg.selected], ev.currentTarget as HTMLButtonElement));
  $('msg-export-all').addEventListener('click', (ev) => void exportMessages(null, ev.currentTarget as HTMLButtonElement));
  $('msg-purge').addEventListener('click', async (ev) => {
    try {
      const r = await busy(ev.currentTarget as HTMLButtonElement, 'Purging…', () => request('purge', {}));
      if (r) toast(`Purged ${num(r.purged)} live ${r.purged === 1 ? 'message' : 'messages'}.`);
      scheduleRefresh(0);
    } catch (e) {
      fail(e, 'Purge failed', true);
    }
  });
  $('dead-replay-selected').addEventListener('click', (ev) => void replay([...st.dead.selected], ev.currentTarget as HTMLButtonElement));
  $('dead-discard-selected').addEventListener('click', (ev) => void discard([...st.dead.selected], ev.currentTarget as HTMLButtonElement));
  $('dead-replay-all').addEventListener('click', (ev) => void replay('all', ev.currentTarget as HTMLButtonElement));
  $('dead-purge-all').addEventListener('click', (ev) => void discard('all', ev.currentTarget as HTMLButtonElement));
  $('audit-refresh').addEventListener('click', () => void loadAudit());
  $('banner-retry').addEventListener('click', () => void init());

  const form = $('push-form') as HTMLFormElement;
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void sendPush();
  });
  let checkTimer: ReturnType<typeof setTimeout> | undefined;
  for (const k of PUSH_FIELDS) {
    $(PUSH_INPUT[k]).addEventListener('input', () => {
      if (checkTimer) clearTimeout(checkTimer);
      checkTimer = setTimeout(() => validatePush([k]), 200);
    });
  }
  $('push-format').addEventListener('click', () => {
    const ta = $(PUSH_INPUT.body) as HTMLTextAreaElement;
    const v = validatePush(['body']);
    if (v.ok) ta.value = JSON.stringify(v.plan.body, null, 2);
  });
  ($(PUSH_INPUT.body) as HTMLTextAreaElement).addEventListener('keydown', (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === 'Enter') {
      ev.preventDefault();
      void sendPush();
    }
  });
}

wire();
if (st.dialect) renderDeadArea(); // a rebuilt page names them before (or without) reading the queue
renderStateChips();
setTab(st.tab, false);
void init();
