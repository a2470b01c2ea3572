// An in-memory stand-in for the emulator, speaking the protocol's ops that the queue panel uses.
// Shared by the panel handler's unit tests and the webview tests.

import { QuaysideError } from '../../../emulator/errors';
import type {
  AuditEntry,
  ChangeEvent,
  LagStep,
  MessageState,
  MessageView,
  OpArgs,
  OpName,
  OpResult,
  QueueCounts,
  QueueInfo,
  ServerEvent,
} from '../../../emulator/protocol';
import type { Transport } from '../../../emulator/clients/transport';

export interface Call {
  op: OpName;
  args: any;
}

const STEP = 30 * 60_000;

export class FakeTransport implements Transport {
  readonly namespace: string;
  readonly queue: string;
  messages: MessageView[] = [];
  audit: AuditEntry[] = [];
  lagHistory: LagStep[] = [];
  calls: Call[] = [];
  now: number;
  /** Fail the next request of this op with this error. */
  failNext = new Map<OpName, QuaysideError>();
  /** Fail the n-th request of this op from now (1: the next) with this error. */
  failNth = new Map<OpName, { n: number; error: QuaysideError }>();
  /** Delay every answer (ms). */
  latencyMs = 0;
  maxReplayPerCall = 100;
  dialect: QueueInfo['dialect'] = 'cache';
  private listeners = new Set<(e: ServerEvent) => void>();
  private reconnectListeners = new Set<() => void>();
  private subs = new Map<string, { namespace?: string; queue?: string }>();
  private seq = 0;
  /** What clock.now says the emulator runs on. */
  clockMode: 'system' | 'virtual' = 'virtual';

  constructor(opts: { namespace?: string; queue?: string; now?: number } = {}) {
    this.namespace = opts.namespace ?? 'demo';
    this.queue = opts.queue ?? 'jobs';
    this.now = opts.now ?? Date.UTC(2026, 11, 2, 15, 12, 0);
  }

  // ---- fixtures -------------------------------------------------------------------------

  add(partial: Partial<MessageView> & { body: unknown }): MessageView {
    const n = ++this.seq;
    const m: MessageView = {
      id: partial.id ?? `msg_${String(n).padStart(6, '0')}`,
      namespace: this.namespace,
      queue: this.queue,
      state: 'ready',
      attempts: 0,
      enqueuedAt: this.now - 60_000,
      visibleAt: this.now - 60_000,
      leaseUntil: null,
      dedupeKey: null,
      attributes: null,
      contentType: 'application/json',
      orderingKey: null,
      meta: null,
      sizeBytes: Buffer.byteLength(JSON.stringify(partial.body)),
      deadAt: null,
      deadReason: null,
      lastError: null,
      ...partial,
    };
    this.messages.push(m);
    return m;
  }

  /** 48 half-hour steps ending at the current one. */
  makeLag(fn: (i: number) => { peakDepth: number; maxWaitMs: number }): LagStep[] {
    const cur = Math.floor(this.now / STEP) * STEP;
    this.lagHistory = Array.from({ length: 48 }, (_, i) => ({ start: cur - (47 - i) * STEP, ...fn(i) }));
    return this.lagHistory;
  }

  counts(): QueueCounts {
    const c = { ready: 0, delayed: 0, leased: 0, dead: 0 } as Record<MessageState, number>;
    let bytes = 0;
    let oldest = 0;
    for (const m of this.messages) {
      c[m.state]++;
      if (m.state !== 'dead') bytes += m.sizeBytes;
      if (m.state === 'ready') oldest = Math.max(oldest, this.now - m.visibleAt);
    }
    return { ...c, depth: c.ready + c.delayed, bytes, oldestReadyAgeMs: oldest };
  }

