import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startEmulator, type Emulator } from '../../emulator/emulator';
import { HTTP_STATUS, LIMITS, OP_NAMES } from '../../emulator/protocol';
import { gc } from '../helpers';
import { RawClient, sqliteOf, storeDigest, type Frame } from './support';

// Hostile and broken input: random and malformed frames at the WebSocket protocol and requests at
// the HTTP API. Each must get an error with a stable code (never `internal`), change nothing in the
// store, send no change events, and leave the server and its other connections working.

const CODES = new Set(Object.keys(HTTP_STATUS));
const DEL = Symbol('delete');
type Bad = unknown | typeof DEL;

// Half a surrogate pair cannot be stored as text: it would come back as U+FFFD, two names as one.
const lone: Bad[] = ['b\ud800', 'b\udc00x', '\udfff\ud800'];
const badName: Bad[] = [DEL, null, 0, 1.5, true, [], {}, { toString: 1 }, '', 'x'.repeat(201), 'a\u0000b', 'tab\there', ...lone];
const badInt: Bad[] = [-1, 1.5, 'x', '5', true, {}, [], 1e308, -1e308, 2 ** 53 + 2, { valueOf: 1 }];
// Strings that name no lease are stale, not errors (receipts are opaque); these cannot be receipts.
const badReceipt: Bad[] = [DEL, null, 5, '', {}, [], 'r_' + '9'.repeat(400)];
const badStr: Bad[] = [5, true, {}, [], '', 'x'.repeat(70_000)];

/** Write operations with a valid template and, per field, values that make the request invalid. */
const WRITES: { op: string; args: Record<string, unknown>; breaks: Record<string, Bad[]> }[] = [
  { op: 'push', args: { namespace: 'fz', queue: 'q', body: { a: 1 } }, breaks: {
    namespace: badName, queue: badName, body: [DEL, 'x'.repeat(300 * 1024)], delayMs: badInt, dedupeKey: [...badStr, 'k'.repeat(513), ...lone],
    dedupeTtlMs: [0, ...badInt], attributes: [5, 'x', [], true], contentType: [...badStr, ...lone], orderingKey: [...badStr, ...lone] } },
  { op: 'push.batch', args: { namespace: 'fz', queue: 'q', messages: [{ body: 1 }, { body: 2 }] }, breaks: {
    namespace: badName, queue: badName,
    messages: [DEL, null, 'x', 5, {}, [], [1], [null], [{ body: 1 }, { nobody: 1 }], [{ body: 1 }, { body: 2, delayMs: -1 }], Array.from({ length: 1001 }, () => ({ body: 1 }))] } },
  { op: 'pull', args: { namespace: 'fz', queue: 'q', max: 1 }, breaks: {
    namespace: badName, queue: badName, max: [0, 1001, ...badInt], leaseMs: [0, ...badInt], waitMs: [LIMITS.maxWaitMs + 1, ...badInt], consumerId: [5, {}, [], '', 'x'.repeat(1001)] } },
  { op: 'ack', args: { receipt: 'r_1_1' }, breaks: { receipt: badReceipt } },
  { op: 'ack.batch', args: { receipts: ['r_1_1'] }, breaks: { receipts: [DEL, null, 'x', 5, {}, [5], [''], ['r_1_1', 7], Array.from({ length: 1001 }, () => 'r_1_1')] } },
  { op: 'nack', args: { receipt: 'r_1_1' }, breaks: { receipt: badReceipt, delayMs: badInt, reason: badStr.filter((x) => typeof x !== 'string' || x === ''), error: [5, {}, [], true], dead: ['yes', 1, {}] } },
  { op: 'extend', args: { receipt: 'r_1_1' }, breaks: { receipt: badReceipt, leaseMs: [0, ...badInt] } },
  { op: 'dead.replay', args: { namespace: 'fz', queue: 'q' }, breaks: { namespace: badName, queue: badName, ids: ['x', 5, {}, [5], Array.from({ length: 10001 }, (_, i) => `m_${i + 1}`)], max: [0, 100001, ...badInt] } },
  { op: 'dead.purge', args: { namespace: 'fz', queue: 'q' }, breaks: { namespace: badName, queue: badName, ids: ['x', 5, {}, [5], [null]] } },
  { op: 'purge', args: { namespace: 'fz', queue: 'q', confirm: 'q' }, breaks: { namespace: badName, queue: badName, confirm: [DEL, null, 'Q', 'q ', 5, {}] } },
  { op: 'queue.create', args: { namespace: 'fz', queue: 'fresh', dialect: 'cache' }, breaks: {
    namespace: badName, queue: badName, dialect: [DEL, null, 'kafka', 5, {}],
    policy: [5, 'x', [], { leaseMs: -1 }, { leaseMs: 43_200_001 }, { leaseMs: 'x' }, { leaseMs: { toString: 1 } }, { maxDepth: { toString: 1 } }, { maxDeliveries: 0 }, { bogus: 1 }, { reasons: 5 }, { reasons: { nack: 5 } }, { onMaxAge: 'keep' }],
    ifNotExists: ['yes', 1] } },
  { op: 'queue.configure', args: { namespace: 'fz', queue: 'q', policy: { leaseMs: 1000 } }, breaks: {
    namespace: badName, queue: badName, policy: [DEL, null, 5, 'x', [], { leaseMs: 0 }, { maxBytes: 'big' }, { maxPayloadBytes: 1e308 }, { recordNackReason: 'yes' }] } },
  { op: 'queue.delete', args: { namespace: 'fz', queue: 'q' }, breaks: { namespace: badName, queue: badName } },
  { op: 'namespace.configure', args: { namespace: 'fz', dailyQuota: 10 }, breaks: { namespace: badName, dailyQuota: [DEL, 1e13, ...badInt] } },
  { op: 'token.create', args: { access: 'read' }, breaks: { access: [DEL, null, 'admin', 'READ', 5, {}, { toString: 1 }], namespace: [5, '', 'x'.repeat(201), {}], name: [5, {}, { toString: 1 }, 'x'.repeat(201)] } },
  { op: 'clock.advance', args: { ms: 10 }, breaks: { ms: [DEL, null, -1, 'x', {}, [], 1e308, Number.MAX_VALUE, 9e15] } },
  { op: 'consumer.set', args: { namespace: 'fz', queue: 'envq', consumer: { appId: 'a' } }, breaks: {
    namespace: badName, queue: badName, consumer: [5, 'x', [], { appId: 5 }, { appId: '' }, { appId: 'a', maxBatchSize: 0 }, { appId: 'a', maxBatchSize: { toString: 1 } }, { appId: 'a', bogus: 1 }, { appId: 'a', constructor: 5 }, { appId: 'a', toString: 1 }, { appId: 'a', hasOwnProperty: 1 }] } },
  { op: 'unsubscribe', args: { subscription: 's_1' }, breaks: { subscription: [DEL, 5, {}, { toString: 1 }, [], ''] } },
  { op: 'consumer.done', args: { consumer: 'c_1', batch: 'b' }, breaks: { consumer: [DEL, 5, {}, { toString: 1 }] } },
  { op: 'subscribe', args: {}, breaks: { namespace: [5, {}, [], '', 'a\u0000b', 'x'.repeat(201)], queue: ['q', 5] } },
  { op: 'cancel', args: { request: 1 }, breaks: { request: [DEL, null, {}, [], true, 1.5, '', 'x'.repeat(65), 2 ** 53] } },
];

