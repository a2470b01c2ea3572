/**
 * Runs a mocha suite programmatically inside the VS Code extension host.
 *
 * The in-host test index (test/extension/host/index.ts, compiled or bundled to
 * dist/test/extension/host/index.js) exports `run()` and calls this:
 *
 *     import * as path from 'path';
 *     import { runMochaSuite } from './mocha-index';
 *     export function run(): Promise<void> {
 *       return runMochaSuite(__dirname, ['tree.test.js', 'webview.test.js']);
 *     }
 *
 * The same module works under @vscode/test-electron's desktop VS Code and under the offline VS Code
 * server (scripts/vscode/code-offline.js). Output goes to console.log (the workbench forwards it to the
 * runner's stdout). A JSON results file is written to $QUAYSIDE_TEST_RESULTS (the runner
 * test/extension/run-vscode-tests.ts sets it) or, without it, to <testsRoot>/test-results.json:
 *
 *     { "passed": 3, "failed": 1, "pending": 0, "total": 4, "durationMs": 812,
 *       "failures": [{ "title": "...", "fullTitle": "...", "file": "...", "error": "...", "stack": "..." }] }
 *
 * The returned promise rejects when any test failed or no test ran, which makes the extension host
 * exit non-zero.
 *
 * Environment read here: QUAYSIDE_TEST_RESULTS, QUAYSIDE_TEST_GREP (mocha --grep),
 * QUAYSIDE_TEST_TIMEOUT_MS (default 20000).
 */
import * as fs from 'fs';
import * as path from 'path';
import * as util from 'util';

type MochaCtor = typeof import('mocha');

export interface SuiteFailure {
  title: string;
  fullTitle: string;
  file?: string;
  error: string;
  stack?: string;
}

export interface SuiteResults {
  passed: number;
  failed: number;
  pending: number;
  total: number;
  durationMs: number;
  failures: SuiteFailure[];
}

/**
 * mocha >= 12 is an ES module: `require('mocha')` gives its namespace (Node's require(esm)); a bundler
 * gives either the class or `{ default }`. Accept all shapes.
 */
function loadMocha(): MochaCtor {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const m = require('mocha') as MochaCtor | { default: MochaCtor };
  if (typeof m === 'function') return m;
  return (m as { default: MochaCtor }).default;
}

function resultsPath(testsRoot: string): string {
  return process.env.QUAYSIDE_TEST_RESULTS || path.join(testsRoot, 'test-results.json');
}

function writeResults(file: string, results: SuiteResults): void {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(results, null, 2));
  } catch (e) {
    console.error(`could not write test results to ${file}: ${String(e)}`);
  }
}

export async function runMochaSuite(testsRoot: string, files: string[]): Promise<void> {
  const Mocha = loadMocha();
  const started = Date.now();
  const results: SuiteResults = { passed: 0, failed: 0, pending: 0, total: 0, durationMs: 0, failures: [] };
  const out = resultsPath(testsRoot);
  // A stale file from an earlier run must not be read as this run's result.
  try { fs.rmSync(out, { force: true }); } catch { /* ignore */ }

  const mocha = new Mocha({
    ui: 'bdd',
    // 'spec' writes through Base.consoleLog (console.log), which the extension host forwards.
    reporter: 'spec',
    color: false,
    timeout: Number(process.env.QUAYSIDE_TEST_TIMEOUT_MS || 20000),
  });
  if (process.env.QUAYSIDE_TEST_GREP) mocha.grep(process.env.QUAYSIDE_TEST_GREP);
  for (const f of files) {
    const abs = path.isAbsolute(f) ? f : path.resolve(testsRoot, f);
    if (!fs.existsSync(abs)) throw new Error(`test file not found: ${abs}`);
    mocha.addFile(abs);
  }

  await new Promise<void>((resolve, reject) => {
    let runner: ReturnType<InstanceType<MochaCtor>['run']>;
    try {
      runner = mocha.run(() => resolve());
    } catch (e) {
      reject(e);
      return;
    }
    runner.on('pass', () => { results.passed++; });
    runner.on('pending', () => { results.pending++; });
    runner.on('fail', (test, err: unknown) => {
      results.failed++;
      const e = err as { message?: string; stack?: string } | undefined;
      results.failures.push({
        title: test.title,
        fullTitle: test.fullTitle(),
        file: test.file,
        error: e?.message ?? util.inspect(err),
        stack: e?.stack,
      });
    });
  }).catch((e: unknown) => {
    // Loading a test file threw: count it as a failure so the run is red, not empty.
    results.failed++;
    const err = e as { message?: string; stack?: string };
    results.failures.push({ title: 'loading test files', fullTitle: 'loading test files', error: err?.message ?? String(e), stack: err?.stack });
    console.error('error while loading or running the tests:', e);
  });

  results.total = results.passed + results.failed + results.pending;
  results.durationMs = Date.now() - started;
  writeResults(out, results);
  console.log(`in-host mocha: ${results.passed} passing, ${results.failed} failing, ${results.pending} pending (results: ${out})`);
  if (results.failed > 0) throw new Error(`${results.failed} test(s) failed`);
  if (results.passed === 0) throw new Error('no tests ran');
}
