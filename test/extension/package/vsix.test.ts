// The .vsix on its own: `vsce package` (what `npm run package` ends with) over the built dist/,
// unpacked into an empty folder far from this repository's node_modules. The packaged emulator
// must start from there with only what the package carries, and the bundled extension must load
// with nothing but `vscode` from outside.
import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import Module from 'module';
import * as os from 'os';
import * as path from 'path';
import { EmulatorService } from '../../../src/core/service';
import { Connection } from '../../../emulator/clients/connection';

const REPO = path.resolve(__dirname, '..', '..', '..');

describe('the .vsix on its own', function () {
  this.timeout(120_000);
  let dir: string;
  let ext: string;

  before(() => {
    for (const f of ['dist/extension.js', 'dist/emulator/cli.js', 'media/panel/dist/panel.js']) {
      assert.ok(fs.existsSync(path.join(REPO, f)), `${f} is missing: npm test builds it before mocha`);
    }
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-vsix-'));
    const vsix = path.join(dir, 'quayside.vsix');
    execFileSync(process.execPath, [path.join(REPO, 'scripts', 'vsix-readme.js')], { cwd: REPO, stdio: 'pipe' });
    const vsce = path.join(REPO, 'node_modules', '@vscode', 'vsce', 'vsce');
    execFileSync(process.execPath, [vsce, 'package', '--allow-missing-repository', '--skip-license', '--readme-path', 'dist/vsix-README.md', '--out', vsix], { cwd: REPO, stdio: 'pipe' });
    execFileSync('python3', ['-m', 'zipfile', '-e', vsix, path.join(dir, 'unpacked')], { stdio: 'pipe' });
    ext = path.join(dir, 'unpacked', 'extension');
  });

  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true }); // unset when a build step was missing
  });

  it('carries the bundle, the emulator and its runtime modules, and no sources, tests or dev tools', () => {
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else files.push(path.relative(ext, p).split(path.sep).join('/'));
      }
    };
    walk(ext);
    for (const f of ['package.json', 'readme.md', 'dist/extension.js', 'dist/emulator/cli.js', 'media/panel/dist/panel.js', 'node_modules/ws/package.json', 'node_modules/better-sqlite3/build/Release/better_sqlite3.node']) {
      assert.ok(files.includes(f), `${f} is not in the package`);
    }
    const stray = files.filter((f) => /^(src|test|emulator|scripts|bench)\//.test(f) || /(?<!\.d)\.ts$/.test(f) || /^node_modules\/(typescript|esbuild|mocha|playwright-core|@vscode)\//.test(f));
    assert.deepEqual(stray, []);
    // The packaged README has no pictures or repository links that would be broken there.
    assert.doesNotMatch(fs.readFileSync(path.join(ext, 'readme.md'), 'utf8'), /!\[|\]\((?!https?:|#)/);
  });

  it('the bundled extension loads with only vscode from outside', () => {
    const before = new Set(Object.keys(require.cache));
    const load = Module.prototype.require;
    Module.prototype.require = function (this: NodeModule, id: string) {
      if (id === 'vscode') return new Proxy({}, { get: () => new Proxy(function () {}, { get: () => undefined }) });
      return load.call(this, id);
    } as typeof load;
    try {
      const mod = require(path.join(ext, 'dist', 'extension.js')) as { activate?: unknown; deactivate?: unknown };
      assert.equal(typeof mod.activate, 'function');
      assert.equal(typeof mod.deactivate, 'function');
    } finally {
      Module.prototype.require = load;
    }
    // Every file it loaded (besides node's own modules) came from the package.
    const loaded = Object.keys(require.cache).filter((f) => !before.has(f));
    assert.ok(loaded.length > 0);
    assert.deepEqual(loaded.filter((f) => !f.startsWith(ext + path.sep)), []);
  });

  it('its packaged emulator starts from the unpacked folder and answers over WebSocket', async () => {
    const svc = new EmulatorService({
      getConfig: () => ({
        url: '', token: '', nodePath: process.execPath, port: 0, host: '127.0.0.1', dataDir: '', memory: true, clock: 'system',
        restartOnCrash: false, workspaceFolders: [], extensionPath: ext, env: process.env, cwd: dir,
      }),
    });
    try {
      const snap = await svc.start();
      assert.equal(snap.state, 'running', JSON.stringify(snap.error));
      assert.equal(snap.endpoint!.source, 'packaged');
      assert.ok(svc.lastLaunch!.cliPath!.startsWith(ext), `ran ${svc.lastLaunch!.cliPath}, not the unpacked copy`);
      const c = new Connection({ url: snap.endpoint!.url, token: snap.endpoint!.token });
      try {
        const { id } = await c.request('push', { namespace: 'vsix', queue: 'q', body: { ok: true }, create: 'cache' });
        const { messages } = await c.request('pull', { namespace: 'vsix', queue: 'q' });
        assert.equal(messages[0].id, id);
        assert.deepEqual(messages[0].body, { ok: true });
      } finally {
        await c.close();
      }
    } finally {
      await svc.dispose();
    }
  });
});
