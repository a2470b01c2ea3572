import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
// js-yaml and ajv only read and check the document here (no types installed for js-yaml).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require('js-yaml') as { load(text: string): unknown };
import Ajv from 'ajv';
import { ENV_ROUTES } from '../../../emulator/http/env-api';
import { fresh, readOnlyToken, startTestEmulator } from '../support';

// docs/openapi.yaml describes exactly the routes the emulator serves, in both directions.

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

type Doc = { openapi: string; paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { $ref?: string; content?: Record<string, { schema: unknown }> }> }>>; components: Record<string, unknown> };
const loadDoc = () => yaml.load(fs.readFileSync(path.resolve(__dirname, '../../../docs/openapi.yaml'), 'utf8')) as Doc;

function documented(): { method: string; path: string }[] {
  const doc = loadDoc();
  assert.match(doc.openapi, /^3\./);
  const out: { method: string; path: string }[] = [];
  for (const [p, item] of Object.entries(doc.paths)) for (const m of Object.keys(item)) if (METHODS.includes(m)) out.push({ method: m.toUpperCase(), path: p });
  return out;
}

const key = (r: { method: string; path: string }) => `${r.method} ${r.path}`;

describe('conformance: env HTTP API matches docs/openapi.yaml', () => {
  it('every route the emulator serves is documented', () => {
    const doc = new Set(documented().map(key));
    const missing = ENV_ROUTES.map(key).filter((k) => !doc.has(k));
    assert.deepEqual(missing, []);
  });

  it('every documented route is served', () => {
    const served = new Set(ENV_ROUTES.map(key));
    const extra = documented().map(key).filter((k) => !served.has(k));
    assert.deepEqual(extra, []);
  });

  it('every documented route answers over HTTP (not the 404 of an unknown route)', async () => {
    const emu = await startTestEmulator();
    try {
      for (const r of documented()) {
        const res = await fetch(`${emu.httpUrl}${r.path.replace('{qId}', 'q_missing')}`, {
          method: r.method,
          headers: { authorization: `Bearer ${emu.token}`, 'content-type': 'application/json' },
          body: r.method === 'GET' || r.method === 'DELETE' ? undefined : '{}',
        });
        const body = (await res.json()) as { error?: { message: string } };
        assert.ok(!(res.status === 404 && /no route/.test(body.error?.message ?? '')), `${key(r)} is not served`);
      }
    } finally {
      await emu.close();
    }
  });

  it('every answer has a status its operation lists, and a body its schema takes (with the fields it requires)', async function () {
    this.timeout(30_000);
    const doc = loadDoc();
    // The whole document as one schema, so that its #/components refs resolve; OpenAPI's own keys are not JSON Schema's.
    const ajv = new Ajv({ strict: false, allErrors: true });
    ajv.addSchema(doc as object, 'doc');
    const esc = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');
    const emu = await startTestEmulator();
    const seen = new Set<string>();
    const call = async (method: string, url: string, body?: unknown, token = emu.token) => {
      const res = await fetch(`${emu.httpUrl}${url}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      const json = (await res.json()) as Record<string, unknown>;
      const route = Object.keys(doc.paths).find((t) => new RegExp(`^${t.replace(/\{qId\}/g, '[^/]+')}$`).test(url.split('?')[0]))!;
      const op = doc.paths[route][method.toLowerCase()];
      assert.ok(op, `${method} ${url} is documented`);
      let answer = op.responses![String(res.status)];
      assert.ok(answer, `${op.operationId}: status ${res.status} is listed (${JSON.stringify(json)})`);
      let pointer = `doc#/paths/${esc(route)}/${method.toLowerCase()}/responses/${res.status}`;
      if (answer.$ref) {
        pointer = `doc${answer.$ref}`;
        answer = answer.$ref.slice(2).split('/').reduce((o: any, k) => o[k], doc); // eslint-disable-line @typescript-eslint/no-explicit-any
      }
      const validate = ajv.compile({ $ref: `${pointer}/content/${esc('application/json')}/schema` });
      assert.ok(validate(json), `${op.operationId} ${res.status}: ${JSON.stringify(json)} — ${ajv.errorsText(validate.errors)}`);
      seen.add(`${op.operationId} ${res.status}`);
      return { status: res.status, body: json as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    try {
      const project = fresh('p');
      const ro = await readOnlyToken(emu);
      const q = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'orders', maxRetries: 0 })).body;
      await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'orders' }); // 409
      await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'x', bogus: 1 }); // 400
      await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'y' }, ro); // 403
      await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'y' }, 'nobody'); // 401
      await call('GET', `/v1/queues?project=${project}`);
      await call('GET', `/v1/queues/${q.id}`);
      await call('GET', '/v1/queues/q_missing'); // 404
      await call('PATCH', `/v1/queues/${q.id}`, { visibilityMs: 1000 });
      await call('POST', `/v1/queues/${q.id}/messages`, { body: { n: 1 }, attributes: { k: 'v' } });
      await call('POST', `/v1/queues/${q.id}/messages`, { messages: [{ body: 2 }, { body: 3, delaySeconds: 60 }] });
      await call('GET', `/v1/queues/${q.id}/messages?limit=2`);
      const got = (await call('POST', `/v1/queues/${q.id}/receive`, { max: 2 })).body.messages;
      await call('POST', `/v1/queues/${q.id}/extend`, { leaseId: got[0].leaseId, visibilityMs: 5000 });
      await call('POST', `/v1/queues/${q.id}/ack`, { acks: [got[0].leaseId], retries: [{ leaseId: got[1].leaseId }] });
      await call('POST', `/v1/queues/${q.id}/extend`, { leaseId: got[0].leaseId, visibilityMs: 5000 }); // 409: settled
      await call('GET', `/v1/queues/${q.id}/messages?failed=1`);
      await call('POST', `/v1/queues/${q.id}/retry-failed`, {});
      await call('PUT', `/v1/queues/${q.id}/consumer`, { appId: 'worker', maxBatchSize: 5 });
      await call('GET', `/v1/queues/${q.id}`);
      await call('POST', `/v1/queues/${q.id}/receive`, {}); // 409: it has a consumer app
      await call('PUT', `/v1/queues/${q.id}/consumer`, { appId: null });
      const full = (await call('POST', '/v1/queues', { project, environment: 'dev', slug: 'small', maxDepth: 1 })).body;
      await call('POST', `/v1/queues/${full.id}/messages`, { body: 1 });
      await call('POST', `/v1/queues/${full.id}/messages`, { body: 2 }); // 507
      await call('POST', `/v1/queues/${q.id}/purge`, { confirm: 'wrong' }); // 400
      await call('POST', `/v1/queues/${q.id}/purge`, { confirm: 'orders', failed: true });
      await call('DELETE', `/v1/queues/${q.id}`);
    } finally {
      await emu.close();
    }
    // Every operation was met at least once, each with its success status.
    for (const op of ['createQueue 201', 'listQueues 200', 'getQueue 200', 'patchQueue 200', 'deleteQueue 200', 'putConsumer 200', 'sendMessages 201', 'peekMessages 200', 'receive 200', 'ackRetry 200', 'extend 200', 'retryFailed 200', 'purge 200', 'createQueue 401', 'createQueue 403', 'sendMessages 507', 'receive 409', 'extend 409']) {
      assert.ok(seen.has(op), `${op} was checked`);
    }
  });
});
