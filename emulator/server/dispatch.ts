import { QuaysideError, invalid } from '../errors';
import type { Actor, Engine } from '../engine/engine';
import { PROTOCOL_VERSION, READ_OPS, OP_NAMES, OP_ARGS, PUSH_INPUT_KEYS, LIMITS, unknownKeyProblem, type Access, type OpName, type ResponseFrame, type ServerEvent, type WireError } from '../protocol';
import * as v from '../engine/validate';
import { authorize, resolveToken } from './auth';

/** One client's state: who it is, what it subscribed to, its consumers and its held requests. */
export class Session {
  actor: Actor | null = null;
  access: Access | null = null;
  subscriptions = new Map<string, { namespace?: string; queue?: string }>();
  /** Consumers attached on this connection, with the queue each serves. */
  consumers = new Map<string, { namespace: string; queue: string }>();
  /** Consumers this connection detached: they may still report their batches in hand done. */
  detached = new Set<string>();
  /** Consumers let go because a hello gave a token that may not take their batches (see revoke). */
  revoked = new Set<string>();
  /** Waiting pulls, by request id, with the namespace each waits in. */
  held = new Map<number | string, { abort: AbortController; namespace: string }>();
  /**
   * The leases the last held pulls handed out, by request id: a `cancel` that arrives just after
   * its pull was answered (the two crossed on the wire, and the client will not read the answer)
   * gives them back. A few dozen are kept; a cancel comes right behind its pull or not at all.
   */
  answeredPulls = new Map<number | string, string[]>();
  inFlight = 0;
  /** The session is ending (its connection closed, or the emulator stopping): see endSession. */
  ending = false;
  private seq = 0;
  constructor(readonly emit: (e: ServerEvent) => void, readonly clientName = 'client') {}
  nextSubscription(): string {
    return `s_${++this.seq}`;
  }
  /** May the connection's token take work from `namespace` (lease it, be given batches)? */
  mayTake(namespace: string): boolean {
    return this.access === 'readwrite' && (this.actor?.namespace == null || this.actor.namespace === namespace);
  }
}

/** Lets a consumer go that the connection's token may no longer serve; it is told once. */
function revoke(engine: Engine, s: Session, consumer: string, q: { namespace: string; queue: string }): void {
  s.consumers.delete(consumer);
  // Bounded, as `detached`: a batch the emulator started before the detach was taken still finds it here.
  if (s.revoked.size >= 256) s.revoked.delete(s.revoked.values().next().value!);
  s.revoked.add(consumer);
  void engine.detachConsumer({ consumer }, false).catch(() => {});
  s.emit({ event: 'consumer_dropped', consumer, namespace: q.namespace, queue: q.queue, reason: 'token_changed' });
}

type Handler = (engine: Engine, s: Session, args: Record<string, unknown>, id: number | string) => Promise<unknown>;

const ANSWERED_PULLS_KEPT = 64;

/**
 * An answer that could not be sent (its connection was closing): the leases a pull's answer
 * carries are given back, since nobody will read them. Other answers need nothing.
 */
export function answerNotSent(engine: Engine, frame: ResponseFrame): void {
  if (!frame.ok) return;
  const messages = (frame.result as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) return;
  const receipts = messages.map((m) => (m as { receipt?: unknown }).receipt).filter((r): r is string => typeof r === 'string');
  if (receipts.length > 0) void engine.unclaim(receipts).catch(() => undefined);
}

const opt = (v: unknown) => (v === undefined || v === null ? undefined : v);

/** An id the server handed out (subscription, consumer): a string, or the request is invalid. */
function idArg(v: unknown, name: string): string {
  if (typeof v !== 'string' || v === '') throw invalid(`${name} must be a non-empty string`);
  return v;
}

