import assert from 'node:assert/strict';
import * as remote from '../../../emulator/clients/sync';
import * as memory from '../../../emulator/embedded/memory';
import type { SyncQueue, SyncQueueOptions, SyncSchema } from '../../../emulator/clients/sync-face';
import { startEmulator } from '../../../emulator/emulator';
import { LIMITS } from '../../../emulator/protocol';
import { Connection } from '../../../emulator/clients/connection';
import { DAY, HOUR, MINUTE, fresh, rejects, startTestEmulator, until } from '../support';
import { variants, type Harness } from './harness';

// What the real product's references/api.md gives that DESIGN.md's summary leaves out (schema,
// prefix, per-call tenantId), waits longer than one server hold, whose settings a handle follows,
// and errors that speak the product's field names. Same bodies against both variants.

/** A Zod-like schema that checks and transforms: `{ n: '5' }` in, `{ n: 5 }` out. */
const numberish: SyncSchema = {
  parse(x: unknown) {
    const n = (x as { n?: unknown } | null)?.n;
    if (typeof n !== 'string' || !/^\d+$/.test(n)) throw new Error('n must be a string of digits');
    return { n: Number(n) };
  },
};

/** Handles, each set up (its settings applied to the stored policy) before the next is made. */
async function inOrder(h: Harness, ...opts: SyncQueueOptions[]): Promise<SyncQueue[]> {
  const out: SyncQueue[] = [];
  for (const o of opts) {
    const q = h.queue(o);
    await q.stats();
    out.push(q);
  }
  return out;
}

