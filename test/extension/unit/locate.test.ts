import { strict as assert } from 'assert';
import * as path from 'path';
import { emulatorCandidates, locateEmulator, nodeMajor, resolveNode } from '../../../src/core/locate';

describe('extension: finding the emulator and node', () => {
  const ws = path.join('/w', 'app');
  const ext = path.join('/ext', 'quayside');
  const wsCli = path.join(ws, 'node_modules', 'quayside', 'dist', 'emulator', 'cli.js');
  const extCli = path.join(ext, 'dist', 'emulator', 'cli.js');

  it('tries the workspace copy first, then the packaged copy', () => {
    const c = emulatorCandidates({ workspaceFolders: [ws], extensionPath: ext });
    assert.deepEqual(c.map((x) => [x.source, x.cliPath]), [['workspace', wsCli], ['packaged', extCli]]);
  });

  it('takes the workspace copy when it exists', () => {
    const r = locateEmulator({ workspaceFolders: [ws], extensionPath: ext, exists: (p) => p === wsCli || p === extCli });
    assert.equal(r.found?.source, 'workspace');
    assert.equal(r.found?.cliPath, wsCli);
    assert.equal(r.found?.folder, ws);
  });

  it('falls back to the packaged copy', () => {
    const r = locateEmulator({ workspaceFolders: [ws], extensionPath: ext, exists: (p) => p === extCli });
    assert.equal(r.found?.source, 'packaged');
    assert.deepEqual(r.tried, [wsCli, extCli]);
  });

  it('with several folders, the first folder that has one wins; nothing found lists what was tried', () => {
    const ws2 = path.join('/w', 'other');
    const ws2Cli = path.join(ws2, 'node_modules', 'quayside', 'dist', 'emulator', 'cli.js');
    assert.equal(locateEmulator({ workspaceFolders: [ws, ws2], extensionPath: ext, exists: (p) => p === ws2Cli }).found?.folder, ws2);
    const none = locateEmulator({ workspaceFolders: [], extensionPath: ext, exists: () => false });
    assert.equal(none.found, undefined);
    assert.deepEqual(none.tried, [extCli]);
  });

  it('resolves node on PATH, or a given path', () => {
    const exists = (p: string) => p === '/opt/node/bin/node' || p === '/custom/node';
    assert.equal(resolveNode({ nodePath: 'node', env: { PATH: '/usr/bin:/opt/node/bin' }, platform: 'linux', exists }), '/opt/node/bin/node');
    assert.equal(resolveNode({ nodePath: '', env: { PATH: '/opt/node/bin' }, platform: 'linux', exists }), '/opt/node/bin/node');
    assert.equal(resolveNode({ nodePath: '/custom/node', env: {}, platform: 'linux', exists }), '/custom/node');
    assert.equal(resolveNode({ nodePath: '/missing/node', env: {}, platform: 'linux', exists }), undefined);
    assert.equal(resolveNode({ nodePath: 'node', env: { PATH: '/usr/bin' }, platform: 'linux', exists }), undefined);
  });

  it('resolves node.exe on Windows PATH with PATHEXT', () => {
    const exists = (p: string) => p === 'C:\\node\\node.EXE';
    assert.equal(resolveNode({ nodePath: 'node', env: { Path: 'C:\\x;C:\\node', PATHEXT: '.COM;.EXE' }, platform: 'win32', exists }), 'C:\\node\\node.EXE');
  });

  it('reads node major versions', () => {
    assert.equal(nodeMajor('v20.11.1\n'), 20);
    assert.equal(nodeMajor('v24.0.0'), 24);
    assert.equal(nodeMajor('hello'), undefined);
  });
});
