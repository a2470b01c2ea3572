import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { applyWorkspaceConfig } from '../../emulator/workspace-config';
import { startEmulator } from '../../emulator/emulator';
import * as syncClient from '../../emulator/clients/sync';
import { rejects, startTestEmulator } from './support';

describe('workspace config (quayside.json)', () => {
  let emu: Awaited<ReturnType<typeof startTestEmulator>>;
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-config-'));
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });
  // A fresh (in-memory) emulator per test: each test applies what it reads, whatever ran before it.
  beforeEach(async () => {
    emu = await startTestEmulator();
  });
  afterEach(async () => {
    await emu?.close();
  });
  const queueList = async () =>
    (await emu.engine.listQueues({})).queues.map((q) => ({ ref: `${q.dialect}:${q.namespace}/${q.name}`, policy: q.policy, consumer: q.consumer })).sort((a, b) => a.ref.localeCompare(b.ref));
  const write = (name: string, v: unknown) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, typeof v === 'string' ? v : JSON.stringify(v));
    return f;
  };

  const config = {
    cache: [{ namespace: 'app', name: 'emails', visibilitySeconds: 60, maxDeliveries: 3 }],
    env: [{ project: 'shop', environment: 'dev', slug: 'orders', maxRetries: 5, maxDepth: 100, consumer: { appId: 'worker', maxBatchSize: 20 } }],
    sync: [{ id: 'jobs', delivery: { maxDeliveries: 4, defaultLeaseMs: 5000 }, limits: { maxMessageAgeMs: 60000 } }],
  };

  it('creates the declared queues per dialect with their settings and env consumers', async () => {
    const out = await applyWorkspaceConfig(emu.engine, write('a.json', config));
    assert.deepEqual(out.map((o) => [o.dialect, o.namespace, o.queue, o.action]), [
      ['cache', 'app', 'emails', 'created'], ['env', 'shop/dev', 'orders', 'created'], ['sync', 'default', 'jobs', 'created'],
    ]);
    const cache = await emu.engine.getQueue({ namespace: 'app', queue: 'emails' });
    assert.deepEqual([cache.dialect, cache.policy.leaseMs, cache.policy.maxDeliveries], ['cache', 60000, 3]);
    const env = await emu.engine.getQueue({ namespace: 'shop/dev', queue: 'orders' });
    assert.deepEqual([env.policy.maxDeliveries, env.policy.maxDepth, env.consumer?.appId, env.consumer?.maxBatchSize], [6, 100, 'worker', 20]);
    const sync = await emu.engine.getQueue({ namespace: 'default', queue: 'jobs' });
    assert.deepEqual([sync.policy.maxDeliveries, sync.policy.leaseMs, sync.policy.maxMessageAgeMs], [4, 5000, 60000]);
  });

  it('a file saved with a byte order mark (as editors on Windows may save it) is read as its JSON', async () => {
    const f = path.join(dir, 'bom.json');
    fs.writeFileSync(f, '\uFEFF' + JSON.stringify({ cache: [{ namespace: 'bom', name: 'q' }] }));
    const out = await applyWorkspaceConfig(emu.engine, f);
    assert.deepEqual(out.map((o) => [o.namespace, o.queue, o.action]), [['bom', 'q', 'created']]);
  });

  it('a sync entry with a prefix declares the queue a handle with that prefix uses, with its settings', async () => {
    const out = await applyWorkspaceConfig(emu.engine, write('prefix.json', {
      sync: [
        { prefix: 'myapp:q', tenantId: 'acme', id: 'jobs', delivery: { maxDeliveries: 2 } },
        { prefix: 'sync:queue', tenantId: 'plain', id: 'jobs' },
      ],
    }));
    assert.deepEqual(out.map((o) => [o.namespace, o.queue, o.action]), [['myapp:q:acme', 'jobs', 'created'], ['plain', 'jobs', 'created']]);
    const client = syncClient.queue({ id: 'jobs', tenantId: 'acme', prefix: 'myapp:q', url: emu.url, token: emu.token });
    try {
      await client.send({ data: 1 });
      assert.equal((await emu.engine.getQueue({ namespace: 'myapp:q:acme', queue: 'jobs' })).counts.depth, 1);
      assert.equal((await emu.engine.getQueue({ namespace: 'myapp:q:acme', queue: 'jobs' })).policy.maxDeliveries, 2);
    } finally {
      await client.close();
    }
    const e = await rejects(applyWorkspaceConfig(emu.engine, write('long.json', { sync: [{ prefix: 'p'.repeat(150), tenantId: 't'.repeat(60), id: 'jobs' }] })));
    assert.match(e.message, /long\.json: sync\[0\]: prefix and tenantId must be at most 199 characters together, got 210$/);
    const empty = await rejects(applyWorkspaceConfig(emu.engine, write('empty.json', { sync: [{ prefix: '', id: 'jobs' }] })));
    assert.match(empty.message, /empty\.json: sync\[0\]: prefix must be a non-empty string$/);
  });

  it('is idempotent: applying it again changes nothing; a changed setting updates the queue', async () => {
    assert.deepEqual((await applyWorkspaceConfig(emu.engine, write('a.json', config))).map((o) => o.action), ['created', 'created', 'created']);
    const applied = await queueList();
    const again = await applyWorkspaceConfig(emu.engine, write('a.json', config));
    assert.deepEqual(again.map((o) => o.action), ['unchanged', 'unchanged', 'unchanged']);
    assert.deepEqual(await queueList(), applied, 'applying it again changed nothing');
    const changed = structuredClone(config);
    changed.env[0].maxRetries = 1;
    delete (changed.cache[0] as Record<string, unknown>).visibilitySeconds; // back to the preset
    const out = await applyWorkspaceConfig(emu.engine, write('b.json', changed));
    assert.deepEqual(out.map((o) => o.action), ['updated', 'updated', 'unchanged']);
    assert.equal((await emu.engine.getQueue({ namespace: 'app', queue: 'emails' })).policy.leaseMs, 30000);
    assert.equal((await emu.engine.getQueue({ namespace: 'shop/dev', queue: 'orders' })).policy.maxDeliveries, 2);
    // A consumer setting removed from the file returns to its default too.
    const noBatch = structuredClone(changed);
    noBatch.env[0].consumer = { appId: 'worker' } as typeof noBatch.env[0]['consumer'];
    const third = await applyWorkspaceConfig(emu.engine, write('b2.json', noBatch));
    assert.deepEqual(third.map((o) => o.action), ['unchanged', 'updated', 'unchanged']);
    assert.equal((await emu.engine.getQueue({ namespace: 'shop/dev', queue: 'orders' })).consumer?.maxBatchSize, 10);
    assert.deepEqual((await applyWorkspaceConfig(emu.engine, write('b2.json', noBatch))).map((o) => o.action), ['unchanged', 'unchanged', 'unchanged']);
    // The consumer's lease follows the queue's visibilityMs when the file gives it none.
    const longer = structuredClone(noBatch);
    (longer.env[0] as Record<string, unknown>).visibilityMs = 45000;
    assert.deepEqual((await applyWorkspaceConfig(emu.engine, write('b3.json', longer))).map((o) => o.action), ['unchanged', 'updated', 'unchanged']);
    assert.equal((await emu.engine.getQueue({ namespace: 'shop/dev', queue: 'orders' })).consumer?.visibilityMs, 45000);
    assert.deepEqual((await applyWorkspaceConfig(emu.engine, write('b3.json', longer))).map((o) => o.action), ['unchanged', 'unchanged', 'unchanged']);
  });

  it('startEmulator({ config }) applies a file or an object at start; a bad one starts nothing, a conflict closes what started', async () => {
    const fromFile = await startEmulator({ memory: true, config: write('start.json', config) });
    try {
      const { queues } = await fromFile.engine.listQueues({});
      assert.deepEqual(queues.map((q) => `${q.dialect}:${q.namespace}/${q.name}`).sort(), ['cache:app/emails', 'env:shop/dev/orders', 'sync:default/jobs']);
    } finally {
      await fromFile.close();
    }
    const fromObject = await startEmulator({ memory: true, config: { cache: [{ namespace: 'o', name: 'q' }] } });
    assert.equal((await fromObject.engine.getQueue({ namespace: 'o', queue: 'q' })).dialect, 'cache');
    await fromObject.close();
    // Checked before anything opens: a data directory is left untouched.
    const data = fs.mkdtempSync(path.join(dir, 'data-'));
    for (const bad of [path.join(dir, 'missing.json'), write('bad-start.json', { cache: [{ namespace: 'app' }] })]) {
      const e = await rejects(startEmulator({ dataDir: data, config: bad }));
      assert.equal(e.code, 'invalid_argument');
      assert.deepEqual(fs.readdirSync(data), []);
    }
    assert.equal((await rejects(startEmulator({ memory: true, config: 42 as never }))).code, 'invalid_argument');
    // A declared queue that exists with another dialect: the start fails and its port is free again.
    const first = await startEmulator({ dataDir: data, config: { sync: [{ id: 'emails', tenantId: 'app' }] } });
    await first.close();
    const e = await rejects(startEmulator({ dataDir: data, port: first.port, config: { cache: [{ namespace: 'app', name: 'emails' }] } }));
    assert.equal(e.code, 'conflict');
    const again = await startEmulator({ dataDir: data, port: first.port });
    await again.close();
  });

  it('finds everything the engine would refuse before anything is applied, naming the file and the entry once', async () => {
    const data = fs.mkdtempSync(path.join(dir, 'whole-'));
    const first = await startEmulator({ dataDir: data, config: { cache: [{ namespace: 'app', name: 'kept' }] } });
    await first.close();
    const one = { project: 'p', environment: 'e', slug: 'one' };
    const cases: [unknown, RegExp][] = [
      [{ env: [one, { project: 'p', environment: 'e', slug: 'two', consumer: { appId: 'w', maxConcurrency: 999 } }] }, /^bad\.json: env\[1\]: consumer\.maxConcurrency must be an integer from 1 to 250, got 999$/],
      [{ env: [one, { project: 'p', environment: 'e', slug: 'two', consumer: { appId: 'w', visibilityMs: '10' } }] }, /^bad\.json: env\[1\]: consumer\.visibilityMs must be an integer/],
      [{ env: [one, { project: 'p', environment: 'e', slug: 'two', visibilityMs: 1.5 }] }, /^bad\.json: env\[1\]: visibilityMs must be a whole number from 1 to 43200000, got 1\.5$/],
      [{ env: [one, { project: 'p', environment: 'e', slug: 'two', retentionSeconds: 60.5 }] }, /^bad\.json: env\[1\]: retentionSeconds must be a whole number/],
      [{ cache: [{ namespace: 'app', name: 'ok' }, { namespace: 'app', name: 'tab\there' }] }, /^bad\.json: cache\[1\]: name must not contain control characters/],
      [{ cache: [{ namespace: 'a'.repeat(201), name: 'q' }] }, /^bad\.json: cache\[0\]: namespace /],
      [{ env: [{ project: 'p\u0001', environment: 'e', slug: 's' }] }, /^bad\.json: env\[0\]: project must not contain control characters/],
      [{ cache: [{ namespace: 'app', name: 'ok' }, { namespace: 'app', name: 'ok' }] }, /^bad\.json: cache\[1\]: queue "ok" in namespace "app" is declared twice$/],
      ['{ nope', /^bad\.json: not JSON: /],
      // Where an editor can go: V8 says only "at position 30".
      ['{\n  "cache": [\n    { "namespace": "app" name: "x" }\n  ]\n}', /^bad\.json: not JSON: [^(]*\(line 3,? column 26\)$/],
      // With a byte order mark before it, the position counts without the mark: the error is at the start of line 2.
      ['\uFEFF{\n]', /^bad\.json: not JSON: [^(]*\(line 2,? column 1\)$/],
      [{ queues: [] }, /^bad\.json: unknown top-level option "queues"/],
    ];
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      for (const [bad, says] of cases) {
        write('bad.json', bad);
        const e = await rejects(startEmulator({ dataDir: data, config: 'bad.json' }));
        assert.equal(e.code, 'invalid_argument', e.message);
        assert.match(e.message, says);
      }
    } finally {
      process.chdir(cwd);
    }
    // Nothing of any of them was applied: the directory holds the one queue it had.
    const after = await startEmulator({ dataDir: data });
    try {
      assert.deepEqual((await after.engine.listQueues({})).queues.map((q) => q.name), ['kept']);
    } finally {
      await after.close();
    }
    // A conflict, found only against the queues there, names the entry too.
    const e = await rejects(startEmulator({ dataDir: data, config: { env: [one], sync: [{ tenantId: 'app', id: 'kept' }] } }));
    assert.equal(e.code, 'conflict');
    assert.match(e.message, /^sync\[0\]: queue "kept" in namespace "app" is a cache queue; the config declares it as sync$/);
  });

  it('refuses a bad file with a clear error and changes nothing', async () => {
    // The declared queues exist (app/emails is a cache queue, which f.json conflicts with).
    await applyWorkspaceConfig(emu.engine, write('a.json', config));
    const before = await queueList();
    assert.ok(before.some((q) => q.ref === 'cache:app/emails'));
    assert.match((await rejects(applyWorkspaceConfig(emu.engine, write('c.json', '{ nope')))).message, /not JSON/);
    assert.match((await rejects(applyWorkspaceConfig(emu.engine, write('d.json', { sync: [{ id: 'x', delivery: { maxDeliveries: 'three' } }], cache: [{ namespace: 'n', name: 'ok' }] })))).message, /sync\[0\]/);
    assert.match((await rejects(applyWorkspaceConfig(emu.engine, write('e.json', { queues: [] })))).message, /queues/);
    assert.match((await rejects(applyWorkspaceConfig(emu.engine, write('f.json', { sync: [{ id: 'emails', tenantId: 'app' }] })))).message, /cache queue/);
    await assert.rejects(emu.engine.getQueue({ namespace: 'n', queue: 'ok' }), /not found/);
    assert.deepEqual(await queueList(), before, 'no queue created, removed or changed');
  });
});