for (const variant of variants) {
  describe(`conformance: sync product API — ${variant.name}`, function () {
    let h: Harness;
    before(async () => {
      h = await variant.make();
    });
    after(() => h.close());

    describe('recv waits longer than one server hold (20 min)', () => {
      it('ends at its timeout on the emulator clock, and never takes a message sent after it', async () => {
        const q = h.queue({ id: fresh('long') });
        const p = q.recv({ timeoutMs: 30 * MINUTE });
        await h.advance(31 * MINUTE);
        await q.send({ data: 'after-timeout' });
        assert.equal(await p, null);
        assert.equal((await q.recv({ wait: false }))?.data, 'after-timeout');
      });

      it('ends exactly at its timeout, over several holds', async () => {
        const q = h.queue({ id: fresh('long') });
        let done = false;
        const p = q.recv({ timeoutMs: 45 * MINUTE }).then((m) => {
          done = true;
          return m;
        });
        await h.advance(45 * MINUTE - 1);
        assert.equal(done, false, 'still waiting a millisecond before its timeout');
        await h.advance(1);
        assert.equal(await p, null);
      });

      it('takes a message sent after the first hold ended', async () => {
        const q = h.queue({ id: fresh('long') });
        const p = q.recv<string>({ timeoutMs: 30 * MINUTE });
        await h.advance(25 * MINUTE);
        await q.send({ data: 'in time' });
        assert.equal((await p)?.data, 'in time');
      });

      // Found by a model-based probe: a hold ended at its own 20 minutes on the clock, and one
      // advance ran on through the gap before the next hold came, past the message's due time.
      for (const [dueMin, waitMin] of [[25, 30], [21, 60], [45, 60], [61, 90]]) {
        it(`takes a message that comes due at +${dueMin} min during one advance of a ${waitMin}-minute wait, at that instant`, async () => {
          const q = h.queue({ id: fresh('long') });
          await q.stats();
          const t0 = h.now();
          await q.send({ data: 'due', delayMs: dueMin * MINUTE });
          const p = q.recv<string>({ timeoutMs: waitMin * MINUTE, leaseMs: 60_000 });
          await h.advance(waitMin * MINUTE);
          const m = await p;
          assert.equal(m?.data, 'due');
          assert.equal(m?.leaseUntil, t0 + dueMin * MINUTE + 60_000, 'leased the moment it came due');
        });
      }
    });

    describe('schema (payload validation: validated at send, re-parsed at receive)', () => {
      it('send checks data with schema.parse: a throw rejects invalid_argument naming data, and nothing is enqueued', async () => {
        const q = h.queue({ id: fresh('schema'), schema: numberish });
        const e = await rejects(q.send({ data: { n: 5 } }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, /\bdata\b/);
        assert.match(e.message, /n must be a string of digits/);
        assert.ok(e.cause instanceof Error && /digits/.test(e.cause.message), 'the schema\'s own error is the cause');
        assert.deepEqual(await q.stats(), { ready: 0, delayed: 0, inFlight: 0, dlq: 0 });
      });

      it('recv hands the consumer schema.parse(stored data): a transforming schema runs once, at receive', async () => {
        const id = fresh('schema');
        const q = h.queue({ id, schema: numberish });
        await q.send({ data: { n: '5' } });
        const m = await q.recv({ wait: false });
        assert.deepEqual(m?.data, { n: 5 });
        // What is stored is what was sent: a handle without the schema sees the schema's input.
        await m!.nack();
        assert.deepEqual((await h.queue({ id }).recv({ wait: false }))?.data, { n: '5' });
      });

      it('a message that fails the schema at receive goes to the DLQ (reason invalid_payload) and recv goes on to the next', async () => {
        const id = fresh('schema');
        const plain = h.queue({ id });
        await plain.send({ data: { n: 'not digits' } });
        await plain.send({ data: { n: '7' } });
        const q = h.queue({ id, schema: numberish });
        const m = await q.recv({ wait: false });
        assert.deepEqual(m?.data, { n: 7 });
        const [d] = await q.dlq();
        assert.deepEqual([d.data, d.reason], [{ n: 'not digits' }, 'invalid_payload']);
        assert.match(d.lastError ?? '', /n must be a string of digits/);
        // A blocking recv skips it the same way and keeps waiting.
        const waiting = q.recv({ timeoutMs: 60_000 });
        await plain.send({ data: { n: 'bad' } });
        await plain.send({ data: { n: '8' } });
        assert.deepEqual((await waiting)?.data, { n: 8 });
        assert.equal((await q.dlq()).length, 2);
      });

      it('a schema whose parse returns a promise is awaited: a rejection refuses the send, and recv hands over the resolved value', async () => {
        const later: SyncSchema = {
          async parse(x: unknown) {
            if (typeof x !== 'number') throw new Error('must be a number');
            return x * 2;
          },
        };
        const q = h.queue({ id: fresh('async-schema'), schema: later });
        const e = await rejects(q.send({ data: 'nope' }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, /must be a number/);
        assert.equal((await q.stats()).ready, 0, 'nothing enqueued');
        await q.send({ data: 21 });
        assert.equal((await q.recv({ wait: false }))?.data, 42);
      });

      it('a schema that throws something with no text (no toJSON, no toString) still refuses with invalid_argument', async () => {
        const odd = Object.assign(Object.create(null) as object, {
          toJSON() {
            throw new Error('no JSON either');
          },
        });
        const revoked = Proxy.revocable({}, {});
        revoked.revoke();
        for (const thrown of [odd, revoked.proxy]) {
          const q = h.queue({ id: fresh('odd-throw'), schema: { parse: () => { throw thrown; } } });
          const e = await rejects(q.send({ data: 1 }));
          assert.equal(e.code, 'invalid_argument');
        }
      });

      it('a message the schema refuses does not lengthen a recv: the wait still ends at its timeout on the clock', async () => {
        const id = fresh('schema-wait');
        const plain = h.queue({ id });
        const q = h.queue({ id, schema: numberish });
        await q.stats();
        const p = q.recv({ timeoutMs: 30_000 });
        await h.advance(20_000);
        await plain.send({ data: { n: 'bad' } });
        await until(async () => (await plain.stats()).dlq === 1, 'the refused message in the DLQ');
        await h.advance(15_000); // 35 s: past the recv's 30 s
        await plain.send({ data: { n: '1' } });
        assert.equal(await p, null);
        assert.deepEqual((await q.recv({ wait: false }))?.data, { n: 1 }, 'the later message is still there');
      });

      it('a schema that is not an object with parse() is refused invalid_argument', () => {
        for (const schema of [{}, 5, 'zod', { parse: 1 }, null]) {
          if (schema === null) continue; // absent, like undefined
          assert.throws(() => h.queue({ id: 'x', schema: schema as never }), (e: any) => e.code === 'invalid_argument' && /schema/.test(e.message), JSON.stringify(schema));
        }
      });
    });

    describe('prefix (the product\'s Redis key prefix, default "sync:queue")', () => {
      it('another prefix is another set of queues; the default prefix, given or not, is the same one', async () => {
        const id = fresh('prefixed');
        const a = h.queue({ id, prefix: 'app-a' });
        const b = h.queue({ id, prefix: 'app-b' });
        const plain = h.queue({ id });
        const named = h.queue({ id, prefix: 'sync:queue' });
        await a.send({ data: 'for a' });
        await plain.send({ data: 'for the default prefix' });
        assert.equal(await b.recv({ wait: false }), null);
        assert.equal((await a.recv({ wait: false }))?.data, 'for a');
        assert.equal((await named.recv({ wait: false }))?.data, 'for the default prefix');
        assert.equal(a.prefix, 'app-a');
        assert.equal(plain.prefix, 'sync:queue');
      });

      it('a prefix that is not a non-empty string is refused invalid_argument', () => {
        for (const prefix of ['', 5, 'a\nb']) {
          assert.throws(() => h.queue({ id: 'x', prefix: prefix as never }), (e: any) => e.code === 'invalid_argument' && /prefix/.test(e.message), JSON.stringify(prefix));
        }
      });
    });

    describe('per-call tenantId', () => {
      it("send, recv, stream, dlq and dlqRemove with tenantId address that tenant's queue of the same id, with the handle's settings", async () => {
        const id = fresh('tenants');
        const q = h.queue({ id, tenantId: fresh('home'), delivery: { defaultLeaseMs: 7000, maxDeliveries: 1 } });
        const other = fresh('other');
        await q.send({ data: 'for other', tenantId: other });
        assert.equal(await q.recv({ wait: false }), null, "the handle's own tenant is empty");
        assert.equal((await h.queue({ id, tenantId: other }).stats()).ready, 1);
        const m = (await q.recv({ wait: false, tenantId: other }))!;
        assert.equal(m.data, 'for other');
        assert.equal(m.leaseUntil, h.now() + 7000);
        await m.nack(); // maxDeliveries 1: the handle's settings made that queue
        const [d] = await q.dlq({ tenantId: other });
        assert.equal(d.messageId, m.messageId);
        assert.deepEqual(await q.dlq(), []);
        assert.equal(await q.dlqRemove({ messageId: m.messageId }), false);
        assert.equal(await q.dlqRemove({ messageId: m.messageId, tenantId: other }), true);
        await q.send({ data: 1, tenantId: other });
        await q.send({ data: 2, tenantId: other });
        const seen: unknown[] = [];
        for await (const s of q.stream({ wait: false, tenantId: other })) {
          seen.push(s.data);
          await s.ack();
        }
        assert.deepEqual(seen, [1, 2]);
      });

      it('a handle that addresses many tenants keeps working for each, the early ones too', async () => {
        const id = fresh('many');
        const q = h.queue({ id, delivery: { defaultLeaseMs: 4000 } });
        const tenants = Array.from({ length: 300 }, (_, i) => `t${i}-${id}`);
        for (const tenantId of tenants) await q.send({ data: tenantId, tenantId });
        for (const tenantId of [tenants[0], tenants[299], tenants[1]]) {
          const m = (await q.recv({ wait: false, tenantId }))!;
          assert.equal(m.data, tenantId);
          assert.equal(m.leaseUntil, h.now() + 4000, "the handle's settings still apply");
          assert.equal(await m.ack(), true);
        }
      });

      it('a per-call tenantId is checked like the handle\'s: invalid_argument naming tenantId, nothing sent', async () => {
        const q = h.queue({ id: fresh('tenants') });
        for (const tenantId of ['', 5, 't'.repeat(201), 'a\u0000b']) {
          for (const call of [() => q.send({ data: 1, tenantId: tenantId as never }), () => q.recv({ wait: false, tenantId: tenantId as never })]) {
            const e = await rejects(call);
            assert.equal(e.code, 'invalid_argument');
            assert.match(e.message, /tenantId/);
          }
        }
        assert.deepEqual(await q.stats(), { ready: 0, delayed: 0, inFlight: 0, dlq: 0 });
      });
    });

    describe('a nack over the queue\'s maxNackDelayMs throws even when the lease has ended', () => {
      it('stale or not, the delay is a bad request: invalid_argument, nothing settled', async () => {
        const q = h.queue({ id: fresh('stale-nack') });
        await q.send({ data: 1 });
        const m = (await q.recv({ wait: false, leaseMs: 1000 }))!;
        await h.advance(1000); // the lease has ended
        const e = await rejects(m.nack({ delayMs: 8 * 24 * MINUTE * 60 }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, /maxNackDelayMs/);
        assert.equal(await m.nack({ delayMs: 1000 }), false, 'a delay within the limit: just stale');
      });
    });

    it('reader() refuses an option it does not know', () => {
      const q = h.queue({ id: fresh('reader') });
      assert.throws(() => q.reader({ consumerID: 'x' } as never), (e: any) => e.code === 'invalid_argument' && /consumerID/.test(e.message));
    });

    it('a huge finite timeoutMs just waits (the deadline is capped at the latest time a Date holds)', async () => {
      const q = h.queue({ id: fresh('huge') });
      const ac = new AbortController();
      const p = q.recv({ timeoutMs: Number.MAX_SAFE_INTEGER, signal: ac.signal });
      await h.advance(MINUTE);
      await q.send({ data: 'x' });
      assert.equal((await p)?.data, 'x');
    });

    describe('closing a handle, and bad signals', () => {
      it('a stream({ wait: true }) waiting on a handle ends when the handle is closed, instead of retrying', async () => {
        const q = h.queue({ id: fresh('close-stream') });
        await q.stats();
        const it = q.stream({ wait: true })[Symbol.asyncIterator]();
        const next = it.next();
        await new Promise((r) => setImmediate(r)); // the recv is out
        await q.close();
        assert.deepEqual(await next, { done: true, value: undefined });
      });

      it('a signal that is not an AbortSignal is invalid_argument for recv and stream', async () => {
        const q = h.queue({ id: fresh('bad-signal') });
        for (const call of [() => q.recv({ wait: false, signal: 5 as never }), () => q.stream({ wait: false, signal: {} as never })[Symbol.asyncIterator]().next()]) {
          const e = await rejects(call());
          assert.equal(e.code, 'invalid_argument');
          assert.match(e.message, /^signal must be an AbortSignal/);
        }
      });
    });

    describe('settings are per handle (as in the library, which keeps config in each handle)', () => {
      it("a handle's own defaultLeaseMs and maxNackDelayMs govern its calls; a handle given none follows the queue's stored policy as it is now", async () => {
        const id = fresh('per-handle');
        // `none` is first used while the stored policy is a's; then b's settings become it.
        const [a, none, b] = await inOrder(h, { id, delivery: { defaultLeaseMs: 1000 }, limits: { maxNackDelayMs: 1000 } }, { id }, { id, delivery: { defaultLeaseMs: 5000 }, limits: { maxNackDelayMs: 60_000 } });
        for (let i = 0; i < 3; i++) await none.send({ data: i });
        const ma = (await a.recv({ wait: false }))!;
        const mb = (await b.recv({ wait: false }))!;
        const mn = (await none.recv({ wait: false }))!;
        assert.equal(ma.leaseUntil, h.now() + 1000, "a's own lease");
        assert.equal(mb.leaseUntil, h.now() + 5000, "b's own lease");
        assert.equal(mn.leaseUntil, h.now() + 5000, 'the stored lease, as it is now');
        const e = await rejects(ma.nack({ delayMs: 5000 }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, /this handle's maxNackDelayMs \(1000\)/);
        assert.equal((await a.stats()).inFlight, 3, 'the refused nack settled nothing');
        assert.equal(await mb.nack({ delayMs: 5000 }), true);
        assert.equal(await mn.nack({ delayMs: 5000 }), true, 'the stored maxNackDelayMs (60000) allows it');
        assert.equal(await ma.nack({ delayMs: 1000 }), true);
      });

      it("touch() without leaseMs extends by the lease the delivery got, even after another handle changed the queue's default", async () => {
        const id = fresh('touch-own');
        const [none] = await inOrder(h, { id });
        await none.send({ data: 'x' });
        const m = (await none.recv({ wait: false }))!;
        assert.equal(m.leaseUntil, h.now() + 30_000, 'the queue default at the recv');
        await inOrder(h, { id, delivery: { defaultLeaseMs: 2000 } }); // the stored default is now 2 s
        await h.advance(10_000);
        assert.equal(await m.touch(), true);
        assert.equal(m.leaseUntil, h.now() + 30_000, "extended by the delivery's own 30 s, not the new 2 s");
      });

      it("a handle's own idempotencyTtlMs is the window of its sends", async () => {
        const id = fresh('per-handle');
        const [short, long] = await inOrder(h, { id, limits: { idempotencyTtlMs: 1000 } }, { id, limits: { idempotencyTtlMs: 60_000 } });
        const a1 = await short.send({ data: 1, idempotencyKey: 'a' });
        const b1 = await long.send({ data: 1, idempotencyKey: 'b' });
        await h.advance(1000);
        assert.notEqual((await short.send({ data: 2, idempotencyKey: 'a' })).messageId, a1.messageId, "short's 1 s window has ended");
        assert.equal((await short.send({ data: 2, idempotencyKey: 'b' })).messageId, b1.messageId, "long's 60 s window is the first send's");
      });

      it("a handle's own payloadBytes bounds its sends; the stored one bounds the rest", async () => {
        const id = fresh('per-handle');
        const [small, big, none] = await inOrder(h, { id, limits: { payloadBytes: 100 } }, { id, limits: { payloadBytes: 1000 } }, { id });
        const e = await rejects(small.send({ data: 'x'.repeat(500) }));
        assert.equal(e.code, 'payload_too_large');
        assert.match(e.message, /this handle's payloadBytes \(100\)/);
        await big.send({ data: 'x'.repeat(500) });
        await none.send({ data: 'x'.repeat(500) });
        const over = await rejects(none.send({ data: 'x'.repeat(1000) }));
        assert.equal(over.code, 'payload_too_large');
        assert.match(over.message, /the queue's payloadBytes \(1000\)/);
        assert.equal((await none.stats()).ready, 2);
      });

      it("a send refused for data JSON cannot carry writes nothing of the handle's settings: not on a new queue, not on an existing one", async () => {
        /** How many deliveries a message of `q` gets before the DLQ, up to 4. */
        const deliveries = async (q: SyncQueue) => {
          await q.send({ data: 'probe' });
          for (let n = 1; n <= 4; n++) {
            const m = (await q.recv({ wait: false }))!;
            await m.nack();
            if ((await q.dlq()).length) return n;
          }
          return Infinity;
        };
        for (const data of [NaN, 1n, { a: [Infinity] }, { self: null as unknown }]) {
          if (data && typeof data === 'object' && 'self' in data) data.self = data; // a cycle
          const id = fresh('refused-first');
          const e = await rejects(h.queue({ id, delivery: { maxDeliveries: 2 } }).send({ data }));
          assert.equal(e.code, 'invalid_argument', e.message);
          assert.equal(await deliveries(h.queue({ id })), Infinity, 'the queue was made with the default 10, not 2');
        }
        const id = fresh('refused-later');
        await inOrder(h, { id, delivery: { maxDeliveries: 3 } });
        const e = await rejects(h.queue({ id, delivery: { maxDeliveries: 1 } }).send({ data: NaN }));
        assert.equal(e.code, 'invalid_argument');
        assert.match(e.message, /^send: data/);
        assert.equal(await deliveries(h.queue({ id })), 3, 'the stored maxDeliveries is still 3');
      });

      it('settings the emulator applies on its own (maxDeliveries, maxMessageAgeMs, dlqRetentionMs) are the stored policy: the last handle to configure wins', async () => {
        const id = fresh('per-handle');
        const [five] = await inOrder(h, { id, delivery: { maxDeliveries: 5 } }, { id, delivery: { maxDeliveries: 1 } });
        await five.send({ data: 'x' });
        await (await five.recv({ wait: false }))!.nack();
        assert.deepEqual((await five.dlq()).map((d) => d.reason), ['max_deliveries_exceeded'], 'the last handle\'s maxDeliveries: 1');

        // Age and dead-letter retention: the first handle asks for long ones, the last for short.
        const aged = fresh('per-handle-age');
        const [long] = await inOrder(
          h,
          { id: aged, limits: { maxMessageAgeMs: HOUR, dlqRetentionMs: DAY } },
          { id: aged, limits: { maxMessageAgeMs: MINUTE, dlqRetentionMs: HOUR } },
        );
        await long.send({ data: 'old' });
        await h.advance(MINUTE - 1);
        assert.deepEqual(await long.dlq(), [], 'not yet a minute old');
        await h.advance(1);
        assert.deepEqual((await long.dlq()).map((d) => d.reason), ['expired'], 'the last handle\'s maxMessageAgeMs: a minute');
        await h.advance(HOUR - 1);
        assert.equal((await long.dlq()).length, 1, 'kept until an hour after it died');
        await h.advance(1);
        assert.deepEqual(await long.dlq(), [], 'the last handle\'s dlqRetentionMs: an hour');
      });
    });

    describe('errors name the sync fields', () => {
      it('idempotencyKey, id, tenantId, orderingKey and data, with the codes unchanged', async () => {
        const q = h.queue({ id: fresh('errors') });
        const key = await rejects(q.send({ data: 1, idempotencyKey: 'k'.repeat(600) }));
        assert.equal(key.code, 'invalid_argument');
        assert.match(key.message, /^idempotencyKey must be at most 512 characters/);
        assert.match((await rejects(q.send({ data: 1, orderingKey: 'o'.repeat(513) }))).message, /^orderingKey must be at most 512 characters/);
        assert.match((await rejects(q.send({ data: 1, idempotencyKey: 'k\ud800' }))).message, /^idempotencyKey must be well-formed Unicode/);
        assert.match((await rejects(q.send({ data: 1, orderingKey: '\udc00o' }))).message, /^orderingKey must be well-formed Unicode/);
        assert.match((await rejects(q.dlq({ limit: '5' as never }))).message, /got "5"$/);
        assert.throws(() => h.queue({ id: 'i'.repeat(201) }), (e: any) => e.code === 'invalid_argument' && /^id must be at most 200 characters/.test(e.message));
        assert.throws(() => h.queue({ id: 'a\tb' }), (e: any) => e.code === 'invalid_argument' && /^id must not contain control characters/.test(e.message));
        assert.throws(() => h.queue({ id: 'x', tenantId: 't'.repeat(201) }), (e: any) => e.code === 'invalid_argument' && /^tenantId must be at most 200 characters/.test(e.message));
        assert.throws(() => h.queue({ id: 'x', prefix: 'p'.repeat(150), tenantId: 't'.repeat(150) }), (e: any) => e.code === 'invalid_argument' && /prefix/.test(e.message) && /tenantId/.test(e.message));
        const size = await rejects(q.send({ data: 'x'.repeat(131072) }));
        assert.equal(size.code, 'payload_too_large');
        assert.match(size.message, /\bdata\b/);
        assert.doesNotMatch(size.message, /\bbody\b/);
        const big = await rejects(q.send({ data: 'x'.repeat(9 * 1024 * 1024) }));
        assert.equal(big.code, 'payload_too_large');
        assert.match(big.message, /\bdata\b/);
        assert.doesNotMatch(big.message, /\bbody\b|\bpush\b/);
        const bigint = await rejects(q.send({ data: { n: 1n } }));
        assert.equal(bigint.code, 'invalid_argument');
        assert.match(bigint.message, /\bdata\b.*JSON/);
        assert.doesNotMatch(bigint.message, /\bbody\b|\bpush\b/);
        assert.deepEqual(await q.stats(), { ready: 0, delayed: 0, inFlight: 0, dlq: 0 });
      });

      it('meta is a record: a string, number or array is refused invalid_argument naming meta, and nothing is sent', async () => {
        const q = h.queue({ id: fresh('meta') });
        for (const meta of ['str', 7, [1, 2], true]) {
          const e = await rejects(q.send({ data: 1, meta: meta as never }));
          assert.equal(e.code, 'invalid_argument');
          assert.match(e.message, /^send: meta must be an object/);
        }
        await q.send({ data: 1, meta: { trace: 'abc', n: [1] } });
        assert.deepEqual((await q.recv({ wait: false }))?.meta, { trace: 'abc', n: [1] });
        assert.equal((await q.stats()).inFlight, 1, 'only the good send enqueued');
      });
    });
  });
}

describe('conformance: sync — a handle sees only sync queues', () => {
  it('after its queue is deleted and the name is taken by a cache queue, an old handle is refused conflict and touches nothing there', async () => {
    const emu = await startTestEmulator();
    const q = remote.queue({ id: 'jobs', tenantId: 't', url: emu.url, token: emu.token });
    try {
      await q.send({ data: 'sync-1' });
      assert.equal((await q.recv({ wait: false }))?.data, 'sync-1');
      await emu.engine.deleteQueue({ namespace: 't', queue: 'jobs' });
      await emu.engine.push({ namespace: 't', queue: 'jobs', body: { fromCache: 1 }, create: 'cache' });
      for (const [op, call] of [['send', () => q.send({ data: 'sync-2' })], ['recv', () => q.recv({ wait: false })], ['dlq', () => q.dlq()], ['stats', () => q.stats()]] as const) {
        const e = await rejects(call());
        assert.equal(e.code, 'conflict', op);
        assert.match(e.message, /cache queue/, op);
      }
      const cache = await emu.engine.peek({ namespace: 't', queue: 'jobs' });
      assert.deepEqual(cache.messages.map((m) => [m.body, m.state, m.attempts]), [[{ fromCache: 1 }, 'ready', 0]], 'the cache queue is as the cache client left it');
      assert.equal((await emu.engine.getQueue({ namespace: 't', queue: 'jobs' })).dialect, 'cache');
    } finally {
      await q.close();
      await emu.close();
    }
  });
});

describe('conformance: sync — refusals in the product\'s words (a read-only token, a missing queue)', () => {
  it('names the call made and the tenant, never the engine\'s operation (queue.create, push, pull, dead.purge) or namespace', async () => {
    const emu = await startTestEmulator();
    const ro = remote.queue({ id: 'nope', tenantId: 't1', url: emu.url, token: await emu.createToken({ access: 'read' }) });
    const rw = remote.queue({ id: 'there', tenantId: 't1', url: emu.url, token: emu.token });
    const roThere = remote.queue({ id: 'there', tenantId: 't1', url: emu.url, token: await emu.createToken({ access: 'read' }) });
    try {
      await rw.send({ data: 1 });
      const missing = await rejects(ro.dlq());
      assert.equal(missing.code, 'not_found');
      assert.equal(missing.message, 'dlq(): queue "nope" not found for tenant "t1"');
      for (const q of [ro, roThere]) {
        for (const [op, call] of [['send', () => q.send({ data: 1 })], ['recv', () => q.recv({ wait: false })], ['dlqRemove', () => q.dlqRemove({ messageId: 'm_1' })]] as const) {
          const e = await rejects(call());
          assert.equal(e.code, 'forbidden', op);
          assert.equal(e.message, `${op}(): this token is read-only; ${op} needs a read-write token`);
        }
      }
      assert.deepEqual(await roThere.stats(), { ready: 1, delayed: 0, inFlight: 0, dlq: 0 }, 'a read-only handle still reads; nothing moved');
    } finally {
      for (const q of [ro, rw, roThere]) await q.close();
      await emu.close();
    }
  });
});

describe('conformance: sync — a long recv on the system clock (real time)', function () {
  this.timeout(20000);
  const saved = LIMITS.maxWaitMs;
  // A server hold of 100 ms instead of 20 minutes, so a wait of several holds takes a moment.
  before(() => {
    LIMITS.maxWaitMs = 100;
  });
  after(() => {
    LIMITS.maxWaitMs = saved;
  });

  const makers: { name: string; make: () => Promise<{ q: SyncQueue; close(): Promise<void> }> }[] = [
    {
      name: 'quayside/sync (emulator)',
      async make() {
        const emu = await startEmulator({ memory: true });
        const q = remote.queue({ id: 'real-time', url: emu.url, token: emu.token });
        return { q, close: async () => { await q.close(); await emu.close(); } };
      },
    },
    {
      name: 'quayside/sync/memory (in-process)',
      async make() {
        const mem = memory.createMemoryQueues();
        return { q: mem.queue({ id: 'real-time' }), close: () => mem.close() };
      },
    },
  ];

  for (const m of makers) {
    it(`${m.name}: waits its whole timeout over several holds, then resolves null`, async () => {
      const { q, close } = await m.make();
      try {
        await q.stats();
        const started = Date.now();
        assert.equal(await q.recv({ timeoutMs: 350 }), null);
        const took = Date.now() - started;
        assert.ok(took >= 340, `ended after ${took} ms, before its 350 ms timeout`);
        assert.ok(took < 3000, `ended after ${took} ms, long after its 350 ms timeout`);
        // A message sent while a later hold waits is taken.
        const p = q.recv<string>({ timeoutMs: 2000 });
        setTimeout(() => void q.send({ data: 'late' }), 250);
        assert.equal((await p)?.data, 'late');
      } finally {
        await close();
      }
    });
  }
});

describe('conformance: sync — createMemoryQueues options', () => {
  it('a clock it cannot read, or an option it does not know, is invalid_argument, as startEmulator says (not a quiet system clock)', () => {
    for (const opts of [{ clock: 1234 }, { clock: 'Virtual' }, { clock: { start: 'now' } }, { clock: { start: 0, speed: 2 } }, { clok: 'virtual' }, 5]) {
      assert.throws(() => memory.createMemoryQueues(opts as never), (e: { code?: string }) => e.code === 'invalid_argument', JSON.stringify(opts));
    }
    const ok = memory.createMemoryQueues({ clock: { start: 0 } });
    assert.equal(ok.clock.now(), 0);
    void ok.close();
  });
});

describe('conformance: sync — url and token, used or not, are checked alike', () => {
  it('a url or token that is not a non-empty string is invalid_argument from quayside/sync and quayside/sync/memory', async () => {
    const mq = memory.createMemoryQueues();
    try {
      for (const bad of [{ url: '' }, { url: 5 }, { token: {} }, { token: '' }]) {
        for (const [name, make] of [['sync', remote.queue], ['memory', memory.queue], ['createMemoryQueues', mq.queue]] as const) {
          assert.throws(() => make({ id: 'q', ...bad } as never), (e: { code?: string }) => e.code === 'invalid_argument', `${name} ${JSON.stringify(bad)}`);
        }
      }
      // Beside a transport of its own too, where quayside/sync uses neither.
      const transport = new Connection({});
      assert.throws(() => remote.queue({ id: 'q', url: 5 as never, transport }), (e: { code?: string }) => e.code === 'invalid_argument');
      assert.throws(() => remote.queue({ id: 'q', token: '', transport }), (e: { code?: string }) => e.code === 'invalid_argument');
      await transport.close();
      // Accepted (and unused) in memory: one options object serves either import.
      const q = memory.queue({ id: fresh('unused'), url: 'ws://127.0.0.1:1', token: 't' });
      await q.send({ data: 1 });
      await q.close();
    } finally {
      await mq.close();
    }
  });
});
