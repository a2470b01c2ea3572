/**
 * Opens the extension in a real VS Code workbench (the offline VS Code server from
 * scripts/vscode/setup.sh, in headless Chromium) for screenshots and UI checks.
 *
 * Library:
 *
 *     import { openWorkbench } from '../scripts/vscode/screenshots';
 *     const wb = await openWorkbench({ folder: '/tmp/ws', env: { QUAYSIDE_X: '1' } });
 *     await wb.clickActivityBar('Quayside');
 *     await wb.runCommand('Quayside: Open Dashboard');
 *     const frame = await wb.webviewFrame({ selector: 'h1' });
 *     await wb.screenshot('dashboard');          // -> docs/images/dashboard.png
 *     await wb.close();
 *
 * CLI (one shot):
 *
 *     npx tsx scripts/vscode/screenshots.ts --folder <dir> [--extension <dir>] [--vsix <file>]
 *         [--activity "<activity-bar title>"] [--command "<palette title>"]... [--webview <css selector>]
 *         [--name <png name>] [--out-dir <dir>] [--wait-ms <n>]
 *
 * The server runs WITHOUT --enable-smoke-test-driver and without extensionTestsPath, so notification
 * toasts are visible. The extension is loaded from its folder via the extensionDevelopmentPath payload
 * (default: the repo root) or, with `vsix`, installed into a fresh extensions dir first.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Browser, BrowserContext, Frame, Page } from 'playwright-core';

interface ServerHandle {
  port: number;
  authority: string;
  pid: number;
  tmpDir: string;
  logFile: string;
  readLog(): string;
  stop(): Promise<void>;
}

interface CodeOffline {
  startServer(options: {
    env?: NodeJS.ProcessEnv;
    settings?: Record<string, unknown>;
    extraArgs?: string[];
    smokeTestDriver?: boolean;
    installExtensions?: string[];
    linkExtensions?: string[];
  }): Promise<ServerHandle>;
  launchBrowser(): Promise<Browser>;
  workbenchUrl(server: ServerHandle, opts: { folder?: string; extensionDevelopmentPaths?: string[]; extensionTestsPath?: string }): string;
  REPO_ROOT: string;
}

// Plain CommonJS shared with the test launcher; typed by the interface above.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const lib = require('./code-offline.js') as CodeOffline;

export const REPO_ROOT = lib.REPO_ROOT;
export const DEFAULT_SCREENSHOT_DIR = path.join(REPO_ROOT, 'docs', 'images');

export interface OpenWorkbenchOptions {
  /** Folder to open (required). */
  folder: string;
  /** Extra environment for the server and so the extension host (merged over process.env). */
  env?: Record<string, string>;
  /** Extension folder loaded via extensionDevelopmentPath (default the repo root). Ignored with vsix. */
  extensionPath?: string;
  /** A .vsix to install into the fresh extensions dir instead of extensionPath. */
  vsix?: string;
  /** Extra user settings. */
  settings?: Record<string, unknown>;
  /** Viewport (default 1280x800). */
  viewport?: { width: number; height: number };
  /** Where screenshot(name) writes (default docs/images, or $QUAYSIDE_SCREENSHOT_DIR). */
  screenshotDir?: string;
  /** Forward the browser console to stderr. */
  verbose?: boolean;
}