const brokenWrite = fc
  .constantFrom(...WRITES)
  .chain((w) =>
    fc.record({
      w: fc.constant(w),
      picks: fc.uniqueArray(fc.constantFrom(...Object.keys(w.breaks)), { minLength: 1, maxLength: 2 }).chain((fields) =>
        fc.tuple(...fields.map((f) => fc.tuple(fc.constant(f), fc.constantFrom(...w.breaks[f])))),
      ),
    }),
  )
  .map(({ w, picks }) => {
    const args: Record<string, unknown> = JSON.parse(JSON.stringify(w.args));
    for (const [field, value] of picks) {
      if (value === DEL) delete args[field];
      else args[field] = value;
    }
    return { op: w.op, args, picks: picks.map(([f]) => f) };
  });

/** Frames that are broken before any operation could run. */
const brokenFrame: fc.Arbitrary<{ text: string; binary?: boolean; expectId: unknown }> = fc.oneof(
  fc.string({ maxLength: 200 }).filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  }).map((text) => ({ text, expectId: null })),
  fc.constantFrom('NaN', 'Infinity', '{"id":1,"op":"push","args":{"body":NaN}}', '{id:1,op:"stats"}', '{"id":1,', '\u0000', '[', '"', '{"id":1}{"id":2}', '\ufeff{}')
    .map((text) => ({ text, expectId: null })),
  fc.jsonValue({ maxDepth: 3 }).filter((v) => typeof v !== 'object' || v === null || Array.isArray(v)).map((v) => ({ text: JSON.stringify(v), expectId: null })),
  fc.record({ id: fc.oneof(fc.double(), fc.boolean(), fc.constant(null), fc.constant(''), fc.string({ minLength: 65, maxLength: 80 }), fc.constant(2 ** 53 + 2), fc.constant({}), fc.constant([1])), op: fc.constantFrom(...OP_NAMES) })
    .filter((f) => !(typeof f.id === 'number' && Number.isSafeInteger(f.id)))
    .map((f) => ({ text: JSON.stringify(f), expectId: null })),
  fc.record({ id: fc.integer({ min: 1, max: 1e9 }), op: fc.oneof(fc.string({ maxLength: 80 }).filter((s) => !(OP_NAMES as readonly string[]).includes(s)), fc.integer(), fc.constant(null), fc.constant(['push'])) })
    .map((f) => ({ text: JSON.stringify(f), expectId: f.id })),
  fc.record({ id: fc.string({ minLength: 1, maxLength: 64 }), op: fc.constantFrom(...OP_NAMES.filter((o) => o !== 'hello')), args: fc.oneof(fc.array(fc.integer()), fc.integer(), fc.string(), fc.boolean()) })
    .map((f) => ({ text: JSON.stringify(f), expectId: f.id })),
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => ({ text: Buffer.from(b).toString('latin1'), binary: true, expectId: null })),
);

/** Any JSON-ish args, with the usual field names filled in from a pool (valid and not). */
const anyArgs = fc.dictionary(
  fc.oneof(fc.constantFrom('namespace', 'queue', 'id', 'ids', 'receipt', 'receipts', 'max', 'limit', 'cursor', 'states', 'search', 'subscription', 'request', 'ms', 'body', 'policy', 'consumer', 'dialect', 'access', 'version', 'token'), fc.string({ maxLength: 10 })),
  fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom('fz', 'q', 'envq', 'm_1', 'r_1_1', 'd_1_1', 1e308, -0, 2 ** 53 + 1, ['ready'], ['dead', 'x'], { toString: 1 }, '%', "'; DROP TABLE messages; --")),
  { maxKeys: 6 },
);

