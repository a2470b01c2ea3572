import { strict as assert } from 'assert';
import * as path from 'path';
import { cliArgs, probeNode, spawnEmulator } from '../../../src/core/process';
import { LaunchError } from '../../../src/core/lifecycle';

const FAKE = path.join(__dirname, 'fixtures', 'fake-cli.js');

function run(mode: string, extra: Partial<Parameters<typeof spawnEmulator>[0]> = {}) {
  const lines: string[] = [];
  const inst = spawnEmulator({
    nodePath: process.execPath,
    cliPath: FAKE,
    source: 'packaged',
    port: 45678,
    dataDir: '/tmp/qs-data',
    token: 'tok',
    env: { ...process.env, FAKE_MODE: mode },
    log: (l, s) => lines.push(`${s}: ${l}`),
    graceMs: 300,
    ...extra,
  });
  return { inst, lines };
}

describe('extension: the emulator child process', () => {
  it('passes the CLI contract flags', () => {
    assert.deepEqual(cliArgs({ nodePath: 'node', cliPath: '/x/cli.js', port: 7433, dataDir: '/w/.quayside', token: 't', clock: 'virtual' }), [
      '--max-semi-space-size=4', '/x/cli.js', 'start', '--port', '7433', '--host', '127.0.0.1', '--data', '/w/.quayside', '--token', 't', '--clock', 'virtual', '--json', '--exit-with-parent',
    ]);
    assert.deepEqual(cliArgs({ nodePath: 'node', cliPath: 'c', port: 0, memory: true, dataDir: '/ignored', token: 't' }).slice(6), ['127.0.0.1', '--memory', '--token', 't', '--json', '--exit-with-parent']);
  });

  it('resolves ready from the listening line, logs the rest, and ends when stdin closes', async () => {
    // A long grace: were closing stdin not enough, stop() would wait all of it before a SIGTERM.
    const graceMs = 10_000;
    const { inst, lines } = run('listen', { graceMs });
    const ep = await inst.ready;
    assert.equal(ep.url, 'ws://127.0.0.1:45678');
    assert.equal(ep.port, 45678);
    assert.equal(ep.token, 'tok');
    assert.equal(ep.source, 'packaged');
    assert.ok(ep.pid && ep.pid > 0);
    assert.ok(lines.includes('stdout: opening the data directory'));
    const started = Date.now();
    await inst.stop();
    const took = Date.now() - started;
    const exit = await inst.exited;
    // The mechanism: a clean exit of its own (the fake has no SIGTERM handler, so a kill shows as a signal).
    assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, 'it left on its own when stdin closed');
    // And stop() did not sit out the grace period: a bound far from both, not a speed budget.
    assert.ok(took < graceMs / 2, `stop() took ${took} ms (grace ${graceMs} ms)`);
    assert.ok(lines.some((l) => l === 'stderr: a warning on stderr'));
  });

  it('rejects ready with the CLI error code', async () => {
    const { inst } = run('error');
    await assert.rejects(inst.ready, (e: LaunchError) => e.code === 'port_in_use' && /45678/.test(e.message));
    await inst.exited;
  });

  it('a native module failure on stderr becomes native_module, not a stack trace', async () => {
    const { inst } = run('native');
    await assert.rejects(inst.ready, (e: LaunchError) => e.code === 'native_module' && /module version 115/.test(e.message));
  });

  it('an exit before listening says so', async () => {
    const { inst } = run('silent-exit');
    await assert.rejects(inst.ready, (e: LaunchError) => e.code === 'exited' && /exit code 3/.test(e.message));
  });

  it('a missing node is node_not_found', async () => {
    const { inst } = run('listen', { nodePath: '/nonexistent/node' });
    await assert.rejects(inst.ready, (e: LaunchError) => e.code === 'node_not_found');
    await inst.exited;
  });

  it('exited resolves when it crashes after listening', async () => {
    const { inst } = run('crash');
    await inst.ready;
    assert.equal((await inst.exited).code, 7);
  });

  it('times out when no listening line comes', async () => {
    const { inst } = run('listen', { readyTimeoutMs: 5 });
    await assert.rejects(inst.ready, (e: LaunchError) => e.code === 'timeout');
    await inst.exited;
  });

  it('probes node versions', async () => {
    assert.match(await probeNode(process.execPath), /^v\d+\./);
    await assert.rejects(probeNode('/nonexistent/node'), (e: LaunchError) => e.code === 'node_not_found');
  });
});