/** Every operation of the protocol, mapped onto the engine. No product naming lives here. */
const HANDLERS: Record<Exclude<OpName, 'hello'>, Handler> = {
  'queue.create': (e, s, a) => e.createQueue(a as never, s.actor!),
  'queue.configure': (e, s, a) => e.configureQueue(a as never, s.actor!),
  'queue.delete': (e, s, a) => e.deleteQueue(a as never, s.actor!),
  'queue.get': (e, s, a) => e.getQueue(a as never, s.actor!),
  'queue.list': (e, s, a) => e.listQueues(a, s.actor!),
  'namespace.list': (e, s) => e.listNamespaces(s.actor!),
  'namespace.configure': (e, s, a) => e.configureNamespace(a as never, s.actor!),
  push: (e, s, a) => e.push(a as never, s.actor!),
  'push.batch': (e, s, a) => e.pushBatch(a as never, s.actor!),
  pull: async (e, s, a, id) => {
    const wait = typeof a.waitMs === 'number' && a.waitMs > 0;
    if (!wait) return e.pull(a as never, s.actor!);
    // The id is how its answer and a cancel find it: a second held pull under the same id would
    // overwrite the first's entry, escape the limit below and outlive the connection.
    if (s.held.has(id)) throw invalid(`request id ${JSON.stringify(id)} is already a waiting pull on this connection; give each request its own id`);
    if (s.held.size >= LIMITS.maxWaitingPullsPerConnection) throw new QuaysideError('limit_exceeded', `at most ${LIMITS.maxWaitingPullsPerConnection} waiting pulls per connection`);
    const ac = new AbortController();
    // Not String(): a namespace that is no string (a bad request the engine refuses next) may not convert.
    const held = { abort: ac, namespace: typeof a.namespace === 'string' ? a.namespace : '' };
    s.held.set(id, held);
    // A cancel under this id now means this pull: an earlier one answered under it is in its client's hands.
    s.answeredPulls.delete(id);
    try {
      const r = await e.pull(a as never, s.actor!, ac.signal);
      // Ended early by a stop, not by its wait running out: "nothing came" would be a lie the
      // client cannot tell from a timeout, so it hears what a lost connection says.
      if (s.ending && r.messages.length === 0) throw new QuaysideError('unavailable', 'the emulator is stopping; the wait ended before its time');
      if (r.messages.length > 0) {
        s.answeredPulls.set(id, r.messages.map((m) => m.receipt));
        if (s.answeredPulls.size > ANSWERED_PULLS_KEPT) s.answeredPulls.delete(s.answeredPulls.keys().next().value!);
      }
      return r;
    } finally {
      // A cancel took it out already; a later pull may reuse the id.
      if (s.held.get(id) === held) s.held.delete(id);
    }
  },
  ack: (e, s, a) => e.ack(a as never, s.actor!),
  'ack.batch': (e, s, a) => e.ackBatch(a as never, s.actor!),
  nack: (e, s, a) => e.nack(a as never, s.actor!),
  extend: (e, s, a) => e.extend(a as never, s.actor!),
  peek: (e, s, a) => e.peek(a as never, s.actor!),
  'message.get': (e, s, a) => e.getMessage(a as never, s.actor!),
  'dead.list': (e, s, a) => e.deadList(a as never, s.actor!),
  'dead.replay': (e, s, a) => e.replay(a as never, s.actor!),
  'dead.purge': (e, s, a) => e.purgeDead(a as never, s.actor!),
  purge: (e, s, a) => e.purge(a as never, s.actor!),
  stats: (e, s, a) => e.stats(a as never, s.actor!),
  'audit.list': (e, s, a) => e.auditList(a, s.actor!),
  subscribe: async (_e, s, a) => {
    const namespace = opt(a.namespace);
    const queue = opt(a.queue);
    // The same rules as names everywhere else, so a subscription can only name what could exist.
    if (namespace !== undefined) v.name(namespace, 'namespace');
    if (queue !== undefined) v.name(queue, 'queue');
    if (queue !== undefined && namespace === undefined) throw invalid('a queue subscription needs its namespace');
    const scope = s.actor!.namespace;
    if (scope !== null && namespace !== undefined && namespace !== scope) throw new QuaysideError('forbidden', `this token is for namespace "${scope}"`);
    if (s.subscriptions.size >= 256) throw new QuaysideError('limit_exceeded', 'at most 256 subscriptions per connection');
    const id = s.nextSubscription();
    s.subscriptions.set(id, { namespace: (namespace as string | undefined) ?? scope ?? undefined, queue: queue as string | undefined });
    return { subscription: id };
  },
  unsubscribe: async (_e, s, a) => ({ ok: s.subscriptions.delete(idArg(a.subscription, 'subscription')) }),
  'consumer.set': (e, s, a) => e.setConsumer(a as never, s.actor!),
  'consumer.attach': async (e, s, a) => {
    const dropped = new Set<string>();
    const r = await e.attachConsumer(
      a as never,
      (batch, messages) => {
        // A batch started before its consumer's detach was taken: it goes back, unread, not to a token that may not take it.
        if (s.revoked.has(r.consumer)) {
          void e.unclaim(messages.map((m) => m.receipt)).catch(() => {});
          return;
        }
        const q = messages[0];
        s.emit({ event: 'deliver', consumer: r.consumer, batch, namespace: q?.namespace ?? String(a.namespace), queue: q?.queue ?? String(a.queue), messages });
      },
      s.actor!,
      (consumer) => {
        // The queue was deleted: so was this consumer, and the connection should hear it. (The
        // attach may not be answered yet: a delete in the same commit tells it first.)
        dropped.add(consumer);
        s.consumers.delete(consumer);
        s.emit({ event: 'consumer_dropped', consumer, namespace: String(a.namespace), queue: String(a.queue), reason: 'queue_deleted' });
      },
    );
    // Not if its queue was deleted in the same commit (it was told already, above).
    const q = { namespace: String(a.namespace), queue: String(a.queue) };
    if (!dropped.has(r.consumer)) {
      // A hello may have changed the token while this attach was in the engine.
      if (s.mayTake(q.namespace)) s.consumers.set(r.consumer, q);
      else revoke(e, s, r.consumer, q);
    }
    return r;
  },
  'consumer.done': async (e, s, a) => {
    const c = idArg(a.consumer, 'consumer');
    if (!s.consumers.has(c) && !s.detached.has(c)) return { ok: false };
    return e.consumerDone(a as never);
  },
  'consumer.detach': async (e, s, a) => {
    const c = idArg(a.consumer, 'consumer');
    if (!s.consumers.delete(c)) return { ok: false };
    // Bounded: a connection that attaches and detaches for ever keeps only its recent ones.
    if (s.detached.size >= 256) s.detached.delete(s.detached.values().next().value!);
    s.detached.add(c);
    return e.detachConsumer(a as never);
  },
  'clock.now': async (e) => ({ now: e.now(), mode: e.clock.mode }),
  'clock.advance': async (e, s, a) => {
    // One clock for every namespace: moving it expires leases and ages messages everywhere.
    if (s.actor!.namespace !== null) throw new QuaysideError('forbidden', `the clock is shared by every namespace; this token is for namespace "${s.actor!.namespace}" only`);
    return { now: await e.advance(a.ms) };
  },
  cancel: async (e, s, a) => {
    if (!isFrameId(a.request)) throw invalid(`request must be the id of a held request (a safe integer or a string of 1 to 64 characters), got ${v.describe(a.request)}`);
    const held = s.held.get(a.request);
    if (!held) {
      // Answered already, the answer crossing this cancel: its leases go back, unread.
      const receipts = s.answeredPulls.get(a.request);
      if (!receipts) return { ok: false };
      s.answeredPulls.delete(a.request);
      await e.unclaim(receipts);
      return { ok: true };
    }
    // Its place is free now, not a few turns later when the pull unwinds: the client sends the next
    // waiting pull the moment its cancel goes, and that one must not find the limit still reached.
    s.held.delete(a.request);
    held.abort.abort();
    return { ok: true };
  },
  'token.create': async (e, s, a) => {
    const ns = opt(a.namespace) ?? null;
    // The default name is a label made from what was given: cut to the name limit, not refused for it.
    // (Only from strings: what is not one, the engine refuses next, and it may not convert.)
    const name = opt(a.name) ?? `${typeof a.access === 'string' ? a.access : ''}${typeof ns === 'string' ? ':' + ns : ''}`.slice(0, 200);
    return { token: await e.createToken(a.access, ns, name, s.actor!) };
  },
};

