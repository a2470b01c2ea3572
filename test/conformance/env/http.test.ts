import assert from 'node:assert/strict';
import { fresh, readOnlyToken, startTestEmulator } from '../support';

// The env management API's own rules, over real HTTP (DESIGN.md "env HTTP API").

describe('conformance: env HTTP API', () => {
  let emu: Awaited<ReturnType<typeof startTestEmulator>>;
  before(async () => {
    emu = await startTestEmulator();
  });
  after(() => emu.close());

  const call = async (method: string, path: string, body?: unknown, token: string | null = emu.token) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    const r = await fetch(`${emu.httpUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as any };
  };

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
  });

  it('Authorization: Bearer <token> is required; a read-only token may only read', async () => {
    const project = fresh('p');
    const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'auth' })).body;
    assert.equal((await call('GET', '/v1/queues', undefined, null)).status, 401);
    assert.equal((await call('GET', '/v1/queues', undefined, 'qs_rw_wrong')).status, 401);
    const ro = await readOnlyToken(emu);
    assert.equal((await call('GET', `/v1/queues/${q.id}/messages`, undefined, ro)).status, 200);
    assert.equal((await call('POST', `/v1/queues/${q.id}/messages`, { body: 1 }, ro)).status, 403);
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
});
