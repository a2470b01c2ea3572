import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startEmulator, type VirtualEmulator } from '../../emulator/emulator';
import { createCache } from '../../emulator/clients/cache';
import { queue as syncQueue } from '../../emulator/clients/sync';
import { urlHost } from '../../emulator/server/auth';
import { LIMITS } from '../../emulator/protocol';
import { readOnlyToken } from '../conformance/support';

// The `quayside` command's own options: what the extension's push form and chart offer is in the
// CLI too, and a bad option is a usage error (exit 64) before anything starts.

const run = promisify(execFile);
const cli = path.resolve(__dirname, '../../emulator/cli.ts');
const tsx = path.resolve(__dirname, '../../node_modules/.bin/tsx');
const HOUR = 3600_000;

type Failure = { code: number; stdout: string; stderr: string };
const fails = (p: Promise<unknown>) => p.then(() => null, (e: Failure) => e);

/** The first line a started `quayside start` child prints (its listening line), or its exit as an error. */
function firstLine(child: ChildProcessWithoutNullStreams): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.split('\n')[0]);
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${buf}`)));
  });
}

/** An in-memory emulator on a virtual clock, and the CLI options that reach it. */
async function cliEmulator(): Promise<{ emu: VirtualEmulator; conn: string[] }> {
  const emu = await startEmulator({ memory: true, clock: 'virtual' });
  return { emu, conn: ['--url', emu.url, '--token', emu.token] };
}

describe('quayside CLI: push --attributes, stats and show', function () {
  // Some tests run 15–19 CLI processes in turn through tsx: 12 s on a quiet machine, twice that
  // beside a busy neighbour.
  this.timeout(90_000);
  let emu: VirtualEmulator;
  let args: string[];
  before(async () => {
    emu = await startEmulator({ memory: true, clock: 'virtual' });
    args = ['--ns', 'cli', '--url', emu.url, '--token', emu.token];
  });
  after(() => emu.close());

  it('push --attributes sends a JSON object of attributes with the message; anything else is a usage error that pushes nothing', async () => {
    await run(tsx, [cli, 'push', 'jobs', '{"n":1}', '--attributes', '{"source":"cli"}', ...args]);
    const peek = await emu.engine.peek({ namespace: 'cli', queue: 'jobs' });
    assert.deepEqual(peek.messages.map((m) => [m.body, m.attributes]), [[{ n: 1 }, { source: 'cli' }]]);
    for (const [bad, what] of [['[1]', /--attributes must be a JSON object/], ['{oops', /--attributes is not JSON/]] as const) {
      const e = await fails(run(tsx, [cli, 'push', 'jobs', '{"n":2}', '--attributes', bad, ...args, '--json']));
      assert.equal(e?.code, 64);
      assert.match(JSON.parse(e!.stderr).error.message, what);
    }
    assert.equal((await emu.engine.peek({ namespace: 'cli', queue: 'jobs' })).total, 1);
  });

  it('stats shows the counts and the half-hour steps with a backlog; --json gives the stats answer', async () => {
    const q = createCache({ url: emu.url, token: emu.token, namespace: 'cli' }).queue('lagging');
    await q.push('waits');
    await emu.clock.advance(HOUR);
    const text = (await run(tsx, [cli, 'stats', 'lagging', ...args])).stdout;
    assert.match(text, /^ready 1, delayed 0, in flight 0, dead 0, oldest ready 3600 s$/m);
    assert.match(text, /HALF HOUR FROM\s+PEAK DEPTH\s+LONGEST WAIT \(S\)/);
    assert.match(text, /\s1\s+3600$/m, 'the last step saw the message wait an hour');
    const json = JSON.parse((await run(tsx, [cli, 'stats', 'lagging', ...args, '--json'])).stdout);
    assert.equal(json.counts.ready, 1);
    assert.equal(json.lagHistory.length, 48);
    const missing = await fails(run(tsx, [cli, 'stats', ...args]));
    assert.equal(missing?.code, 64);
  });

  it('show prints one message in full (the extension\'s Show Message); an unknown id is not_found (exit 1)', async () => {
    const { id } = await emu.engine.push({ namespace: 'cli', queue: 'shown', body: { to: 'ada' }, attributes: { source: 't' }, dedupeKey: 'k1', create: 'cache' });
    const text = (await run(tsx, [cli, 'show', 'shown', id, ...args])).stdout;
    assert.match(text, new RegExp(`^id +${id}$`, 'm'));
    assert.match(text, /^state +ready$/m);
    assert.match(text, /^dedupe key +k1$/m);
    assert.match(text, /^attributes +\{"source":"t"\}$/m);
    assert.match(text, /^body\n\{\n  "to": "ada"\n\}$/m);
    const json = JSON.parse((await run(tsx, [cli, 'show', 'shown', id, ...args, '--json'])).stdout);
    assert.deepEqual([json.id, json.body], [id, { to: 'ada' }]);
    const gone = await fails(run(tsx, [cli, 'show', 'shown', 'm_999999', ...args, '--json']));
    assert.equal(gone?.code, 1);
    assert.equal(JSON.parse(gone!.stderr).error.code, 'not_found');
  });

  it('export writes every message (a page at a time, never leasing) as JSON or NDJSON, to stdout or --out', async () => {
    const ref = { namespace: 'cli', queue: 'exported' };
    // More than two of the export's pages (it peeks LIMITS.maxPageSize at a time), so paging is exercised.
    const n = LIMITS.maxPageSize * 2 + 5;
    for (let i = 0; i < n; i += 500) {
      await emu.engine.pushBatch({ ...ref, messages: Array.from({ length: Math.min(500, n - i) }, (_, j) => ({ body: { i: i + j } })), create: 'cache' });
    }
    await emu.engine.pull({ ...ref, max: 1, leaseMs: 60_000 });
    const big = { maxBuffer: 256 * 1024 * 1024 };
    const order = (from: number) => Array.from({ length: n - from }, (_, k) => from + k);
    const all = JSON.parse((await run(tsx, [cli, 'export', 'exported', ...args], big)).stdout) as { id: string; body: { i: number }; state: string }[];
    // Every message exactly once, in order: the first (leased) and the rest ready.
    assert.deepEqual(all.map((m) => m.body.i), order(0));
    assert.equal(new Set(all.map((m) => m.id)).size, n, 'no message twice');
    assert.deepEqual(all.map((m) => m.state), ['leased', ...Array(n - 1).fill('ready')]);
    assert.equal((await emu.engine.stats(ref)).counts.leased, 1, 'exporting leased nothing more');
    const lines = (await run(tsx, [cli, 'export', 'exported', '--state', 'ready', '--format', 'ndjson', ...args], big)).stdout.split('\n').filter(Boolean);
    assert.deepEqual(lines.map((l) => JSON.parse(l).body.i), order(1));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-cli-export-'));
    try {
      const file = path.join(dir, 'out.json');
      const said = JSON.parse((await run(tsx, [cli, 'export', 'exported', '--out', file, ...args, '--json'])).stdout);
      assert.deepEqual(said, { exported: n, file });
      assert.deepEqual((JSON.parse(fs.readFileSync(file, 'utf8')) as { body: { i: number } }[]).map((m) => m.body.i), order(0));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const bad = await fails(run(tsx, [cli, 'export', 'exported', '--format', 'csv', ...args, '--json']));
    assert.equal(bad?.code, 64);
  });

  it('peek and export take --search, the panel\'s filter: a case-sensitive part of the body, quotes found as typed', async () => {
    const ref = { namespace: 'cli', queue: 'searched' };
    for (const body of [{ to: 'ada' }, { to: 'bob' }, { say: 'she said "hi"' }, { to: 'Ada' }]) await emu.engine.push({ ...ref, body, create: 'cache' });
    const peeked = JSON.parse((await run(tsx, [cli, 'peek', 'searched', '--search', 'ada', ...args, '--json'])).stdout);
    assert.deepEqual([peeked.total, peeked.messages.map((m: { body: unknown }) => m.body)], [1, [{ to: 'ada' }]]);
    assert.match((await run(tsx, [cli, 'peek', 'searched', '--search', 'bob', ...args])).stdout, /^1 message\(s\)$/m);
    const exported = JSON.parse((await run(tsx, [cli, 'export', 'searched', '--search', 'said "hi"', ...args])).stdout);
    assert.deepEqual(exported.map((m: { body: unknown }) => m.body), [{ say: 'she said "hi"' }]);
    for (const argv of [['peek', 'searched', '--search'], ['export', 'searched', '--search', '']]) {
      const e = await fails(run(tsx, [cli, ...argv, ...args, '--json']));
      assert.equal(e?.code, 64, argv.join(' '));
      assert.match(JSON.parse(e!.stderr).error.message, /--search needs a value/);
    }
  });

  it('an argument more than a command takes is a usage error that does nothing (push q 1 2 does not push 1)', async () => {
    for (const extra of [['push', 'extra-args', '1', '2'], ['queues', 'stray'], ['show', 'extra-args', 'm_1', 'm_2']]) {
      const e = await fails(run(tsx, [cli, ...extra, ...args, '--json']));
      assert.equal(e?.code, 64, extra.join(' '));
      assert.match(JSON.parse(e!.stderr).error.message, /is one too many/);
    }
    assert.equal((await emu.engine.listQueues({ namespace: 'cli' })).queues.some((q) => q.name === 'extra-args'), false, 'nothing was pushed');
  });

  it('--ns is also --namespace, and QUAYSIDE_NAMESPACE stands in for it where a command needs one; with neither, the usage error names both', async () => {
    const conn = ['--url', emu.url, '--token', emu.token];
    await run(tsx, [cli, 'push', 'ns-env', '1', ...conn], { env: { ...process.env, QUAYSIDE_NAMESPACE: 'from-env' } });
    await run(tsx, [cli, 'push', 'ns-env', '2', '--namespace', 'from-flag', ...conn]);
    assert.equal((await emu.engine.stats({ namespace: 'from-env', queue: 'ns-env' })).counts.depth, 1);
    assert.equal((await emu.engine.stats({ namespace: 'from-flag', queue: 'ns-env' })).counts.depth, 1);
    const env = { ...process.env };
    delete env.QUAYSIDE_NAMESPACE;
    const e = await fails(run(tsx, [cli, 'push', 'ns-env', '3', ...conn, '--json'], { env }));
    assert.equal(e?.code, 64);
    assert.equal(JSON.parse(e!.stderr).error.message, '--ns NAMESPACE is required (or QUAYSIDE_NAMESPACE)');
    const { stdout } = await run(tsx, [cli, '--help']);
    assert.match(stdout, /--ns is also --namespace; a command that needs one reads QUAYSIDE_NAMESPACE/);
  });

  it('an option given twice is a usage error (64) that does nothing: purge --ns prod --ns dev purges neither', async () => {
    for (const ns of ['twice-a', 'twice-b']) await emu.engine.push({ namespace: ns, queue: 'jobs', body: 1, create: 'cache' });
    const conn = ['--url', emu.url, '--token', emu.token, '--json'];
    for (const argv of [
      ['purge', 'jobs', '--ns', 'twice-a', '--ns', 'twice-b', '--yes'],
      ['purge', 'jobs', '--ns=twice-a', '--namespace', 'twice-b', '--yes'],
      ['queues', '--ns', 'twice-a', '--ns', 'twice-b'],
      ['push', 'jobs', '2', '--ns', 'twice-a', '--delay', '5', '--delay', '0'],
    ]) {
      const e = await fails(run(tsx, [cli, ...argv, ...conn]));
      assert.equal(e?.code, 64, argv.join(' '));
      assert.match(JSON.parse(e!.stderr).error.message, /given more than once|are the same option/);
    }
    for (const ns of ['twice-a', 'twice-b']) assert.equal((await emu.engine.stats({ namespace: ns, queue: 'jobs' })).counts.depth, 1, ns);
  });

  it('peek and dead say when more pages follow and take --cursor for the next one (a table that stops at its limit is not the whole list)', async () => {
    const ref = { namespace: 'cli', queue: 'pages' };
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await emu.engine.push({ ...ref, body: { i }, create: 'cache' })).id);
    for (const m of (await emu.engine.pull({ ...ref, max: 3 })).messages) await emu.engine.nack({ receipt: m.receipt, dead: true });
    const conn = ['--ns', 'cli', '--url', emu.url, '--token', emu.token];
    for (const cmd of ['peek', 'dead']) {
      // Live messages (peek's default): 2, in pages of 1; dead letters: 3, in pages of 2.
      const limit = cmd === 'peek' ? '1' : '2';
      const first = (await run(tsx, [cli, cmd, 'pages', '--limit', limit, ...conn])).stdout;
      const cursor = /more follow: the next page with --cursor (\S+) /.exec(first)?.[1];
      assert.ok(cursor, `${cmd}: the first page says more follow:\n${first}`);
      const second = (await run(tsx, [cli, cmd, 'pages', '--limit', limit, '--cursor', cursor, ...conn])).stdout;
      assert.doesNotMatch(second, /more follow/, `${cmd}: the last page says nothing more`);
      const shown = (text: string) => ids.filter((id) => new RegExp(`^${id}\\b`, 'm').test(text));
      assert.deepEqual([...shown(first), ...shown(second)], cmd === 'dead' ? ids.slice(0, 3) : ids.slice(3), `${cmd}: the two pages hold every message once`);
    }
  });

  it('start: a value given to a flag that takes none, or an empty value, is a usage error (64) that starts nothing; a bad config file is code config, named once', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-cli-flags-'));
    try {
      for (const argv of [['--memory=true'], ['--memory=false'], ['--json=1'], ['--free-tier=yes'], ['--help=no'], ['--data', ''], ['--config', ''], ['--host', ''], ['--data=']]) {
        const e = await fails(run(tsx, [cli, 'start', '--port', '0', ...argv], { cwd: dir }));
        assert.equal(e?.code, 64, argv.join(' '));
        assert.match(e!.stderr, /--(memory|json|free-tier|help) takes no value|--(data|config|host) needs a value/, argv.join(' '));
      }
      assert.deepEqual(fs.readdirSync(dir), [], 'nothing was started or written');
      fs.writeFileSync(path.join(dir, 'q.json'), JSON.stringify({ env: [{ project: 'p', environment: 'e', slug: 's', consumer: { appId: 'w', maxConcurrency: 999 } }] }));
      fs.writeFileSync(path.join(dir, 'broken.json'), '{ nope');
      for (const [file, says] of [['q.json', /^q\.json: env\[0\]: consumer\.maxConcurrency must be an integer from 1 to 250, got 999$/], ['broken.json', /^broken\.json: not JSON: /]] as const) {
        const e = await fails(run(tsx, [cli, 'start', '--port', '0', '--config', file, '--json'], { cwd: dir }));
        assert.equal(e?.code, 1);
        const line = JSON.parse(e!.stdout.trim().split('\n').pop()!);
        assert.equal(line.code, 'config');
        assert.match(line.message, says);
      }
      assert.deepEqual(fs.readdirSync(dir).sort(), ['broken.json', 'q.json'], 'no data directory was made');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a flag value out of range is a usage error (exit 64) whether the CLI or the emulator finds it, and does nothing', async () => {
    await emu.engine.push({ namespace: 'cli', queue: 'ranges', body: 1, create: 'cache' });
    const cases: [string[], RegExp][] = [
      [['peek', 'ranges', '--state', 'bogus'], /--state: unknown state "bogus"; states are ready, delayed, leased, dead/],
      [['peek', 'ranges', '--limit', '1001'], /--limit must be at most 1000, got 1001/],
      [['dead', 'ranges', '--limit', '1001'], /--limit must be at most 1000/],
      [['replay', 'ranges', '--max', '100001'], /--max must be at most 100000/],
      [['replay', 'ranges', '--ids', 'm_1,m_2', '--max', '1'], /give one or the other/],
      // The queue's own limit, found by the emulator, named by the flag the user typed.
      [['push', 'ranges', '2', '--delay', String(7 * 24 * HOUR + 1)], new RegExp(`^--delay must be at most ${7 * 24 * HOUR}, got ${7 * 24 * HOUR + 1}$`)],
      // Decimal digits only: Number() would read these as 16, 1000, 3 and 5.
      ...['0x10', '1e3', '0b11', ' 5', '1.5'].map((d): [string[], RegExp] => [['push', 'ranges', '3', '--delay', d], /--delay must be a whole number ≥ 0/]),
      [['purge-dead', 'ranges', '--ids', 'm_1,,m_2'], /--ids has an empty id/],
    ];
    for (const [argv, message] of cases) {
      const e = await fails(run(tsx, [cli, ...argv, ...args, '--json']));
      assert.equal(e?.code, 64, argv.join(' '));
      assert.match(JSON.parse(e!.stderr).error.message, message);
    }
    assert.equal((await emu.engine.peek({ namespace: 'cli', queue: 'ranges' })).total, 1, 'nothing was pushed');
    const before = emu.clock.now();
    for (const ms of ['1e3', '1.5', '0.4', '-1']) {
      const e = await fails(run(tsx, [cli, 'advance', ms, '--url', emu.url, '--token', emu.token, '--json']));
      assert.equal(e?.code, 64, ms);
      assert.match(JSON.parse(e!.stderr).error.message, /MS must be a whole number of milliseconds ≥ 0/);
    }
    assert.equal(emu.clock.now(), before, 'the clock did not move');
  });

  it('dead and purge-dead call an env queue\'s dead letters its failed messages, as the product and the panel do', async () => {
    const text = async (argv: string[], ns: string) => (await run(tsx, [cli, ...argv, '--ns', ns, '--url', emu.url, '--token', emu.token])).stdout.split('\n')[0];
    for (const [dialect, ns, words] of [['env', 'shop/dev', 'failed message(s)'], ['cache', 'cli', 'dead letter(s)']] as const) {
      const ref = { namespace: ns, queue: `words-${dialect}` };
      await emu.engine.createQueue({ ...ref, dialect });
      await emu.engine.push({ ...ref, body: 1 });
      const [m] = (await emu.engine.pull({ ...ref, max: 1 })).messages;
      await emu.engine.nack({ receipt: m.receipt, dead: true });
      assert.equal(await text(['dead', ref.queue], ns), `1 ${words}`, dialect);
      assert.equal(await text(['purge-dead', ref.queue], ns), `purged 1 ${words}`, dialect);
    }
  });

  it('a read-only token is refused in the words of the command (forbidden, exit 1), and nothing changes', async () => {
    await emu.engine.push({ namespace: 'cli', queue: 'guarded', body: 1, create: 'cache' });
    const ro = await readOnlyToken(emu);
    const roArgs = ['--ns', 'cli', '--url', emu.url, '--token', ro, '--json'];
    for (const [cmd, ...rest] of [['push', 'guarded', '2'], ['purge', 'guarded', '--yes'], ['replay', 'guarded'], ['purge-dead', 'guarded']]) {
      const e = await fails(run(tsx, [cli, cmd, ...rest, ...roArgs]));
      assert.equal(e?.code, 1, cmd);
      const err = JSON.parse(e!.stderr).error;
      assert.deepEqual([err.code, err.message, err.details?.readOnly], ['forbidden', `this token is read-only; quayside ${cmd} needs a read-write token`, true]);
    }
    assert.equal((await emu.engine.peek({ namespace: 'cli', queue: 'guarded' })).total, 1);
    // Reading is what such a token is for.
    assert.equal(JSON.parse((await run(tsx, [cli, 'peek', 'guarded', ...roArgs])).stdout).total, 1);
  });

  it('options with no command are a usage error (64); --help and a bare quayside print the usage, --version the version (0)', async () => {
    for (const argv of [['--bogus'], ['--json'], ['--ns', 'cli']]) {
      const e = await fails(run(tsx, [cli, ...argv]));
      assert.equal(e?.code, 64, argv.join(' '));
      assert.match(e!.stderr, /no command given; an option \(--\w+\) goes after one/);
    }
    for (const flagged of ['--help=no', '--version=1']) {
      const e = await fails(run(tsx, [cli, flagged]));
      assert.equal(e?.code, 64, flagged);
      assert.match(e!.stderr, /--(help|version) takes no value; give --(help|version) alone/);
    }
    for (const argv of [[], ['--help'], ['help']]) assert.match((await run(tsx, [cli, ...argv])).stdout, /^quayside <command> \[options\]/, argv.join(' '));
    const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8')) as { version: string };
    assert.equal((await run(tsx, [cli, '--version'])).stdout, `quayside ${pkg.version}\n`);
  });

  it('--json errors carry what the protocol\'s error does: quota_exceeded has its resetAt', async () => {
    await emu.engine.configureNamespace({ namespace: 'cli-quota', dailyQuota: 1 });
    const quota = ['--ns', 'cli-quota', '--url', emu.url, '--token', emu.token, '--json'];
    await run(tsx, [cli, 'push', 'q', '1', ...quota]);
    const e = await fails(run(tsx, [cli, 'push', 'q', '2', ...quota]));
    assert.equal(e?.code, 1);
    const err = JSON.parse(e!.stderr).error;
    assert.equal(err.code, 'quota_exceeded');
    const midnight = new Date(emu.clock.now());
    midnight.setUTCHours(24, 0, 0, 0);
    assert.equal(err.resetAt, midnight.getTime());
  });

  it('advance on an emulator with the system clock is a conflict (exit 1) that says how to start one with a virtual clock, from the CLI as from code', async () => {
    const sys = await startEmulator({ memory: true });
    try {
      const e = await fails(run(tsx, [cli, 'advance', '1000', '--url', sys.url, '--token', sys.token, '--json']));
      assert.equal(e?.code, 1);
      const err = JSON.parse(e!.stderr).error;
      assert.equal(err.code, 'conflict');
      assert.match(err.message, /the clock is not virtual/);
      assert.match(err.message, /quayside start --clock virtual/);
      assert.match(err.message, /startEmulator\(\{ clock: 'virtual' \}\)/);
    } finally {
      await sys.close();
    }
  });
});

describe('quayside start: its options', function () {
  this.timeout(30_000);

  it('a --host that names nothing this machine can resolve fails with a plain message (exit 1), not the resolver\'s error code', async () => {
    const e = await fails(run(tsx, [cli, 'start', '--memory', '--port', '0', '--host', '0.0.0.0.0', '--json']));
    assert.equal(e?.code, 1);
    const line = JSON.parse(e!.stdout.trim().split('\n').pop()!);
    assert.equal(line.code, 'listen');
    assert.match(line.message, /cannot listen on 0\.0\.0\.0\.0: it is not an address or a host name this machine can resolve/);
  });

  it('a port outside 0–65535 is a usage error (64), as a port that is not a number is', async () => {
    for (const port of ['99999', '-1', 'abc']) {
      const e = await fails(run(tsx, [cli, 'start', '--memory', '--port', port, '--json']));
      assert.equal(e?.code, 64, `--port ${port}`);
      assert.equal(JSON.parse(e!.stdout.trim().split('\n').pop()!).code, 'usage');
    }
  });

  it('an empty QUAYSIDE_TOKEN counts as unset: the emulator starts with a token of its own', async () => {
    const child = spawn(tsx, [cli, 'start', '--memory', '--port', '0', '--host', '127.0.0.1', '--json'], { env: { ...process.env, QUAYSIDE_TOKEN: '' } });
    try {
      const line = await firstLine(child);
      const ev = JSON.parse(line) as { event: string; url: string; token: string };
      assert.equal(ev.event, 'listening');
      assert.match(ev.token, /^qs_rw_/);
      assert.match(ev.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
    } finally {
      child.kill('SIGTERM');
    }
  });

  it('a --token that cannot be the emulator\'s own is a usage error (64); a QUAYSIDE_TOKEN that cannot is passed over with a note, and the start goes on', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-cli-token-'));
    try {
      const first = await startEmulator({ dataDir: dir, token: 'dev' });
      const shopRw = await first.createToken({ access: 'readwrite', namespace: 'shop' });
      await first.close();
      for (const bad of ['a b', 'qs_ro_mine', shopRw]) {
        const e = await fails(run(tsx, [cli, 'start', '--data', dir, '--port', '0', '--token', bad, '--json']));
        assert.equal(e?.code, 64, bad);
        const line = JSON.parse(e!.stdout.trim().split('\n').pop()!);
        assert.equal(line.code, 'usage');
        assert.match(line.message, /^--token: /);
      }
      for (const [envToken, note] of [['qs_ro_an-apps-token', /a token that starts qs_ro_ reads as read-only/], [shopRw, /it is already a read-write token for namespace "shop"/]] as const) {
        const child = spawn(tsx, [cli, 'start', '--data', dir, '--port', '0', '--host', '127.0.0.1', '--json'], { env: { ...process.env, QUAYSIDE_TOKEN: envToken } });
        try {
          let err = '';
          child.stderr.on('data', (d: Buffer) => (err += d));
          const line = await firstLine(child);
          const ev = JSON.parse(line) as { event: string; token: string };
          assert.equal(ev.event, 'listening');
          assert.equal(ev.token, 'dev', 'the data directory\'s own token');
          // Read once it has exited: its stderr and stdout are two pipes, in no set order.
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGTERM');
          await exited;
          assert.match(err, /QUAYSIDE_TOKEN is not used as the emulator's token: /);
          assert.match(err, note);
        } finally {
          child.kill('SIGTERM');
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a --url or QUAYSIDE_URL that is not a ws://, wss://, http:// or https:// URL is a usage error (64); a client given one fails invalid_argument at once', async () => {
    for (const [extra, env, from] of [[['--url', 'not a url'], {}, '--url'], [[], { QUAYSIDE_URL: 'ftp://127.0.0.1:1' }, 'QUAYSIDE_URL']] as const) {
      const e = await fails(run(tsx, [cli, 'queues', ...extra, '--json'], { env: { ...process.env, ...env } }));
      assert.equal(e?.code, 64, from);
      const err = JSON.parse(e!.stderr).error;
      assert.equal(err.code, 'usage');
      assert.match(err.message, new RegExp(`is not a ws:// or wss:// \\(or http://, https://\\) URL .*\\(from ${from}\\)$`));
    }
    // A scheme in capitals and spaces around are still the URL they look like.
    const emu = await startEmulator({ memory: true });
    try {
      const ok = createCache({ url: ` HTTP://${emu.url.slice('ws://'.length)}/ `, token: emu.token, namespace: 'url-forms' });
      await ok.queue('q').push(1);
      await ok.close();
    } finally {
      await emu.close();
    }
    const c = createCache({ url: 'localhost:7433', namespace: 'x' });
    await assert.rejects(c.queue('q').push(1), (e: Error & { code?: string }) => e.code === 'invalid_argument' && /url "localhost:7433"/.test(e.message));
    await c.close();
  });

  it('start stops cleanly (exit 0, its data directory unlocked) on a SIGTERM, SIGINT or SIGHUP (its terminal closed) sent the moment it prints that it listens', async () => {
    const fs = await import('node:fs');
    const os = await import('node:os');
    for (const [round, signal] of (['SIGTERM', 'SIGTERM', 'SIGTERM', 'SIGINT', 'SIGHUP', 'SIGHUP'] as const).entries()) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-sigterm-'));
      try {
        const child = spawn(process.execPath, ['-r', 'tsx/cjs', cli, 'start', '--port', '0', '--data', dir, '--json'], { cwd: path.resolve(__dirname, '../..') });
        const exited = new Promise<[number | null, string | null]>((r) => child.on('exit', (code, signal) => r([code, signal])));
        child.stdout.once('data', () => child.kill(signal));
        assert.deepEqual(await exited, [0, null], `round ${round}: ${signal}`);
        assert.equal(fs.existsSync(path.join(dir, 'quayside.lock')), false, 'the lock was released');
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it('the URL names a host a client can dial: loopback for a wildcard bind, IPv6 in brackets', () => {
    assert.equal(urlHost('127.0.0.1'), '127.0.0.1');
    assert.equal(urlHost('0.0.0.0'), '127.0.0.1');
    assert.equal(urlHost('::'), '[::1]');
    assert.equal(urlHost('::1'), '[::1]');
    assert.equal(urlHost('localhost'), 'localhost');
  });
});

describe('quayside CLI: what a person at a terminal sees and does', function () {
  this.timeout(60_000);
  let emu: VirtualEmulator;
  let conn: string[];
  before(async () => ({ emu, conn } = await cliEmulator()));
  after(() => emu.close());

  /** Makes `n` dead letters in ns/queue, each with `error` as its last error. */
  async function dead(namespace: string, queue: string, dialect: 'cache' | 'env', n: number, error?: string, reason?: string): Promise<void> {
    await emu.engine.createQueue({ namespace, queue, dialect, ifNotExists: true });
    for (let i = 0; i < n; i++) {
      await emu.engine.push({ namespace, queue, body: { i } });
      const [m] = (await emu.engine.pull({ namespace, queue, max: 1 })).messages;
      await emu.engine.nack({ receipt: m.receipt, dead: true, error, reason });
    }
  }

  it('a last error with its stack, or escape sequences, stays on its row as escapes (dead, show)', async () => {
    await dead('tty', 'stack', 'cache', 1, 'Error: boom\n    at handler (app.js:1:1)\u001b[2J\u0007');
    const lines = (await run(tsx, [cli, 'dead', 'stack', '--ns', 'tty', ...conn])).stdout.trimEnd().split('\n');
    assert.equal(lines.length, 3, 'a header and one row under the count');
    assert.ok(lines[2].endsWith('Error: boom\\n    at handler (app.js:1:1)\\x1b[2J\\x07'), lines[2]);
    const id = (await emu.engine.deadList({ namespace: 'tty', queue: 'stack' })).messages[0].id;
    const shown = (await run(tsx, [cli, 'show', 'stack', id, '--ns', 'tty', ...conn])).stdout;
    assert.match(shown, /^last error {3}Error: boom\\n {4}at handler/m);
    assert.doesNotMatch(shown, /\u001b/);
    // C1 controls (U+009B opens an escape sequence on some terminals) and bidi overrides, in a body
    // and in app text: escaped too, the body still as JSON.
    await emu.engine.push({ namespace: 'tty', queue: 'ctrl', body: { s: 'a\u009b2Jb\u202e' }, dedupeKey: 'k\u202ex', create: 'cache' });
    const c1 = (await emu.engine.peek({ namespace: 'tty', queue: 'ctrl' })).messages[0].id;
    const c1Shown = (await run(tsx, [cli, 'show', 'ctrl', c1, '--ns', 'tty', ...conn])).stdout;
    assert.doesNotMatch(c1Shown, /[\u009b\u202e]/);
    assert.match(c1Shown, /^dedupe key {3}k\\u202ex$/m);
    assert.deepEqual(JSON.parse(c1Shown.slice(c1Shown.indexOf('\nbody\n') + 6)), { s: 'a\u009b2Jb\u202e' });
    // The JSON is the data as it is.
    const json = JSON.parse((await run(tsx, [cli, 'dead', 'stack', '--ns', 'tty', ...conn, '--json'])).stdout);
    assert.equal(json.messages[0].lastError, 'Error: boom\n    at handler (app.js:1:1)\u001b[2J\u0007');
  });

  it("peek calls an env queue's dead messages failed, and --state failed asks for them", async () => {
    await dead('shop/dev', 'orders', 'env', 1);
    await emu.engine.push({ namespace: 'shop/dev', queue: 'orders', body: 'live' });
    const all = (await run(tsx, [cli, 'peek', 'orders', '--ns', 'shop/dev', '--state', 'ready,failed', ...conn])).stdout;
    assert.match(all, /^2 message\(s\)$/m);
    assert.match(all, /^m_\d+\s+failed\s+1\s/m);
    assert.match(all, /^m_\d+\s+ready\s+0\s/m);
    const json = JSON.parse((await run(tsx, [cli, 'peek', 'orders', '--ns', 'shop/dev', '--state', 'failed', ...conn, '--json'])).stdout);
    assert.deepEqual(json.messages.map((m: { state: string }) => m.state), ['dead'], 'the JSON keeps the protocol state');
  });

  it('create --dialect env needs a project/environment namespace; anything else is a usage error that creates nothing', async () => {
    for (const ns of ['dev', '/dev', 'shop/']) {
      const e = await fails(run(tsx, [cli, 'create', 'c1', '--ns', ns, '--dialect', 'env', ...conn]));
      assert.equal(e?.code, 64, ns);
      assert.match(e!.stderr, /<project>\/<environment>/);
    }
    assert.deepEqual((await emu.engine.listQueues({ dialect: 'env' })).queues.filter((q) => q.name === 'c1'), []);
    await run(tsx, [cli, 'create', 'c1', '--ns', 'shop/staging', '--dialect', 'env', ...conn]);
    const res = await fetch(`${emu.httpUrl}/v1/queues?project=shop&environment=staging`, { headers: { authorization: `Bearer ${emu.token}` } });
    assert.deepEqual(((await res.json()) as { queues: { slug: string }[] }).queues.map((q) => q.slug), ['c1'], 'reachable as an env queue');
  });

  it('purge-dead of every dead letter asks first in a terminal (no: nothing purged; y: purged); --yes and a script are not asked', async () => {
    await dead('tty', 'asked', 'cache', 3);
    const count = async () => (await emu.engine.deadList({ namespace: 'tty', queue: 'asked' })).total;
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    // `script` (util-linux, in every Debian) gives the command a terminal; the answer comes on its stdin.
    const atTerminal = (answer: string, extra: string[] = []) =>
      new Promise<string>((resolve, reject) => {
        const cmd = [tsx, cli, 'purge-dead', 'asked', '--ns', 'tty', ...conn, ...extra].map(quote).join(' ');
        const child = spawn('script', ['-qec', cmd, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d;
          // \x04 is Ctrl-D at a terminal: the input ends with no answer.
          if (out.includes('[y/N]')) child.stdin.end(answer === '\x04' ? answer : answer + '\n');
        });
        const timer = setTimeout(() => child.kill(), 30_000);
        child.on('exit', () => {
          clearTimeout(timer);
          resolve(out);
        });
        child.on('error', reject);
        if (extra.includes('--yes')) child.stdin.end();
      });
    const no = await atTerminal('n');
    assert.match(no, /Delete all 3 dead letters of asked in tty, for good\? \[y\/N\]/);
    assert.match(no, /nothing purged/);
    assert.equal(await count(), 3);
    const eof = await atTerminal('\x04');
    assert.match(eof, /nothing purged/, 'Ctrl-D is no');
    assert.doesNotMatch(eof, /Error|ABORT/);
    assert.equal(await count(), 3);
    // --json at a terminal is still a person typing: asked too (the question is on stderr).
    const json = await atTerminal('n', ['--json']);
    assert.match(json, /\[y\/N\]/);
    assert.match(json, /"purged": 0/);
    assert.equal(await count(), 3);
    const yes = await atTerminal('y');
    assert.match(yes, /purged 3 dead letter\(s\)/);
    assert.equal(await count(), 0);
    await dead('tty', 'asked', 'cache', 2);
    const flagged = await atTerminal('', ['--yes']);
    assert.doesNotMatch(flagged, /\[y\/N\]/);
    assert.match(flagged, /purged 2 dead letter\(s\)/);
    await dead('tty', 'asked', 'cache', 1);
    assert.match((await run(tsx, [cli, 'purge-dead', 'asked', '--ns', 'tty', ...conn])).stdout, /^purged 1 dead letter\(s\)$/m, 'no terminal: not asked');
    // None left: nothing to ask about ("Delete all 0 dead letters?").
    const none = await atTerminal('n');
    assert.doesNotMatch(none, /\[y\/N\]/);
    assert.match(none, /no dead letters to purge/);
  });

  it("replay of the oldest says how many are left; stats calls an env queue's dead messages failed", async () => {
    await dead('tty', 'many', 'cache', 3);
    assert.match((await run(tsx, [cli, 'replay', 'many', '--max', '2', '--ns', 'tty', ...conn])).stdout, /^replayed 2; 1 dead letter left \(--max N takes more at once\)$/m);
    assert.match((await run(tsx, [cli, 'replay', 'many', '--ns', 'tty', ...conn])).stdout, /^replayed 1$/m);
    // The JSON says it too.
    await dead('tty', 'many', 'cache', 3);
    assert.deepEqual(JSON.parse((await run(tsx, [cli, 'replay', 'many', '--max', '1', '--ns', 'tty', ...conn, '--json'])).stdout), { replayed: 1, left: 2 });
    await dead('shop/qa', 'stat-env', 'env', 2);
    assert.match((await run(tsx, [cli, 'stats', 'stat-env', '--ns', 'shop/qa', ...conn])).stdout, /^ready 0, delayed 0, in flight 0, failed 2, oldest ready 0 s$/m);
    const dead1 = (await run(tsx, [cli, 'dead', 'stat-env', '--ns', 'shop/qa', ...conn])).stdout;
    assert.match(dead1, /^2 failed message\(s\)\nID\s+ATTEMPTS\s+REASON\s+FAILED AT\s/);
    const failedId = (await emu.engine.deadList({ namespace: 'shop/qa', queue: 'stat-env' })).messages[0].id;
    const shown = (await run(tsx, [cli, 'show', 'stat-env', failedId, '--ns', 'shop/qa', ...conn])).stdout;
    assert.match(shown, /^state {8}failed$/m);
    assert.match(shown, /^failed {7}\S/m);
    assert.match((await run(tsx, [cli, 'replay', 'stat-env', '--max', '1', '--ns', 'shop/qa', ...conn])).stdout, /^replayed 1; 1 failed message left/m);
  });

  it('push to a missing queue makes a cache queue, as cache.queue().push does, but not in a project/environment, where env.queue must find an env queue', async () => {
    await run(tsx, [cli, 'push', 'jobs', '1', '--ns', 'pushed', ...conn]);
    assert.equal((await emu.engine.getQueue({ namespace: 'pushed', queue: 'jobs' })).dialect, 'cache');
    const e = await fails(run(tsx, [cli, 'push', 'invoices', '1', '--ns', 'acme/dev', ...conn]));
    assert.equal(e?.code, 1);
    assert.match(e!.stderr, /not found.*quayside create invoices --ns acme\/dev --dialect env \(or cache\)/s);
    assert.deepEqual((await emu.engine.listQueues({ namespace: 'acme/dev' })).queues, [], 'no cache queue took the slug');
    // Once the env queue exists, the CLI pushes to it.
    await run(tsx, [cli, 'create', 'invoices', '--ns', 'acme/dev', '--dialect', 'env', ...conn]);
    await run(tsx, [cli, 'push', 'invoices', '2', '--ns', 'acme/dev', ...conn]);
    assert.equal((await emu.engine.stats({ namespace: 'acme/dev', queue: 'invoices' })).counts.ready, 1);
  });

  it('push --dialect makes a missing queue of that dialect (a sync tenant\'s queue before its worker first ran), which that client then uses', async () => {
    await run(tsx, [cli, 'push', 'jobs', '{"task":"seed"}', '--ns', 'tenant-a', '--dialect', 'sync', ...conn]);
    assert.equal((await emu.engine.getQueue({ namespace: 'tenant-a', queue: 'jobs' })).dialect, 'sync');
    const worker = syncQueue({ id: 'jobs', tenantId: 'tenant-a', url: emu.url, token: emu.token });
    try {
      const m = await worker.recv({ wait: false });
      assert.deepEqual(m?.data, { task: 'seed' });
      assert.equal(await m!.ack(), true);
    } finally {
      await worker.close();
    }
    // An existing queue of another dialect is refused, not pushed to: --dialect says what the queue must be.
    const mismatch = await fails(run(tsx, [cli, 'push', 'jobs', '2', '--ns', 'tenant-a', '--dialect', 'cache', ...conn]));
    assert.equal(mismatch?.code, 1);
    assert.match(mismatch!.stderr, /queue "jobs" in namespace "tenant-a" is a sync queue, not cache; nothing was pushed/);
    assert.equal((await emu.engine.stats({ namespace: 'tenant-a', queue: 'jobs' })).counts.ready, 0);
    await run(tsx, [cli, 'push', 'jobs', '3', '--ns', 'tenant-a', '--dialect', 'sync', ...conn]);
    assert.equal((await emu.engine.stats({ namespace: 'tenant-a', queue: 'jobs' })).counts.ready, 1, 'one of its own dialect takes it');
    // An env queue made by a push needs a project/environment, as create does; a dialect it does not know is a usage error.
    await run(tsx, [cli, 'push', 'orders', '1', '--ns', 'shop/dev', '--dialect', 'env', ...conn]);
    assert.equal((await emu.engine.getQueue({ namespace: 'shop/dev', queue: 'orders' })).dialect, 'env');
    for (const [args, says] of [[['--ns', 'plain', '--dialect', 'env'], /<project>\/<environment>/], [['--ns', 'plain', '--dialect', 'kafka'], /--dialect must be cache, env or sync, got "kafka"/]] as const) {
      const e = await fails(run(tsx, [cli, 'push', 'never', '1', ...args, ...conn]));
      assert.equal(e?.code, 64);
      assert.match(e!.stderr, says);
    }
    assert.deepEqual((await emu.engine.listQueues({ namespace: 'plain' })).queues, [], 'nothing was made');
  });
});

describe('quayside CLI: in a pipeline and in a script', function () {
  // Runs about twenty CLI processes through tsx, one after another.
  this.timeout(120_000);
  let emu: VirtualEmulator;
  let conn: string[];
  before(async () => ({ emu, conn } = await cliEmulator()));
  after(() => emu.close());

  /** Runs the CLI with its stdout read only until the first chunk, as `… | head -1` does; its exit code and stderr. */
  function closedEarly(argv: string[]): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(tsx, [cli, ...argv]);
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d));
      child.stdout.once('data', () => child.stdout.destroy());
      const timer = setTimeout(() => child.kill(), 60_000);
      child.on('error', reject);
      child.on('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      });
    });
  }

  it('a reader that stops early (| head -1) ends peek, export and dead quietly (exit 0), with no stack trace', async () => {
    // Far more than a pipe's 64 KiB buffer in every command's output.
    const pad = 'x'.repeat(150);
    await emu.engine.pushBatch({ namespace: 'pipe', queue: 'big', messages: Array.from({ length: 1000 }, (_, i) => ({ body: { i, pad } })), create: 'cache' });
    await emu.engine.createQueue({ namespace: 'pipe', queue: 'graves', dialect: 'cache' });
    await emu.engine.pushBatch({ namespace: 'pipe', queue: 'graves', messages: Array.from({ length: 600 }, (_, i) => ({ body: { i, pad } })) });
    const { messages } = await emu.engine.pull({ namespace: 'pipe', queue: 'graves', max: 600 });
    for (const m of messages) await emu.engine.nack({ receipt: m.receipt, dead: true, error: 'e'.repeat(200) });
    for (const argv of [
      ['peek', 'big', '--limit', '1000'],
      ['export', 'big'],
      ['export', 'big', '--format', 'ndjson'],
      ['dead', 'graves', '--limit', '1000'],
    ]) {
      const { code, stderr } = await closedEarly([...argv, '--ns', 'pipe', ...conn]);
      assert.equal(stderr, '', argv.join(' '));
      assert.equal(code, 0, argv.join(' '));
    }
  });

  it('start --json reports every usage error as its error event on stdout, --clock or --durability with no value too', async () => {
    for (const flagged of ['--clock', '--durability']) {
      const e = await fails(run(tsx, [cli, 'start', '--memory', '--port', '0', '--json', flagged]));
      assert.equal(e?.code, 64, flagged);
      assert.deepEqual(JSON.parse(e!.stdout), { event: 'error', code: 'usage', message: `${flagged} needs a value` });
      assert.equal(e!.stderr, '');
    }
  });

  it('QUAYSIDE_PORT is read as strictly as --port: a blank, 0x0 or 1e0 is a usage error, not a random port or port 1', async () => {
    for (const port of [' ', '0x0', '1e0', '70000']) {
      // A timeout kills a start the variable did not stop (before the fix, a blank started one on a random port).
      const e = await fails(run(tsx, [cli, 'start', '--memory', '--json'], { env: { ...process.env, QUAYSIDE_PORT: port }, timeout: 20_000 }));
      assert.equal(e?.code, 64, `QUAYSIDE_PORT=${port}`);
      assert.match(JSON.parse(e!.stdout).message, /(QUAYSIDE_PORT|port) must be a whole number from 0 to 65535/);
    }
  });

  it('queues --ns "" (an unset variable) is a usage error, not the list of every namespace', async () => {
    await emu.engine.createQueue({ namespace: 'mine', queue: 'a', dialect: 'cache' });
    await emu.engine.createQueue({ namespace: 'theirs', queue: 'b', dialect: 'cache' });
    for (const empty of [['--ns', ''], ['--namespace=']]) {
      const e = await fails(run(tsx, [cli, 'queues', ...empty, ...conn, '--json']));
      assert.equal(e?.code, 64, empty.join(' '));
      assert.match(JSON.parse(e!.stderr).error.message, /--ns needs a value/);
      assert.equal(e!.stdout, '');
    }
    const mine = JSON.parse((await run(tsx, [cli, 'queues', '--ns', 'mine', ...conn, '--json'])).stdout) as { name: string }[];
    assert.deepEqual(mine.map((q) => q.name), ['a']);
  });

  it('export --out to a path it cannot write fails with the code out_file (exit 1) and a plain reason', async () => {
    await emu.engine.push({ namespace: 'pipe', queue: 'small', body: 1, create: 'cache' });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-cli-out-'));
    try {
      for (const [target, why] of [[dir, /it is a directory \(EISDIR\)/], [path.join(dir, 'no', 'such.json'), /its directory does not exist \(ENOENT\)/]] as const) {
        const e = await fails(run(tsx, [cli, 'export', 'small', '--ns', 'pipe', '--out', target, ...conn, '--json']));
        assert.equal(e?.code, 1);
        const { error } = JSON.parse(e!.stderr);
        assert.equal(error.code, 'out_file');
        assert.match(error.message, why);
      }
      const text = await fails(run(tsx, [cli, 'export', 'small', '--ns', 'pipe', '--out', dir, ...conn]));
      assert.match(text!.stderr, /^quayside: out_file: cannot write --out .*: it is a directory \(EISDIR\); nothing was exported\n$/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('push - takes a body saved with a byte order mark (as Windows editors save a file)', async () => {
    const child = spawn(tsx, [cli, 'push', 'bom', '-', '--ns', 'pipe', ...conn, '--json']);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stdin.end('\uFEFF{"from":"notepad"}');
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, out);
    assert.deepEqual((await emu.engine.peek({ namespace: 'pipe', queue: 'bom' })).messages.map((m) => m.body), [{ from: 'notepad' }]);
  });

  it('names with a blank at either end are quoted in the tables, so they cannot pass for others', async () => {
    await emu.engine.createQueue({ namespace: 'blank ', queue: ' q', dialect: 'cache' });
    await emu.engine.createQueue({ namespace: 'blank', queue: 'q', dialect: 'cache' });
    const rows = (await run(tsx, [cli, 'queues', ...conn])).stdout.split('\n').filter((l) => l.includes('blank'));
    assert.deepEqual(rows.map((r) => r.split(/\s{2,}/).slice(0, 2)), [['blank', 'q'], ['"blank "', '" q"']]);
  });

  it('columns line up under names in CJK (two columns a character in a terminal)', async () => {
    await emu.engine.createQueue({ namespace: 'wide', queue: '注文', dialect: 'cache' });
    await emu.engine.createQueue({ namespace: 'wide', queue: 'orders', dialect: 'cache' });
    const lines = (await run(tsx, [cli, 'queues', '--ns', 'wide', ...conn])).stdout.trimEnd().split('\n');
    // Terminal columns: ASCII one, 注 and 文 two each. DIALECT starts at the same column on every line.
    const at = (line: string) => {
      let col = 0;
      for (const ch of line.slice(0, line.search(/DIALECT|cache/))) col += /[\u4e00-\u9fff]/.test(ch) ? 2 : 1;
      return col;
    };
    assert.equal(lines.length, 3);
    assert.deepEqual(lines.map(at), [at(lines[0]), at(lines[0]), at(lines[0])], lines.join('\n'));
  });

  it('a typo in an option gets its message and a pointer to --help, an unknown command the usage; bogus --help is unknown, --version --json is JSON', async () => {
    const typo = await fails(run(tsx, [cli, 'push', 'q', '1', '--ns', 'pipe', '--dealy', '5', ...conn]));
    assert.equal(typo?.code, 64);
    assert.equal(typo!.stderr, 'quayside: unknown option --dealy for push; it takes --url --token --json --help --ns --namespace --delay --dedupe --attributes --dialect\nquayside --help lists every command and option\n');
    for (const argv of [['bogus'], ['bogus', '--help']]) {
      const e = await fails(run(tsx, [cli, ...argv]));
      assert.equal(e?.code, 64, argv.join(' '));
      assert.match(e!.stderr, /^quayside: unknown command "bogus"\n\nquayside <command> \[options\]/);
    }
    assert.match((await run(tsx, [cli, 'push', '--help'])).stdout, /^quayside <command> \[options\]/, 'a command\'s --help is the usage');
    const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8')) as { version: string };
    assert.deepEqual(JSON.parse((await run(tsx, [cli, '--version', '--json'])).stdout), { version: pkg.version });
    const state = await fails(run(tsx, [cli, 'peek', 'big', '--ns', 'pipe', '--state', 'ready,', ...conn]));
    assert.match(state!.stderr, /--state has an empty state in "ready,"/);
  });
});

describe('quayside CLI: unusual paths', function () {
  this.timeout(120_000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-cli-paths-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Runs `start --json` through sh (so it can leave its directory first), reads its first stdout line, then stops it. */
  function startVia(script: string, env: NodeJS.ProcessEnv = process.env): Promise<{ line: string; code: number | null }> {
    return new Promise((resolve, reject) => {
      const child = spawn('sh', ['-c', script], { cwd: dir, env, detached: true });
      let out = '';
      let line: string | undefined;
      const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 30_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d;
        if (line === undefined && out.includes('\n')) {
          line = out.split('\n')[0];
          // A start that listens is stopped; one that failed goes by itself, with its exit code.
          if (/"event":"listening"|listening on/.test(line)) process.kill(-child.pid!, 'SIGTERM');
        }
      });
      child.on('error', reject);
      child.on('exit', (code) => {
        clearTimeout(timer);
        resolve({ line: line ?? out, code });
      });
    });
  }
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const start = `${q(tsx)} ${q(cli)} start --port 0 --json`;

  it('started in a directory that was deleted: a data_dir error event without --data, and with an absolute --data it listens and says so', async () => {
    // The built CLI under node: tsx itself cannot start without a working directory. (npm test builds first.)
    const built = `${q(process.execPath)} ${q(path.resolve(__dirname, '../../dist/emulator/cli.js'))} start --port 0 --json`;
    const gone = await startVia(`mkdir gone && cd gone && rmdir ../gone && exec ${built}`);
    assert.equal(gone.code, 1);
    const ev = JSON.parse(gone.line);
    assert.deepEqual([ev.event, ev.code], ['error', 'data_dir']);
    assert.match(ev.message, /the current directory no longer exists/);
    const data = path.join(dir, 'abs-data');
    const listening = await startVia(`mkdir gone2 && cd gone2 && rmdir ../gone2 && exec ${built} --data ${q(data)}`);
    assert.equal(JSON.parse(listening.line).event, 'listening', listening.line);
    assert.equal(JSON.parse(listening.line).dataDir, data);
  });

  it('--data=~/q (a ~ the shell left alone) is the home directory, as in the extension; --data . is shown as ./', async () => {
    const home = path.join(dir, 'home');
    fs.mkdirSync(home);
    const r = await startVia(`exec ${start} --data=~/q`, { ...process.env, HOME: home });
    assert.equal(JSON.parse(r.line).dataDir, path.join(home, 'q'));
    assert.equal(fs.existsSync(path.join(dir, '~')), false, 'no directory named ~ here');
    const text = await startVia(`exec ${q(tsx)} ${q(cli)} start --port 0 --data .`);
    assert.match(text.line, /data in \.\/(,|$)/);
    // A control character in the path is shown escaped, on the banner's one line.
    fs.mkdirSync(path.join(dir, 'a\nb'));
    const odd = await startVia(`exec ${q(tsx)} ${q(cli)} start --port 0 --data "$(printf 'a\\nb')"`);
    assert.match(odd.line, /data in a\\nb\/(,|$)/);
  });

  it('a quayside.json that is a dangling symlink is a config error, not "no config"', async () => {
    fs.symlinkSync(path.join(dir, 'nowhere.json'), path.join(dir, 'quayside.json'));
    const r = await startVia(`exec ${start} --memory`);
    assert.equal(r.code, 1);
    assert.deepEqual([JSON.parse(r.line).event, JSON.parse(r.line).code], ['error', 'config']);
  });

  it('export --out replaces a file whole, through a symlink, and leaves nothing aside', async () => {
    const emu = await startEmulator({ memory: true });
    try {
      await emu.engine.push({ namespace: 'p', queue: 'q', body: { n: 1 }, create: 'cache' });
      const real = path.join(dir, 'real.json');
      fs.writeFileSync(real, 'old contents');
      fs.symlinkSync(real, path.join(dir, 'link.json'));
      await run(tsx, [cli, 'export', 'q', '--ns', 'p', '--out', path.join(dir, 'link.json'), '--url', emu.url, '--token', emu.token]);
      assert.deepEqual(JSON.parse(fs.readFileSync(real, 'utf8')).map((m: { body: unknown }) => m.body), [{ n: 1 }]);
      assert.ok(fs.lstatSync(path.join(dir, 'link.json')).isSymbolicLink(), 'the link stays a link');
      assert.deepEqual(fs.readdirSync(dir).sort(), ['link.json', 'real.json']);
    } finally {
      await emu.close();
    }
  });
});
