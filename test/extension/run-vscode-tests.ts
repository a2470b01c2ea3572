/**
 * Runs the extension's in-host test suite inside a real VS Code.
 *
 *     npx tsx test/extension/run-vscode-tests.ts [--tests <index.js>] [--extension <dir>] [--workspace <dir>]
 *
 * Offline (the default): @vscode/test-electron's runTests() launches scripts/vscode/code-offline.js as
 * its "VS Code executable", which runs the suite in the VS Code server from the npm package
 * `code-server` driven by headless Chromium (install with scripts/vscode/setup.sh).
 * Online (QUAYSIDE_VSCODE_DESKTOP=1): runTests() downloads a desktop VS Code (QUAYSIDE_VSCODE_VERSION,
 * default stable) and runs the same suite there (on a headless Linux box run it under xvfb-run).
 *
 * Options (each also as an env var):
 *   --tests      QUAYSIDE_VSCODE_TESTS      compiled in-host test index exporting run()
 *                                           (default dist/test/extension/host/index.js)
 *   --extension  QUAYSIDE_VSCODE_EXTENSION  extensionDevelopmentPath (default the repo root)
 *   --workspace  QUAYSIDE_VSCODE_WORKSPACE  folder to open (default a fresh temp dir)
 *
 * The suite (via test/extension/host/mocha-index.ts) writes its results to $QUAYSIDE_TEST_RESULTS,
 * which this runner points into a temp dir. Every variable in the environment whose name starts with
 * QUAYSIDE_ is passed to the extension host through extensionTestsEnv.
 *
 * Ends with a plain `N passed, N failed` line; exits non-zero on any failure or when no test ran.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { runTests, TestRunFailedError } from '@vscode/test-electron';

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const PREFIX = '[vscode-tests]';

interface Args {
  tests: string;
  extension: string;
  workspace?: string;
}

function parseArgs(argv: string[]): Args {
  const get = (flag: string): string | undefined => {
    const i = argv.findIndex((a) => a === flag || a.startsWith(flag + '='));
    if (i < 0) return undefined;
    const a = argv[i];
    return a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[i + 1];
  };
  return {
    tests: path.resolve(get('--tests') ?? process.env.QUAYSIDE_VSCODE_TESTS ?? path.join(REPO_ROOT, 'dist/test/extension/host/index.js')),
    extension: path.resolve(get('--extension') ?? process.env.QUAYSIDE_VSCODE_EXTENSION ?? REPO_ROOT),
    workspace: get('--workspace') ?? process.env.QUAYSIDE_VSCODE_WORKSPACE,
  };
}

interface Results {
  passed: number;
  failed: number;
  failures?: { fullTitle?: string; error?: string }[];
}

function readResults(file: string): Results | undefined {
  try {
    const r = JSON.parse(fs.readFileSync(file, 'utf8')) as Results;
    if (typeof r.passed === 'number' && typeof r.failed === 'number') return r;
  } catch {
    /* missing or unreadable */
  }
  return undefined;
}

/** Fallback when no results file was written: mocha's spec reporter summary. */
function parseMochaOutput(text: string): Results | undefined {
  const passing = /^\s*(\d+) passing/m.exec(text);
  const failing = /^\s*(\d+) failing/m.exec(text);
  if (!passing && !failing) return undefined;
  return { passed: passing ? Number(passing[1]) : 0, failed: failing ? Number(failing[1]) : 0 };
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const desktop = process.env.QUAYSIDE_VSCODE_DESKTOP === '1';
  if (!fs.existsSync(args.tests)) {
    console.error(`${PREFIX} the in-host test index ${args.tests} does not exist: compile or bundle test/extension/host first`);
    console.log('0 passed, 1 failed');
    return 1;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-vscode-tests-'));
  const workspace = path.resolve(args.workspace ?? path.join(tmp, 'workspace'));
  fs.mkdirSync(workspace, { recursive: true });
  const resultsFile = path.join(tmp, 'results.json');

  const extensionTestsEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('QUAYSIDE_') && v !== undefined) extensionTestsEnv[k] = v;
  }
  extensionTestsEnv.QUAYSIDE_TEST_RESULTS = resultsFile;
  extensionTestsEnv.QUAYSIDE_TEST_WORKSPACE = workspace;

  console.log(`${PREFIX} ${desktop ? 'desktop VS Code (download)' : 'offline VS Code server'}; extension ${args.extension}; tests ${args.tests}; workspace ${workspace}`);

  // Keep a copy of what the launched VS Code prints, to read mocha's summary if no results file appears.
  let captured = '';
  const origWrite = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    if (captured.length < 4_000_000) captured += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    return (origWrite as (...a: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;

  const started = Date.now();
  let exitCode: number;
  try {
    exitCode = await runTests({
      ...(desktop
        ? { version: process.env.QUAYSIDE_VSCODE_VERSION || 'stable' }
        : { vscodeExecutablePath: path.join(REPO_ROOT, 'scripts/vscode/code-offline.js') }),
      extensionDevelopmentPath: args.extension,
      extensionTestsPath: args.tests,
      launchArgs: [workspace, '--disable-extensions'],
      extensionTestsEnv,
    });
  } catch (e) {
    if (e instanceof TestRunFailedError) exitCode = typeof e.code === 'number' ? e.code : 1;
    else {
      console.error(`${PREFIX} could not run the tests:`, e);
      exitCode = 1;
    }
  } finally {
    process.stdout.write = origWrite;
  }

  const results = readResults(resultsFile) ?? parseMochaOutput(captured);
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  let passed = results?.passed ?? 0;
  let failed = results?.failed ?? 0;
  if (!results) {
    console.error(`${PREFIX} no results: neither ${resultsFile} nor a mocha summary was produced`);
  } else if (results.failures?.length) {
    console.error(`${PREFIX} failures:`);
    for (const f of results.failures) console.error(`${PREFIX}   ${f.fullTitle ?? '?'}: ${f.error ?? ''}`);
  }
  // A run that exited non-zero without reporting any failing test still counts as a failure.
  if (exitCode !== 0 && failed === 0) failed = 1;
  if (exitCode === 0 && failed > 0) exitCode = 1;
  if (passed + failed === 0) {
    console.error(`${PREFIX} no tests ran`);
    failed = 1;
    passed = 0;
  }
  console.log(`${PREFIX} VS Code exit code ${exitCode}, ${secs} s`);
  if (!process.env.QUAYSIDE_VSCODE_KEEP_TMP) fs.rmSync(tmp, { recursive: true, force: true });
  console.log(`${passed} passed, ${failed} failed`);
  return failed > 0 || exitCode !== 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(PREFIX, e);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
