import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { HOUR, DAY, MINUTE, makeEngine, rejects, tempDir } from '../helpers';
import { APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION } from '../../emulator/store/schema';
import { DB_FILE } from '../../emulator/store/store';
import { PRESETS, mergePolicy } from '../../emulator/engine/presets';

// The decisions under DESIGN.md's transition table: dedupe, sizes, quota, capacity, counts,
// lag history, bad input, persistence.

const ref = { namespace: 'ns', queue: 'q' };

/** A database file as an older Quayside left it: the migrations up to `version` only. */
function legacyDb(file: string, version: number): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  for (const m of MIGRATIONS.slice(0, version)) db.exec(m);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.pragma(`user_version = ${version}`);
  return db;
}

describe('engine: decisions', () => {
  let t: ReturnType<typeof makeEngine>;
  afterEach(async () => t && (await t.close()));

  describe('dedupe', () => {
    it('a dedupe key returns the first id for 1 hour, and not after', async () => {
      t = makeEngine();
      const first = await t.engine.push({ ...ref, body: 1, dedupeKey: 'k', create: 'cache' });
      await t.advance(HOUR - 1);
      const again = await t.engine.push({ ...ref, body: 2, dedupeKey: 'k' });
      assert.deepEqual(again, { id: first.id, deduped: true });
      assert.equal((await t.engine.stats(ref)).counts.ready, 1, 'the repeat enqueued nothing');
      await t.advance(1);
      const later = await t.engine.push({ ...ref, body: 3, dedupeKey: 'k' });
      assert.equal(later.deduped, false);
      assert.notEqual(later.id, first.id);
    });

    it('the first push owns the key even after its message is acked', async () => {
      t = makeEngine();
      const first = await t.engine.push({ ...ref, body: 1, dedupeKey: 'k', create: 'cache' });
      const { messages } = await t.engine.pull(ref);
      await t.engine.ack({ receipt: messages[0].receipt });
      assert.deepEqual(await t.engine.push({ ...ref, body: 1, dedupeKey: 'k' }), { id: first.id, deduped: true });
    });

    it('expired keys are swept from the file within half an hour of their window ending', async () => {
      t = makeEngine({ start: Date.UTC(2026, 0, 5, 10, 0, 0) });
      const keys = () => (t.store.db.prepare('SELECT count(*) AS n FROM dedupe').get() as { n: number }).n;
      await t.engine.push({ ...ref, body: 1, dedupeKey: 'a', create: 'cache' });
      await t.engine.push({ ...ref, body: 2, dedupeKey: 'b' });
      await t.advance(HOUR - MINUTE);
      await t.engine.push({ ...ref, body: 3, dedupeKey: 'c' });
      assert.equal(keys(), 3);
      await t.advance(31 * MINUTE); // 11:30, a step boundary: a and b ended at 11:00
      assert.equal(keys(), 1, 'a and b expired an hour after their push; c is still in its window');
      assert.deepEqual(await t.engine.push({ ...ref, body: 4, dedupeKey: 'a' }).then((r) => r.deduped), false);
      // A backlog (keys expiring faster than a step's sweep takes, a data directory from before the
      // sweep): the step takes 10,000, so no step stalls; the rest go 1,000 a transaction, so keys
      // that expire faster than 10,000 a step cannot pile up (found by a leak probe).
      const ins = t.store.db.prepare('INSERT INTO dedupe (queue_id, key, message_id, expires_at) VALUES (1, ?, 1, 0)');
      t.store.transaction(() => {
        for (let i = 0; i < 12_000; i++) ins.run(`old${i}`);
      });
      await t.advance(30 * MINUTE); // 12:00
      const left = keys();
      assert.ok(left >= 2 && left <= 2_000 + 2 && left % 1000 === 2, `the step took 10,000 (and its advance's own transactions a batch each): ${left} left`);
      for (let i = 0; i < 3; i++) await t.engine.push({ ...ref, body: `p${i}` }); // a batch each, the last one short
      assert.equal(keys(), 1, 'the backlog and c (ended 11:59) are gone; the second a (pushed at 11:30) is in its window');
      await t.advance(30 * MINUTE); // 12:30: the second a
      assert.equal(keys(), 0);
    });

    it('a steady stream of keys faster than a step\'s sweep, many to a transaction, does not pile up', async () => {
      // Found in review: one batch of 1,000 a transaction could not keep up with group commits of
      // several 1,000-key batches.
      t = makeEngine({ start: Date.UTC(2026, 0, 5, 10, 0, 0) });
      const keys = () => (t.store.db.prepare('SELECT count(*) AS n FROM dedupe').get() as { n: number }).n;
      let k = 0;
      const batch = () => t.engine.pushBatch({ ...ref, create: 'cache', messages: Array.from({ length: 1000 }, () => ({ body: 1, dedupeKey: `k${k++}` })) });
      // 10,000 keys a commit (ten batches at once), a commit every 10 minutes for 3 hours, each key
      // expiring an hour after its push: 30,000 a step, and at most 6 commits' worth in the window.
      for (let round = 0; round < 18; round++) {
        await Promise.all(Array.from({ length: 10 }, batch));
        await t.advance(10 * MINUTE);
      }
      assert.ok(keys() <= 7 * 10_000, `${keys()} keys in the table; at most 60,000 are in their window`);
    });

    it('repeats never extend the window', async () => {
      t = makeEngine();
      const first = await t.engine.push({ ...ref, body: 1, dedupeKey: 'k', create: 'cache' });
      await t.advance(50 * MINUTE);
      await t.engine.push({ ...ref, body: 1, dedupeKey: 'k' });
      await t.advance(10 * MINUTE);
      const r = await t.engine.push({ ...ref, body: 1, dedupeKey: 'k' });
      assert.equal(r.deduped, false, 'the window started at the first push');
      assert.notEqual(r.id, first.id);
    });

    it('sync keeps keys for 7 days by default, or for the given TTL', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'sync' });
      const a = await t.engine.push({ ...ref, body: 1, dedupeKey: 'a' });
      const b = await t.engine.push({ ...ref, body: 1, dedupeKey: 'b', dedupeTtlMs: 1000 });
      await t.advance(999);
      assert.deepEqual(await t.engine.push({ ...ref, body: 1, dedupeKey: 'b' }), { id: b.id, deduped: true }, 'inside its 1 s');
      await t.advance(1);
      assert.equal((await t.engine.push({ ...ref, body: 1, dedupeKey: 'b' })).deduped, false, 'its 1 s is over');
      await t.advance(7 * DAY - 1001);
      assert.deepEqual(await t.engine.push({ ...ref, body: 1, dedupeKey: 'a' }), { id: a.id, deduped: true }, 'a millisecond before 7 days');
      await t.advance(1);
      const again = await t.engine.push({ ...ref, body: 1, dedupeKey: 'a' });
      assert.equal(again.deduped, false, 'the default 7 days are over');
      assert.notEqual(again.id, a.id);
    });

    it('in one batch, a repeated key points at the first message', async () => {
      t = makeEngine();
      const { results } = await t.engine.pushBatch({ ...ref, create: 'cache', messages: [{ body: 1, dedupeKey: 'x' }, { body: 2 }, { body: 3, dedupeKey: 'x' }] });
      assert.equal(results[0].deduped, false);
      assert.deepEqual(results[2], { id: results[0].id, deduped: true });
      assert.equal((await t.engine.stats(ref)).counts.ready, 2);
    });
  });

  describe('sizes', () => {
    const limits = [['cache', 256 * 1024], ['env', 128 * 1024]] as const;
    for (const [dialect, limit] of limits) {
      it(`${dialect}: a body of exactly ${limit} bytes passes and one byte more fails`, async () => {
        t = makeEngine();
        await t.engine.createQueue({ ...ref, dialect });
        const exact = 'x'.repeat(limit - 2); // JSON adds the two quotes
        await t.engine.push({ ...ref, body: exact });
        const err = await rejects(t.engine.push({ ...ref, body: exact + 'y' }));
        assert.equal(err.code, 'payload_too_large');
        assert.match(err.message, new RegExp(`${limit} bytes`));
        assert.equal((await t.engine.stats(ref)).counts.ready, 1);
      });
    }

    it('sync: the limit is on the envelope the library stores ({ data, attempt, orderingKey, meta, enqueuedAt } as JSON)', async () => {
      t = makeEngine(); // the clock starts at a 13-digit epoch ms
      await t.engine.createQueue({ ...ref, dialect: 'sync' });
      const envelope = (data: unknown, orderingKey?: string, meta?: unknown) =>
        Buffer.byteLength(JSON.stringify({ data, attempt: 0, orderingKey, meta, enqueuedAt: t.clock.now() }), 'utf8');
      const overhead = envelope('') - 2;
      assert.equal(overhead, 48);
      const exact = 'x'.repeat(131072 - 2 - overhead);
      assert.equal(envelope(exact), 131072);
      await t.engine.push({ ...ref, body: exact });
      const err = await rejects(t.engine.push({ ...ref, body: exact + 'y' }));
      assert.equal(err.code, 'payload_too_large');
      assert.match(err.message, /131073 bytes; the limit of queue "q" is 131072 bytes/);
      // The ordering key and meta are in the envelope too.
      const withBoth = 'x'.repeat(131072 - envelope('', 'k€', { a: 1 }));
      assert.equal(envelope(withBoth, 'k€', { a: 1 }), 131072);
      await t.engine.push({ ...ref, body: withBoth, orderingKey: 'k€', meta: { a: 1 } });
      assert.equal((await rejects(t.engine.push({ ...ref, body: withBoth, orderingKey: 'k€x', meta: { a: 1 } }))).code, 'payload_too_large');
      assert.equal((await rejects(t.engine.push({ ...ref, body: withBoth, orderingKey: 'k€', meta: { a: 10 } }))).code, 'payload_too_large');
      assert.equal((await t.engine.stats(ref)).counts.ready, 2);
    });

    it('the limit counts UTF-8 bytes, not characters', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'env' });
      const euro = '€'.repeat(Math.floor((128 * 1024 - 2) / 3)); // 3 bytes each
      await t.engine.push({ ...ref, body: euro });
      assert.equal((await rejects(t.engine.push({ ...ref, body: euro + '€' }))).code, 'payload_too_large');
    });
  });

  describe('free-tier quota', () => {
    it('1,000 messages a day, then quota_exceeded (429) until 00:00 UTC, then accepted', async () => {
      t = makeEngine({ dailyQuota: 1000, start: Date.UTC(2026, 0, 5, 22, 0, 0) });
      const messages = Array.from({ length: 500 }, (_, i) => ({ body: i }));
      await t.engine.pushBatch({ ...ref, messages, create: 'cache' });
      await t.engine.pushBatch({ ...ref, messages });
      const err = await rejects(t.engine.push({ ...ref, body: 'one more' }));
      assert.equal(err.code, 'quota_exceeded');
      assert.equal(err.status, 429);
      assert.equal(err.resetAt, Date.UTC(2026, 0, 6));
      assert.equal((await t.engine.stats(ref)).counts.ready, 1000);
      await t.advance(2 * HOUR - 1);
      assert.equal((await rejects(t.engine.push({ ...ref, body: 'still no' }))).code, 'quota_exceeded');
      await t.advance(1);
      assert.equal((await t.engine.push({ ...ref, body: 'new day' })).deduped, false);
    });

    it('a batch larger than what is left of the day is refused whole, and the error says how much is left', async () => {
      t = makeEngine({ dailyQuota: 10 });
      await t.engine.pushBatch({ ...ref, create: 'cache', messages: Array.from({ length: 7 }, (_, i) => ({ body: i })) });
      const err = await rejects(t.engine.pushBatch({ ...ref, messages: Array.from({ length: 4 }, (_, i) => ({ body: i })) }));
      assert.equal(err.code, 'quota_exceeded');
      assert.match(err.message, /has 3 of its 10 messages left for today, fewer than the 4 in this batch/);
      assert.equal((await t.engine.stats(ref)).counts.ready, 7, 'nothing of the batch was enqueued');
      await t.engine.pushBatch({ ...ref, messages: Array.from({ length: 3 }, (_, i) => ({ body: i })) });
      assert.match((await rejects(t.engine.push({ ...ref, body: 'one more' }))).message, /has used its 10 messages for today/);
    });

    it('deduped pushes do not use the quota; other dialects are not limited', async () => {
      t = makeEngine({ dailyQuota: 2 });
      await t.engine.push({ ...ref, body: 1, dedupeKey: 'k', create: 'cache' });
      await t.engine.push({ ...ref, body: 1, dedupeKey: 'k' });
      await t.engine.push({ ...ref, body: 2 });
      assert.equal((await rejects(t.engine.push({ ...ref, body: 3 }))).code, 'quota_exceeded');
      await t.engine.createQueue({ namespace: 'ns', queue: 's', dialect: 'sync' });
      for (let i = 0; i < 5; i++) await t.engine.push({ namespace: 'ns', queue: 's', body: i });
    });

    it('is off by default', async () => {
      t = makeEngine();
      await t.engine.pushBatch({ ...ref, create: 'cache', messages: Array.from({ length: 1000 }, (_, i) => ({ body: i })) });
      await t.engine.push({ ...ref, body: 'the 1001st' });
    });
  });

  describe('answers of many large messages', () => {
    it('a pull, a peek page and a dead-letter page carry at most 32 MiB of bodies (at least one message); the rest stay where they were, for the next', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache', policy: { maxPayloadBytes: 4 * 1024 * 1024, maxDeliveries: 1 } });
      const body = 'x'.repeat(4 * 1024 * 1024 - 2); // 4 MiB as JSON: eight make the 32 MiB
      for (let i = 0; i < 10; i++) await t.engine.push({ ...ref, body });
      const first = await t.engine.pull({ ...ref, max: 10 });
      assert.equal(first.messages.length, 8, 'a 100 MiB answer would not reach a WebSocket client');
      const c = (await t.engine.stats(ref)).counts;
      assert.deepEqual([c.leased, c.ready], [8, 2], 'the rest were not leased');
      assert.equal((await t.engine.pull({ ...ref, max: 10 })).messages.length, 2);
      const page = await t.engine.peek({ ...ref, states: ['leased'], limit: 10 });
      assert.equal(page.messages.length, 8);
      assert.equal((await t.engine.peek({ ...ref, states: ['leased'], limit: 10, cursor: page.next })).messages.length, 2);
      await t.advance(30_000); // every lease ends: maxDeliveries 1, so all ten are dead
      const dead = await t.engine.deadList({ ...ref, limit: 1000 });
      assert.equal(dead.messages.length, 8);
      assert.equal((await t.engine.deadList({ ...ref, limit: 1000, cursor: dead.next })).messages.length, 2);
    });
  });

  describe('capacity', () => {
    it('maxDepth counts live messages (leased too) and answers queue_full', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'env', policy: { maxDepth: 2 } });
      await t.engine.push({ ...ref, body: 1 });
      await t.engine.push({ ...ref, body: 2 });
      await t.engine.pull(ref);
      assert.equal((await rejects(t.engine.push({ ...ref, body: 3 }))).code, 'queue_full');
      assert.equal((await rejects(t.engine.pushBatch({ ...ref, messages: [{ body: 3 }] }))).code, 'queue_full');
    });

    it('maxBytes counts live bytes', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'env', policy: { maxBytes: 10 } });
      await t.engine.push({ ...ref, body: '123456' }); // 8 bytes
      assert.equal((await rejects(t.engine.push({ ...ref, body: 'ab' }))).code, 'queue_full');
      const { messages } = await t.engine.pull(ref);
      await t.engine.ack({ receipt: messages[0].receipt });
      await t.engine.push({ ...ref, body: 'ab' });
    });
  });

  describe('bad input changes nothing', () => {
    it('a batch with one bad message enqueues none', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      const err = await rejects(t.engine.pushBatch({ ...ref, messages: [{ body: 1 }, { body: 2, delayMs: -5 }] }));
      assert.equal(err.code, 'invalid_argument');
      assert.match(err.message, /messages\[1\]\.delayMs/);
      assert.equal((await t.engine.stats(ref)).counts.depth, 0);
    });

    for (const [what, args] of [
      ['NaN delay', { body: 1, delayMs: NaN }],
      ['Infinity delay', { body: 1, delayMs: Infinity }],
      ['negative delay', { body: 1, delayMs: -1 }],
      ['fractional delay', { body: 1, delayMs: 1.5 }],
      ['string delay', { body: 1, delayMs: '5' }],
      ['missing body', {}],
      ['a function body', { body: () => 1 }],
      ['empty dedupe key', { body: 1, dedupeKey: '' }],
      ['array attributes', { body: 1, attributes: [1] }],
    ] as const) {
      it(`push with ${what} is invalid_argument`, async () => {
        t = makeEngine();
        await t.engine.createQueue({ ...ref, dialect: 'cache' });
        const err = await rejects(t.engine.push({ ...ref, ...(args as object) } as never));
        assert.equal(err.code, 'invalid_argument');
        assert.ok(err.message.length > 5);
        assert.equal((await t.engine.stats(ref)).counts.depth, 0);
      });
    }

    it('half a surrogate pair: a name or key is refused (SQLite would store U+FFFD, two names as one); a nack error keeps U+FFFD in its place', async () => {
      t = makeEngine();
      for (const queue of ['b\ud800', 'b\udc00']) {
        const err = await rejects(t.engine.createQueue({ namespace: 'ns', queue, dialect: 'cache' }));
        assert.equal(err.code, 'invalid_argument');
        assert.match(err.message, /^queue must be well-formed Unicode/);
      }
      assert.equal((await rejects(t.engine.createQueue({ namespace: 'x\ud800', queue: 'q', dialect: 'cache' }))).code, 'invalid_argument');
      assert.deepEqual((await t.engine.listQueues({})).queues.map((q) => q.name), []);
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      assert.equal((await rejects(t.engine.push({ ...ref, body: 1, dedupeKey: 'k\ud800' }))).code, 'invalid_argument');
      assert.equal((await t.engine.stats(ref)).counts.depth, 0);
      // A whole pair is text like any other.
      const { id } = await t.engine.push({ ...ref, body: 1, dedupeKey: 'k\ud83d\ude00' });
      const [m] = (await t.engine.pull({ ...ref, max: 1 })).messages;
      // An error's text comes from whatever the app threw; it is never a reason to refuse the nack.
      assert.equal((await t.engine.nack({ receipt: m.receipt, error: 'bad \ud800 byte \ud83d\ude00', dead: true })).ok, true);
      assert.equal((await t.engine.getMessage({ ...ref, id })).lastError, 'bad \ufffd byte \ud83d\ude00');
    });

    it('a control character in a name is refused, C0, DEL and C1 alike (U+0000–U+001F, U+007F–U+009F); the printable neighbours are names', async () => {
      t = makeEngine();
      for (const queue of ['a\tb', 'a\u0000', 'a\u007f', 'a\u0080', 'a\u009f']) {
        const err = await rejects(t.engine.createQueue({ namespace: 'ns', queue, dialect: 'cache' }));
        assert.equal(err.code, 'invalid_argument');
        assert.match(err.message, /^queue must not contain control characters/);
      }
      assert.equal((await rejects(t.engine.createQueue({ namespace: 'n\u0085s', queue: 'q', dialect: 'cache' }))).code, 'invalid_argument');
      assert.deepEqual((await t.engine.listQueues({})).queues.map((q) => q.name), []);
      for (const queue of ['a~b', 'a\u00a0b', 'caf\u00e9']) await t.engine.createQueue({ namespace: 'ns', queue, dialect: 'cache' });
      assert.deepEqual((await t.engine.listQueues({})).queues.map((q) => q.name).sort(), ['a~b', 'a\u00a0b', 'caf\u00e9'].sort());
    });

    it('a queue.delete whose commit fails (disk full) keeps the queue and its push consumers: they still get batches and are told nothing', async () => {
      t = makeEngine();
      const q = { namespace: 'p/e', queue: 'q' };
      await t.engine.createQueue({ ...q, dialect: 'env' });
      await t.engine.setConsumer({ ...q, consumer: { appId: 'a', maxBatchSize: 1, maxBatchTimeoutMs: 0 } });
      const got: unknown[] = [];
      const told: string[] = [];
      await t.engine.attachConsumer(q, (_b, messages) => got.push(...messages.map((m) => m.body)), undefined, (id) => told.push(id));
      const store = t.store as unknown as { transaction: (fn: () => unknown) => unknown };
      const real = store.transaction.bind(t.store);
      store.transaction = (fn) => {
        store.transaction = real;
        return real(() => {
          fn();
          throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
        });
      };
      assert.equal((await rejects(t.engine.deleteQueue(q))).code, 'storage_full');
      await t.engine.push({ ...q, body: 'still here' });
      for (let i = 0; i < 200 && got.length === 0; i++) await new Promise((r) => setImmediate(r));
      assert.deepEqual(got, ['still here']);
      assert.deepEqual(told, []);
      // A delete that commits tells it.
      await t.engine.deleteQueue(q);
      assert.equal(told.length, 1);
    });

    it('unknown queues are not_found; a queue in another namespace is not found', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      assert.equal((await rejects(t.engine.push({ namespace: 'other', queue: 'q', body: 1 }))).code, 'not_found');
      assert.equal((await rejects(t.engine.pull({ namespace: 'other', queue: 'q' }))).code, 'not_found');
    });

    it('receipts are opaque: any string naming no live lease is stale (false); what cannot be a receipt is invalid_argument', async () => {
      t = makeEngine();
      await t.engine.push({ ...ref, body: 1, create: 'cache' });
      const [m] = (await t.engine.pull(ref)).messages;
      for (const receipt of ['nope', 'r_99_123', m.id, 'r_1_', m.receipt + 'x']) {
        assert.deepEqual(await t.engine.ack({ receipt }), { ok: false }, receipt);
        assert.deepEqual(await t.engine.nack({ receipt }), { ok: false }, receipt);
        assert.deepEqual(await t.engine.extend({ receipt }), { ok: false, leaseUntil: null }, receipt);
      }
      assert.deepEqual(await t.engine.ackBatch({ receipts: ['nope', m.receipt] }), { acked: 1, stale: 1 });
      for (const receipt of [42, '', null, 'r_' + '9'.repeat(300)]) {
        assert.equal((await rejects(t.engine.ack({ receipt }))).code, 'invalid_argument', String(receipt));
      }
    });

    it('pull arguments are range-checked', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      for (const bad of [{ max: 0 }, { max: 1001 }, { max: NaN }, { leaseMs: -1 }, { leaseMs: Infinity }, { waitMs: -1 }]) {
        assert.equal((await rejects(t.engine.pull({ ...ref, ...bad }))).code, 'invalid_argument', JSON.stringify(bad));
      }
    });

    it('pull waitUntil ends a held wait at that instant of the clock, and one already passed leases nothing', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'sync' });
      const start = t.clock.now();
      let ended = false;
      const held = t.engine.pull({ ...ref, waitMs: 20 * MINUTE, waitUntil: start + 5 * MINUTE }).then((r) => {
        ended = true;
        return r;
      });
      await t.advance(5 * MINUTE - 1);
      assert.equal(ended, false);
      await t.advance(1);
      assert.deepEqual((await held).messages, []);
      await t.engine.push({ ...ref, body: 'later' });
      // The client's next hold of a wait that already ended (it arrived after the advance).
      assert.deepEqual((await t.engine.pull({ ...ref, waitMs: 20 * MINUTE, waitUntil: start + 5 * MINUTE })).messages, []);
      assert.equal((await t.engine.stats(ref)).counts.ready, 1, 'nothing was leased');
      assert.equal((await rejects(t.engine.pull({ ...ref, waitUntil: -1 }))).code, 'invalid_argument');
    });

    it('with waitUntil, a hold runs to it on the clock (waitMs bounds it in real time only), so no advance runs through a gap between holds', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'sync' });
      const start = t.clock.now();
      await t.engine.push({ ...ref, body: 'due', delayMs: 7 * MINUTE });
      const held = t.engine.pull({ ...ref, waitMs: 5 * MINUTE, waitUntil: start + 10 * MINUTE });
      await t.advance(10 * MINUTE);
      const [m] = (await held).messages;
      assert.equal(m?.body, 'due');
      assert.equal(m.leaseUntil, start + 7 * MINUTE + (await t.engine.getQueue(ref)).policy.leaseMs, 'leased when it came due, past the waitMs of the hold');
    });

    it('push and push.batch refuse a create that names no dialect, whether or not the queue exists, and enqueue nothing', async () => {
      t = makeEngine();
      for (const exists of [false, true]) {
        if (exists) await t.engine.createQueue({ ...ref, dialect: 'cache' });
        for (const create of ['sqs', 5, true, {}]) {
          const e = await rejects(t.engine.push({ ...ref, body: 1, create } as never));
          assert.equal(e.code, 'invalid_argument', `${exists} ${JSON.stringify(create)}`);
          assert.match(e.message, /^create must be one of cache, env, sync/);
          assert.equal((await rejects(t.engine.pushBatch({ ...ref, messages: [{ body: 1 }], create } as never))).code, 'invalid_argument');
        }
      }
      assert.equal((await t.engine.stats(ref)).counts.ready, 0, 'nothing was enqueued');
      await t.engine.push({ ...ref, body: 1, create: null } as never);
      assert.equal((await t.engine.stats(ref)).counts.ready, 1, 'create: null is not given');
    });

    it('a queue of one dialect cannot be created again as another', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      const asEnv = await rejects(t.engine.createQueue({ ...ref, dialect: 'env' }));
      assert.equal(asEnv.code, 'conflict');
      assert.match(asEnv.message, /is a cache queue, not env$/);
      assert.equal((await rejects(t.engine.createQueue({ ...ref, dialect: 'cache' }))).code, 'conflict');
      assert.equal((await t.engine.createQueue({ ...ref, dialect: 'cache', ifNotExists: true })).name, 'q');
      await t.engine.createQueue({ ...ref, queue: 'e', dialect: 'env' });
      assert.match((await rejects(t.engine.createQueue({ ...ref, queue: 'e', dialect: 'sync' }))).message, /is an env queue, not sync$/);
      assert.equal((await rejects(t.engine.createQueue({ ...ref, dialect: 'cache', policy: { leaseMs: 0 } }))).code, 'invalid_argument');
    });

    it('policy overrides are checked', async () => {
      t = makeEngine();
      for (const policy of [{ leaseMs: 0 }, { maxDeliveries: 1.5 }, { bogus: 1 }, { maxDepth: -1 }]) {
        assert.equal((await rejects(t.engine.createQueue({ namespace: 'ns', queue: JSON.stringify(policy), dialect: 'cache', policy }))).code, 'invalid_argument');
      }
      assert.equal((await t.engine.listQueues()).queues.length, 0);
    });
  });

  describe('ids', () => {
    it('a message id is never handed out again after its message is gone, so a dedupe key keeps naming its own message', async () => {
      t = makeEngine();
      const first = await t.engine.push({ ...ref, body: 'first', dedupeKey: 'order-7', create: 'cache' });
      const [m] = (await t.engine.pull(ref)).messages;
      await t.engine.ack({ receipt: m.receipt });
      const second = await t.engine.push({ ...ref, body: 'second' });
      assert.notEqual(second.id, first.id);
      assert.deepEqual(await t.engine.push({ ...ref, body: 'again', dedupeKey: 'order-7' }), { id: first.id, deduped: true });
    });

    it('ids stay unique across restarts even when the newest messages were acked before the stop', async () => {
      const dir = tempDir();
      try {
        t = makeEngine({ dataDir: dir });
        const seen = new Set<string>();
        for (let round = 0; round < 3; round++) {
          // Push, ack the newest (so the highest ids are gone from the table), stop, start again.
          for (let i = 0; i < 5; i++) seen.add((await t.engine.push({ ...ref, body: i, create: 'cache' })).id);
          const { messages } = await t.engine.pull({ ...ref, max: 5 });
          await t.engine.ackBatch({ receipts: messages.map((m) => m.receipt) });
          await t.close();
          t = makeEngine({ dataDir: dir });
        }
        const next = (await t.engine.push({ ...ref, body: 'after' })).id;
        assert.equal(seen.has(next), false, `${next} was handed out before`);
        assert.equal(seen.size, 15);
        assert.ok(Number(next.slice(2)) > Math.max(...[...seen].map((id) => Number(id.slice(2)))));
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a schema-1 database (AUTOINCREMENT ids) migrates, keeps its messages and ids, and never hands out an old id', async () => {
      const dir = tempDir();
      try {
        const file = path.join(dir, DB_FILE);
        const db = legacyDb(file, 1);
        db.prepare("INSERT INTO queues (id, pub_id, ns, name, dialect, policy, created_at, n_waiting, live_bytes) VALUES (1, 'q_old', 'ns', 'q', 'cache', '{}', 0, 1, 1)").run();
        const ins = db.prepare("INSERT INTO messages (queue_id, state, visible_at, enqueued_at, body, size) VALUES (1, 0, 0, 0, ?, 1)");
        for (let i = 1; i <= 40; i++) ins.run(String(i));
        // The newest 39 were acked: only id 1 is left, but ids up to 40 were handed out.
        db.prepare('DELETE FROM messages WHERE id > 1').run();
        db.close();
        t = makeEngine({ dataDir: dir });
        const old = await t.engine.peek(ref);
        assert.deepEqual(old.messages.map((m) => [m.id, m.body]), [['m_1', 1]]);
        const id = Number((await t.engine.push({ ...ref, body: 'new' })).id.slice(2));
        assert.ok(id > 40, `id ${id} may have been handed out before the migration`);
        const check = new Database(file, { readonly: true });
        assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION);
        const sql = (check.prepare("SELECT sql FROM sqlite_master WHERE name = 'messages'").get() as { sql: string }).sql;
        assert.doesNotMatch(sql, /AUTOINCREMENT/);
        assert.equal((check.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' AND name LIKE 'msg_%'").get() as { n: number }).n, 5);
        check.close();
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a schema-2 database migrates to queue order by seq: its messages keep their order, ahead of new ones, and a requeue goes to the back', async () => {
      const dir = tempDir();
      const start = Date.UTC(2026, 0, 5, 10, 0, 0);
      try {
        const file = path.join(dir, DB_FILE);
        const db = legacyDb(file, 2);
        // The policy a cache queue is created with, taken from a current engine.
        const fresh = makeEngine();
        await fresh.engine.createQueue({ ...ref, dialect: 'cache' });
        // ... as schema 2 stored it: the cache preset's delay limit was 12 hours then.
        const policy = JSON.stringify({ ...JSON.parse((fresh.store.db.prepare('SELECT policy FROM queues').get() as { policy: string }).policy), maxDelayMs: 12 * HOUR });
        await fresh.close();
        db.prepare("INSERT INTO queues (id, pub_id, ns, name, dialect, policy, created_at, n_waiting, live_bytes) VALUES (1, 'q_old', 'ns', 'q', 'cache', ?, 0, 3, 3)").run(policy);
        // Three waiting messages that all became visible at the instant the engine starts at.
        const ins = db.prepare('INSERT INTO messages (id, queue_id, state, visible_at, enqueued_at, body, size) VALUES (?, 1, 0, ?, ?, ?, 1)');
        for (const id of [7, 8, 9]) ins.run(id, start, start, JSON.stringify(`old${id}`));
        db.close();
        t = makeEngine({ dataDir: dir, start });
        const [first] = (await t.engine.pull(ref)).messages;
        assert.equal(first.id, 'm_7');
        assert.equal((await t.engine.nack({ receipt: first.receipt })).ok, true);
        await t.engine.push({ ...ref, body: 'new' });
        const { messages } = await t.engine.pull({ ...ref, max: 10 });
        assert.deepEqual(messages.map((m) => m.body), ['old8', 'old9', 'old7', 'new']);
        // The old default delay limit became the new one (7 days).
        assert.equal((await t.engine.getQueue(ref)).policy.maxDelayMs, 7 * DAY);
        await t.engine.push({ ...ref, body: 'tomorrow', delayMs: DAY });
        const check = new Database(file, { readonly: true });
        assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION);
        const cols = (check.prepare("SELECT name FROM pragma_table_info('messages')").all() as { name: string }[]).map((c) => c.name);
        assert.ok(cols.includes('seq'));
        const ready = (check.prepare("SELECT sql FROM sqlite_master WHERE name = 'msg_ready'").get() as { sql: string }).sql;
        assert.match(ready, /\(queue_id, visible_at, seq\)/);
        check.close();
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a schema-3 database migrates to audit entries with token ids (old entries keep theirs null, new ones get one) and to message limits of at most 4 MiB', async () => {
      const dir = tempDir();
      try {
        const file = path.join(dir, DB_FILE);
        const db = legacyDb(file, 3);
        db.prepare("INSERT INTO audit (at, token, ns, queue, action, count, detail) VALUES (1, 'ci', 'ns', 'q', 'purge_dead', 2, 'all')").run();
        const fresh = makeEngine();
        const policy = (await fresh.engine.createQueue({ ...ref, dialect: 'sync' })).policy;
        await fresh.close();
        const ins = db.prepare("INSERT INTO queues (id, pub_id, ns, name, dialect, policy, created_at) VALUES (?, ?, 'ns', ?, 'sync', ?, 0)");
        ins.run(1, 'q_big', 'big', JSON.stringify({ ...policy, maxPayloadBytes: 64 * 1024 * 1024 }));
        ins.run(2, 'q_small', 'small', JSON.stringify({ ...policy, maxPayloadBytes: 1000 }));
        db.close();
        t = makeEngine({ dataDir: dir });
        assert.equal((await t.engine.getQueue({ namespace: 'ns', queue: 'big' })).policy.maxPayloadBytes, 4 * 1024 * 1024);
        assert.equal((await t.engine.getQueue({ namespace: 'ns', queue: 'small' })).policy.maxPayloadBytes, 1000);
        await t.engine.createQueue({ ...ref, dialect: 'cache' });
        await t.engine.purgeDead(ref, { name: 'ci', tokenId: 'tok_000000000001', namespace: null });
        const { entries } = await t.engine.auditList({});
        assert.deepEqual(entries.map((e) => [e.token, e.tokenId, e.action, e.count]), [
          ['ci', 'tok_000000000001', 'purge_dead', 0],
          ['ci', null, 'purge_dead', 2],
        ]);
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a start that catches up on many instants applies them in time order: a last lease that ended before the age limit is a failure, not an expiry', async () => {
      // Found in review: the sweep applied every age limit due by now before every lease end due by
      // now, so a delivery that failed long before its message grew too old was judged too old.
      const start = Date.UTC(2026, 0, 5, 10, 0, 0);
      for (const [dialect, reason] of [['sync', 'max_deliveries_exceeded'], ['env', 'timeout']] as const) {
        const dir = tempDir();
        const q = { namespace: 'ns', queue: dialect };
        try {
          t = makeEngine({ dataDir: dir, start });
          await t.engine.createQueue({ ...q, dialect, policy: { maxDeliveries: 1, maxMessageAgeMs: 60_000 } });
          await t.engine.push({ ...q, body: 'x' });
          await t.engine.pull({ ...q, leaseMs: 5000 });
          await t.close();
          // Back 10 minutes later: the lease ended at +5 s, the age limit at +60 s.
          t = makeEngine({ dataDir: dir, start: start + 10 * MINUTE });
          const { messages } = await t.engine.deadList(q);
          assert.deepEqual(messages.map((m) => [m.id, m.deadReason]), [['m_1', reason]], dialect);
        } finally {
          await t.close();
          t = null as never;
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
    });

    it('a death that fell due while the emulator was stopped is dated when it fell due, and its dead retention counts from then', async () => {
      // Found by a probe of downtime: such deaths were dated at the restart, so a dead letter whose
      // retention ended while the emulator was stopped was still listed after it came back.
      const start = Date.UTC(2026, 0, 5, 10, 0, 0);
      const dir = tempDir();
      const leased = { namespace: 'ns', queue: 'leased' };
      const aged = { namespace: 'ns', queue: 'aged' };
      const kept = { namespace: 'ns', queue: 'kept' };
      try {
        t = makeEngine({ dataDir: dir, start });
        await t.engine.createQueue({ ...leased, dialect: 'sync', policy: { maxDeliveries: 1, deadRetentionMs: 10 * MINUTE } });
        await t.engine.createQueue({ ...aged, dialect: 'sync', policy: { maxMessageAgeMs: 2 * MINUTE, deadRetentionMs: 10 * MINUTE } });
        await t.engine.createQueue({ ...kept, dialect: 'cache', policy: { maxDeliveries: 1 } });
        for (const q of [leased, aged, kept]) await t.engine.push({ ...q, body: q.queue });
        await t.engine.pull({ ...leased, leaseMs: MINUTE });
        await t.engine.pull({ ...kept, leaseMs: 3 * MINUTE });
        await t.close();
        // Back 12 minutes later: the sync lease ended at +1 min and the age limit came at +2 min,
        // so both dead letters' 10 minutes of retention are over; the cache one died at +3 min.
        t = makeEngine({ dataDir: dir, start: start + 12 * MINUTE });
        assert.deepEqual((await t.engine.deadList(leased)).messages, [], 'died at +1 min, deleted at +11 min');
        assert.deepEqual((await t.engine.deadList(aged)).messages, [], 'died at +2 min, deleted at +12 min');
        const [dead] = (await t.engine.deadList(kept)).messages;
        assert.deepEqual([dead.deadReason, dead.deadAt], ['timeout', start + 3 * MINUTE], 'dated at its lease end, not at the restart');
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a schema-4 database migrates to dead letters in the order they died: its own keep their order (by id, whatever their seq), ahead of later deaths in the same millisecond', async () => {
      const dir = tempDir();
      const start = Date.UTC(2026, 0, 5, 10, 0, 0);
      try {
        const file = path.join(dir, DB_FILE);
        const db = legacyDb(file, 4);
        const fresh = makeEngine();
        const policy = (await fresh.engine.createQueue({ ...ref, dialect: 'cache', policy: { maxDeliveries: 1 } })).policy;
        await fresh.close();
        db.prepare("INSERT INTO queues (id, pub_id, ns, name, dialect, policy, created_at, n_dead, n_waiting, live_bytes) VALUES (1, 'q_old', 'ns', 'q', 'cache', ?, 0, 2, 2, 2)").run(JSON.stringify(policy));
        // Two dead at the instant the engine starts at: one with no seq (from before schema 3), one with its last queue seq.
        const dead = db.prepare("INSERT INTO messages (id, queue_id, state, visible_at, attempts, enqueued_at, body, size, dead_at, dead_reason, seq) VALUES (?, 1, 2, ?, 1, ?, ?, 1, ?, 'nack', ?)");
        dead.run(5, start, start, '"old5"', start, null);
        dead.run(3, start, start, '"old3"', start, 20);
        // Two waiting, in queue order m_9 then m_8.
        const ins = db.prepare('INSERT INTO messages (id, queue_id, state, visible_at, enqueued_at, body, size, seq) VALUES (?, 1, 0, ?, ?, ?, 1, ?)');
        ins.run(9, start, start, '"old9"', 30);
        ins.run(8, start, start, '"old8"', 31);
        db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('message_id_floor', '1000')").run(); // above every id and seq given
        db.close();
        t = makeEngine({ dataDir: dir, start });
        const got = (await t.engine.pull({ ...ref, max: 2 })).messages;
        assert.deepEqual(got.map((m) => m.id), ['m_9', 'm_8']);
        for (const m of got) assert.equal((await t.engine.nack({ receipt: m.receipt })).ok, true); // both die now, m_9 first
        const list = await t.engine.deadList({ ...ref, limit: 1000 });
        assert.deepEqual(list.messages.map((m) => m.id), ['m_3', 'm_5', 'm_9', 'm_8']);
        // A cursor a schema-4 emulator gave (`d_<deadAt>_<id>`) still pages on from the same row.
        assert.deepEqual((await t.engine.deadList({ ...ref, cursor: `d_${start}_3` })).messages.map((m) => m.id), ['m_5', 'm_9', 'm_8']);
        const check = new Database(file, { readonly: true });
        assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION);
        assert.match((check.prepare("SELECT sql FROM sqlite_master WHERE name = 'msg_dead'").get() as { sql: string }).sql, /\(queue_id, dead_at, seq\)/);
        check.close();
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a batch long enough for multi-row inserts keeps every message whole, in order, with its own id, delay, dedupe key and attributes', async () => {
      t = makeEngine();
      // 61 = two statements of 25 rows, then 11 one by one.
      const messages = Array.from({ length: 61 }, (_, i) => ({
        body: { i, text: `m${i}` },
        ...(i % 7 === 3 ? { delayMs: 60_000 } : {}),
        ...(i % 10 === 5 ? { dedupeKey: `k${i}` } : {}),
        ...(i === 30 ? { attributes: { who: 'thirty' } } : {}),
      }));
      const { results } = await t.engine.pushBatch({ ...ref, create: 'cache', messages });
      const ids = results.map((r) => Number(r.id.slice(2)));
      assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
      assert.equal(new Set(ids).size, 61);
      assert.ok(results.every((r) => !r.deduped));
      const delayed = messages.filter((m) => m.delayMs).length;
      const c = (await t.engine.stats(ref)).counts;
      assert.deepEqual([c.ready, c.delayed], [61 - delayed, delayed]);
      const got = (await t.engine.pull({ ...ref, max: 100 })).messages;
      assert.deepEqual(got.map((m) => m.body), messages.filter((m) => !m.delayMs).map((m) => m.body), 'ready ones come out oldest first, in batch order');
      assert.deepEqual(got.map((m) => m.attempts), got.map(() => 1));
      assert.equal(got.find((m) => (m.body as { i: number }).i === 30)?.attributes?.who, 'thirty');
      // Dedupe keys written with the batch name their own messages.
      for (const i of [5, 15, 55]) assert.deepEqual(await t.engine.push({ ...ref, body: 'again', dedupeKey: `k${i}` }), { id: results[i].id, deduped: true });
    });

    it('a repeated id in replay counts once', async () => {
      t = makeEngine();
      await t.engine.push({ ...ref, body: 1, create: 'cache' });
      const [m] = (await t.engine.pull(ref)).messages;
      await t.engine.nack({ receipt: m.receipt, dead: true });
      assert.deepEqual(await t.engine.replay({ ...ref, ids: [m.id, m.id] }), { replayed: 1 });
      const c = (await t.engine.stats(ref)).counts;
      assert.deepEqual([c.ready, c.dead], [1, 0]);
    });
  });

  describe('counts', () => {
    it('a receipt given twice in one ack.batch acks once; the second is stale and the counts stay exact', async () => {
      t = makeEngine();
      await t.engine.push({ ...ref, body: 1, create: 'cache' });
      await t.engine.push({ ...ref, body: 2 });
      const { messages } = await t.engine.pull({ ...ref, max: 2 });
      assert.deepEqual(await t.engine.ackBatch({ receipts: [messages[0].receipt, messages[0].receipt, messages[1].receipt] }), { acked: 2, stale: 1 });
      const c = (await t.engine.stats(ref)).counts;
      assert.deepEqual([c.ready, c.leased, c.bytes], [0, 0, 0]);
    });

    it('a push refused in the same group commit as a pull leaves the counts exact', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache', policy: { maxDepth: 1 } });
      await t.engine.push({ ...ref, body: 1 });
      // Both in one group commit: the pull commits, the batch over maxDepth is refused and rolled back.
      const [ok, full] = await Promise.allSettled([t.engine.pull(ref), t.engine.pushBatch({ ...ref, messages: [{ body: 2 }, { body: 3 }] })]);
      assert.equal(ok.status, 'fulfilled');
      assert.equal(full.status, 'rejected');
      const c = (await t.engine.stats(ref)).counts;
      assert.deepEqual([c.ready, c.leased], [0, 1]);
    });
  });

  describe('counts and lag history', () => {
    it('counts ready, delayed, leased, dead and the oldest ready wait', async () => {
      t = makeEngine();
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      await t.engine.push({ ...ref, body: 1 });
      await t.engine.push({ ...ref, body: 2 });
      await t.engine.push({ ...ref, body: 3, delayMs: 60_000 });
      await t.engine.push({ ...ref, body: 4 });
      const { messages } = await t.engine.pull(ref);
      await t.engine.pull(ref).then(({ messages: [m] }) => t.engine.nack({ receipt: m.receipt, dead: true }));
      await t.advance(5000);
      const c = (await t.engine.stats(ref)).counts;
      assert.deepEqual({ ready: c.ready, delayed: c.delayed, leased: c.leased, dead: c.dead, depth: c.depth }, { ready: 1, delayed: 1, leased: 1, dead: 1, depth: 2 });
      assert.equal(c.oldestReadyAgeMs, 5000);
      assert.ok(messages.length === 1);
    });

    it('lag_history: 48 aligned half-hour steps with peak depth and longest oldest-message wait', async () => {
      t = makeEngine({ start: Date.UTC(2026, 0, 5, 10, 10, 0) });
      await t.engine.createQueue({ ...ref, dialect: 'cache' });
      for (let i = 0; i < 3; i++) await t.engine.push({ ...ref, body: i });
      await t.advance(10 * MINUTE);
      const { messages } = await t.engine.pull({ ...ref, max: 3 });
      for (const m of messages) await t.engine.ack({ receipt: m.receipt });
      await t.advance(HOUR);
      const { lagHistory } = await t.engine.stats(ref);
      assert.equal(lagHistory.length, 48);
      for (const s of lagHistory) assert.equal(s.start % (30 * MINUTE), 0);
      const step = lagHistory.find((s) => s.start === Date.UTC(2026, 0, 5, 10, 0, 0))!;
      assert.equal(step.peakDepth, 3);
      assert.ok(step.maxWaitMs >= 10 * MINUTE, `longest wait ${step.maxWaitMs}`);
      assert.equal(lagHistory[lagHistory.length - 1].peakDepth, 0);
    });

    it('lag_history: each ended step keeps the wait its oldest message had reached by the step\'s end, and no step\'s figure goes down later', async () => {
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      t = makeEngine({ start: step0 + MINUTE });
      await t.engine.push({ ...ref, body: 'waits', create: 'cache' });
      const steps = async () => {
        const { lagHistory } = await t.engine.stats(ref);
        return lagHistory.filter((s) => s.start >= step0).map((s) => [(s.start - step0) / MINUTE, s.peakDepth, s.maxWaitMs / MINUTE]);
      };
      await t.advance(9 * MINUTE);
      assert.deepEqual(await steps(), [[0, 1, 9]]);
      await t.advance(60 * MINUTE); // now 01:10 into the hour
      assert.deepEqual(await steps(), [[0, 1, 29], [30, 1, 59], [60, 1, 69]]);
      await t.advance(30 * MINUTE);
      assert.deepEqual(await steps(), [[0, 1, 29], [30, 1, 59], [60, 1, 89], [90, 1, 99]]);
      // Once the message is gone the ended steps keep their figures, and the new one starts at 0.
      const [m] = (await t.engine.pull(ref)).messages;
      await t.engine.ack({ receipt: m.receipt });
      await t.advance(30 * MINUTE);
      assert.deepEqual(await steps(), [[0, 1, 29], [30, 1, 59], [60, 1, 89], [90, 1, 99], [120, 0, 0]]);
    });

    it('lag_history: after a late step change (a suspended process) the step that ended and the ones slept through are closed with what waited through them', async () => {
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      t = makeEngine({ start: step0 + MINUTE });
      await t.engine.push({ ...ref, body: 'waits', create: 'cache' });
      await t.advance(9 * MINUTE);
      // The process sleeps from 10:10 to 12:05: the clock jumps without the due work on the way.
      t.clock.set(step0 + 2 * 60 * MINUTE + 5 * MINUTE);
      await t.advance(0);
      const steps = (await t.engine.stats(ref)).lagHistory.filter((s) => s.start >= step0).map((s) => [(s.start - step0) / MINUTE, s.peakDepth, s.maxWaitMs / MINUTE]);
      assert.deepEqual(steps, [[0, 1, 29], [30, 1, 59], [60, 1, 89], [90, 1, 119], [120, 1, 124]]);
    });

    it('lag_history: while every message is leased and nothing waits anywhere, the steps show depth 0; the leases running out count from then on', async () => {
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      t = makeEngine({ start: step0 - 10 * MINUTE });
      await t.engine.pushBatch({ ...ref, create: 'cache', messages: Array.from({ length: 20 }, (_, i) => ({ body: i })) });
      await t.engine.pull({ ...ref, max: 20, leaseMs: 3 * HOUR });
      await t.advance(3 * HOUR + 5 * MINUTE); // the leases end at 12:50, in the step of 12:30
      const steps = (await t.engine.stats(ref)).lagHistory.filter((s) => s.start >= step0 - 30 * MINUTE).map((s) => [(s.start - step0) / MINUTE, s.peakDepth, s.maxWaitMs / MINUTE]);
      assert.deepEqual(steps, [[-30, 20, 0], [0, 0, 0], [30, 0, 0], [60, 0, 0], [90, 0, 0], [120, 0, 0], [150, 20, 5]]);
    });

    it('lag_history: a queue empty for hours and then pushed to shows the push in its own step only (the step change seen by that push)', async () => {
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      t = makeEngine({ start: step0 + MINUTE });
      await t.engine.push({ ...ref, create: 'cache', body: 'one' });
      assert.equal((await t.engine.ack({ receipt: (await t.engine.pull(ref)).messages[0].receipt })).ok, true);
      // A system clock moves on with no due work on the way; the next thing the engine does is a push.
      t.clock.set(step0 + 2 * HOUR + 10 * MINUTE);
      await t.engine.push({ ...ref, body: 'later' });
      await t.advance(0); // the due work that follows (a system clock's timer)
      const steps = (await t.engine.stats(ref)).lagHistory.filter((s) => s.start >= step0).map((s) => [(s.start - step0) / MINUTE, s.peakDepth]);
      assert.deepEqual(steps, [[0, 1], [30, 0], [60, 0], [90, 0], [120, 1]]);
    });

    it('lag_history: a step change whose transaction does not commit is taken again by the next one', async () => {
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      t = makeEngine({ start: step0 + MINUTE });
      await t.engine.push({ ...ref, body: 'waits', create: 'cache' });
      t.clock.set(step0 + 2 * HOUR + 10 * MINUTE);
      // The next commit fails (a full disk), and is rolled back with the step's closing records.
      const transaction = t.store.transaction.bind(t.store);
      let failNext = true;
      t.store.transaction = <T>(fn: () => T): T =>
        transaction(() => {
          const out = fn();
          if (failNext) {
            failNext = false;
            throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
          }
          return out;
        });
      assert.equal((await rejects(t.engine.push({ ...ref, body: 'lost' }))).code, 'storage_full');
      await t.advance(0);
      const steps = (await t.engine.stats(ref)).lagHistory.filter((s) => s.start >= step0).map((s) => [(s.start - step0) / MINUTE, s.peakDepth, s.maxWaitMs / MINUTE]);
      assert.deepEqual(steps, [[0, 1, 29], [30, 1, 59], [60, 1, 89], [90, 1, 119], [120, 1, 129]]);
    });

    it('lag_history: the steps an emulator was down for are closed at its next start with what waited through them', async () => {
      const dir = tempDir();
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      try {
        t = makeEngine({ dataDir: dir, start: step0 + 17 * MINUTE });
        await t.engine.pushBatch({ ...ref, create: 'cache', messages: [{ body: 1 }, { body: 2 }] });
        await t.close();
        t = makeEngine({ dataDir: dir, start: step0 + 3 * HOUR + 22 * MINUTE });
        await t.advance(0);
        const steps = (await t.engine.stats(ref)).lagHistory.filter((s) => s.start >= step0).map((s) => [(s.start - step0) / MINUTE, s.peakDepth, s.maxWaitMs / MINUTE]);
        assert.deepEqual(steps, [[0, 2, 13], [30, 2, 43], [60, 2, 73], [90, 2, 103], [120, 2, 133], [150, 2, 163], [180, 2, 185]]);
      } finally {
        await t.close();
        t = null as never;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('lag_history: messages that leave without being pulled (purge, the age limit) still count the wait they reached', async () => {
      const step0 = Date.UTC(2026, 0, 5, 10, 0, 0);
      t = makeEngine({ start: step0 + MINUTE });
      const stepOf = async (r: typeof ref) => (await t.engine.stats(r)).lagHistory.find((s) => s.start === step0)!;
      const purged = { namespace: 'ns', queue: 'purged' };
      await t.engine.push({ ...purged, body: 1, create: 'cache' });
      await t.engine.push({ ...purged, body: 2 });
      // A sync queue whose messages go dead at 19 minutes of age.
      const aged = { namespace: 'ns', queue: 'aged' };
      await t.engine.createQueue({ ...aged, dialect: 'sync', policy: { maxMessageAgeMs: 19 * MINUTE } });
      await t.engine.push({ ...aged, body: 'old' });
      await t.advance(19 * MINUTE);
      assert.equal((await t.engine.stats(aged)).counts.dead, 1);
      assert.deepEqual(await t.engine.purge({ ...purged, confirm: 'purged' }), { purged: 2 });
      await t.advance(MINUTE);
      for (const r of [purged, aged]) {
        const s = await stepOf(r);
        assert.equal(s.maxWaitMs, 19 * MINUTE, `${r.queue}: ${JSON.stringify(s)}`);
      }
      assert.equal((await stepOf(purged)).peakDepth, 2);
    });

    it('lag records are written at most once a second while a queue keeps changing, and none is lost to stats, a step end, a failed commit or close', async () => {
      const dir = tempDir();
      const start = Date.UTC(2026, 0, 5, 10, 29, 58);
      const step = Date.UTC(2026, 0, 5, 10, 0, 0);
      const lagRows = () => {
        const db = new Database(path.join(dir, DB_FILE), { readonly: true });
        try {
          return (db.prepare('SELECT start, peak_depth, end_depth FROM lag ORDER BY start').all() as { start: number; peak_depth: number; end_depth: number }[]).map((r) => [r.start, r.peak_depth, r.end_depth]);
        } finally {
          db.close();
        }
      };
      try {
        t = makeEngine({ dataDir: dir, start });
        await t.engine.createQueue({ ...ref, dialect: 'cache' });
        for (let i = 0; i < 5; i++) await t.engine.push({ ...ref, body: i });
        // Creating the queue wrote its first record; five pushes in the same second wait in memory.
        assert.deepEqual(lagRows(), [[step, 0, 0]]);
        // stats counts what waits, without writing it.
        const { lagHistory } = await t.engine.stats(ref);
        assert.equal(lagHistory.find((s) => s.start === step)!.peakDepth, 5);
        assert.deepEqual(lagRows(), [[step, 0, 0]]);

        // A second later the next commit would write the record, but that commit fails (disk full):
        // nothing of it is kept, and what waited is still there for the next one.
        await t.advance(1000);
        const store = t.store as unknown as { lagRecord: (...a: unknown[]) => void };
        const real = store.lagRecord.bind(t.store);
        store.lagRecord = () => {
          store.lagRecord = real;
          throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
        };
        assert.equal((await rejects(t.engine.push({ ...ref, body: 'lost' }))).code, 'storage_full');
        assert.deepEqual(lagRows(), [[step, 0, 0]]);
        await t.engine.push({ ...ref, body: 5 });
        assert.deepEqual(lagRows(), [[step, 6, 6]]);
        await t.engine.pull({ ...ref, max: 4 });
        assert.deepEqual(lagRows(), [[step, 6, 6]]);

        // The step ends: its last reading is written with the first record of the next one (made
        // when the clock crossed into it); a push in the same second waits again.
        await t.advance(1000);
        await t.engine.push({ ...ref, body: 6 });
        assert.deepEqual(lagRows(), [[step, 6, 2], [step + 30 * MINUTE, 2, 2]]);
        await t.engine.push({ ...ref, body: 7 });
        await t.close();
        assert.deepEqual(lagRows(), [[step, 6, 2], [step + 30 * MINUTE, 4, 4]]);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a deleted queue leaves no lag bookkeeping behind, and a new queue that takes its id starts clean', async () => {
      const dir = tempDir();
      try {
        t = makeEngine({ dataDir: dir, start: Date.UTC(2026, 0, 5, 10, 29, 58) });
        const { lag } = t.engine as unknown as { lag: { seen: Map<number, unknown>; writtenAt: Map<number, unknown>; unwritten: Map<string, unknown> } };
        for (let i = 0; i < 20; i++) {
          await t.engine.createQueue({ ...ref, dialect: 'cache' });
          await t.engine.push({ ...ref, body: i });
          await t.engine.push({ ...ref, body: i });
          await t.engine.deleteQueue(ref);
        }
        assert.deepEqual([lag.seen.size, lag.writtenAt.size, lag.unwritten.size], [0, 0, 0]);
        await t.engine.createQueue({ ...ref, dialect: 'cache' });
        const { lagHistory } = await t.engine.stats(ref);
        assert.equal(Math.max(...lagHistory.map((s) => s.peakDepth)), 0);
      } finally {
        await t.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  it('close and reopen on the same data directory keeps queues, messages, leases, dedupe keys, dead letters and the audit log', async () => {
    const dir = tempDir();
    const start = Date.UTC(2026, 0, 5, 10, 0, 0);
    t = makeEngine({ dataDir: dir, start });
    await t.engine.createQueue({ ...ref, dialect: 'sync', policy: { maxDeliveries: 3 } });
    const kept = await t.engine.push({ ...ref, body: { keep: true }, dedupeKey: 'k', attributes: { a: 1 } });
    const delayed = await t.engine.push({ ...ref, body: 'later', delayMs: 60_000 });
    await t.engine.push({ ...ref, body: 'leased' });
    await t.engine.push({ ...ref, body: 'dead' });
    const pulled = await t.engine.pull({ ...ref, max: 3 });
    const leased = pulled.messages.find((m) => m.body === 'leased')!;
    const toDie = pulled.messages.find((m) => m.body === 'dead')!;
    const back = pulled.messages.find((m) => m.id === kept.id)!;
    await t.engine.nack({ receipt: back.receipt });
    await t.engine.nack({ receipt: toDie.receipt, dead: true, error: 'bad' });
    await t.engine.replay({ ...ref, ids: ['m_999'] });
    await t.close();

    t = makeEngine({ dataDir: dir, start: start + 1000 });
    const q = (await t.engine.listQueues()).queues[0];
    assert.equal(q.name, 'q');
    assert.equal(q.policy.maxDeliveries, 3);
    assert.deepEqual({ r: q.counts.ready, d: q.counts.delayed, l: q.counts.leased, x: q.counts.dead }, { r: 1, d: 1, l: 1, x: 1 });
    assert.deepEqual(await t.engine.push({ ...ref, body: 1, dedupeKey: 'k' }), { id: kept.id, deduped: true });
    assert.equal((await t.engine.ack({ receipt: leased.receipt })).ok, true, 'the lease and its receipt survived');
    const dead = await t.engine.deadList(ref);
    assert.equal(dead.messages[0].lastError, 'bad');
    assert.equal((await t.engine.getMessage({ ...ref, id: delayed.id })).state, 'delayed');
    assert.equal((await t.engine.getMessage({ ...ref, id: kept.id })).attributes?.a, 1);
    assert.equal((await t.engine.auditList({})).entries[0].action, 'replay');
  });

  it('work that fell due while the emulator was down is applied at start', async () => {
    const dir = tempDir();
    const start = Date.UTC(2026, 0, 5, 10, 0, 0);
    t = makeEngine({ dataDir: dir, start });
    await t.engine.createQueue({ ...ref, dialect: 'cache', policy: { maxDeliveries: 1 } });
    const { id } = await t.engine.push({ ...ref, body: 1 });
    await t.engine.pull({ ...ref, leaseMs: 1000 });
    await t.close();
    t = makeEngine({ dataDir: dir, start: start + 5000 });
    await t.advance(0);
    const m = await t.engine.getMessage({ ...ref, id });
    assert.equal(m.state, 'dead');
    assert.equal(m.deadReason, 'timeout');
  });
});

describe('engine: a queue policy\'s lease', () => {
  it('is at most 12 hours when set, as a pull and every face allow; a queue made with more before the limit can be sent its own policy back', () => {
    assert.equal(mergePolicy(PRESETS.cache, { leaseMs: 12 * HOUR }).leaseMs, 12 * HOUR);
    assert.throws(() => mergePolicy(PRESETS.cache, { leaseMs: 12 * HOUR + 1 }), /policy\.leaseMs is at most 43200000 ms/);
    const old = { ...PRESETS.cache, leaseMs: DAY };
    assert.equal(mergePolicy(old, { ...old, maxDeliveries: 3 }).maxDeliveries, 3, 'the stored value, sent back unchanged');
    assert.throws(() => mergePolicy(old, { leaseMs: DAY + 1 }), /at most 43200000/);
  });
});
