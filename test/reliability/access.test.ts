import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { createCache } from '../../emulator/clients/cache';
import { startEmulator, type Emulator } from '../../emulator/emulator';
import { READ_OPS } from '../../emulator/protocol';
import { RawClient, ensureBuilt, kill9, startOk, sqliteOf, storeDigest } from './support';

// Access (DESIGN.md "Access"): loopback binding, Origin and Host checks, tokens, read-only vs
// read-write, namespace scoping, the audit log, and names that are only names.
// (That a message body holding HTML and script renders as text in the queue panel is tested by the
// webview suite, test/extension/webview.)

function nonLoopbackAddress(): string | null {
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return null;
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('reliability: access', function () {
  this.timeout(60_000);
  let emu: Emulator;
  let admin: RawClient;
  before(async () => {
    emu = await startEmulator({ port: 0, memory: true, clock: 'virtual' });
    admin = await RawClient.hello(emu.url, emu.token);
    for (const ns of ['alpha', 'beta']) {
      await admin.ok('queue.create', { namespace: ns, queue: 'jobs', dialect: 'cache' });
      for (let i = 0; i < 3; i++) await admin.ok('push', { namespace: ns, queue: 'jobs', body: { ns, i } });
    }
  });
  after(async () => {
    await admin?.close();
    await emu?.close();
  });

  it('binds 127.0.0.1 by default (startEmulator and the CLI); other interfaces are not reachable', async () => {
    assert.equal(emu.host, '127.0.0.1');
    assert.match(emu.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(await canConnect('127.0.0.1', emu.port), true);
    const other = nonLoopbackAddress();
    if (other) assert.equal(await canConnect(other, emu.port), false, `reachable on ${other}`);
    ensureBuilt();
    const child = await startOk({ memory: true });
    try {
      assert.match(child.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
      if (other) assert.equal(await canConnect(other, child.port), false, `the CLI's emulator is reachable on ${other}`);
    } finally {
      await kill9(child);
    }
  });

  it("refuses WebSocket upgrades with any Origin, a VS Code webview's too (and a foreign Host); accepts none", async () => {
    for (const origin of ['http://evil.example', 'https://localhost:3000', 'http://127.0.0.1:8080', 'null', 'file://', 'chrome-extension://abc', 'vscode-webview://1234abcd', 'vscode-file://vscode-app']) {
      await assert.rejects(RawClient.open(emu.url, { origin }), (e: { status?: number }) => e.status === 403, origin);
    }
    await assert.rejects(RawClient.open(emu.url, { host: 'evil.example' }), (e: { status?: number }) => e.status === 403);
    // Two Origin headers (Node joins them), and the version-8 handshake's Sec-WebSocket-Origin.
    const twice = { origin: ['vscode-webview://a', 'https://evil.example'] } as unknown as Record<string, string>;
    await assert.rejects(RawClient.open(emu.url, twice), (e: { status?: number }) => e.status === 403, 'two Origin headers');
    const v8 = await new Promise<number | 'open'>((resolve, reject) => {
      const ws = new WebSocket(emu.url, { protocolVersion: 8, origin: 'https://evil.example' });
      ws.once('open', () => {
        ws.close();
        resolve('open');
      });
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
      ws.once('error', reject);
    });
    assert.equal(v8, 403, 'Sec-WebSocket-Origin of a web page');
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.get(`${emu.httpUrl}/v1/queues`, { headers: { host: 'rebind.evil.example', authorization: `Bearer ${emu.token}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
    });
    assert.equal(status, 403, 'an HTTP request with a foreign Host (DNS rebinding)');
    const c = await RawClient.open(emu.url);
    await c.close();
  });

  it('a missing or wrong token is refused, over WebSocket and HTTP, and nothing runs before hello', async () => {
    const c = await RawClient.open(emu.url);
    assert.equal((await c.request('queue.list', {})).error?.code, 'unauthorized');
    assert.equal((await c.request('push', { namespace: 'alpha', queue: 'jobs', body: 1 })).error?.code, 'unauthorized');
    for (const token of [undefined, '', 'qs_rw_wrong', emu.token + 'x', emu.token.slice(0, -1), 'x'.repeat(5000), 5]) {
      assert.equal((await c.request('hello', { version: 1, token })).error?.code, 'unauthorized', String(token));
    }
    // A token with a newline from a file is still refused, and the message says why.
    const spaced = await c.request('hello', { version: 1, token: `${emu.token}\n` });
    assert.equal(spaced.error?.code, 'unauthorized');
    assert.match(spaced.error!.message, /ends with whitespace/);
    assert.doesNotMatch((await c.request('hello', { version: 1, token: 'qs_rw_wrong' })).error!.message, /whitespace/);
    assert.equal((await c.request('queue.list', {})).error?.code, 'unauthorized');
    await c.close();
    for (const authorization of [undefined, 'Bearer', 'Bearer qs_rw_wrong', `Basic ${emu.token}`, `Bearer ${emu.token}x`]) {
      const res = await fetch(`${emu.httpUrl}/v1/queues`, { headers: authorization ? { authorization } : {} });
      assert.equal(res.status, 401, String(authorization));
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'unauthorized');
    }
  });

  it('a read-only token can list, peek and read stats but not push, pull, ack, replay or purge', async () => {
    const ro = (await admin.ok('token.create', { access: 'read', name: 'viewer' })).token;
    const c = await RawClient.hello(emu.url, ro);
    const ref = { namespace: 'alpha', queue: 'jobs' };
    assert.equal((await c.ok('queue.list', {})).queues.length, 2);
    assert.equal((await c.ok('peek', ref)).messages.length, 3);
    assert.equal((await c.ok('stats', ref)).counts.ready, 3);
    assert.ok(Array.isArray((await c.ok('dead.list', ref)).messages));
    const before = storeDigest(sqliteOf(emu));
    const writes: [string, object][] = [
      ['push', { ...ref, body: 1 }], ['push.batch', { ...ref, messages: [{ body: 1 }] }], ['pull', ref], ['ack', { receipt: 'r_1_1' }],
      ['nack', { receipt: 'r_1_1' }], ['extend', { receipt: 'r_1_1' }], ['dead.replay', ref], ['dead.purge', ref], ['purge', { ...ref, confirm: 'jobs' }],
      ['queue.create', { namespace: 'alpha', queue: 'x', dialect: 'cache' }], ['queue.delete', ref], ['queue.configure', { ...ref, policy: {} }],
      ['token.create', { access: 'readwrite' }], ['clock.advance', { ms: 1 }], ['namespace.configure', { namespace: 'alpha', dailyQuota: 1 }],
    ];
    for (const [op, args] of writes) {
      assert.ok(!READ_OPS.has(op as never));
      assert.equal((await c.request(op, args)).error?.code, 'forbidden', op);
    }
    assert.equal(storeDigest(sqliteOf(emu)), before);
    // The same over HTTP.
    const q = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: JSON.stringify({ project: 'p', environment: 'e', slug: 'ro' }) });
    const id = ((await q.json()) as { id: string }).id;
    const h = { authorization: `Bearer ${ro}` };
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}/messages`, { headers: h })).status, 200);
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}`, { headers: h })).status, 200);
    const d2 = storeDigest(sqliteOf(emu));
    for (const [path, body] of [['messages', { body: 1 }], ['receive', {}], ['retry-failed', {}], ['purge', { confirm: 'ro' }], ['ack', { acks: [] }]] as const) {
      const res = await fetch(`${emu.httpUrl}/v1/queues/${id}/${path}`, { method: 'POST', headers: h, body: JSON.stringify(body) });
      assert.equal(res.status, 403, path);
    }
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}`, { method: 'DELETE', headers: h })).status, 403);
    assert.equal(storeDigest(sqliteOf(emu)), d2);
    await c.close();
  });

  it('startEmulator().createToken mints read-only and namespace tokens for an app\'s tests, and checks what it is given', async () => {
    const ro = await emu.createToken({ access: 'read' });
    assert.match(ro, /^qs_ro_/);
    const reader = createCache({ url: emu.url, token: ro, namespace: 'alpha' });
    const gamma = await emu.createToken({ namespace: 'gamma' });
    const writer = createCache({ url: emu.url, token: gamma, namespace: 'gamma' });
    const elsewhere = createCache({ url: emu.url, token: gamma, namespace: 'beta' });
    try {
      assert.equal((await reader.queue('jobs').stats()).depth, 3);
      await assert.rejects(reader.queue('jobs').push(1), { code: 'forbidden' });
      assert.equal((await writer.queue('jobs').push('w')).deduped, false);
      await assert.rejects(elsewhere.queue('jobs').push(1), { code: 'forbidden' });
      await assert.rejects(emu.createToken({ access: 'admin' as never }), { code: 'invalid_argument' });
      await assert.rejects(emu.createToken({ namespace: '' }), { code: 'invalid_argument' });
      // A misspelt option must not quietly give a read-write token to a test of read-only access.
      await assert.rejects(emu.createToken({ acess: 'read' } as never), { code: 'invalid_argument', message: /unknown option "acess"/ });
    } finally {
      await Promise.all([reader.close(), writer.close(), elsewhere.close()]);
    }
  });

  it('a token for one namespace sees nothing of another (lists, reads, events, receipts, tokens)', async () => {
    const rw = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha', name: 'alpha-app' })).token;
    const c = await RawClient.hello(emu.url, rw);
    const beta = { namespace: 'beta', queue: 'jobs' };
    assert.deepEqual((await c.ok('queue.list', {})).queues.map((q: { namespace: string }) => q.namespace), ['alpha']);
    assert.deepEqual((await c.ok('queue.list', { namespace: 'beta' })).queues, []);
    assert.deepEqual((await c.ok('namespace.list', {})).namespaces.map((n: { namespace: string }) => n.namespace), ['alpha']);
    for (const [op, args] of [['peek', beta], ['stats', beta], ['dead.list', beta], ['message.get', { ...beta, id: 'm_4' }], ['push', { ...beta, body: 1 }], ['pull', beta], ['dead.replay', beta], ['purge', { ...beta, confirm: 'jobs' }], ['queue.delete', beta], ['subscribe', { namespace: 'beta' }], ['token.create', { access: 'read', namespace: 'beta' }], ['token.create', { access: 'read' }]] as const) {
      const r = await c.request(op, args);
      assert.equal(r.ok, false, `${op} on another namespace succeeded`);
      assert.ok(['forbidden', 'not_found'].includes(r.error!.code), `${op}: ${r.error!.code}`);
    }
    // A receipt from the other namespace settles nothing.
    const { messages } = await admin.ok('pull', { ...beta, leaseMs: 60_000 });
    assert.equal((await c.ok('ack', { receipt: messages[0].receipt })).ok, false);
    assert.equal((await c.ok('extend', { receipt: messages[0].receipt })).ok, false);
    assert.equal((await admin.ok('stats', beta)).counts.leased, 1);
    // Events from the other namespace never reach it.
    await c.ok('subscribe', {});
    await admin.ok('push', { ...beta, body: 'secret' });
    await admin.ok('push', { namespace: 'alpha', queue: 'jobs', body: 'mine' });
    await c.waitFor((f) => f.event === 'change' && f.namespace === 'alpha');
    assert.equal(c.frames.filter((f) => f.event === 'change' && f.namespace !== 'alpha').length, 0);
    assert.deepEqual((await c.ok('audit.list', { namespace: 'beta' })).entries, []);
    // Over HTTP: env queues of another project are not found.
    const mk = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: JSON.stringify({ project: 'other', environment: 'prod', slug: 'hidden' }) });
    const id = ((await mk.json()) as { id: string }).id;
    const h = { authorization: `Bearer ${rw}` };
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}`, { headers: h })).status, 404);
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}/messages`, { method: 'POST', headers: h, body: '{"body":1}' })).status, 404);
    const list = (await (await fetch(`${emu.httpUrl}/v1/queues`, { headers: h })).json()) as { queues: unknown[] };
    assert.deepEqual(list.queues, []);
    await c.close();
  });

  it('a token for one namespace cannot move the clock that every namespace shares', async () => {
    const rw = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha' })).token;
    const c = await RawClient.hello(emu.url, rw);
    try {
      const before = (await admin.ok('clock.now', {})).now;
      const r = await c.request('clock.advance', { ms: 60_000 });
      assert.equal(r.ok, false);
      assert.equal(r.error!.code, 'forbidden');
      assert.equal((await admin.ok('clock.now', {})).now, before);
      assert.equal((await c.ok('clock.now', {})).now, before, 'reading it is allowed');
    } finally {
      await c.close();
    }
  });

  it('a token for one namespace cannot change that namespace\'s daily quota (the plan\'s limit)', async () => {
    const rw = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha' })).token;
    const c = await RawClient.hello(emu.url, rw);
    try {
      const before = storeDigest(sqliteOf(emu));
      for (const dailyQuota of [5000, null, 1]) {
        const r = await c.request('namespace.configure', { namespace: 'alpha', dailyQuota });
        assert.equal(r.error?.code, 'forbidden', String(dailyQuota));
        assert.match(r.error!.message, /every namespace/);
      }
      assert.equal(storeDigest(sqliteOf(emu)), before);
      // The same call with a token for every namespace goes through.
      assert.deepEqual(await admin.ok('namespace.configure', { namespace: 'alpha', dailyQuota: 5000 }), { namespace: 'alpha', dailyQuota: 5000 });
      await admin.ok('namespace.configure', { namespace: 'alpha', dailyQuota: null });
    } finally {
      await c.close();
    }
  });

  it('hello sent again replaces who the connection is: subscriptions narrow to the new token; a refused one changes nothing', async () => {
    const c = await RawClient.hello(emu.url, emu.token);
    try {
      await c.ok('subscribe', {}); // everything, as the admin
      await c.ok('subscribe', { namespace: 'beta' });
      const alpha = (await admin.ok('token.create', { access: 'read', namespace: 'alpha' })).token;
      await c.ok('hello', { version: 1, token: alpha });
      await admin.ok('push', { namespace: 'beta', queue: 'jobs', body: 'not for alpha' });
      await admin.ok('push', { namespace: 'alpha', queue: 'jobs', body: 'for alpha' });
      await c.waitFor((f) => f.event === 'change' && f.namespace === 'alpha');
      assert.equal(c.frames.filter((f) => f.event === 'change' && f.namespace === 'beta').length, 0);
      const refused = await c.request('hello', { version: 1, token: 'qs_rw_not-a-token' });
      assert.equal(refused.error!.code, 'unauthorized');
      assert.deepEqual((await c.ok('namespace.list', {})).namespaces.map((n: { namespace: string }) => n.namespace), ['alpha'], 'still the alpha token');
    } finally {
      await c.close();
    }
  });

  it('hello sent again with a token that may not take the work ends what the connection held: its consumer is dropped (token_changed) and its waiting pull answers empty', async () => {
    const q = { namespace: 'beta', queue: 'rehello' };
    await admin.ok('queue.create', { ...q, dialect: 'env' });
    await admin.ok('consumer.set', { ...q, consumer: { appId: 'app', maxBatchSize: 1, maxBatchTimeoutMs: 1 } });
    const held = { namespace: 'beta', queue: 'rehello-pull' };
    await admin.ok('queue.create', { ...held, dialect: 'cache' });
    const alphaRw = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha' })).token;
    const readAll = (await admin.ok('token.create', { access: 'read' })).token;
    for (const token of [alphaRw, readAll]) {
      const c = await RawClient.hello(emu.url, emu.token);
      try {
        const { consumer } = await c.ok('consumer.attach', q);
        const waiting = c.request('pull', { ...held, waitMs: 60_000 });
        await c.ok('hello', { version: 1, token });
        const dropped = await c.waitFor((f) => f.event === 'consumer_dropped');
        assert.deepEqual({ ...dropped }, { event: 'consumer_dropped', consumer, namespace: 'beta', queue: 'rehello', reason: 'token_changed' });
        assert.deepEqual((await waiting).result, { messages: [], leaseMs: 30_000 }, 'the waiting pull ended empty');
        await admin.ok('push', { ...q, body: 'not for this connection' });
        await admin.ok('push', { ...held, body: 'not for this connection' });
        await admin.ok('clock.advance', { ms: 10 });
        assert.equal(c.frames.filter((f) => f.event === 'deliver').length, 0, 'no batch went to the new token');
        for (const r of [q, held]) {
          const { messages } = await admin.ok('peek', r);
          assert.deepEqual(messages.map((m: { state: string; attempts: number }) => [m.state, m.attempts]), [['ready', 0]], `${r.queue}: untouched`);
          await admin.ok('purge', { ...r, confirm: r.queue });
        }
      } finally {
        await c.close();
      }
    }
    // A hello that crosses an attach still in the engine, or a batch the emulator was already
    // starting (another client's push in the same commit): neither reaches the new token.
    for (let round = 0; round < 20; round++) {
      const c = await RawClient.hello(emu.url, emu.token);
      try {
        const attaching = c.request('consumer.attach', q);
        const rehello = round % 2 === 0 ? c.request('hello', { version: 1, token: readAll }) : null;
        const { consumer } = (await attaching).result as { consumer: string };
        const pushing = admin.request('push', { ...q, body: round });
        await (rehello ?? c.request('hello', { version: 1, token: readAll }));
        await pushing;
        await c.waitFor((f) => f.event === 'consumer_dropped' && f.consumer === consumer);
        await admin.ok('clock.advance', { ms: 10 });
        const dropAt = c.frames.findIndex((f) => f.event === 'consumer_dropped');
        assert.equal(c.frames.slice(dropAt).filter((f) => f.event === 'deliver').length, 0, `round ${round}: no batch after consumer_dropped`);
        if (c.frames.some((f) => f.event === 'deliver')) continue; // went out under the admin token, before the hello
        const { messages } = await admin.ok('peek', q);
        assert.deepEqual(messages.map((m: { state: string; attempts: number }) => [m.state, m.attempts]), [['ready', 0]], `round ${round}: given back, no attempt spent`);
      } finally {
        await c.close();
        await admin.ok('purge', { ...q, confirm: q.queue });
      }
    }
    // A token that may still take the work keeps it: the same admin token again.
    const c = await RawClient.hello(emu.url, emu.token);
    try {
      await c.ok('consumer.attach', q);
      await c.ok('hello', { version: 1, token: emu.token });
      await admin.ok('push', { ...q, body: 'still mine' });
      await c.waitFor((f) => f.event === 'deliver');
      assert.equal(c.frames.filter((f) => f.event === 'consumer_dropped').length, 0);
    } finally {
      await c.close();
      await admin.ok('queue.delete', q);
      await admin.ok('queue.delete', held);
    }
  });

  it('every replay and purge lands in the audit log with its token and count', async () => {
    const ops = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha', name: 'ops-bot' })).token;
    const c = await RawClient.hello(emu.url, ops);
    const ref = { namespace: 'alpha', queue: 'jobs' };
    await c.ok('queue.create', { namespace: 'alpha', queue: 'audited', dialect: 'cache' });
    const a = { namespace: 'alpha', queue: 'audited' };
    for (let i = 0; i < 5; i++) await c.ok('push', { ...a, body: i });
    const { messages } = await c.ok('pull', { ...a, max: 5 });
    for (const m of messages) await c.ok('nack', { receipt: m.receipt, dead: true });
    const replayed = await c.ok('dead.replay', { ...a, ids: [messages[0].id, messages[1].id] });
    assert.equal(replayed.replayed, 2);
    assert.equal((await admin.ok('dead.replay', { ...a, max: 1 })).replayed, 1);
    assert.equal((await c.ok('dead.purge', { ...a, ids: [messages[4].id] })).purged, 1);
    assert.equal((await c.ok('dead.purge', a)).purged, 1);
    assert.equal((await c.ok('purge', { ...a, confirm: 'audited' })).purged, 3);
    const mk = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: JSON.stringify({ project: 'aud', environment: 'e', slug: 'h' }) });
    const id = ((await mk.json()) as { id: string }).id;
    await fetch(`${emu.httpUrl}/v1/queues/${id}/messages`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: '{"body":1}' });
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}/retry-failed`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: '{}' })).status, 200);
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${id}/purge`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}` }, body: '{"confirm":"h"}' })).status, 200);

    const entries = (await admin.ok('audit.list', { limit: 100 })).entries as { token: string; namespace: string; queue: string; action: string; count: number }[];
    const mine = entries.filter((e) => e.queue === 'audited').reverse().map((e) => [e.token, e.action, e.count]);
    assert.deepEqual(mine, [['ops-bot', 'replay', 2], ['admin', 'replay', 1], ['ops-bot', 'purge_dead', 1], ['ops-bot', 'purge_dead', 1], ['ops-bot', 'purge', 3]]);
    const http = entries.filter((e) => e.namespace === 'aud/e').reverse().map((e) => [e.token, e.action, e.count]);
    assert.deepEqual(http, [['admin', 'replay', 0], ['admin', 'purge', 1]]);
    // The audit log names tokens; it never holds a secret.
    assert.ok(entries.every((e) => e.token !== ops && e.token !== emu.token));
    void ref;
    await c.close();
  });

  it('the audit log tells apart tokens that share a name, and a scoped token cannot pass for the admin', async () => {
    await admin.ok('queue.create', { namespace: 'alpha', queue: 'who', dialect: 'cache' });
    const a = { namespace: 'alpha', queue: 'who' };
    const twinA = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha', name: 'ci' })).token;
    const twinB = (await admin.ok('token.create', { access: 'readwrite', namespace: 'alpha', name: 'ci' })).token;
    const scoped = await RawClient.hello(emu.url, twinA);
    const fakeAdmin = (await scoped.ok('token.create', { access: 'readwrite', namespace: 'alpha', name: 'admin' })).token;
    for (const t of [twinA, twinB, fakeAdmin, emu.token, twinA]) {
      const c = await RawClient.hello(emu.url, t);
      await c.ok('dead.purge', a);
      await c.close();
    }
    await scoped.close();
    type Entry = { token: string; tokenId: string | null; queue: string };
    const entries = ((await admin.ok('audit.list', { namespace: 'alpha', queue: 'who' })).entries as Entry[]).reverse();
    assert.deepEqual(entries.map((e) => e.token), ['ci', 'ci', 'admin', 'admin', 'ci']);
    const ids = entries.map((e) => e.tokenId);
    assert.ok(ids.every((id) => typeof id === 'string' && /^tok_[0-9a-f]{12}$/.test(id)), `ids: ${ids.join(', ')}`);
    assert.equal(new Set(ids.slice(0, 4)).size, 4, 'four different tokens, four different ids');
    assert.equal(ids[4], ids[0], 'one token keeps one id');
    // The id is a fingerprint: no part of any secret shows in the log.
    for (const secret of [twinA, twinB, fakeAdmin, emu.token]) assert.ok(ids.every((id) => !secret.includes(id!.slice(4))));
  });

  it('queue names, namespaces, keys and searches with quotes, unicode and SQL fragments are just names', async () => {
    const nasty = ["'; DROP TABLE messages; --", 'Robert"); DROP TABLE queues;--', '%', '_', '\\', '1 OR 1=1', '🚀 队列 ñ', 'a/b', '"', "''", 'ＡＢＣ', '\u202e'];
    const before = (await admin.ok('queue.list', {})).queues.length;
    for (const [i, name] of nasty.entries()) {
      await admin.ok('queue.create', { namespace: `ns ${name}`, queue: name, dialect: 'cache' });
      await admin.ok('push', { namespace: `ns ${name}`, queue: name, body: { name, i }, dedupeKey: name });
      const again = await admin.ok('push', { namespace: `ns ${name}`, queue: name, body: 'dup', dedupeKey: name });
      assert.equal(again.deduped, true);
    }
    const queues = (await admin.ok('queue.list', {})).queues as { namespace: string; name: string; counts: { ready: number } }[];
    assert.equal(queues.length, before + nasty.length);
    for (const [i, name] of nasty.entries()) {
      const q = queues.find((x) => x.namespace === `ns ${name}` && x.name === name);
      assert.ok(q, `queue ${JSON.stringify(name)} is missing`);
      assert.equal(q.counts.ready, 1);
      const peek = await admin.ok('peek', { namespace: `ns ${name}`, queue: name });
      assert.deepEqual(peek.messages.map((m: { body: unknown }) => m.body), [{ name, i }]);
      // Search matches the body's JSON text, and the text as written inside its strings: a name
      // holding " or \ (escaped in the stored JSON) is found as typed too.
      assert.equal((await admin.ok('peek', { namespace: `ns ${name}`, queue: name, search: name })).total, 1, name);
    }
    // A text JSON escapes is found in the strings that hold it, keys too, and nowhere else: a
    // newline or a tab is not found inside a path's escaped backslash (C:\new, C:\temp).
    const ref = { namespace: 'search', queue: 'escapes' };
    const bodies = [{ path: 'C:\\new\\temp' }, { text: 'line one\nline two\tend' }, { 'say "hi"': 1 }, 'she said "hi"', { q: 'a\\"b' }];
    for (const body of bodies) await admin.ok('push', { ...ref, body, create: 'cache' });
    const found = async (search: string) => ((await admin.ok('peek', { ...ref, search })).messages as { body: unknown }[]).map((m) => m.body);
    assert.deepEqual(await found('\n'), [bodies[1]]);
    assert.deepEqual(await found('one\nline'), [bodies[1]]);
    assert.deepEqual(await found('\t'), [bodies[1]]);
    assert.deepEqual(await found('C:\\new'), [bodies[0]]);
    assert.deepEqual(await found('say "hi"'), [bodies[2]]);
    assert.deepEqual(await found('said "hi"'), [bodies[3]]);
    assert.deepEqual(await found('a\\"b'), [bodies[4]]);
    assert.equal((await admin.ok('peek', { ...ref, search: '\n' })).total, 1, 'the count agrees with the page');
    // A LIKE wildcard matches only bodies that hold it.
    assert.equal((await admin.ok('peek', { namespace: 'alpha', queue: 'jobs', search: '%' })).total, 0);
    assert.equal((await admin.ok('peek', { namespace: 'alpha', queue: 'jobs', search: "' OR 1=1 --" })).total, 0);
    // Any printable name round-trips.
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).filter((s) => !/[\u0000-\u001f]/.test(s) && s.length <= 200), async (name) => {
        const ns = 'fc-names';
        await admin.ok('queue.create', { namespace: ns, queue: name, dialect: 'sync', ifNotExists: true });
        const info = await admin.ok('queue.get', { namespace: ns, queue: name });
        assert.equal(info.name, name);
        await admin.ok('queue.delete', { namespace: ns, queue: name });
      }),
      { numRuns: 100 },
    );
    assert.equal((await sqliteOf(emu).pragma('integrity_check', { simple: true })), 'ok');
  });
});