const KNOWN = new Set<string>(OP_NAMES);

function wireError(e: unknown): WireError {
  if (e instanceof QuaysideError) return e.toWire();
  return { code: 'internal', message: `internal error: ${(e as Error)?.message ?? String(e)}` };
}

/** What a frame's id may be; `cancel` names a request by it, so it takes the same. */
function isFrameId(id: unknown): id is number | string {
  return (typeof id === 'number' && Number.isSafeInteger(id)) || (typeof id === 'string' && id.length > 0 && id.length <= 64);
}

/** Checks one decoded frame and runs it. Never throws: every failure is an error frame. */
export async function dispatch(engine: Engine, s: Session, frame: unknown): Promise<ResponseFrame> {
  if (typeof frame !== 'object' || frame === null || Array.isArray(frame)) {
    return { id: null, ok: false, error: { code: 'invalid_argument', message: 'a frame must be a JSON object { id, op, args }' } };
  }
  const f = frame as Record<string, unknown>;
  const id = f.id;
  if (!isFrameId(id)) {
    return { id: null, ok: false, error: { code: 'invalid_argument', message: 'id must be a safe integer or a string of 1 to 64 characters' } };
  }
  try {
    if (typeof f.op !== 'string') throw invalid('op must be a string');
    const op = f.op;
    if (!KNOWN.has(op)) throw invalid(`unknown operation "${op.slice(0, 60)}"`);
    const args = f.args === undefined || f.args === null ? {} : f.args;
    if (typeof args !== 'object' || Array.isArray(args)) throw invalid('args must be an object');
    const a = args as Record<string, unknown>;
    checkArgKeys(op as OpName, a);
    if (op === 'hello') return { id, ok: true, result: hello(engine, s, a) };
    if (!s.actor || !s.access) throw new QuaysideError('unauthorized', 'send hello with a token first');
    authorize(s.access, op as OpName, READ_OPS);
    const result = await HANDLERS[op as Exclude<OpName, 'hello'>](engine, s, a, id);
    return { id, ok: true, result };
  } catch (e) {
    return { id, ok: false, error: wireError(e) };
  }
}

