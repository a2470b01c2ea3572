import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
// js-yaml comes with mocha (no types installed); it only reads the document here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require('js-yaml') as { load(text: string): unknown };
import { ENV_ROUTES } from '../../../emulator/http/env-api';
import { startTestEmulator } from '../support';

// docs/openapi.yaml describes exactly the routes the emulator serves, in both directions.

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

function documented(): { method: string; path: string }[] {
  const doc = yaml.load(fs.readFileSync(path.resolve(__dirname, '../../../docs/openapi.yaml'), 'utf8')) as { openapi: string; paths: Record<string, Record<string, unknown>> };
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
});
