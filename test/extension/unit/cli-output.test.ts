import { strict as assert } from 'assert';
import { LineSplitter, classifyStderr, hostPort, parseCliLine } from '../../../src/core/cliOutput';

describe('extension: reading the CLI output', () => {
  it('parses the listening line', () => {
    const ev = parseCliLine('{"event":"listening","url":"ws://127.0.0.1:7433","http":"http://127.0.0.1:7433","token":"abc","pid":42,"dataDir":"/w/.quayside","clock":"virtual"}');
    assert.deepEqual(ev, { event: 'listening', url: 'ws://127.0.0.1:7433', http: 'http://127.0.0.1:7433', token: 'abc', pid: 42, dataDir: '/w/.quayside', clock: 'virtual' });
  });

  it('parses error lines, with defaults for missing fields', () => {
    assert.deepEqual(parseCliLine('{"event":"error","code":"port_in_use","message":"port 7433 on 127.0.0.1 is in use"}'), { event: 'error', code: 'port_in_use', message: 'port 7433 on 127.0.0.1 is in use' });
    assert.equal(parseCliLine('{"event":"error"}')?.event, 'error');
    assert.equal((parseCliLine('{"event":"error"}') as { code: string }).code, 'failed');
  });

  it('ignores log text, other JSON and broken JSON', () => {
    assert.equal(parseCliLine('Quayside emulator listening on ws://127.0.0.1:7433'), undefined);
    assert.equal(parseCliLine('{"event":"other"}'), undefined);
    assert.equal(parseCliLine('{"event":"listening"'), undefined);
    assert.equal(parseCliLine('[1,2]'), undefined);
    assert.equal(parseCliLine(''), undefined);
  });

  it('splits chunks into lines, keeping partial lines for later', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    s.push('{"event":"list');
    s.push('ening"}\r\nsecond\nthi');
    assert.deepEqual(lines, ['{"event":"listening"}', 'second']);
    s.end();
    assert.deepEqual(lines, ['{"event":"listening"}', 'second', 'thi']);
  });

  it('recognises a native module built for another Node on stderr', () => {
    const stderr = `Error: The module '/x/node_modules/better-sqlite3/build/Release/better_sqlite3.node'
was compiled against a different Node.js version using
NODE_MODULE_VERSION 115. This version of Node.js requires
NODE_MODULE_VERSION 137. Please try re-compiling or re-installing`;
    const c = classifyStderr(stderr);
    assert.equal(c?.code, 'native_module');
    assert.match(c!.message, /module version 115, this Node needs 137/);
    assert.equal(classifyStderr("Error: Cannot find module 'ws'")?.code, 'emulator_broken');
    assert.equal(classifyStderr('something else'), undefined);
  });

  it('host and port of a URL', () => {
    assert.deepEqual(hostPort('ws://127.0.0.1:7433'), { host: '127.0.0.1', port: 7433 });
    assert.deepEqual(hostPort('nonsense'), { host: '127.0.0.1', port: 0 });
  });
});
