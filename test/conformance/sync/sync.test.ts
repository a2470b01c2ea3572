import assert from 'node:assert/strict';
import * as remote from '../../../emulator/clients/sync';
import * as memory from '../../../emulator/embedded/memory';
import type { SyncQueue } from '../../../emulator/clients/sync-face';
import { startEmulator } from '../../../emulator/emulator';
import type { QuaysideError } from '../../../emulator/errors';
import { DAY, SECOND, fresh, rejects, startTestEmulator, until } from '../support';
import { variants, type Harness } from './harness';

// One test per statement of seeds/002 (the sync product) and DESIGN.md's "sync details", run with
// the same bodies against quayside/sync (the emulator) and quayside/sync/memory (in-process).

for (const variant of variants) {
  describe(`conformance: sync (seeds/002) — ${variant.name}`, function () {
    let h: Harness;
    let q: SyncQueue;
    before(async () => {
      h = await variant.make();
    });
    after(() => h.close());
    beforeEach(() => {
      q = h.queue({ id: fresh('jobs'), tenantId: fresh('tenant') });
    });

    it('close() ends a handle: its waiting recv and later calls fail unavailable, and another handle on the queue keeps working', async () => {
      const id = fresh('closing');
      const closing = h.queue({ id });
      const other = h.queue({ id });
      await closing.stats(); // set up, so the recv below is waiting on the queue
      const waiting = closing.recv({ timeoutMs: 60_000 }).then(() => 'resolved', (e: { code: string }) => e.code);
      await closing.close();
      assert.equal(await waiting, 'unavailable');
      assert.equal((await rejects(closing.send({ data: 1 }))).code, 'unavailable');
      await other.send({ data: 'still here' });
      const m = await other.recv({ wait: false });
      assert.equal(m?.data, 'still here');
      assert.equal(await m!.ack(), true);
    });

    it('calls made together reach the queue in the order they were made', async () => {
      await q.send({ data: 'a' });
      const m = await q.recv({ wait: false });
      assert.deepEqual(await Promise.all([m!.nack(), m!.ack()]), [true, false], 'the nack came first, so the ack\'s receipt was stale');
      const again = await q.recv({ wait: false });
      assert.deepEqual(await Promise.all([again!.ack(), again!.touch()]), [true, false]);
      const [got] = await Promise.all([q.recv({ wait: false }), q.send({ data: 'b' })]);
      assert.equal(got, null, 'the recv was made before the send');
      assert.equal((await q.recv({ wait: false }))?.data, 'b');
    });

    it('at-least-once work queue: messages are delivered to exactly one consumer per delivery attempt', async () => {
      for (let i = 0; i < 20; i++) await q.send({ data: i });
      const readers = [q, q.reader(), q.reader()];
      const got = await Promise.all(readers.map(async (r) => {
        const mine: number[] = [];
        for (;;) {
          const m = await r.recv<number>({ wait: false });
          if (!m) return mine;
          mine.push(m.data);
          await m.ack();
        }
      }));
      assert.deepEqual(got.flat().sort((a, b) => a - b), [...Array(20).keys()]);
    });

    it('the consumer pattern example runs as written', async () => {
      await q.send({ data: { n: 1 } });
      await q.send({ data: { n: 2, fail: true } });
      const handled: unknown[] = [];
      const handle = async (d: any) => {
        handled.push(d);
        if (handled.length >= 3) ac.abort();
        if (d.fail && handled.length < 3) throw new Error('first try fails');
      };
      const ac = new AbortController();
      const loop = (async () => {
        // --- seed example ---
        for await (const msg of q.stream({ signal: ac.signal })) {
          try {
            await handle(msg.data);
            await msg.ack();
          } catch (error) {
            await msg.nack({ delayMs: 3000, reason: 'handler_error' });
          }
        }
        // --- end of example ---
      })();
      await until(() => handled.length === 2, 'two deliveries');
      await h.advance(3000); // the nack's delay
      await loop;
      assert.deepEqual(handled, [{ n: 1 }, { n: 2, fail: true }, { n: 2, fail: true }]);
      assert.deepEqual(await q.stats(), { ready: 0, delayed: 0, inFlight: 0, dlq: 0 });
    });

    it('ack(): processing succeeded, the message is removed', async () => {
      await q.send({ data: 'x' });
      const m = (await q.recv({ wait: false }))!;
      assert.equal(await m.ack(), true);
      await h.advance(31 * SECOND);
      assert.equal(await q.recv({ wait: false }), null);
      assert.deepEqual(await q.dlq(), []);
    });

    it('nack({ delayMs }): processing failed, the message is re-queued after the delay', async () => {
      await q.send({ data: 'x' });
      const m = (await q.recv({ wait: false }))!;
      assert.equal(await m.nack({ delayMs: 5000 }), true);
      assert.equal(await q.recv({ wait: false }), null);
      await h.advance(4999);
      assert.equal(await q.recv({ wait: false }), null);
      await h.advance(1);
      const again = (await q.recv({ wait: false }))!;
      assert.equal(again.messageId, m.messageId);
      assert.equal(again.attempt, 2);
    });

    it('after maxDeliveries (default 10) a message moves to the DLQ with reason max_deliveries_exceeded', async () => {
      const { messageId } = await q.send({ data: 'doomed' });
      for (let i = 1; i <= 10; i++) {
        const m = (await q.recv({ wait: false }))!;
        assert.equal(m.attempt, i);
        if (i % 2) await m.nack();
        else await h.advance(30 * SECOND); // an expired lease counts too
      }
      assert.equal(await q.recv({ wait: false }), null);
      const dlq = await q.dlq();
      assert.equal(dlq.length, 1);
      assert.deepEqual([dlq[0].messageId, dlq[0].reason, dlq[0].attempts, dlq[0].data], [messageId, 'max_deliveries_exceeded', 10, 'doomed']);
    });

    it('a nack with its own reason that exhausts deliveries records that reason, and its error as lastError', async () => {
      const small = h.queue({ id: fresh('q'), delivery: { maxDeliveries: 1 } });
      await small.send({ data: 1 });
      const m = (await small.recv({ wait: false }))!;
      await m.nack({ reason: 'handler_error', error: new Error('disk full') });
      const [d] = await small.dlq();
      assert.equal(d.reason, 'handler_error');
      assert.equal(d.lastError, 'disk full');
      assert.equal(d.movedAt, h.now());
    });

    it('lastError is the text of whatever nack({ error }) was given: an object\'s own toString, a symbol, a function, else JSON', async () => {
      const cases: [unknown, string][] = [
        [{ toString: () => 'custom text' }, 'custom text'],
        [Symbol('sym'), 'Symbol(sym)'],
        [function handler() {}, 'a function (handler)'],
        [{ code: 7 }, '{"code":7}'],
        [['a', 1], '["a",1]'],
        [10n, '10'],
      ];
      const small = h.queue({ id: fresh('q'), delivery: { maxDeliveries: 1 } });
      for (const [error] of cases) {
        await small.send({ data: 1 });
        await (await small.recv({ wait: false }))!.nack({ error });
      }
      assert.deepEqual((await small.dlq()).map((d) => d.lastError), cases.map(([, text]) => text));
    });

    it('a dead letter keeps the orderingKey and meta it was sent with (and has neither when none were given)', async () => {
      const small = h.queue({ id: fresh('q'), delivery: { maxDeliveries: 1 } });
      await small.send({ data: 'with', orderingKey: 'user-7', meta: { trace: 'abc' } });
      await small.send({ data: 'without' });
      for (let i = 0; i < 2; i++) await (await small.recv({ wait: false }))!.nack();
      const dlq = await small.dlq();
      assert.deepEqual(dlq.map((d) => [d.data, d.orderingKey, d.meta]), [['with', 'user-7', { trace: 'abc' }], ['without', undefined, undefined]]);
      assert.equal('meta' in dlq[1] || 'orderingKey' in dlq[1], false);
    });

    it('touch({ leaseMs }) extends the visibility timeout for long-running handlers', async () => {
      await q.send({ data: 'long' });
      const m = (await q.recv({ wait: false, leaseMs: 10_000 }))!;
      await h.advance(9000);
      assert.equal(await m.touch({ leaseMs: 60_000 }), true);
      assert.equal(m.leaseUntil, h.now() + 60_000);
      await h.advance(59_000);
      assert.equal(await q.reader().recv({ wait: false }), null);
      assert.equal(await m.ack(), true);
    });

    it("touch() without leaseMs extends by that delivery's own lease", async () => {
      await q.send({ data: 'own lease' });
      const m = (await q.recv({ wait: false, leaseMs: 5000 }))!;
      await h.advance(4000);
      assert.equal(await m.touch(), true);
      assert.equal(m.leaseUntil, h.now() + 5000);
      await h.advance(5000);
      assert.equal(await m.touch(), false); // call before the lease expires
    });

    it('reader() creates additional independent blocking consumers within the same process', async () => {
      const a = q.reader();
      const b = q.reader();
      assert.notEqual(a.consumerId, b.consumerId);
      const pa = a.recv<string>({ timeoutMs: 60_000 });
      const pb = b.recv<string>({ timeoutMs: 60_000 });
      await q.send({ data: 'one' });
      await q.send({ data: 'two' });
      const got = await Promise.all([pa, pb]);
      assert.deepEqual(got.map((m) => m!.data).sort(), ['one', 'two']);
    });

    it('more blocking readers than one connection holds at once (300) all get their message: the extra ones wait their turn, none is refused', async () => {
      const waiting = Array.from({ length: 300 }, () => q.reader().recv<number>({ timeoutMs: 60_000 }));
      for (let i = 0; i < 300; i++) await q.send({ data: i });
      const got = await Promise.all(waiting);
      assert.deepEqual(got.map((m) => m!.data).sort((a, b) => a - b), Array.from({ length: 300 }, (_, i) => i));
    });

    it('ack() and nack() can return false if lease already expired (another consumer may have reclaimed)', async () => {
      await q.send({ data: 'x' });
      const slow = (await q.recv({ wait: false }))!;
      await h.advance(30 * SECOND);
      const other = (await q.reader().recv({ wait: false }))!;
      assert.equal(other.messageId, slow.messageId);
      assert.equal(await slow.ack(), false);
      assert.equal(await slow.nack(), false);
      assert.equal(await slow.touch(), false);
      assert.equal(await other.ack(), true);
      // Expired with nobody reclaiming yet is stale too.
      await q.send({ data: 'y' });
      const m = (await q.recv({ wait: false, leaseMs: 1000 }))!;
      await h.advance(1000);
      assert.equal(await m.ack(), false);
    });

    it('defaultLeaseMs is 30s: a handler that takes longer without touch() is reclaimed', async () => {
      await q.send({ data: 'x' });
      const m = (await q.recv({ wait: false }))!;
      assert.equal(m.leaseUntil, h.now() + 30_000);
      await h.advance(29_999);
      assert.equal(await q.reader().recv({ wait: false }), null);
      await h.advance(1);
      const again = (await q.reader().recv({ wait: false }))!;
      assert.equal(again.attempt, 2);
    });

    it('maxMessageAgeMs default 7 days: old unprocessed messages go to the DLQ with reason expired', async () => {
      await q.send({ data: 'old' });
      await h.advance(7 * DAY - 1);
      assert.equal((await q.dlq()).length, 0);
      await h.advance(1);
      const [d] = await q.dlq();
      assert.equal(d.reason, 'expired');
      assert.equal(await q.recv({ wait: false }), null);
    });

    it('a last delivery whose lease ends in the millisecond the message reaches maxMessageAgeMs dies expired, not max_deliveries_exceeded', async () => {
      const o = h.queue({ id: fresh('age-tie'), limits: { maxMessageAgeMs: 10_000 }, delivery: { maxDeliveries: 1 } });
      await o.send({ data: 'tie' });
      assert.ok(await o.recv({ wait: false, leaseMs: 10_000 }));
      await h.advance(10_000);
      const [d] = await o.dlq();
      assert.deepEqual([d.data, d.reason, d.attempts], ['tie', 'expired', 1]);
    });

    it('ordering config is accepted but not enforced at runtime — orderingKey is stored as metadata only', async () => {
      const o = h.queue({ id: fresh('ordered'), ordering: { mode: 'fifo' } });
      await o.send({ data: 1, orderingKey: 'user-1', meta: { trace: 't1' } });
      await o.send({ data: 2, orderingKey: 'user-1' });
      const a = (await o.recv({ wait: false }))!;
      const b = (await o.reader().recv({ wait: false }))!; // same key, in flight at once: not enforced
      assert.deepEqual([a.data, a.orderingKey, a.meta], [1, 'user-1', { trace: 't1' }]);
      assert.deepEqual([b.data, b.orderingKey, b.meta], [2, 'user-1', undefined]);
    });

    it('asking for a partitioned ordering mode throws', () => {
      assert.throws(() => h.queue({ id: 'p', ordering: { mode: 'partitioned' } }), /ordering/);
      assert.throws(() => h.queue({ id: 'p', ordering: 'partitioned' }), (e: any) => e.code === 'invalid_argument');
      for (const ordering of [{ partitions: 4 }, { partitioned: true }, { mode: 'fifo', partitionKey: 'user' }]) {
        assert.throws(() => h.queue({ id: 'p', ordering: ordering as never }), (e: any) => e.code === 'invalid_argument', JSON.stringify(ordering));
      }
      // The error names what asked for partitions, not a mode that is fine on its own.
      assert.throws(() => h.queue({ id: 'p', ordering: { mode: 'best_effort', partitions: 4 } as never }), (e: any) => e.code === 'invalid_argument' && /ordering\.partitions is not supported/.test(e.message) && !/best_effort/.test(e.message));
      // In limits or delivery as well as at the top level.
      for (const where of ['limits', 'delivery']) {
        assert.throws(() => h.queue({ id: 'p', [where]: { ordering: { mode: 'ordering_key_partitioned' } } } as never), (e: any) => e.code === 'invalid_argument' && /ordering/.test(e.message), where);
        h.queue({ id: 'p', [where]: { ordering: 'fifo' } } as never);
      }
      // Accepted and ignored: a mode that is not partitioned, or a partition flag that is off.
      for (const ordering of ['fifo', { mode: 'fifo' }, { partitioned: false }]) h.queue({ id: 'p', ordering: ordering as never });
      // Neither a string nor { mode }: a clear error, not a setting quietly ignored.
      for (const ordering of [42, true, ['fifo']]) {
        assert.throws(() => h.queue({ id: 'p', ordering: ordering as never }), (e: any) => e.code === 'invalid_argument' && /^ordering must be a string or \{ mode \}/.test(e.message), JSON.stringify(ordering));
      }
    });

    it('maintenance (lease reclaim, delayed→ready promotion, DLQ moves) runs automatically', async () => {
      const short = h.queue({ id: fresh('maint'), delivery: { maxDeliveries: 1 } });
      await short.send({ data: 'lease' });
      await short.send({ data: 'delayed', delayMs: 10_000 });
      await short.recv({ wait: false });
      await h.advance(30_000); // nobody calls recv: the lease ends and, out of deliveries, it moves to the DLQ
      assert.deepEqual((await short.dlq()).map((d) => d.data), ['lease']);
      assert.deepEqual(await short.stats(), { ready: 1, delayed: 0, inFlight: 0, dlq: 1 });
    });

    it('payload max 128KB of the envelope, validated at send and re-parsed at receive', async () => {
      // The envelope is { data, attempt: 0, enqueuedAt } as JSON here: 48 bytes around the data.
      await q.send({ data: 'x'.repeat(131072 - 2 - 48) });
      const e = await rejects(q.send({ data: 'x'.repeat(131072 - 2 - 47) }));
      assert.equal(e.code, 'payload_too_large');
      assert.match(e.message, /^send: the message is 131073 bytes as stored/);
      assert.equal((await rejects(q.send({ data: 'x'.repeat(131072 - 2 - 48), meta: { m: 1 } }))).code, 'payload_too_large');
      const sent = { when: '2026-01-01', nested: [1, { a: null }] };
      await q.send({ data: sent });
      await q.recv({ wait: false }).then((m) => m!.ack());
      const m = (await q.recv({ wait: false }))!;
      assert.deepEqual(m.data, sent);
      assert.notEqual(m.data, sent); // a parsed copy, not the sender's object
      assert.equal((await rejects(q.send({ data: undefined as never }))).code, 'invalid_argument');
    });

    it('idempotencyKey with idempotencyTtlMs prevents duplicate sends (default TTL 7 days)', async () => {
      const a = await q.send({ data: 1, idempotencyKey: 'k' });
      await h.advance(7 * DAY - 1);
      const b = await q.send({ data: 2, idempotencyKey: 'k' });
      assert.equal(b.messageId, a.messageId);
      const c1 = await q.send({ data: 3, idempotencyKey: 'short', idempotencyTtlMs: 1000 });
      await h.advance(1000);
      const c2 = await q.send({ data: 4, idempotencyKey: 'short' });
      assert.notEqual(c2.messageId, c1.messageId);
      const k2 = await q.send({ data: 5, idempotencyKey: 'k' });
      assert.notEqual(k2.messageId, a.messageId);
    });

    it('blocking recv({ wait: true }) wakes when a message is sent, and times out with null', async () => {
      const p = q.recv<string>({ timeoutMs: 60_000 });
      await q.send({ data: 'hello' });
      assert.equal((await p)!.data, 'hello');
      const empty = q.recv({ timeoutMs: 5000 });
      await h.advance(5000);
      assert.equal(await empty, null);
    });

    it("a wait made as a fresh handle's first call counts from before an advance made right after it", async () => {
      // Over the emulator this first call is still connecting (TCP, hello, queue setup) when the
      // advance starts; the advance waits for it rather than jumping past its deadline unseen.
      const p = q.recv({ timeoutMs: 5000 });
      await h.advance(5000);
      const bound = new Promise((_, reject) => setTimeout(() => reject(new Error('the wait did not end with the advance')), 3000).unref());
      assert.equal(await Promise.race([p, bound]), null);
    });

    it('more calls at once on one handle than a connection may have in flight all go through, in order', async () => {
      const n = 1100; // the server answers limit_exceeded past 1,024 requests in flight per connection
      const sent = await Promise.all(Array.from({ length: n }, (_, i) => q.send({ data: i })));
      assert.equal(new Set(sent.map((s) => s.messageId)).size, n);
      assert.equal((await q.stats()).ready, n);
      const got: number[] = [];
      for await (const m of q.stream<number>({ wait: false })) {
        got.push(m.data);
        await m.ack();
      }
      assert.deepEqual(got, [...Array(n).keys()], 'received in the order they were sent');
    });

    it('an aborted recv wait resolves to null at once', async () => {
      const ac = new AbortController();
      const p = q.recv({ timeoutMs: 600_000, signal: ac.signal });
      ac.abort();
      assert.equal(await p, null);
      assert.equal(await q.recv({ signal: AbortSignal.abort() }), null);
      // Nothing was leased for the abandoned wait.
      await q.send({ data: 'for someone else' });
      assert.equal((await q.reader().recv({ wait: false }))!.data, 'for someone else');
    });

    it('stream({ wait: false }) ends when the queue is empty', async () => {
      for (let i = 0; i < 3; i++) await q.send({ data: i });
      const seen: number[] = [];
      for await (const m of q.stream<number>({ wait: false })) {
        seen.push(m.data);
        await m.ack();
      }
      assert.deepEqual(seen, [0, 1, 2]);
    });

    it('a message has data, messageId, deliveryId, attempt, leaseUntil, orderingKey and meta', async () => {
      const { messageId } = await q.send({ data: { a: 1 }, orderingKey: 'ok', meta: { m: true } });
      const m = (await q.recv({ wait: false, leaseMs: 7000 }))!;
      assert.equal(m.messageId, messageId);
      assert.deepEqual(m.data, { a: 1 });
      assert.equal(typeof m.deliveryId, 'string');
      assert.equal(m.attempt, 1);
      assert.equal(m.leaseUntil, h.now() + 7000);
      assert.equal(m.orderingKey, 'ok');
      assert.deepEqual(m.meta, { m: true });
      await h.advance(7000);
      const again = (await q.recv({ wait: false }))!;
      assert.notEqual(again.deliveryId, m.deliveryId);
    });

    it('dlq({ limit = 100 }) lists oldest first; dlqRemove({ messageId }) → boolean', async () => {
      const d = h.queue({ id: fresh('dlq'), delivery: { maxDeliveries: 1 } });
      const ids: string[] = [];
      for (let i = 0; i < 105; i++) ids.push((await d.send({ data: i })).messageId);
      for (let i = 0; i < 105; i++) {
        await (await d.recv({ wait: false }))!.nack();
        if (i === 0) await h.advance(1);
      }
      const list = await d.dlq();
      assert.equal(list.length, 100);
      assert.equal(list[0].messageId, ids[0]);
      assert.equal((await d.dlq({ limit: 3 })).length, 3);
      assert.equal(await d.dlqRemove({ messageId: ids[0] }), true);
      assert.equal(await d.dlqRemove({ messageId: ids[0] }), false);
      assert.equal(await d.dlqRemove({ messageId: 'm_999999' }), false);
      assert.equal(await d.dlqRemove({ messageId: 'not-an-id' }), false);
      assert.equal((await d.dlq({ limit: 1000 })).length, 104);
    });

    it('limits and delivery configure the queue (maxDeliveries, defaultLeaseMs, payloadBytes, maxMessageAgeMs, dlqRetentionMs, idempotencyTtlMs)', async () => {
      const c = h.queue({
        id: fresh('cfg'),
        delivery: { maxDeliveries: 2, defaultLeaseMs: 1000 },
        limits: { payloadBytes: 100, maxMessageAgeMs: 10_000, dlqRetentionMs: 5000, idempotencyTtlMs: 2000 },
      });
      assert.equal((await rejects(c.send({ data: 'x'.repeat(99) }))).code, 'payload_too_large');
      const a = await c.send({ data: 'a', idempotencyKey: 'k' });
      const m = (await c.recv({ wait: false }))!;
      assert.equal(m.leaseUntil, h.now() + 1000);
      await h.advance(1000);
      await (await c.recv({ wait: false }))!.nack();
      assert.equal((await c.dlq()).length, 1); // 2 deliveries
      await h.advance(1000);
      assert.notEqual((await c.send({ data: 'b', idempotencyKey: 'k' })).messageId, a.messageId);
      await h.advance(3999);
      assert.deepEqual((await c.dlq()).map((x) => x.data), ['a']);
      await h.advance(1);
      assert.deepEqual((await c.dlq()).map((x) => x.data), []); // dlqRetentionMs 5 s
      await h.advance(6000);
      assert.deepEqual((await c.dlq()).map((x) => [x.data, x.reason]), [['b', 'expired']]);
      assert.throws(() => h.queue({ id: 'bad', limits: { nope: 1 } as never }), /nope/);
      // A key in both places must say one thing: two values would leave one quietly unused.
      assert.throws(() => h.queue({ id: 'bad', limits: { maxDeliveries: 3 } as never, delivery: { maxDeliveries: 5 } }), { code: 'invalid_argument', message: /maxDeliveries is given in both limits \(3\) and delivery \(5\)/ });
      h.queue({ id: fresh('same'), limits: { defaultLeaseMs: 1000 } as never, delivery: { defaultLeaseMs: 1000 } });
    });

    it('a nack delay over maxNackDelayMs throws and settles nothing', async () => {
      const c = h.queue({ id: fresh('nackmax'), limits: { maxNackDelayMs: 60_000 } });
      await c.send({ data: 1 });
      const m = (await c.recv({ wait: false }))!;
      const e = await rejects(m.nack({ delayMs: 60_001 }));
      assert.equal(e.code, 'invalid_argument');
      assert.deepEqual(await c.stats(), { ready: 0, delayed: 0, inFlight: 1, dlq: 0 });
      assert.equal(await m.nack({ delayMs: 60_000 }), true);
      assert.equal((await rejects(q.send({ data: 1 }).then(async () => (await q.recv({ wait: false }))!.nack({ delayMs: 7 * DAY + 1 })))).code, 'invalid_argument');
    });

    it('invalid timings (NaN, negative, Infinity) are rejected with a clear error', async () => {
      await q.send({ data: 1 });
      const m = (await q.recv({ wait: false }))!;
      for (const bad of [NaN, -1, Infinity, -Infinity]) {
        for (const call of [
          () => q.send({ data: 1, delayMs: bad }),
          () => q.send({ data: 1, idempotencyKey: 'x', idempotencyTtlMs: bad }),
          () => q.recv({ timeoutMs: bad }),
          () => q.recv({ leaseMs: bad }),
          () => m.nack({ delayMs: bad }),
          () => m.touch({ leaseMs: bad }),
        ]) {
          const e = await rejects(call);
          assert.equal(e.code, 'invalid_argument');
          assert.match(e.message, /delayMs|TtlMs|timeoutMs|leaseMs/);
          assert.match(e.message, /NaN|negative|finite/);
        }
        assert.throws(() => h.queue({ id: 'x', delivery: { defaultLeaseMs: bad } }), (e: any) => e.code === 'invalid_argument');
      }
      assert.deepEqual(await q.stats(), { ready: 0, delayed: 0, inFlight: 1, dlq: 0 });
      assert.equal(await m.ack(), true);
    });

    it('null options are no options (as undefined is), and options that are not an object are invalid_argument', async () => {
      await q.send({ data: 'n' });
      const m = (await q.recv(null as never))!;
      assert.equal(m.data, 'n');
      assert.equal(await m.touch(null as never), true);
      assert.deepEqual(await q.dlq(null as never), []);
      assert.equal(typeof q.reader(null as never).recv, 'function');
      assert.equal(await m.nack(null as never), true, 'nack(null) requeued it at once');
      const again = (await q.recv({ wait: false }))!;
      assert.equal(again.attempt, 2);
      const it = q.stream(null as never);
      await q.send({ data: 's' });
      const r = await it.next();
      assert.equal((r.value as { data: string }).data, 's');
      await (r.value as { ack(): Promise<boolean> }).ack();
      await it.return?.(undefined);
      for (const bad of ['x', 5, true, [1]]) {
        for (const call of [() => q.recv(bad as never), () => q.dlq(bad as never), () => again.nack(bad as never), () => again.touch(bad as never)]) {
          assert.equal((await rejects(call)).code, 'invalid_argument', JSON.stringify(bad));
        }
        assert.throws(() => q.reader(bad as never), (e: any) => e.code === 'invalid_argument');
      }
      assert.equal(await again.ack(), true, 'the refused calls settled nothing');
    });

    it('ack() and stats() take no options: ack({ delayMs }) meant as a nack deletes nothing, stats({ tenantId }) reads no other tenant', async () => {
      // As an untyped (JavaScript) caller makes these calls; TypeScript refuses them already.
      const withArg = <R>(f: () => Promise<R>) => f as (o: unknown) => Promise<R>;
      await q.send({ data: 'keep' });
      const m = (await q.recv({ wait: false }))!;
      for (const bad of [{ delayMs: 5000 }, 'x', 5]) {
        assert.equal((await rejects(() => withArg(m.ack)(bad))).code, 'invalid_argument', JSON.stringify(bad));
      }
      assert.match((await rejects(() => withArg(m.ack)({ delayMs: 5000 }))).message, /^unknown ack option "delayMs"; ack\(\) takes none$/);
      assert.equal(await m.nack(), true, 'the refused acks settled nothing');
      await q.send({ data: 'elsewhere', tenantId: 'other' });
      const e = await rejects(() => withArg(q.stats)({ tenantId: 'other' }));
      assert.deepEqual([e.code, e.message], ['invalid_argument', 'unknown stats option "tenantId"; stats() takes none']);
      assert.equal((await withArg(q.stats)(null)).ready, 1);
      assert.equal(await (await q.recv({ wait: false }))!.ack(), true);
    });

    it('the queue is scoped by tenantId (default "default")', async () => {
      const id = fresh('scoped');
      const a = h.queue({ id, tenantId: 'a' });
      const b = h.queue({ id, tenantId: 'b' });
      const d1 = h.queue({ id });
      const d2 = h.queue({ id, tenantId: 'default' });
      await a.send({ data: 'for a' });
      await d1.send({ data: 'for default' });
      assert.equal(await b.recv({ wait: false }), null);
      assert.equal((await d2.recv({ wait: false }))!.data, 'for default');
      assert.equal((await a.recv({ wait: false }))!.data, 'for a');
    });
  });
}

