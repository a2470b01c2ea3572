// Fakes for the extension's unit tests: a tiny scripted Transport (queue.list, peek, subscribe,
// events) and an emulator instance the test drives by hand.
import type { Endpoint, ExitInfo, Instance, LaunchContext } from '../../../src/core/lifecycle';
import type { ChangeEvent, MessageView, OpArgs, OpName, OpResult, QueueCounts, QueueInfo, ServerEvent } from '../../../emulator/protocol';
import type { Transport } from '../../../emulator/clients/transport';

export function counts(c: Partial<QueueCounts> = {}): QueueCounts {
  const base = { ready: 0, delayed: 0, leased: 0, dead: 0, bytes: 0, oldestReadyAgeMs: 0, ...c };
  return { ...base, depth: base.ready + base.delayed };
}

export function queue(namespace: string, name: string, c: Partial<QueueCounts> = {}, dialect: QueueInfo['dialect'] = 'cache'): QueueInfo {
  return { id: `${namespace}-${name}`, namespace, name, dialect, policy: {} as QueueInfo['policy'], consumer: null, createdAt: 0, counts: counts(c) };
}

export function message(id: string, state: MessageView['state'], body: unknown = { n: id }, extra: Partial<MessageView> = {}): MessageView {
  return {
    id, namespace: 'ns', queue: 'q', state, body, attempts: 0, enqueuedAt: 0, visibleAt: 0, leaseUntil: null, dedupeKey: null,
    attributes: null, contentType: null, orderingKey: null, meta: null, sizeBytes: 10, deadAt: null, deadReason: null, lastError: null, ...extra,
  };
}

export class ScriptedTransport implements Transport {
  queues: QueueInfo[] = [];
  messages = new Map<string, MessageView[]>(); // "ns/q" -> messages
  calls: { op: OpName; args: unknown }[] = [];
  private listeners = new Set<(e: ServerEvent) => void>();
  private reconnects = new Set<() => void>();

  async request<K extends OpName>(op: K, args: OpArgs<K>): Promise<OpResult<K>> {
    this.calls.push({ op, args });
    const a = args as Record<string, unknown>;
    switch (op) {
      case 'queue.list':
        return { queues: this.queues.map((q) => ({ ...q, counts: { ...q.counts } })) } as OpResult<K>;
      case 'subscribe':
        return { subscription: 'sub1' } as OpResult<K>;
      case 'peek': {
        const all = (this.messages.get(`${a.namespace}/${a.queue}`) ?? []).filter((m) => (a.states as string[]).includes(m.state));
        const start = a.cursor ? all.findIndex((m) => m.id === a.cursor) + 1 : 0;
        const limit = (a.limit as number) ?? 50;
        const page = all.slice(start, start + limit);
        const next = start + limit < all.length ? page[page.length - 1].id : null;
        return { messages: page, next, total: all.length } as OpResult<K>;
      }
      default:
        throw Object.assign(new Error(`unscripted op ${op}`), { code: 'internal' });
    }
  }
  onEvent(l: (e: ServerEvent) => void) {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
  onReconnect(l: () => void) {
    this.reconnects.add(l);
    return () => this.reconnects.delete(l);
  }
  emit(e: ServerEvent) {
    for (const l of this.listeners) l(e);
  }
  reconnect() {
    for (const l of this.reconnects) l();
  }
  async close() {}
}

export function change(namespace: string, q: string, kind: ChangeEvent['kind'], c: Partial<QueueCounts> | null): ChangeEvent {
  return { event: 'change', subscription: 'sub1', namespace, queue: q, kind, ids: [], counts: c ? counts(c) : null, at: 0 };
}

/** An instance the test drives by hand. */
export class FakeInstance implements Instance {
  readonly ready: Promise<Endpoint>;
  readonly exited: Promise<ExitInfo>;
  listen!: (port?: number, endpoint?: Partial<Endpoint>) => void;
  fail!: (e: Error) => void;
  exit!: (code?: number) => void;
  exitWith!: (info: ExitInfo) => void;
  stopped = false;
  constructor(readonly ctx: LaunchContext = { attempt: 0 }) {
    this.ready = new Promise<Endpoint>((res, rej) => {
      this.listen = (port = 7433, endpoint = {}) => res({ url: `ws://127.0.0.1:${port}`, http: `http://127.0.0.1:${port}`, token: 't', host: '127.0.0.1', port, attached: false, ...endpoint });
      this.fail = rej;
    });
    this.ready.catch(() => undefined);
    this.exited = new Promise<ExitInfo>((res) => {
      this.exit = (code = 1) => res({ code, signal: null });
      this.exitWith = res;
    });
  }
  async stop() {
    this.stopped = true;
    this.exit(0);
  }
}