  info(): QueueInfo {
    return {
      id: 'q_1',
      namespace: this.namespace,
      name: this.queue,
      dialect: this.dialect,
      policy: {
        leaseMs: 30_000, maxDeliveries: 5, deadRetentionMs: 14 * 86_400_000, maxMessageAgeMs: null, onMaxAge: 'dead',
        dedupeTtlMs: 3_600_000, maxPayloadBytes: 262_144, maxDepth: null, maxBytes: null, maxNackDelayMs: 7 * 86_400_000,
        maxDelayMs: 7 * 86_400_000, reasons: { timeout: 'timeout', nack: 'nack', expired: 'expired' },
      } as unknown as QueueInfo['policy'], // the policy's fields grow; the panel only reads a few
      consumer: null,
      createdAt: this.now - 86_400_000,
      counts: this.counts(),
    };
  }

  emitChange(kind: ChangeEvent['kind'], ids: string[] = [], ref = { namespace: this.namespace, queue: this.queue }) {
    for (const [subscription, f] of this.subs) {
      if (f.namespace !== undefined && f.namespace !== ref.namespace) continue;
      if (f.queue !== undefined && f.queue !== ref.queue) continue;
      const ev: ChangeEvent = { event: 'change', subscription, ...ref, kind, ids, counts: this.counts(), at: this.now };
      for (const l of this.listeners) l(ev);
    }
  }

  /** Change events to every subscription were dropped (the connection fell behind), as the emulator then tells them. */
  emitGap(only?: string) {
    for (const subscription of only ? [only] : [...this.subs.keys()]) for (const l of this.listeners) l({ event: 'gap', subscription });
  }

  /** A virtual clock's advance, as the emulator tells subscribers. */
  advanceClock(ms: number) {
    this.now += ms;
    for (const l of this.listeners) l({ event: 'clock', now: this.now });
  }

  reconnect() {
    this.subs.clear();
    for (const l of this.reconnectListeners) l();
  }

  get subscriptionCount() {
    return this.subs.size;
  }

  callsOf(op: OpName) {
    return this.calls.filter((c) => c.op === op);
  }

  // ---- Transport ------------------------------------------------------------------------