describe('conformance: sync — transport (quayside/sync only)', function () {
  this.timeout(30000);
  /**
   * A 5 s recv as a fresh handle's first call (still connecting), then at once an advance of 5 s:
   * the wait ends with it. `meanwhile` runs just after the advance is asked for.
   */
  async function coldWaitEndsWithAdvance(id: string, meanwhile?: () => void): Promise<void> {
    const emu = await startTestEmulator();
    const q = remote.queue({ id, url: emu.url, token: emu.token });
    try {
      const p = q.recv({ timeoutMs: 5000 });
      const advanced = emu.clock.advance(5000);
      meanwhile?.();
      await advanced;
      const bound = new Promise((_, reject) => setTimeout(() => reject(new Error('the wait did not end with the advance')), 3000).unref());
      assert.equal(await Promise.race([p, bound]), null);
    } finally {
      await q.close();
      await emu.close();
    }
  }

  it("a wait made as the first call of the process's first handle (not yet connected) counts from before an advance made right after it", () => coldWaitEndsWithAdvance('cold'));

  it('a cold first wait still counts from before the advance when the process stalls while it connects (a long GC pause, a busy neighbour)', () =>
    coldWaitEndsWithAdvance('cold-stall', () => {
      // The whole process stops for longer than the advance's wait would last in real time, on the
      // advance's first turn: the handshake's frames all come after it.
      setImmediate(() => {
        const end = Date.now() + 120;
        while (Date.now() < end) {
          // busy: nothing else in this process runs
        }
      });
    }));

  it('stream({ wait: true }) auto-retries transient transport errors: it rides out an emulator restart', async () => {
    const first = await startEmulator({ memory: true });
    const { port, token } = first;
    const q = remote.queue({ id: 'jobs', url: first.url, token });
    const ac = new AbortController();
    const seen: string[] = [];
    let acked = 0;
    const loop = (async () => {
      for await (const m of q.stream<string>({ signal: ac.signal, timeoutMs: 60_000 })) {
        seen.push(m.data);
        await m.ack();
        acked++;
      }
    })();
    await q.send({ data: 'before' });
    // Its ack answered first: an ack still on the wire when the emulator stops fails `unavailable`
    // (it may or may not have been applied), and would end this loop. The stream's held recv is what
    // must ride out the restart.
    await until(() => acked === 1, 'the first message, acked');
    await first.close();
    await new Promise((r) => setTimeout(r, 200)); // a real outage: the stream sees unavailable errors
    const second = await startEmulator({ memory: true, port, token });
    try {
      const producer = remote.queue({ id: 'jobs', url: second.url, token });
      await producer.send({ data: 'after' });
      await until(() => seen.length === 2, 'the message sent after the restart', 20000);
      assert.deepEqual(seen, ['before', 'after']);
      ac.abort();
      await loop;
      await producer.close();
      await q.close();
    } finally {
      await second.close();
    }
  });

  it('a call the emulator cannot answer fails with unavailable instead of hanging', async () => {
    const q = remote.queue({ id: 'x', url: 'ws://127.0.0.1:9' });
    assert.equal((await rejects(q.send({ data: 1 }))).code, 'unavailable');
    await q.close();
  });

  it('QUAYSIDE_URL and QUAYSIDE_TOKEN are read when url and token are not given', async () => {
    const emu = await startEmulator({ memory: true });
    const saved = { url: process.env.QUAYSIDE_URL, token: process.env.QUAYSIDE_TOKEN };
    process.env.QUAYSIDE_URL = emu.url;
    process.env.QUAYSIDE_TOKEN = emu.token;
    try {
      const q = remote.queue({ id: 'env-vars' });
      await q.send({ data: 1 });
      assert.equal((await q.recv({ wait: false }))!.data, 1);
      await q.close();
    } finally {
      if (saved.url === undefined) delete process.env.QUAYSIDE_URL;
      else process.env.QUAYSIDE_URL = saved.url;
      if (saved.token === undefined) delete process.env.QUAYSIDE_TOKEN;
      else process.env.QUAYSIDE_TOKEN = saved.token;
      await emu.close();
    }
  });

  it('quayside/sync/memory: the shared queue() keeps state in this process only; resetMemory() drops it', async () => {
    const a = memory.queue({ id: 'shared' });
    const b = memory.queue({ id: 'shared' });
    await a.send({ data: 'x' });
    assert.equal((await b.recv({ wait: false }))!.data, 'x');
    await memory.resetMemory();
    assert.equal(await memory.queue({ id: 'shared' }).recv({ wait: false }), null);
    await memory.resetMemory();
  });

  it('quayside/sync/memory: a handle made before resetMemory() goes on against the fresh engine (as a quayside/sync handle does after a restart), and so does its stream', async () => {
    const q = memory.queue<string>({ id: 'survivor' });
    const other = memory.queue<string>({ id: 'survivor' });
    try {
      await q.send({ data: 'old' });
      await memory.resetMemory();
      assert.equal(await q.recv({ wait: false }), null, 'the reset emptied it');
      await q.send({ data: 'new' });
      const m = await other.recv<string>({ wait: false });
      assert.equal(m!.data, 'new');
      await m!.ack();
      const ac = new AbortController();
      const seen: string[] = [];
      const loop = (async () => {
        for await (const x of q.stream<string>({ signal: ac.signal, timeoutMs: 60_000 })) {
          seen.push(x.data);
          await x.ack();
          if (seen.length === 2) ac.abort();
        }
      })();
      await other.send({ data: 'a' });
      await until(() => seen.length === 1, 'the message before the reset');
      await memory.resetMemory();
      await other.send({ data: 'b' });
      await until(() => seen.length === 2, 'the message after the reset', 10_000);
      await loop;
      assert.deepEqual(seen, ['a', 'b']);
    } finally {
      await q.close();
      await other.close();
      await memory.resetMemory();
    }
  });

  it('quayside/sync/memory: a call on its way at resetMemory() is answered: one the old engine has after its commit, one not there yet by the fresh engine', async () => {
    const q = memory.queue<string>({ id: 'on-its-way' });
    const settled = <T>(p: Promise<T>) => p.then((value) => ({ value }), (error: Error) => ({ error: error.message }));
    try {
      // Not yet at the engine (made in the same turn as the reset): the fresh engine takes it.
      await q.send({ data: 'old' });
      const leased = (await q.recv<string>({ wait: false }))!;
      const ack = settled(leased.ack());
      const send = settled(q.send({ data: 'after' }));
      void memory.resetMemory();
      assert.deepEqual(await ack, { value: false }, 'the fresh engine knows no such lease');
      assert.ok('value' in (await send), 'the send went to the fresh engine');
      assert.equal((await q.recv<string>({ wait: false }))!.data, 'after');

      // Already at the engine, its commit not done (the reset runs before the group commit's turn):
      // it is answered as applied, and the reset then drops it with the rest.
      let applied!: Promise<{ value: unknown } | { error: string }>;
      await new Promise<void>((done) => {
        setImmediate(() => {
          void memory.resetMemory();
          done();
        });
        applied = settled(q.send({ data: 'committed' }));
      });
      const answer = await applied;
      assert.ok('value' in answer, `answered as applied, not failed: ${JSON.stringify(answer)}`);
      assert.equal(await q.recv({ wait: false }), null, 'the reset dropped it');
    } finally {
      await q.close();
      await memory.resetMemory();
    }
  });

  it("each entry point takes its own options: quayside/sync refuses memory, quayside/sync/memory refuses transport and a bad memory, and accepts url and token unused", async () => {
    const mem = memory.createMemoryQueues();
    try {
      const onSync = (() => { try { remote.queue({ id: 'x', memory: mem } as never); } catch (e) { return e as QuaysideError; } })();
      assert.equal(onSync?.code, 'invalid_argument');
      assert.match(onSync!.message, /memory/);
      const onMemory = (() => { try { mem.queue({ id: 'x', transport: {} } as never); } catch (e) { return e as QuaysideError; } })();
      assert.equal(onMemory?.code, 'invalid_argument');
      assert.match(onMemory!.message, /transport/);
      // The shared queue() takes memory: its refusal lists it with the rest.
      const onShared = (() => { try { memory.queue({ id: 'x', transport: {} } as never); } catch (e) { return e as QuaysideError; } })();
      assert.equal(onShared?.code, 'invalid_argument');
      assert.match(onShared!.message, /unknown queue option "transport"; expected one of .*\bmemory\b/);
      const badMemory = (() => { try { memory.queue({ id: 'x', memory: {} as never }); } catch (e) { return e as QuaysideError; } })();
      assert.equal(badMemory?.code, 'invalid_argument');
      assert.match(badMemory!.message, /createMemoryQueues/);
      // The same options object as for quayside/sync works in memory: url and token are read by nobody.
      const q = memory.queue({ id: 'both', url: 'ws://127.0.0.1:9', token: 't', memory: mem });
      await q.send({ data: 1 });
      assert.equal((await mem.queue({ id: 'both' }).recv({ wait: false }))!.data, 1);
    } finally {
      await mem.close();
    }
  });
});