describe('reliability: hostile and broken input', function () {
  this.timeout(120_000);
  let emu: Emulator;
  let admin: RawClient;
  let reader: RawClient;
  let watcher: RawClient;
  let envQ: string;
  const digest = () => storeDigest(sqliteOf(emu));

  before(async () => {
    emu = await startEmulator({ port: 0, memory: true, clock: 'virtual' });
    admin = await RawClient.hello(emu.url, emu.token);
    await admin.ok('queue.create', { namespace: 'fz', queue: 'q', dialect: 'cache' });
    await admin.ok('queue.create', { namespace: 'fz', queue: 'envq', dialect: 'env' });
    for (let i = 0; i < 5; i++) await admin.ok('push', { namespace: 'fz', queue: 'q', body: { i } });
    const { messages } = await admin.ok('pull', { namespace: 'fz', queue: 'q', max: 2 });
    await admin.ok('nack', { receipt: messages[0].receipt, dead: true });
    const ro = (await admin.ok('token.create', { access: 'read' })).token;
    reader = await RawClient.hello(emu.url, ro);
    watcher = await RawClient.hello(emu.url, emu.token);
    await watcher.ok('subscribe', {});
    const res = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: JSON.stringify({ project: 'p', environment: 'e', slug: 'web' }) });
    assert.equal(res.status, 201);
    envQ = ((await res.json()) as { id: string }).id;
    watcher.frames.length = 0;
  });
  after(async () => {
    await Promise.all([admin, reader, watcher].map((c) => c?.close()));
    await emu?.close();
  });

  /** The other connection still works, and it saw no change event. */
  async function othersFine(): Promise<void> {
    const s = await watcher.ok('stats', { namespace: 'fz', queue: 'q' });
    assert.equal(s.counts.depth + s.counts.leased + s.counts.dead, 5);
    const events = watcher.frames.filter((f) => f.event === 'change' && f.namespace === 'fz');
    assert.deepEqual(events, [], 'a change event went out for a request that should have changed nothing');
  }

  function assertCoded(r: Frame, what: string): void {
    assert.equal(r.ok, false, `${what} was accepted: ${JSON.stringify(r.result)?.slice(0, 200)}`);
    assert.ok(r.error && CODES.has(r.error.code), `${what}: no stable code: ${JSON.stringify(r.error)}`);
    assert.notEqual(r.error!.code, 'internal', `${what}: ${r.error!.message}`);
    assert.ok(typeof r.error!.message === 'string' && r.error!.message.length > 0);
  }

  it('a write with a wrong, missing or out-of-range field gets a coded error and changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(brokenWrite, { minLength: 1, maxLength: 8 }), async (batch) => {
        const before = digest();
        // Sent together, so they share group commits with each other.
        const answers = await Promise.all(batch.map((b) => admin.request(b.op, b.args)));
        answers.forEach((r, i) => {
          assertCoded(r, `${batch[i].op} with broken ${batch[i].picks.join(', ')}`);
          assert.ok(['invalid_argument', 'payload_too_large', 'not_found'].includes(r.error!.code), `${batch[i].op}: ${r.error!.code} ${r.error!.message}`);
        });
        assert.equal(digest(), before);
      }),
      { numRuns: 300 },
    );
    await othersFine();
  });

  it('a waiting pull, or a token.create, with a value that cannot be made a string is invalid_argument, not internal (found by the property above)', async () => {
    const before = digest();
    for (const bad of [{ toString: 1 }, Object.create(null), { toString: () => { throw new Error('no'); } }]) {
      for (const [op, args] of [['pull', { namespace: bad, queue: 'q', waitMs: 1000 }], ['token.create', { access: bad }], ['token.create', { access: bad, namespace: 'fz' }]] as const) {
        const r = await admin.request(op, args);
        assertCoded(r, `${op} ${JSON.stringify(args)}`);
        assert.equal(r.error!.code, 'invalid_argument');
      }
    }
    assert.equal(digest(), before);
  });

  it('a push that creates its queue and then fails leaves nothing behind, not even the policy of the queue it would have made', async () => {
    const c = await RawClient.hello(emu.url, emu.token);
    try {
      const r = await c.request('push', { namespace: 'fz-policy', queue: 'a', create: 'sync' });
      assert.equal(r.error?.code, 'invalid_argument');
      const made = await c.ok('queue.create', { namespace: 'fz-policy', queue: 'b', dialect: 'cache', policy: { maxDeliveries: 2 } });
      assert.equal(made.dialect, 'cache');
      assert.equal(made.policy.maxDeliveries, 2);
      assert.equal(made.policy.maxMessageAgeMs, null, 'the cache preset, not the sync one of the failed push');
      const listed = (await c.ok('queue.list', { namespace: 'fz-policy' })).queues;
      assert.deepEqual(listed.map((q: { name: string; policy: { maxDeliveries: number } }) => [q.name, q.policy.maxDeliveries]), [['b', 2]]);
    } finally {
      await c.close();
    }
  });

  it('a quota reached at the last instant a date can hold is still quota_exceeded', async () => {
    const end = await startEmulator({ memory: true, clock: 'virtual' });
    const c = await RawClient.hello(end.url, end.token);
    try {
      await c.ok('namespace.configure', { namespace: 'q-end', dailyQuota: 0 });
      await c.ok('clock.advance', { ms: 8.64e15 - end.clock!.now() });
      const r = await c.request('push', { namespace: 'q-end', queue: 'q', body: 1, create: 'cache' });
      assert.equal(r.error?.code, 'quota_exceeded', JSON.stringify(r.error));
    } finally {
      await c.close();
      await end.close();
    }
  });

  it('malformed frames (not JSON, not objects, bad ids, unknown ops, bad args, binary) get coded errors', async () => {
    const before = digest();
    await fc.assert(
      fc.asyncProperty(brokenFrame, async (f) => {
        admin.sendRaw(f.binary ? Buffer.from(f.text, 'latin1') : f.text, f.binary);
        const r = await admin.waitFor((x) => x.event === undefined && (x.id === f.expectId || (f.expectId === null && x.id === null)));
        assertCoded(r, `frame ${f.text.slice(0, 80)}`);
        assert.equal(r.error!.code, 'invalid_argument');
      }),
      { numRuns: 400 },
    );
    assert.equal(digest(), before);
    await othersFine();
  });

  it('any args to any operation from a read-only token: an answer or a coded error, never internal, nothing changed', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...OP_NAMES.filter((o) => o !== 'hello')), anyArgs, async (op, args) => {
        const before = digest();
        const r = await reader.request(op, args);
        if (!r.ok) assertCoded(r, `${op} ${JSON.stringify(args).slice(0, 120)}`);
        assert.equal(digest(), before);
      }),
      { numRuns: 600 },
    );
    await othersFine();
  });

  it('deep nesting, huge numbers and NaN-like values in bodies are refused or stored exactly, never crash', async () => {
    const before = digest();
    for (const depth of [5_000, 100_000, 1_000_000]) {
      admin.sendRaw(`{"id":"deep${depth}","op":"push","args":{"namespace":"fz","queue":"q","body":${'['.repeat(depth)}${']'.repeat(depth)}}}`);
      const r = await admin.waitFor((f) => f.id === `deep${depth}`, 30_000);
      assertCoded(r, `a body nested ${depth} deep`);
    }
    admin.sendRaw(`{"id":"deepargs","op":"queue.create","args":{"namespace":"fz","queue":"x","dialect":"cache","policy":{"leaseMs":${'['.repeat(50_000)}${']'.repeat(50_000)}}}}`);
    assertCoded(await admin.waitFor((f) => f.id === 'deepargs', 30_000), 'nested policy');
    assert.equal(digest(), before);
    // Huge but valid numbers are just JSON; they round-trip exactly through a scratch queue.
    await admin.ok('queue.create', { namespace: 'fz-scratch', queue: 'nums', dialect: 'cache' });
    const body = { big: 1e308, small: -1e308, unsafe: 2 ** 53 + 1, tiny: 5e-324, neg0: -0 };
    await admin.ok('push', { namespace: 'fz-scratch', queue: 'nums', body });
    const got = await admin.ok('peek', { namespace: 'fz-scratch', queue: 'nums' });
    assert.deepEqual(got.messages[0].body, JSON.parse(JSON.stringify(body)));
    await admin.ok('queue.delete', { namespace: 'fz-scratch', queue: 'nums' });
    // A virtual clock cannot be pushed to where times stop being exact.
    assertCoded(await admin.request('clock.advance', { ms: 1e308 }), 'clock.advance 1e308');
    const s = await admin.request('stats', { namespace: 'fz', queue: 'q' }, 5000);
    assert.equal(s.ok, true);
  });

  it('frames over the size limit are refused with payload_too_large; far over it, the socket closes (1009) and the rest carry on', async () => {
    const before = digest();
    const c = await RawClient.hello(emu.url, emu.token);
    c.sendRaw(JSON.stringify({ id: 1, op: 'push', args: { namespace: 'fz', queue: 'q', body: 'x'.repeat(LIMITS.maxFrameBytes) } }));
    const r = await c.waitFor((f) => f.id === null || f.id === 1, 20_000);
    assertCoded(r, 'an oversized frame');
    assert.equal(r.error!.code, 'payload_too_large');
    assert.equal(r.id, 1, 'the request is answered under its own id, read from the head of the frame');
    // An id that does not open the frame cannot be found without parsing it: the answer has id null.
    c.sendRaw(JSON.stringify({ op: 'push', id: 2, args: { namespace: 'fz', queue: 'q', body: 'x'.repeat(LIMITS.maxFrameBytes) } }));
    assert.equal((await c.waitFor((f) => f.id === null || f.id === 2, 20_000)).id, null);
    assert.equal((await c.request('clock.now', {})).ok, true, 'the connection still works after an oversized frame');
    c.sendRaw('x'.repeat(LIMITS.maxFrameBytes * 2 + 1));
    await new Promise<void>((resolve) => (c.closed ? resolve() : c.ws.once('close', () => resolve())));
    assert.equal(c.closed!.code, 1009);
    assert.equal(digest(), before);
    await othersFine();
  });

  it('a flood of requests on one connection: each gets exactly one answer (ok or limit_exceeded), within the in-flight limit', async () => {
    const c = await RawClient.hello(emu.url, emu.token);
    const n = 4 * LIMITS.maxInFlightPerConnection;
    const sock = (c.ws as unknown as { _socket: import('node:net').Socket })._socket;
    sock.cork(); // one write, so the server reads them in few chunks and they are all in flight at once
    for (let i = 1; i <= n; i++) c.sendRaw(`{"id":${i},"op":"stats","args":{"namespace":"fz","queue":"q"}}`);
    sock.uncork();
    const answers = new Map<number, Frame>();
    while (answers.size < n) {
      const f = await c.waitFor((x) => typeof x.id === 'number', 20_000);
      assert.ok(!answers.has(f.id as number), `request ${f.id} was answered twice`);
      answers.set(f.id as number, f);
    }
    const refused = [...answers.values()].filter((f) => !f.ok);
    for (const f of refused) assert.equal(f.error!.code, 'limit_exceeded');
    assert.ok(refused.length > 0, 'the flood never reached the in-flight limit');
    assert.ok(refused.length < n - LIMITS.maxInFlightPerConnection / 2);
    assert.equal((await c.request('stats', { namespace: 'fz', queue: 'q' })).ok, true);
    await c.close();
    await othersFine();
  });

  it('waiting pulls per connection are capped with limit_exceeded; cancelled ones answer at once', async () => {
    await admin.ok('queue.create', { namespace: 'fz-lp', queue: 'empty', dialect: 'cache' });
    const c = await RawClient.hello(emu.url, emu.token);
    const ids: number[] = [];
    const held = Array.from({ length: LIMITS.maxWaitingPullsPerConnection }, () => c.request('pull', { namespace: 'fz-lp', queue: 'empty', waitMs: LIMITS.maxWaitMs }, 60_000));
    // Each waiting pull is held, not answered: the one over the cap is answered at once.
    const over = await c.request('pull', { namespace: 'fz-lp', queue: 'empty', waitMs: 1000 });
    assertCoded(over, 'one waiting pull too many');
    assert.equal(over.error!.code, 'limit_exceeded');
    for (let i = 1; i <= LIMITS.maxWaitingPullsPerConnection + 1; i++) ids.push(i + 1); // hello was 1
    const cancels = await Promise.all(ids.slice(0, LIMITS.maxWaitingPullsPerConnection).map((id) => c.request('cancel', { request: id })));
    assert.ok(cancels.every((x) => x.ok && x.result.ok === true));
    const done = await Promise.all(held);
    assert.ok(done.every((x) => x.ok && x.result.messages.length === 0));
    const again = await c.request('pull', { namespace: 'fz-lp', queue: 'empty', waitMs: 0 });
    assert.equal(again.ok, true);
    await c.close();
    await admin.ok('queue.delete', { namespace: 'fz-lp', queue: 'empty' });
  });

  it(`connections are capped at ${LIMITS.maxConnections} (503 on upgrade); a freed slot is usable again`, async () => {
    const extra: RawClient[] = [];
    let refused: { status?: number } | null = null;
    try {
      for (let i = 0; i < LIMITS.maxConnections + 5 && !refused; i++) {
        try {
          extra.push(await RawClient.open(emu.url));
        } catch (e) {
          refused = e as { status?: number };
        }
      }
      assert.ok(refused, 'no connection was ever refused');
      assert.equal(refused.status, 503);
      assert.equal(extra.length + 3, LIMITS.maxConnections); // admin, reader and watcher hold three
      assert.equal((await watcher.request('clock.now', {})).ok, true);
      await extra.pop()!.close();
      await new Promise((r) => setImmediate(r));
      let back: RawClient | null = null;
      for (let i = 0; i < 50 && !back; i++) back = await RawClient.open(emu.url).catch(() => null);
      assert.ok(back, 'a freed slot was not usable again');
      extra.push(back);
    } finally {
      await Promise.all(extra.map((c) => c.close()));
    }
  });

  it('the HTTP API answers broken requests with a coded JSON error and the matching status, changing nothing', async () => {
    const before = digest();
    const id = envQ;
    const auth = { authorization: `Bearer ${emu.token}` };
    const cases: { method: string; path: string; body?: string; headers?: Record<string, string>; status?: number }[] = [];
    const junkBodies = ['{', 'NaN', '[1,2]', '"x"', '5', 'null', 'true', '{"a":', '\u0000', `{"slug":${'['.repeat(20000)}${']'.repeat(20000)}}`];
    const routes = [
      ['POST', '/v1/queues'], ['PATCH', `/v1/queues/${id}`], ['PUT', `/v1/queues/${id}/consumer`], ['POST', `/v1/queues/${id}/messages`],
      ['POST', `/v1/queues/${id}/receive`], ['POST', `/v1/queues/${id}/ack`], ['POST', `/v1/queues/${id}/extend`], ['POST', `/v1/queues/${id}/retry-failed`], ['POST', `/v1/queues/${id}/purge`],
    ];
    for (const [method, path] of routes) for (const body of junkBodies) cases.push({ method, path, body, status: body === 'null' || body.length === 0 ? undefined : 400 });
    const wrong: [string, string, unknown][] = [
      ['POST', '/v1/queues', { project: 'p', environment: 'e' }],
      ['POST', '/v1/queues', { project: 'p/x', environment: 'e', slug: 's' }],
      ['POST', '/v1/queues', { project: 'p', environment: 'e', slug: 's', maxRetries: 1e308 }],
      ['POST', '/v1/queues', { project: 'p', environment: 'e', slug: 's', maxRetries: [[[[1]]]] }],
      ['POST', '/v1/queues', { project: 'p', environment: 'e', slug: 's', visibilityMs: -1 }],
      ['POST', '/v1/queues', { project: 'p', environment: 'e', slug: 's', bogus: 1 }],
      ['POST', '/v1/queues', { project: 5, environment: 'e', slug: 's' }],
      ['POST', '/v1/queues', { project: 'p', environment: 'e', slug: 'web' }],
      ['PATCH', `/v1/queues/${id}`, { maxDepth: 'x' }],
      ['PATCH', `/v1/queues/${id}`, { maxRetries: { toString: 1 } }],
      ['PUT', `/v1/queues/${id}/consumer`, {}],
      ['PUT', `/v1/queues/${id}/consumer`, { appId: 'a', maxBatchSize: 1e308 }],
      ['POST', `/v1/queues/${id}/messages`, {}],
      ['POST', `/v1/queues/${id}/messages`, { body: 1, delaySeconds: -5 }],
      ['POST', `/v1/queues/${id}/messages`, { body: 1, delaySeconds: 1e308 }],
      ['POST', `/v1/queues/${id}/messages`, { body: 1, dedupId: 5 }],
      ['POST', `/v1/queues/${id}/messages`, { body: 'x'.repeat(200 * 1024) }],
      ['POST', `/v1/queues/${id}/messages`, { messages: [{ body: 1 }, { body: 2, extra: 1 }] }],
      ['POST', `/v1/queues/${id}/messages`, { messages: 'x' }],
      ['POST', `/v1/queues/${id}/receive`, { max: 0 }],
      ['POST', `/v1/queues/${id}/receive`, { max: 'x' }],
      ['POST', `/v1/queues/${id}/ack`, { acks: [5] }],
      ['POST', `/v1/queues/${id}/ack`, { acks: [42] }],
      ['POST', `/v1/queues/${id}/ack`, { retries: [{ leaseId: 5 }] }],
      ['POST', `/v1/queues/${id}/ack`, { retries: [{ leaseId: 'r_1_1', delaySeconds: -1 }] }],
      ['POST', `/v1/queues/${id}/extend`, { leaseId: 'r_1_1' }],
      ['POST', `/v1/queues/${id}/extend`, { leaseId: 'r_1_1', visibilityMs: 10 }],
      ['POST', `/v1/queues/${id}/retry-failed`, { max: -1 }],
      ['POST', `/v1/queues/${id}/purge`, {}],
      ['POST', `/v1/queues/${id}/purge`, { confirm: 'WEB' }],
      ['POST', `/v1/queues/${id}/purge`, { confirm: 'web', failed: 'yes' }],
      ['DELETE', '/v1/queues/q_doesnotexist', undefined],
      ['GET', `/v1/queues/${encodeURIComponent("'; DROP TABLE queues; --")}`, undefined],
      ['GET', `/v1/queues/${id}/messages?limit=abc`, undefined],
      ['GET', `/v1/queues/${id}/messages?limit=1e308`, undefined],
      ['GET', `/v1/queues/${id}/messages?cursor=zzz`, undefined],
      ['POST', `/v1/queues/${id}`, {}],
      ['DELETE', `/v1/queues/${id}/messages`, undefined],
      // Malformed percent-escapes name no queue.
      ['GET', '/v1/queues/%ZZ', undefined],
      ['DELETE', '/v1/queues/%E0%A4%A', undefined],
      ['POST', '/v1/queues/%/messages', { body: 1 }],
    ];
    for (const [method, path, body] of wrong) cases.push({ method, path, body: body === undefined ? undefined : JSON.stringify(body) });
    cases.push({ method: 'GET', path: '/v1/queues', headers: {}, status: 401 });
    cases.push({ method: 'POST', path: `/v1/queues/${id}/purge`, headers: { authorization: 'Bearer nope' }, body: '{"confirm":"web"}', status: 401 });
    cases.push({ method: 'POST', path: `/v1/queues/${id}/purge`, headers: { authorization: 'Basic abc' }, body: '{"confirm":"web"}', status: 401 });
    cases.push({ method: 'POST', path: `/v1/queues/${id}/messages`, body: JSON.stringify({ body: 'x'.repeat(9 * 1024 * 1024) }), status: 413 });
    for (const c of cases) {
      const res = await fetch(`${emu.httpUrl}${c.path}`, { method: c.method, headers: c.headers ?? auth, body: c.body });
      const text = await res.text();
      const what = `${c.method} ${c.path} ${String(c.body).slice(0, 60)}`;
      let payload: { error?: { code: string; message: string } };
      try {
        payload = JSON.parse(text);
      } catch {
        assert.fail(`${what}: the answer is not JSON (${res.status} ${text.slice(0, 100)})`);
      }
      if (c.body === 'null' && res.ok) continue; // an empty JSON body is `{}` for routes with no required field
      assert.ok(res.status >= 400 && res.status < 500, `${what}: status ${res.status} ${text.slice(0, 200)}`);
      assert.ok(payload.error && CODES.has(payload.error.code) && payload.error.message, `${what}: ${text.slice(0, 200)}`);
      assert.equal(res.status, payload.error.code === 'invalid_argument' && res.status === 405 ? 405 : HTTP_STATUS[payload.error.code as keyof typeof HTTP_STATUS], what);
      if (c.status) assert.equal(res.status, c.status, what);
    }
    assert.equal(digest(), before);
    await othersFine();
  });

  it('random HTTP requests with a read-only token: never a 5xx, errors coded, nothing changed', async () => {
    const ro = (await admin.ok('token.create', { access: 'read' })).token;
    const before = digest();
    const pathArb = fc.oneof(
      fc.constantFrom('/v1/queues', `/v1/queues/${envQ}`, `/v1/queues/${envQ}/messages`, `/v1/queues/${envQ}/receive`, `/v1/queues/${envQ}/ack`, `/v1/queues/${envQ}/purge`, `/v1/queues/${envQ}/retry-failed`, `/v1/queues/${envQ}/consumer`, `/v1/queues/${envQ}/extend`),
      fc.string({ maxLength: 30 }).map((s) => `/v1/queues/${encodeURIComponent(s) || 'x'}`),
      fc.string({ maxLength: 30 }).map((s) => `/v1/queues/${envQ}/messages?failed=${encodeURIComponent(s)}&limit=${encodeURIComponent(s)}`),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'), pathArb, fc.option(fc.jsonValue({ maxDepth: 3 })), async (method, path, body) => {
        const res = await fetch(`${emu.httpUrl}${path}`, { method, headers: { authorization: `Bearer ${ro}` }, body: method === 'GET' || method === 'DELETE' || body === null ? undefined : JSON.stringify(body) });
        const payload = (await res.json()) as { error?: { code: string } };
        assert.ok(res.status < 500, `${method} ${path}: ${res.status} ${JSON.stringify(payload).slice(0, 200)}`);
        if (!res.ok) assert.ok(payload.error && CODES.has(payload.error.code));
        if (method !== 'GET' && res.status < 300) assert.fail(`${method} ${path} succeeded with a read-only token`);
      }),
      { numRuns: 300 },
    );
    assert.equal(digest(), before);
  });

  it('any args to any operation from a read-write token: never internal; a refused one changes nothing', async () => {
    // Its own emulator: what succeeds here changes things, which the shared fixture must not see.
    const own = await startEmulator({ port: 0, memory: true, clock: 'virtual' });
    const c = await RawClient.hello(own.url, own.token);
    try {
      const ownDigest = () => storeDigest(sqliteOf(own));
      await c.ok('queue.create', { namespace: 'w', queue: 'envq', dialect: 'env' });
      let refused = 0;
      let answered = 0;
      const value = fc.oneof(
        fc.constantFrom('$R', '$ID', '$DEAD', 'w', 'q', 'envq', 'cache', 'env', 'sync', 'read', 'write', ['ready'], ['dead'], -1, 0, 1, 1.5, 1e308, 2 ** 53 + 1, '', null, true, {}, { toString: 1 }, { appId: 'a' }, { leaseMs: 5 }),
        fc.jsonValue({ maxDepth: 2 }),
      );
      // A valid request for each operation, then 0 to 2 of its fields (or new ones) set to anything.
      const Q = { namespace: 'w', queue: 'q' };
      const TEMPLATES: Record<string, Record<string, unknown>> = {
        'queue.create': { namespace: 'w', queue: 'made', dialect: 'sync' }, 'queue.configure': { ...Q, policy: { leaseMs: 5000 } }, 'queue.delete': Q,
        'queue.get': Q, 'queue.list': { namespace: 'w' }, 'namespace.list': {}, 'namespace.configure': { namespace: 'w', dailyQuota: 0 },
        push: { ...Q, body: { a: 1 } }, 'push.batch': { ...Q, messages: [{ body: 1 }, { body: 2 }] }, pull: { ...Q, max: 1 }, ack: { receipt: '$R' },
        'ack.batch': { receipts: ['$R'] }, nack: { receipt: '$R' }, extend: { receipt: '$R' }, peek: Q, 'message.get': { ...Q, id: '$ID' },
        'dead.list': Q, 'dead.replay': { ...Q, ids: ['$DEAD'] }, 'dead.purge': { ...Q, ids: ['$DEAD'] }, purge: { ...Q, confirm: 'q' }, stats: Q,
        'audit.list': { namespace: 'w' }, subscribe: { namespace: 'w' }, unsubscribe: { subscription: 's_1' },
        'consumer.set': { namespace: 'w', queue: 'envq', consumer: { appId: 'a' } }, 'consumer.attach': { namespace: 'w', queue: 'envq', dialect: 'env' },
        'consumer.done': { consumer: 'c_1', batch: 'b_1' }, 'consumer.detach': { consumer: 'c_1' }, 'clock.now': {}, 'clock.advance': { ms: 10 },
        cancel: { request: 1 }, 'token.create': { access: 'read', namespace: 'w' },
      };
      const field = fc.oneof(
        fc.constantFrom('namespace', 'queue', 'dialect', 'id', 'ids', 'receipt', 'receipts', 'max', 'limit', 'cursor', 'states', 'body', 'messages', 'delayMs', 'leaseMs',
          'dedupeKey', 'reason', 'dead', 'policy', 'consumer', 'confirm', 'access', 'name', 'ms', 'dailyQuota', 'ifNotExists', 'subscription', 'request', 'batch'),
        fc.string({ maxLength: 6 }),
      );
      const ops = OP_NAMES.filter((o) => o !== 'hello');
      const request = fc.record({
        op: fc.constantFrom(...ops),
        changes: fc.array(fc.tuple(field, fc.oneof(fc.constant(DEL), value)), { maxLength: 2 }),
      });
      await fc.assert(
        fc.asyncProperty(request, async ({ op, changes }) => {
          const argsT: Record<string, unknown> = { ...TEMPLATES[op] };
          for (const [f, v] of changes) {
            if (v === DEL) delete argsT[f];
            else argsT[f] = v;
          }
          // Live values for the placeholders: a fresh lease, a message id and a dead letter.
          // Earlier runs may have set a quota, a depth limit or deleted the queue: these may fail.
          await c.request('push', { namespace: 'w', queue: 'q', body: { n: 1 } });
          const pulled = (await c.request('pull', { namespace: 'w', queue: 'q', max: 2 })).result?.messages ?? [];
          if (pulled.length > 1) await c.request('nack', { receipt: pulled[1].receipt, dead: true });
          const dead = (await c.request('dead.list', { namespace: 'w', queue: 'q', limit: 1 })).result?.messages ?? [];
          const fills: Record<string, unknown> = { $R: pulled[0]?.receipt ?? 'r_0_0', $ID: pulled[0]?.id ?? 'm_1', $DEAD: dead[0]?.id ?? 'm_1' };
          const args = JSON.parse(JSON.stringify(argsT), (_k, v) => (typeof v === 'string' && v in fills ? fills[v] : v));
          if (op === 'pull' || op === 'consumer.attach') delete args.waitMs; // no real-time waits in a property
          const before = ownDigest();
          const r = await c.request(op, args);
          if (r.ok) {
            answered++;
            return;
          }
          refused++;
          assertCoded(r, `${op} ${JSON.stringify(args).slice(0, 160)}`);
          assert.equal(ownDigest(), before, `${op} ${JSON.stringify(args).slice(0, 160)}: refused with ${r.error!.code} but the store changed`);
        }),
        { numRuns: 500 },
      );
      assert.ok(refused >= 100 && answered >= 50, `refused ${refused}, answered ${answered}`);
    } finally {
      await c.close();
      await own.close();
    }
  });

  it('random HTTP requests with a read-write token: never a 5xx; a refused one is coded and changes nothing', async () => {
    // Its own emulator, as above. Placeholders are filled in at run time, so requests reach a live
    // queue, lease and slug often enough to get past the first check; a DELETE that succeeds makes
    // the next run create another.
    const own = await startEmulator({ port: 0, memory: true, clock: 'virtual' });
    const ownDigest = () => storeDigest(sqliteOf(own));
    const auth = { authorization: `Bearer ${own.token}` };
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${own.httpUrl}${path}`, { method, headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, any> };
    };
    let live = { id: '', slug: '' };
    let n = 0;
    async function ensureQueue(): Promise<string | undefined> {
      if (live.id && (await call('GET', `/v1/queues/${live.id}`)).status === 200) {
        // Keep one ready message about, so that most runs hold a live lease.
        const q = (await call('GET', `/v1/queues/${live.id}`)).json;
        if (q.consumer == null) await call('POST', `/v1/queues/${live.id}/messages`, { body: { n } });
        const leased = await call('POST', `/v1/queues/${live.id}/receive`, { max: 1 });
        return leased.json.messages?.[0]?.leaseId;
      }
      const slug = `rw${n++}`;
      const made = await call('POST', '/v1/queues', { project: 'rp', environment: 'e', slug, maxRetries: 1 });
      assert.equal(made.status, 201);
      live = { id: made.json.id, slug };
      await call('POST', `/v1/queues/${live.id}/messages`, { messages: [1, 2, 3, 4].map((i) => ({ body: { i } })) });
      // One message into the failed area: two deliveries whose leases are retried.
      for (let i = 0; i < 2; i++) {
        const got = await call('POST', `/v1/queues/${live.id}/receive`, { max: 1 });
        await call('POST', `/v1/queues/${live.id}/ack`, { retries: [{ leaseId: got.json.messages[0].leaseId }] });
      }
      return (await call('POST', `/v1/queues/${live.id}/receive`, { max: 1 })).json.messages?.[0]?.leaseId;
    }
    const special = fc.constantFrom('$Q', '$SLUG', '$LEASE', 'rp', 'e', -1, 0, 1, 1.5, 1e308, 2 ** 53 + 2, '', 'x'.repeat(300), true, null, [], {}, { toString: 1 });
    const field = fc.constantFrom('project', 'environment', 'slug', 'maxRetries', 'maxDepth', 'maxBytes', 'retentionSeconds', 'visibilityMs', 'appId', 'maxBatchSize',
      'maxBatchTimeoutMs', 'maxConcurrency', 'body', 'contentType', 'delaySeconds', 'attributes', 'dedupId', 'max', 'leaseId', 'confirm', 'failed');
    const obj = fc.dictionary(fc.oneof(field, fc.string({ maxLength: 6 })), fc.oneof(special, fc.jsonValue({ maxDepth: 2 })), { maxKeys: 5 });
    const body = fc.oneof(
      obj,
      obj.map((o) => ({ messages: [o, { body: 1 }] })),
      fc.record({ acks: fc.array(fc.oneof(special, fc.string()), { maxLength: 3 }), retries: fc.array(fc.record({ leaseId: special, delaySeconds: special }, { requiredKeys: ['leaseId'] }), { maxLength: 2 }) }, { requiredKeys: [] }),
      fc.jsonValue({ maxDepth: 2 }),
    );
    const route = fc.constantFrom(
      ['POST', '/v1/queues'], ['GET', '/v1/queues?project=rp&environment=e'], ['GET', '/v1/queues/$Q'], ['PATCH', '/v1/queues/$Q'], ['DELETE', '/v1/queues/$Q'],
      ['PUT', '/v1/queues/$Q/consumer'], ['POST', '/v1/queues/$Q/messages'], ['GET', '/v1/queues/$Q/messages?failed=1'], ['POST', '/v1/queues/$Q/receive'],
      ['POST', '/v1/queues/$Q/ack'], ['POST', '/v1/queues/$Q/extend'], ['POST', '/v1/queues/$Q/retry-failed'], ['POST', '/v1/queues/$Q/purge'],
    );
    let refused = 0;
    let answered = 0;
    try {
      await fc.assert(
        fc.asyncProperty(route, fc.option(body), async ([method, pathT], b) => {
          const lease = (await ensureQueue()) ?? 'r_0_0';
          const fill = (s: string) => s.replaceAll('$Q', live.id).replaceAll('$SLUG', live.slug).replaceAll('$LEASE', lease);
          const path = fill(pathT);
          const text = b === null || method === 'GET' || method === 'DELETE' ? undefined : fill(JSON.stringify(b));
          const before = ownDigest();
          const res = await fetch(`${own.httpUrl}${path}`, { method, headers: auth, body: text });
          const payload = (await res.json()) as { error?: { code: string; message: string } };
          const what = `${method} ${path} ${String(text).slice(0, 160)}`;
          assert.ok(res.status < 500, `${what}: ${res.status} ${JSON.stringify(payload).slice(0, 200)}`);
          if (res.ok) {
            answered++;
            return;
          }
          refused++;
          assert.ok(payload.error && CODES.has(payload.error.code) && payload.error.message, `${what}: ${JSON.stringify(payload).slice(0, 200)}`);
          assert.equal(res.status, HTTP_STATUS[payload.error.code as keyof typeof HTTP_STATUS], what);
          assert.equal(ownDigest(), before, `${what}: refused with ${payload.error.code} but the store changed`);
        }),
        { numRuns: 400 },
      );
    } finally {
      await own.close();
    }
    // Both kinds must be common, or the property tests little.
    assert.ok(refused >= 50 && answered >= 50, `refused ${refused}, answered ${answered}`);
  });

  it('memory stays bounded across thousands of broken frames and repeated oversized ones', async () => {
    const c = await RawClient.hello(emu.url, emu.token);
    const big = JSON.stringify({ id: 0, op: 'push', args: { namespace: 'fz', queue: 'q', body: 'y'.repeat(LIMITS.maxFrameBytes) } });
    const round = async () => {
      for (let i = 0; i < 10; i++) {
        c.sendRaw(big);
        await c.waitFor((f) => f.id === 0 && f.error?.code === 'payload_too_large', 20_000);
      }
      for (let i = 0; i < 2000; i++) c.sendRaw(i % 2 ? '{"id":' : `{"id":${i},"op":"nope"}`);
      for (const until = Date.now() + 20_000; c.frames.length < 2000; ) {
        assert.ok(Date.now() < until, `only ${c.frames.length} of 2000 broken frames were answered`);
        await new Promise((r) => setTimeout(r, 5));
      }
      c.frames.length = 0;
    };
    await round();
    gc();
    const base = process.memoryUsage().heapUsed;
    for (let k = 0; k < 5; k++) await round();
    gc();
    const grown = process.memoryUsage().heapUsed - base;
    console.log(`      heap after 5 rounds (50 × 8 MiB frames, 10,000 broken frames): ${(grown / 1048576).toFixed(1)} MiB over the baseline`);
    assert.ok(grown < 32 * 1048576, `heap grew by ${(grown / 1048576).toFixed(1)} MiB`);
    await c.close();
    await othersFine();
  });
});
