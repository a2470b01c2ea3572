import assert from 'node:assert/strict';
import { fresh, httpCall, readOnlyToken, startTestEmulator } from '../support';

// The env management API's own rules, over real HTTP (DESIGN.md "env HTTP API").

describe('conformance: env HTTP API', () => {
  let emu: Awaited<ReturnType<typeof startTestEmulator>>;
  before(async () => {
    emu = await startTestEmulator();
  });
  after(() => emu.close());

  const call = (method: string, path: string, body?: unknown, token: string | null = emu.token) => httpCall(emu, method, path, body, token);

  it('POST /v1/queues answers 201 with the queue; a taken slug answers 409', async () => {
    const project = fresh('p');
    const r = await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'orders', maxRetries: 5, visibilityMs: 1000 });
    assert.equal(r.status, 201);
    assert.deepEqual([r.body.slug, r.body.project, r.body.environment, r.body.consumer, r.body.maxRetries, r.body.visibilityMs], ['orders', project, 'dev', null, 5, 1000]);
    assert.match(r.body.id, /^q_/);
    const again = await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'orders' });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'conflict');
    // The same slug in another environment is another queue.
    assert.equal((await call('POST', '/v1/queues', { project, environment: 'prod', slug: 'orders' })).status, 201);
  });

  it('GET lists by project and environment; GET one has counts and lag_history; PATCH changes settings; DELETE deletes', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 's' })).body;
    await call('POST', '/v1/queues', { project, environment: 'other', slug: 's' });
    const list = await call('GET', `/v1/queues?project=${project}&environment=dev`);
    assert.deepEqual(list.body.queues.map((x: any) => x.id), [q.id]);
    const one = await call('GET', `/v1/queues/${q.id}`);
    assert.equal(one.body.lag_history.length, 48);
    assert.equal(one.body.counts.depth, 0);
    const patched = await call('PATCH', `/v1/queues/${q.id}`, { maxRetries: 1, maxDepth: 10 });
    assert.deepEqual([patched.body.maxRetries, patched.body.maxDepth], [1, 10]);
    assert.equal((await call('PATCH', `/v1/queues/${q.id}`, { bogus: 1 })).status, 400);
    assert.equal((await call('DELETE', `/v1/queues/${q.id}`)).status, 200);
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).status, 404);
  });

  it('a route acts only on the queue its id names: one deleted and made again under the slug between lookup and action is 404, untouched', async () => {
    const routes: [string, string, unknown?][] = [
      ['GET', ''],
      ['PATCH', '', { maxRetries: 1 }],
      ['DELETE', ''],
      ['PUT', '/consumer', { appId: 'a' }],
      ['POST', '/messages', { body: 'x' }],
      ['POST', '/messages', { messages: [{ body: 'x' }] }],
      ['GET', '/messages'],
      ['GET', '/messages?failed=1'],
      ['POST', '/receive', { max: 10 }],
      ['POST', '/ack', { acks: ['r_1'] }],
      ['POST', '/extend', { leaseId: 'r_1', visibilityMs: 1000 }],
      ['POST', '/retry-failed', {}],
      ['POST', '/purge', { confirm: 'jobs' }],
      ['POST', '/purge', { confirm: 'jobs', failed: true }],
    ];
    const engine = emu.engine;
    const real = engine.getQueue.bind(engine);
    try {
      for (const [method, suffix, body] of routes) {
        const project = fresh('race');
        const ns = `${project}/dev`;
        const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'jobs' })).body;
        // Another client, between this route's lookup by id and its action: the env queue is
        // deleted and a cache queue with a message takes its name.
        let armed = true;
        (engine as { getQueue: typeof real }).getQueue = async (a, actor) => {
          const info = await real(a, actor);
          if (armed && 'id' in a && a.id === q.id) {
            armed = false;
            await engine.deleteQueue({ namespace: ns, queue: 'jobs' });
            await engine.push({ namespace: ns, queue: 'jobs', body: 'cache-data', create: 'cache' });
          }
          return info;
        };
        const r = await call(method, `/v1/queues/${q.id}${suffix}`, body);
        const what = `${method} ${suffix || '/'} ${JSON.stringify(body ?? '')}`;
        assert.equal(armed, false, `${what}: the lookup ran`);
        assert.equal(r.status, 404, `${what}: ${JSON.stringify(r.body)}`);
        const after = await real({ namespace: ns, queue: 'jobs' });
        assert.deepEqual([after.dialect, after.counts.ready, after.counts.leased, after.consumer], ['cache', 1, 0, null], what);
      }
    } finally {
      (engine as { getQueue: typeof real }).getQueue = real;
    }
  });

  it('GET /v1/queues filters by project alone or by environment alone', async () => {
    const project = fresh('p');
    const other = fresh('p');
    const dev = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'a' })).body;
    const prod = (await call('POST', '/v1/queues', { project, environment: 'prod', slug: 'a' })).body;
    const elsewhere = (await call('POST', '/v1/queues', { project: other, environment: 'dev', slug: 'a' })).body;
    const ids = async (query: string) => (await call('GET', `/v1/queues?${query}`)).body.queues.map((x: any) => x.id);
    assert.deepEqual((await ids(`project=${project}`)).sort(), [dev.id, prod.id].sort());
    const devIds = await ids('environment=dev');
    assert.ok(devIds.includes(dev.id) && devIds.includes(elsewhere.id) && !devIds.includes(prod.id));
    // A bad value alone is still refused.
    const bad = await call('GET', '/v1/queues?project=a/b');
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_argument');
    assert.equal((await call('GET', '/v1/queues?environment=')).status, 400);
  });

  it('errors are { error: { code, message } } with the matching status; a bad request changes nothing', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'e' })).body;
    const bad = await call('POST', `/v1/queues/${q.id}/messages`, { body: 1, delaySeconds: -1 });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_argument');
    assert.equal(typeof bad.body.error.message, 'string');
    const batch = await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 1 }, { nobody: true }] });
    assert.equal(batch.status, 400);
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
    assert.equal((await call('GET', '/v1/queues/q_nope')).status, 404);
    // Messages name this API's fields (dedupId, slug), not the engine's.
    const badKey = await call('POST', `/v1/queues/${q.id}/messages`, { body: 1, dedupId: 7 });
    assert.equal(badKey.status, 400);
    assert.match(badKey.body.error.message, /^dedupId must be a string, got number$/);
    const inBatch = await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 1 }, { body: 2, dedupId: '' }] });
    assert.match(inBatch.body.error.message, /^messages\[1\]\.dedupId must not be empty$/);
    const noSlug = await call('POST', '/v1/queues', { project, environment: 'dev' });
    assert.equal(noSlug.status, 400);
    assert.match(noSlug.body.error.message, /^slug must be a string, got undefined$/);
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
  });

  it('Authorization: Bearer <token> is required; a read-only token may only read', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'auth' })).body;
    assert.equal((await call('GET', '/v1/queues', undefined, null)).status, 401);
    assert.equal((await call('GET', '/v1/queues', undefined, 'qs_rw_wrong')).status, 401);
    const ro = await readOnlyToken(emu);
    assert.equal((await call('GET', `/v1/queues/${q.id}/messages`, undefined, ro)).status, 200);
    const refused = await call('POST', `/v1/queues/${q.id}/messages`, { body: 1 }, ro);
    assert.equal(refused.status, 403);
    // Worded by the route the caller sent, not by the engine operation behind it.
    assert.equal(refused.body.error.message, `this token is read-only; POST /v1/queues/${q.id}/messages needs a read-write token`);
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
  });

  it('a 401 says to use a Bearer token (WWW-Authenticate); a 405 lists the methods the path takes (Allow)', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'hdr' })).body;
    const anon = await fetch(`${emu.httpUrl}/v1/queues`);
    assert.equal(anon.status, 401);
    assert.match(anon.headers.get('www-authenticate') ?? '', /^Bearer\b/);
    const put = await fetch(`${emu.httpUrl}/v1/queues/${q.id}`, { method: 'PUT', headers: { authorization: `Bearer ${emu.token}` } });
    assert.equal(put.status, 405);
    assert.equal(put.headers.get('allow'), 'GET, HEAD, PATCH, DELETE');
    assert.equal(((await put.json()) as any).error.code, 'invalid_argument');
    // An answer that is neither carries neither.
    const ok = await fetch(`${emu.httpUrl}/v1/queues/${q.id}`, { headers: { authorization: `Bearer ${emu.token}` } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('allow'), null);
    assert.equal(ok.headers.get('www-authenticate'), null);
  });

  it('HEAD on a GET route answers as the GET would, with no body, and leases nothing', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'head' })).body;
    await call('POST', `/v1/queues/${q.id}/messages`, { body: { a: 1 } });
    const auth = { authorization: `Bearer ${emu.token}` };
    for (const path of [`/v1/queues?project=${project}&environment=dev`, `/v1/queues/${q.id}`, `/v1/queues/${q.id}/messages`, `/v1/queues/${q.id}/messages?failed=1`]) {
      const head = await fetch(`${emu.httpUrl}${path}`, { method: 'HEAD', headers: auth });
      assert.equal(head.status, 200, path);
      assert.match(head.headers.get('content-type') ?? '', /^application\/json/, path);
      assert.equal(await head.text(), '', path);
    }
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${q.id}`, { method: 'HEAD' })).status, 401, 'the same token rules');
    assert.equal((await fetch(`${emu.httpUrl}/v1/queues/${q.id}/receive`, { method: 'HEAD', headers: auth })).status, 405, 'a POST route has no HEAD');
    const [m] = (await call('GET', `/v1/queues/${q.id}/messages`)).body.messages;
    assert.deepEqual([m.state, m.attempts], ['ready', 0]);
  });

  it('a query parameter given twice is 400, not one of its values taken at random', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'twice' })).body;
    const r = await call('GET', `/v1/queues/${q.id}/messages?limit=1&limit=500`);
    assert.equal(r.status, 400);
    assert.deepEqual([r.body.error.code, r.body.error.message], ['invalid_argument', 'query parameter "limit" is given more than once']);
    assert.equal((await call('GET', `/v1/queues?project=${project}&project=other`)).status, 400);
    assert.equal((await call('GET', `/v1/queues/${q.id}/messages?limit=1`)).status, 200);
  });

  it('?limit= is a whole number in digits: 0x10, 1e2, " 5", 1.5 and 0 are 400, not read as numbers', async () => {
    const q = (await call('POST', '/v1/queues', { project: fresh('p'), environment: 'dev', slug: 'limits' })).body;
    await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 1 }, { body: 2 }, { body: 3 }] });
    for (const bad of ['0x10', '1e2', '%205', '1.5', '0', '', 'abc', '1001']) {
      const r = await call('GET', `/v1/queues/${q.id}/messages?limit=${bad}`);
      assert.equal(r.status, 400, bad);
      assert.match(r.body.error.message, /^limit must be/, bad);
    }
    assert.equal((await call('GET', `/v1/queues/${q.id}/messages?limit=2`)).body.messages.length, 2);
    assert.equal((await call('GET', `/v1/queues/${q.id}/messages?limit=1000&failed=1`)).status, 200);
  });

  it('a number past what a double holds (1e400 reads as Infinity) is named as read, not as "null"', async () => {
    const r = await fetch(`${emu.httpUrl}/v1/queues`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}`, 'content-type': 'application/json' }, body: `{"project":"${fresh('p')}","environment":"dev","slug":"big","maxDepth":1e400}` });
    assert.equal(r.status, 400);
    assert.equal(((await r.json()) as { error: { message: string } }).error.message, 'maxDepth must be a whole number from 1 to 1000000000, got Infinity');
  });

  it('a body that is not UTF-8 is 400 invalid_argument and sends nothing (it is not stored with U+FFFD in its place)', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'utf8' })).body;
    const bytes = Buffer.concat([Buffer.from('{"body":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]); // Latin-1 é
    const r = await fetch(`${emu.httpUrl}/v1/queues/${q.id}/messages`, { method: 'POST', headers: { authorization: `Bearer ${emu.token}`, 'content-type': 'application/json' }, body: bytes });
    assert.equal(r.status, 400);
    const err = ((await r.json()) as any).error;
    assert.deepEqual([err.code, err.message], ['invalid_argument', 'the request body is not valid UTF-8']);
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
    // The same text as UTF-8 is a body like any other.
    assert.equal((await call('POST', `/v1/queues/${q.id}/messages`, { body: 'caf\u00e9' })).status, 201);
    assert.equal((await call('GET', `/v1/queues/${q.id}/messages`)).body.messages[0].body, 'caf\u00e9');
  });

  it('POST …/messages sends one ({ id }) or a batch ({ messages } → { ids }), all or nothing', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'm', maxDepth: 2 })).body;
    const one = await call('POST', `/v1/queues/${q.id}/messages`, { body: { a: 1 }, attributes: { k: 'v' }, dedupId: 'd' });
    assert.equal(one.status, 201);
    assert.match(one.body.id, /^m_/);
    const full = await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 2 }, { body: 3 }] });
    assert.equal(full.status, 507);
    assert.equal(full.body.error.code, 'queue_full');
    const ok = await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 2 }] });
    assert.equal(ok.body.ids.length, 1);
  });

  it('POST …/ack is one transition: a bad leaseId or delay anywhere settles nothing; unknown leases and those of another queue are stale', async () => {
    const project = fresh('p');
    const a = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'a' })).body;
    const b = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'b' })).body;
    await call('POST', `/v1/queues/${a.id}/messages`, { messages: [{ body: 1 }, { body: 2 }, { body: 3 }] });
    await call('POST', `/v1/queues/${b.id}/messages`, { body: 'b' });
    const [m1, m2, m3] = (await call('POST', `/v1/queues/${a.id}/receive`, { max: 3 })).body.messages;
    const [mb] = (await call('POST', `/v1/queues/${b.id}/receive`, {})).body.messages;
    const states = async () => (await call('GET', `/v1/queues/${a.id}/messages`)).body.messages.map((m: any) => m.state);
    for (const body of [
      { acks: [m1.leaseId], retries: [{ leaseId: 5 }] },
      { retries: [{ leaseId: m1.leaseId }, { leaseId: m2.leaseId, delaySeconds: -1 }] },
      { acks: [m1.leaseId, ''] },
    ]) {
      const r = await call('POST', `/v1/queues/${a.id}/ack`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error.code, 'invalid_argument');
      assert.deepEqual(await states(), ['leased', 'leased', 'leased'], `${JSON.stringify(body)} changed something`);
    }
    // An unknown leaseId and b's lease through a's route are stale (b's message stays leased); a
    // lease named twice settles once.
    const r = await call('POST', `/v1/queues/${a.id}/ack`, { acks: [m1.leaseId, mb.leaseId, 'bogus'], retries: [{ leaseId: m2.leaseId }, { leaseId: m1.leaseId }] });
    assert.deepEqual(r.body, { acked: 1, retried: 1, stale: 3 });
    assert.equal((await call('POST', `/v1/queues/${a.id}/extend`, { leaseId: 'bogus', visibilityMs: 1000 })).status, 409);
    assert.deepEqual((await call('GET', `/v1/queues/${b.id}`)).body.counts.inFlight, 1);
    assert.equal((await call('POST', `/v1/queues/${a.id}/extend`, { leaseId: mb.leaseId, visibilityMs: 1000 })).status, 409);
    assert.equal((await call('POST', `/v1/queues/${b.id}/extend`, { leaseId: mb.leaseId, visibilityMs: 1000 })).status, 200);
    assert.deepEqual((await call('POST', `/v1/queues/${b.id}/ack`, { acks: [mb.leaseId, m3.leaseId] })).body, { acked: 1, retried: 0, stale: 1 });
  });

  it('every object in a request refuses a key it does not know, naming it, and changes nothing (a misspelt retries[].delaySeconds retries nothing)', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'keys', maxRetries: 0 })).body;
    await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 1 }, { body: 2 }] });
    const [m1, m2] = (await call('POST', `/v1/queues/${q.id}/receive`, { max: 2 })).body.messages;
    const state = async () => {
      const one = (await call('GET', `/v1/queues/${q.id}`)).body;
      const live = (await call('GET', `/v1/queues/${q.id}/messages`)).body.messages;
      const queues = (await call('GET', `/v1/queues?project=${project}`)).body.queues.map((x: any) => x.slug);
      return JSON.stringify([one.maxRetries, one.consumer, one.counts, live.map((m: any) => [m.state, m.attempts, m.leaseExpiresAt]), queues]);
    };
    const before = await state();
    const cases: [string, string, unknown, string][] = [
      ['POST', `/v1/queues/${q.id}/ack`, { retries: [{ leaseId: m1.leaseId, delaySecond: 60 }] }, 'retries[0].delaySecond'],
      ['POST', `/v1/queues/${q.id}/ack`, { acks: [m2.leaseId], retries: [{ leaseId: m1.leaseId, delaySeconds: 5, leaseid: 'x' }] }, 'retries[0].leaseid'],
      ['POST', `/v1/queues/${q.id}/messages`, { body: 3, delaySecond: 60 }, 'delaySecond'],
      ['POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 3 }, { body: 4, dedupID: 'd' }] }, 'messages[1].dedupID'],
      ['PUT', `/v1/queues/${q.id}/consumer`, { appId: 'w', maxBatchSise: 5 }, 'maxBatchSise'],
      ['PATCH', `/v1/queues/${q.id}`, { maxRetry: 5 }, 'maxRetry'],
      ['POST', `/v1/queues/${q.id}/receive`, { max: 1, visibility: 5000 }, 'visibility'],
      ['POST', `/v1/queues/${q.id}/extend`, { leaseId: m1.leaseId, visibilityMs: 60_000, leaseMs: 1 }, 'leaseMs'],
      ['POST', `/v1/queues/${q.id}/retry-failed`, { maximum: 5 }, 'maximum'],
      ['POST', `/v1/queues/${q.id}/purge`, { confirm: 'keys', fail: true }, 'fail'],
      ['POST', '/v1/queues', { project, environment: 'dev', slug: 'other', maxRetrys: 1 }, 'maxRetrys'],
      // Query parameters too: a misspelt ?failed would peek the live messages.
      ['GET', `/v1/queues/${q.id}/messages?faild=1`, undefined, 'faild'],
      ['GET', `/v1/queues?project=${project}&environmnet=dev`, undefined, 'environmnet'],
      ['GET', `/v1/queues/${q.id}?verbose=1`, undefined, 'verbose'],
      ['POST', `/v1/queues/${q.id}/purge?confirm=keys`, { confirm: 'keys' }, 'confirm'],
    ];
    for (const [method, path, body, key] of cases) {
      const r = await call(method, path, body);
      assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}`);
      assert.equal(r.body.error.code, 'invalid_argument');
      assert.ok(r.body.error.message.includes(`"${key}"`), `${r.body.error.message} names "${key}"`);
      assert.equal(await state(), before, `${method} ${path} ${JSON.stringify(body)} changed something`);
    }
  });

  it('a project or environment over 100 characters is refused with a message that names the limit', async () => {
    const long = 'x'.repeat(101);
    for (const [method, path, body] of [
      ['POST', '/v1/queues', { project: long, environment: 'dev', slug: 's' }],
      ['POST', '/v1/queues', { project: fresh('p'), environment: long, slug: 's' }],
      ['GET', `/v1/queues?project=${long}`, undefined],
      ['GET', `/v1/queues?environment=${long}`, undefined],
    ] as const) {
      const r = await call(method, path, body);
      assert.equal(r.status, 400, `${method} ${path}`);
      assert.equal(r.body.error.code, 'invalid_argument');
      assert.match(r.body.error.message, /at most 100 characters/);
    }
    const exactly = await call('POST', '/v1/queues', { project: fresh('p').padEnd(100, 'p'), environment: 'e'.repeat(99), slug: 's' });
    assert.equal(exactly.status, 201);
    // The namespace "<project>/<environment>" is at most 200 characters: said in this API's names.
    const both = await call('POST', '/v1/queues', { project: fresh('p').padEnd(100, 'p'), environment: 'e'.repeat(100), slug: 's' });
    assert.equal(both.status, 400);
    assert.match(both.body.error.message, /^project and environment must be at most 199 characters together, got 200$/);
  });

  it('POST …/messages checks contentType as env.queue.send does: text needs a string, bytes and v8 base64, other labels are kept', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'ct' })).body;
    for (const body of [
      { body: 5, contentType: 'text' },
      { body: 5, contentType: 'v8' },
      { body: 'not base64!', contentType: 'v8' },
      { body: 'not base64!', contentType: 'bytes' },
      { messages: [{ body: 'ok', contentType: 'text' }, { body: {}, contentType: 5 }] },
      { body: {}, contentType: '' },
    ]) {
      const r = await call('POST', `/v1/queues/${q.id}/messages`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error.code, 'invalid_argument');
    }
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).body.counts.depth, 0);
    for (const body of [{ body: 'hi', contentType: 'text' }, { body: 'AQL/', contentType: 'bytes' }, { body: Buffer.from(require('node:v8').serialize({ x: 1 })).toString('base64'), contentType: 'v8' }, { body: { a: 1 }, contentType: 'json' }, { body: [1] }, { body: { a: 2 }, contentType: 'application/json' }]) {
      assert.equal((await call('POST', `/v1/queues/${q.id}/messages`, body)).status, 201, JSON.stringify(body));
    }
    const peek = (await call('GET', `/v1/queues/${q.id}/messages`)).body.messages;
    assert.deepEqual(peek.map((m: any) => m.contentType), ['text', 'bytes', 'v8', 'json', 'json', 'application/json']);
    assert.deepEqual(peek[5].body, { a: 2 });
  });

  it('PUT …/consumer replaces the consumer\'s settings: what it leaves out is the default again', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'c' })).body;
    const first = await call('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker', maxBatchSize: 3, maxBatchTimeoutMs: 100, maxConcurrency: 2 });
    assert.deepEqual(first.body.consumer, { appId: 'worker', maxBatchSize: 3, maxBatchTimeoutMs: 100, maxConcurrency: 2, visibilityMs: 30_000 });
    const second = await call('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker' });
    assert.deepEqual(second.body.consumer, { appId: 'worker', maxBatchSize: 10, maxBatchTimeoutMs: 5000, maxConcurrency: 1, visibilityMs: 30_000 });
    const bad = await call('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'other', maxBatchSize: 500 });
    assert.equal(bad.status, 400);
    assert.equal((await call('GET', `/v1/queues/${q.id}`)).body.consumer.appId, 'worker');
    // null is "not given" here as for every optional field: the default.
    const nulls = await call('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker', maxBatchSize: null, maxConcurrency: 2, visibilityMs: null });
    assert.equal(nulls.status, 200, JSON.stringify(nulls.body));
    assert.deepEqual(nulls.body.consumer, { appId: 'worker', maxBatchSize: 10, maxBatchTimeoutMs: 5000, maxConcurrency: 2, visibilityMs: 30_000 });
  });

  it('null for an optional field is "not given" on every route (appId, maxDepth and maxBytes excepted: their null means none)', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'nulls', maxRetries: null, maxDepth: null })).body;
    assert.equal(q.maxRetries, 3);
    await call('POST', `/v1/queues/${q.id}/messages`, { body: 1 });
    assert.equal((await call('PATCH', `/v1/queues/${q.id}`, { retentionSeconds: null })).status, 200);
    assert.deepEqual((await call('POST', `/v1/queues/${q.id}/retry-failed`, { max: null })).body, { retried: 0 });
    const purged = await call('POST', `/v1/queues/${q.id}/purge`, { confirm: 'nulls', failed: null });
    assert.equal(purged.status, 200, JSON.stringify(purged.body));
    assert.deepEqual(purged.body, { purged: 1 }, 'failed: null purges the live messages, as leaving it out does');
  });
});