  onEvent(listener: (event: ServerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onReconnect(listener: () => void): () => void {
    this.reconnectListeners.add(listener);
    return () => this.reconnectListeners.delete(listener);
  }

  get listenerCount() {
    return this.listeners.size;
  }

  async close(): Promise<void> {}

  /** No emulator: every request fails as the switching transport fails it then. */
  down = false;

  async request<K extends OpName>(op: K, args: OpArgs<K>): Promise<OpResult<K>> {
    this.calls.push({ op, args: structuredClone(args) });
    if (this.down) throw new QuaysideError('unavailable', 'the Quayside emulator is not running');
    if (this.latencyMs) await new Promise((r) => setTimeout(r, this.latencyMs));
    const f = this.failNext.get(op);
    if (f) {
      this.failNext.delete(op);
      throw f;
    }
    const nth = this.failNth.get(op);
    if (nth && --nth.n === 0) {
      this.failNth.delete(op);
      throw nth.error;
    }
    return this.answer(op, args as any) as OpResult<K>;
  }

  private check(a: { namespace?: string; queue?: string }) {
    if (a.namespace !== this.namespace || a.queue !== this.queue) throw new QuaysideError('not_found', `queue ${a.queue} not found`);
  }

  private checkIds(ids: unknown) {
    if (Array.isArray(ids) && ids.length > 10000) throw new QuaysideError('invalid_argument', 'at most 10000 ids at once');
  }

  private page(list: MessageView[], a: { limit?: number; cursor?: string }) {
    const start = a.cursor ? Number(a.cursor.replace(/^c/, '')) : 0;
    const limit = a.limit ?? 100;
    const messages = list.slice(start, start + limit).map((m) => structuredClone(m));
    const next = start + limit < list.length ? `c${start + limit}` : null;
    return { messages, next, total: list.length };
  }

  private answer(op: OpName, a: any): unknown {
    switch (op) {
      case 'queue.get':
        this.check(a);
        return this.info();
      case 'clock.now':
        return { now: this.now, mode: this.clockMode };
      case 'subscribe': {
        const id = `sub_${this.subs.size + 1}_${Math.random().toString(36).slice(2, 6)}`;
        this.subs.set(id, { namespace: a.namespace, queue: a.queue });
        return { subscription: id };
      }
      case 'unsubscribe':
        return { ok: this.subs.delete(a.subscription) };
      case 'peek': {
        this.check(a);
        const states: MessageState[] = a.states ?? ['ready', 'delayed', 'leased', 'dead'];
        const q = a.search ? String(a.search).toLowerCase() : null;
        const list = this.messages.filter((m) => states.includes(m.state) && (!q || JSON.stringify(m.body).toLowerCase().includes(q)));
        return this.page(list, a);
      }
      case 'message.get': {
        this.check(a);
        const m = this.messages.find((x) => x.id === a.id);
        if (!m) throw new QuaysideError('not_found', `message ${a.id} not found`);
        return structuredClone(m);
      }
      case 'dead.list':
        this.check(a);
        // The protocol's bounds (docs/protocol.md), so a caller that oversteps fails here as it would there.
        if (a.limit !== undefined && !(Number.isInteger(a.limit) && a.limit >= 1 && a.limit <= 1000)) throw new QuaysideError('invalid_argument', 'limit must be 1–1000');
        return this.page(this.messages.filter((m) => m.state === 'dead'), a);
      case 'push': {
        this.check(a);
        const m = this.pushOne(a);
        this.emitChange('pushed', [m.id]);
        return { id: m.id, deduped: false };
      }
      case 'push.batch': {
        this.check(a);
        const results = a.messages.map((x: any) => ({ id: this.pushOne(x).id, deduped: false }));
        this.emitChange('pushed', results.map((r: any) => r.id));
        return { results };
      }
      case 'dead.replay': {
        this.check(a);
        this.checkIds(a.ids);
        const dead = this.messages.filter((m) => m.state === 'dead');
        const want = a.ids ? new Set<string>(a.ids) : null;
        const chosen = want ? dead.filter((m) => want.has(m.id)) : dead.slice(0, Math.min(a.max ?? 100, this.maxReplayPerCall));
        for (const m of chosen) Object.assign(m, { state: 'ready', attempts: 0, deadAt: null, deadReason: null, visibleAt: this.now });
        if (chosen.length) this.log('replay', chosen.length);
        this.emitChange('replayed', chosen.map((m) => m.id));
        return { replayed: chosen.length };
      }
      case 'dead.purge': {
        this.check(a);
        this.checkIds(a.ids);
        const want = a.ids ? new Set<string>(a.ids) : null;
        const gone = new Set(this.messages.filter((m) => m.state === 'dead' && (!want || want.has(m.id))));
        this.messages = this.messages.filter((m) => !gone.has(m));
        if (gone.size) this.log('purge_dead', gone.size);
        this.emitChange('purged', [...gone].map((m) => m.id));
        return { purged: gone.size };
      }
      case 'purge': {
        this.check(a);
        if (a.confirm !== this.queue) throw new QuaysideError('invalid_argument', 'confirm must equal the queue name');
        const gone = this.messages.filter((m) => m.state !== 'dead');
        this.messages = this.messages.filter((m) => m.state === 'dead');
        this.log('purge', gone.length);
        this.emitChange('purged', gone.map((m) => m.id));
        return { purged: gone.length };
      }
      case 'stats':
        this.check(a);
        return { counts: this.counts(), lagHistory: this.lagHistory, now: this.now };
      case 'audit.list':
        return { entries: this.audit.filter((e) => (!a.queue || e.queue === a.queue)).slice(0, a.limit ?? 100) };
      default:
        throw new QuaysideError('invalid_argument', `fake transport: ${op} not implemented`);
    }
  }

  private pushOne(a: any): MessageView {
    const delayed = (a.delayMs ?? 0) > 0;
    return this.add({
      body: a.body,
      enqueuedAt: this.now,
      visibleAt: this.now + (a.delayMs ?? 0),
      state: delayed ? 'delayed' : 'ready',
      dedupeKey: a.dedupeKey ?? null,
      attributes: a.attributes ?? null,
    });
  }

  private log(action: AuditEntry['action'], count: number) {
    this.audit.unshift({ id: this.audit.length + 1, at: this.now, token: 'extension', tokenId: 'tok_5c1e0a9f2b7d', namespace: this.namespace, queue: this.queue, action, count, detail: null });
  }
}