// Sets, for a look-up per key on every request (the lists stay the source, and name the keys in errors).
const ALLOWED = new Map<string, ReadonlySet<string>>(Object.entries(OP_ARGS).map(([op, keys]) => [op, new Set<string>(keys)]));

/** Refuses an argument the operation does not take, so a misspelt one cannot act as absent. */
function checkArgKeys(op: OpName, a: Record<string, unknown>): void {
  const allowed = ALLOWED.get(op)!;
  for (const k in a) if (!allowed.has(k) && a[k] !== undefined) throw invalid(`${op}: ${unknownKeyProblem(a, OP_ARGS[op])}`);
  if (op === 'push.batch' && Array.isArray(a.messages)) {
    a.messages.forEach((m, i) => {
      const p = m !== null && typeof m === 'object' && !Array.isArray(m) ? unknownKeyProblem(m as Record<string, unknown>, PUSH_INPUT_KEYS) : null;
      if (p) throw invalid(`${op}: messages[${i}]: ${p}`);
    });
  }
}

/**
 * Who the connection is. A hello sent again replaces that, and narrows the subscriptions to what
 * the new token may see; a refused one changes nothing, as any refused request.
 */
function hello(engine: Engine, s: Session, a: Record<string, unknown>) {
  if (a.version !== PROTOCOL_VERSION) throw invalid(typeof a.version === 'number' ? `unsupported protocol version ${a.version}; this emulator speaks ${PROTOCOL_VERSION}` : `version must be the protocol version, the number ${PROTOCOL_VERSION}; got ${v.describe(a.version)}`);
  const who = resolveToken(engine, a.token);
  s.actor = { name: who.name, tokenId: who.tokenId, namespace: who.namespace };
  s.access = who.access;
  if (who.namespace !== null) {
    for (const [id, sub] of s.subscriptions) {
      if (sub.namespace === undefined) sub.namespace = who.namespace;
      else if (sub.namespace !== who.namespace) s.subscriptions.delete(id);
    }
  }
  // What the connection holds that the new token could not ask for ends now: its waiting pulls
  // answer empty, and its consumers are let go, so no batch reaches a token that may not take it.
  for (const [id, h] of s.held) {
    if (s.mayTake(h.namespace)) continue;
    s.held.delete(id);
    h.abort.abort();
  }
  for (const [consumer, q] of s.consumers) if (!s.mayTake(q.namespace)) revoke(engine, s, consumer, q);
  return { version: PROTOCOL_VERSION, server: 'quayside', clock: engine.clock.mode, now: engine.now(), access: who.access, namespace: who.namespace };
}

/** Releases what a session held when its connection ends. */
export function endSession(engine: Engine, s: Session): void {
  s.ending = true;
  for (const h of s.held.values()) h.abort.abort();
  s.held.clear();
  // The connection is gone, and what it had in hand with it: its slots are free at once.
  for (const c of s.consumers.keys()) void engine.detachConsumer({ consumer: c }, false).catch(() => {});
  for (const c of s.detached) void engine.detachConsumer({ consumer: c }, false).catch(() => {});
  s.consumers.clear();
  s.detached.clear();
  s.revoked.clear();
  s.subscriptions.clear();
}

/** Does a change in (namespace, queue) match a subscription? */
export function matches(sub: { namespace?: string; queue?: string }, namespace: string, queue: string): boolean {
  return (sub.namespace === undefined || sub.namespace === namespace) && (sub.queue === undefined || sub.queue === queue);
}