export interface Workbench {
  page: Page;
  context: BrowserContext;
  browser: Browser;
  url: string;
  /** Clicks the activity-bar item with this title (a click toggles its side bar). */
  clickActivityBar(title: string, timeoutMs?: number): Promise<void>;
  /** Runs a command from the palette (F1) by its title as shown there, e.g. "Quayside: Refresh". */
  runCommand(title: string, timeoutMs?: number): Promise<void>;
  /** Finds the webview frame (webviews are nested iframes) containing `selector` and/or `text`. */
  webviewFrame(opts?: { selector?: string; text?: string; timeoutMs?: number }): Promise<Frame>;
  /** Texts of notifications (visible toasts, and the screen-reader alerts). */
  notifications(): Promise<string[]>;
  /** Saves <screenshotDir>/<name>.png and returns its path. */
  screenshot(name: string, opts?: { fullPage?: boolean; clip?: { x: number; y: number; width: number; height: number } }): Promise<string>;
  /** The VS Code server's log so far. */
  serverLog(): string;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function openWorkbench(options: OpenWorkbenchOptions): Promise<Workbench> {
  const folder = path.resolve(options.folder);
  if (!fs.existsSync(folder)) throw new Error(`folder ${folder} does not exist`);
  const extensionPath = path.resolve(options.extensionPath ?? REPO_ROOT);
  const screenshotDir = path.resolve(options.screenshotDir ?? process.env.QUAYSIDE_SCREENSHOT_DIR ?? DEFAULT_SCREENSHOT_DIR);
  const server = await lib.startServer({
    env: { ...process.env, ...(options.env ?? {}) },
    settings: options.settings,
    smokeTestDriver: false,
    installExtensions: options.vsix ? [path.resolve(options.vsix)] : [],
    linkExtensions: options.vsix ? [] : [extensionPath],
  });
  let browser: Browser | undefined;
  try {
    browser = await lib.launchBrowser();
    // A fresh context: the workbench keeps UI state per folder in browser storage.
    const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 800 } });
    const page = await context.newPage();
    if (options.verbose) page.on('console', (m) => process.stderr.write(`[browser ${m.type()}] ${m.text()}\n`));
    const url = lib.workbenchUrl(server, { folder });
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60000 });
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    // Let the extension host start and the contributions render.
    await page.waitForSelector('.activitybar li.action-item', { timeout: 30000 });
    await sleep(1500);
    const b = browser;

    const wb: Workbench = {
      page,
      context,
      browser: b,
      url,
      async clickActivityBar(title, timeoutMs = 20000) {
        const t = title.replace(/"/g, '\\"');
        // Exact title first; built-in items carry their keybinding, e.g. "Explorer (Ctrl+Shift+E)".
        const exact = page.locator(`.activitybar li.action-item:has(a[aria-label="${t}"])`);
        const item = (await exact.count()) > 0 ? exact.first() : page.locator(`.activitybar li.action-item:has(a[aria-label^="${t}"])`).first();
        await item.waitFor({ state: 'visible', timeout: timeoutMs });
        await item.click();
        // Move the pointer off the item so its hover tooltip is not in the screenshot.
        const vp = page.viewportSize() ?? { width: 1280, height: 800 };
        await page.mouse.move(Math.round(vp.width * 0.6), Math.round(vp.height * 0.6));
        await sleep(500);
      },
      async runCommand(title, timeoutMs = 20000) {
        await page.keyboard.press('F1');
        const input = page.locator('.quick-input-widget input').first();
        await input.waitFor({ state: 'visible', timeout: timeoutMs });
        await input.fill('>' + title);
        const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
        await row.waitFor({ state: 'visible', timeout: timeoutMs });
        await row.click();
        await sleep(500);
      },
      async webviewFrame(opts = {}) {
        const deadline = Date.now() + (opts.timeoutMs ?? 20000);
        for (;;) {
          for (const f of page.frames()) {
            if (f === page.mainFrame()) continue;
            try {
              if (opts.selector && !(await f.$(opts.selector))) continue;
              if (opts.text) {
                const body = await f.evaluate(() => document.body?.innerText ?? '');
                if (!body.includes(opts.text)) continue;
              }
              if (!opts.selector && !opts.text && !f.url().includes('fake.html') && f.name() !== 'active-frame') continue;
              return f;
            } catch {
              /* frame navigating or detached */
            }
          }
          if (Date.now() > deadline) throw new Error(`no webview frame with ${JSON.stringify(opts)}`);
          await sleep(250);
        }
      },
      async notifications() {
        return page.$$eval('.notification-toast .notification-list-item-message, .monaco-aria-container .monaco-alert', (els) =>
          els.map((e) => (e.textContent ?? '').trim()).filter(Boolean),
        );
      },
      async screenshot(name, opts = {}) {
        fs.mkdirSync(screenshotDir, { recursive: true });
        const file = path.join(screenshotDir, name.endsWith('.png') ? name : `${name}.png`);
        await page.screenshot({ path: file, fullPage: opts.fullPage, clip: opts.clip });
        return file;
      },
      serverLog: () => server.readLog(),
      async close() {
        await b.close().catch(() => undefined);
        await server.stop();
      },
    };
    return wb;
  } catch (e) {
    if (browser) await browser.close().catch(() => undefined);
    process.stderr.write(server.readLog());
    await server.stop();
    throw e;
  }
}

async function cli(argv: string[]): Promise<number> {
  const values = (flag: string): string[] => {
    const out: string[] = [];
    argv.forEach((a, i) => {
      if (a === flag && i + 1 < argv.length) out.push(argv[i + 1]);
      else if (a.startsWith(flag + '=')) out.push(a.slice(flag.length + 1));
    });
    return out;
  };
  const one = (flag: string) => values(flag).pop();
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log('usage: screenshots.ts --folder <dir> [--extension <dir>] [--vsix <file>] [--activity <title>] [--command <title>]... [--webview <selector>] [--name <png>] [--out-dir <dir>] [--wait-ms <n>]');
    return 0;
  }
  let folder = one('--folder');
  if (!folder) {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-shot-ws-'));
  }
  const t0 = Date.now();
  const wb = await openWorkbench({
    folder,
    extensionPath: one('--extension'),
    vsix: one('--vsix'),
    screenshotDir: one('--out-dir'),
    verbose: !!process.env.QUAYSIDE_VSCODE_VERBOSE,
  });
  try {
    console.log(`[screenshots] workbench ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const activity = one('--activity');
    if (activity) await wb.clickActivityBar(activity);
    for (const c of values('--command')) await wb.runCommand(c);
    const webview = one('--webview');
    if (webview) await wb.webviewFrame({ selector: webview });
    await sleep(Number(one('--wait-ms') ?? 1000));
    const file = await wb.screenshot(one('--name') ?? 'workbench');
    console.log(`[screenshots] saved ${file}`);
    const notes = await wb.notifications();
    if (notes.length) console.log(`[screenshots] notifications: ${notes.join(' | ')}`);
  } finally {
    await wb.close();
  }
  return 0;
}

if (require.main === module) {
  cli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error('[screenshots]', e);
      process.exit(1);
    },
  );
}
