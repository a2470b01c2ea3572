import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

// The package's public entry points (package.json "exports"), as an app imports them from the
// built dist/ (npm test builds first; skipped when dist/ is missing).

const root = path.resolve(__dirname, '../..');
const built = fs.existsSync(path.join(root, 'dist/emulator/clients/cache.js'));

describe('entry points (package exports, built)', function () {
  before(function () {
    if (!built) this.skip();
  });

  it('quayside/cache, quayside/env, quayside/sync, quayside/sync/memory and quayside/emulator resolve with their typings', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const want: Record<string, string[]> = {
      './cache': ['createCache'],
      './env': ['createEnv', 'runConsumer'],
      './sync': ['queue'],
      './sync/memory': ['queue', 'createMemoryQueues'],
      './emulator': ['startEmulator', 'connectClock'],
    };
    for (const [sub, names] of Object.entries(want)) {
      const entry = pkg.exports[sub];
      assert.ok(fs.existsSync(path.join(root, entry.types)), `${sub} types`);
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const mod = require(path.join(root, entry.default));
      for (const n of names) assert.equal(typeof mod[n], 'function', `${sub} exports ${n}`);
    }
  });

  it('an app\'s strict TypeScript test type-checks against the built typings, with the virtual clock always there when asked for', function () {
    this.timeout(60_000);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ts = require('typescript') as typeof import('typescript');
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'qs-types-'));
    try {
      fs.mkdirSync(path.join(dir, 'node_modules', '@types'), { recursive: true });
      // The package as installed: its manifest and dist/, none of its own node_modules.
      fs.mkdirSync(path.join(dir, 'node_modules', 'quayside'));
      for (const f of ['package.json', 'dist']) fs.symlinkSync(path.join(root, f), path.join(dir, 'node_modules', 'quayside', f));
      // An app has @types/node, not this package's dev dependencies (@types/better-sqlite3, @types/ws).
      fs.symlinkSync(path.join(root, 'node_modules', '@types', 'node'), path.join(dir, 'node_modules', '@types', 'node'), 'dir');
      fs.symlinkSync(path.join(root, 'node_modules', 'undici-types'), path.join(dir, 'node_modules', 'undici-types'), 'dir');
      fs.writeFileSync(path.join(dir, 'app.test.ts'), [
        "import { startEmulator } from 'quayside/emulator';",
        "import { createCache } from 'quayside/cache';",
        "import { createMemoryQueues } from 'quayside/sync/memory';",
        'export async function run(): Promise<number> {',
        "  const emu = await startEmulator({ clock: 'virtual' });",
        "  const jobs = createCache({ url: emu.url, token: emu.token, namespace: 'app' }).queue('jobs');",
        '  await jobs.push({ n: 1 }, { delaySeconds: 30 });',
        '  await emu.clock.advance(30_000);',
        "  const mem = createMemoryQueues({ clock: { start: 0 } });",
        '  await mem.clock.advance(1);',
        '  await emu.close();',
        '  return emu.clock.now() + mem.clock.now();',
        '}',
        // Seed-shaped code with typed bodies compiles unchanged (only the import line differs).
        "import { runConsumer, type MessageBatch, type ErrorCode, type ConsumerEnv } from 'quayside/env';",
        "declare const withDefault: { parse(d: unknown): Job; readonly '~standard': { readonly version: 1; readonly vendor: string; validate(v: unknown): unknown; readonly types?: { readonly input: { n?: number }; readonly output: Job } | undefined } };",
        "declare const toNumber: { parse(d: unknown): number; readonly '~standard': { readonly version: 1; readonly vendor: string; validate(v: unknown): unknown; readonly types?: { readonly input: string; readonly output: number } | undefined } };",
        "import { queue } from 'quayside/sync';",
        "import { StoreOpenError } from 'quayside/emulator';",
        'interface Job { n: number }',
        'interface Payload { to: string }',
        'export async function typed(url: string, token: string): Promise<number> {',
        "  const q = createCache({ url, token, namespace: 'app' }).queue<Job>('jobs');",
        '  const [m] = await q.pull({ max: 10 });',
        '  let total: number = m.body.n;',
        "  // @ts-expect-error a queue<Job> takes Jobs",
        "  await q.push({ name: 'not a job' });",
        '  await q.consume(async (msg) => { total += msg.body.n; }, { onError: (_e, msg) => { total -= msg.body.n; } });',
        '  const schema = { parse: (d: unknown): Payload => d as Payload };',
        "  const s = queue({ id: 'mail', schema, url, token });",
        '  const got = await s.recv({ wait: false });',
        '  if (got) { const to: string = got.data.to; const trace: unknown = got.meta?.traceId; void to; void trace; }',
        '  for await (const x of s.stream({ wait: false })) { const to: string = x.data.to; void to; }',
        "  await s.send({ data: { to: 'a@b' }, meta: { traceId: 't' } });",
        "  // @ts-expect-error the schema's type is the queue's: a body of another shape is a type error",
        '  await s.send({ data: { n: 1 } });',
        '  class Worker { seen = 0; async queue(batch: MessageBatch<Job>) { for (const msg of batch.messages) this.seen += msg.body.n; } }',
        "  await runConsumer(new Worker(), { url, token, project: 'p', environment: 'e', queue: 'q' });",
        // The seed's module: queue and fetch; env is typed (a misspelt env.queue call is an error).
        "  const opts = { url, token, project: 'p', environment: 'e', queue: 'q' };",
        "  await runConsumer({ async queue(batch, env) { for (const msg of batch.messages) await env.queue.send('out', msg.body); }, fetch: (req: Request) => new Response(req.url) }, opts);",
        "  // @ts-expect-error env.queue has send, not sned",
        "  await runConsumer({ async queue(_batch, env) { await env.queue.sned('out', 1); } }, opts);",
        "  interface AppEnv { queue: import('quayside/env').EnvQueue; charges: Map<string, number> }",
        "  const billing = { async queue(batch: MessageBatch<Job>, env: AppEnv) { for (const msg of batch.messages) env.charges.set('x', msg.body.n); } };",
        "  await runConsumer(billing, { ...opts, env: { charges: new Map<string, number>() } });",
        "  // @ts-expect-error an app whose env needs charges must be given them",
        "  await runConsumer(billing, opts);",
        // An env that extends ConsumerEnv keeps its named bindings (Omit would leave only the record).
        "  interface BilledEnv extends ConsumerEnv { charges: Map<string, number> }",
        "  const billed = { async queue(_batch: MessageBatch<Job>, env: BilledEnv) { env.charges.clear(); } };",
        "  await runConsumer(billed, { ...opts, env: { charges: new Map<string, number>() } });",
        "  // @ts-expect-error an env extending ConsumerEnv that needs charges must be given them",
        "  await runConsumer(billed, opts);",
        "  // @ts-expect-error charges is a Map, not a number",
        "  await runConsumer(billed, { ...opts, env: { charges: 1 } });",
        // A handler may name only the bindings it reads (runConsumer adds queue at run time).
        "  await runConsumer({ async queue(_batch, env: { DB: string }) { void env.DB; } }, { ...opts, env: { DB: 'x' } });",
        // A transforming schema (Standard Schema types, as Zod declares them) is sent its input and received as its output.
        "  const n = queue({ id: 'n', schema: toNumber, url, token });",
        "  await n.send({ data: '42' });",
        "  // @ts-expect-error send takes the schema's input (a string), not its output",
        "  await n.send({ data: 42 });",
        "  const r = await n.recv({ wait: false });",
        "  if (r) { const num: number = r.data; void num; }",
        "  const [dead] = await n.dlq();",
        "  if (dead) { const raw: string = dead.data; void raw; }",
        // Named by the call, the type stands even where the schema's input differs (a default, a transform).
        "  const named = queue<Job>({ id: 'named', schema: withDefault, url, token });",
        "  await named.send({ data: { n: 1 } });",
        "  const asNumber = queue<number>({ id: 'as-number', schema: toNumber, url, token });",
        "  void asNumber;",
        // A Standard Schema that declares no types is a schema like any other.
        "  const bare = queue({ id: 'bare', url, token, schema: { parse: (d: unknown): Job => d as Job, '~standard': { version: 1 as const, vendor: 'x', validate: (v: unknown) => ({ value: v }) } } });",
        "  await bare.send({ data: { n: 2 } });",
        "  // @ts-expect-error a bare schema's type is still the queue's",
        "  await bare.send({ data: { to: 'x' } });",
        // One call site for either import.
        "  const either = Math.random() > 0.5 ? queue : (await import('quayside/sync/memory')).queue;",
        "  void either({ id: 'either', url, token });",
        "  const code: ErrorCode = 'not_found';",
        '  void code;',
        '  try { await startEmulator({ dataDir: url }); } catch (e) { if (e instanceof StoreOpenError && e.problem === \'in_use\') total++; }',
        // One options object for either sync import: the in-memory queue takes url and token unused.
        "  const mq = (await import('quayside/sync/memory')).queue({ id: 'both', url, token });",
        '  void mq;',
        // The seed does not say which of limits / delivery holds which setting: either takes any.
        "  queue({ id: 'a', url, token, limits: { maxDeliveries: 3 }, delivery: { maxMessageAgeMs: 1000, ordering: 'fifo' } });",
        '  return total;',
        '}',
        // Without a virtual clock there may be none: the typings must say so.
        'export async function plain(): Promise<void> {',
        '  const emu = await startEmulator();',
        '  // @ts-expect-error clock is only there with clock: virtual',
        '  await emu.clock.advance(1);',
        '}',
      ].join('\n'));
      // node16 reads "exports"; the classic CommonJS setup (module commonjs, resolution node10)
      // ignores it and finds the typings through "typesVersions".
      // The package's own .d.ts files are checked too (skipLibCheck off, no esModuleInterop): a
      // public type that reached better-sqlite3 would fail here, as it would in such an app.
      for (const [module, moduleResolution] of [
        [ts.ModuleKind.Node16, ts.ModuleResolutionKind.Node16],
        [ts.ModuleKind.CommonJS, ts.ModuleResolutionKind.Node10],
      ] as const) {
        const program = ts.createProgram([path.join(dir, 'app.test.ts')], {
          strict: true, noEmit: true, module, moduleResolution, target: ts.ScriptTarget.ES2022,
          types: ['node'], typeRoots: [path.join(dir, 'node_modules', '@types')], skipLibCheck: false, preserveSymlinks: true,
        });
        const problems = ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? path.basename(d.file.fileName) + ': ' : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
        assert.deepEqual(problems, [], `module ${ts.ModuleKind[module]}, resolution ${ts.ModuleResolutionKind[moduleResolution]}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('quayside/sync/memory works from the build with no emulator', async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { createMemoryQueues } = require(path.join(root, 'dist/emulator/embedded/memory.js'));
    const mem = createMemoryQueues({ clock: 'virtual' });
    const q = mem.queue({ id: 'built' });
    await q.send({ data: { ok: true } });
    assert.deepEqual((await q.recv({ wait: false })).data, { ok: true });
    await mem.close();
  });

  it('the npm package carries every entry point, its types and the bin, and not the tests, the extension or the tooling', function () {
    this.timeout(60_000);
    const { execFileSync } = require('node:child_process') as typeof import('node:child_process');
    // --ignore-scripts: the build ran already (prepare would run it again)
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const files = new Set((JSON.parse(out) as { files: { path: string }[] }[])[0].files.map((f) => f.path));
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const wanted: string[] = [pkg.bin.quayside, 'README.md', 'LICENSE', 'package.json'];
    for (const [sub, entry] of Object.entries(pkg.exports as Record<string, string | { types: string; default: string }>)) {
      if (typeof entry === 'string') wanted.push(entry);
      else wanted.push(entry.types, entry.default, entry.default.replace(/\.js$/, '.js.map'));
      assert.ok(sub.startsWith('./'));
    }
    const missing = wanted.map((f) => f.replace(/^\.\//, '')).filter((f) => !files.has(f));
    assert.deepEqual(missing, [], 'shipped');
    const stray = [...files].filter((f) => /^(test|src|bench|scripts|media|examples|\.ci|\.tools)\//.test(f) || /\.(tgz|vsix)$/.test(f) || f === 'dist/extension.js');
    assert.deepEqual(stray, [], 'not shipped');
    // The README and the docs a user reads in node_modules show their screenshots (none broken).
    const shown = [...files].filter((f) => f.endsWith('.md')).flatMap((md) =>
      [...fs.readFileSync(path.join(root, md), 'utf8').matchAll(/!\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => path.posix.join(path.posix.dirname(md), m[1])));
    assert.ok(shown.length >= 4, 'the README shows its screenshots');
    assert.deepEqual(shown.filter((img) => !files.has(img)), [], 'every image a shipped page shows is shipped');
  });
});
