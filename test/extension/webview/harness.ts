// Renders the queue panel's real HTML and bundled script in headless Chromium with a stub host:
// `acquireVsCodeApi` posts to Node, where the real PanelHandler answers from a FakeTransport.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { PanelHandler, type PanelUi, type SaveTarget } from '../../../src/panel/handler';
import { renderPanelHtml } from '../../../src/panel/html';
import type { HostMessage, PanelRequest, QueueRef } from '../../../src/panel/messages';
import type { Transport } from '../../../emulator/clients/transport';
import { FakeTransport } from './fake-transport';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const { buildPanel } = require('../../../scripts/build-panel.js') as { buildPanel: (o?: { outfile?: string }) => Promise<string> };

const ROOT = path.resolve(__dirname, '../../..');
const ORIGIN = 'https://panel.test';

let built: Promise<string> | null = null;
let buildDir: string | null = null;
/**
 * Bundles the webview script into a temporary directory, not media/panel/dist: a test run must not
 * replace the bundle a packaging or VS Code run may be reading at the same time.
 */
export function buildOnce(): Promise<string> {
  return (built ??= buildPanel({ outfile: path.join((buildDir = mkdtempSync(path.join(os.tmpdir(), 'quayside-panel-'))), 'panel.js') }));
}

/** Remove the bundle's temporary directory (an `after` hook): one run would otherwise leave one behind. */
export async function removeBuild(): Promise<void> {
  const dir = buildDir;
  const pending = built;
  built = null;
  buildDir = null;
  await pending?.catch(() => undefined); // a build still writing would recreate files in it
  if (dir) rmSync(dir, { recursive: true, force: true });
}

export async function launch(): Promise<Browser> {
  await buildOnce();
  return chromium.launch({
    executablePath: process.env.QUAYSIDE_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
}

/** VS Code's Dark+ values for the variables the panel uses (VS Code injects these into a real webview). */
export const DARK_THEME = `html {
  --vscode-font-family: "DejaVu Sans", "Segoe UI", Ubuntu, sans-serif; --vscode-font-size: 13px;
  --vscode-editor-font-family: "DejaVu Sans Mono", Consolas, monospace;
  --vscode-foreground: #cccccc; --vscode-editor-background: #1f1f1f; --vscode-descriptionForeground: #9d9d9d;
  --vscode-panel-border: #2b2b2b; --vscode-widget-border: #313131; --vscode-list-hoverBackground: #2a2d2e;
  --vscode-list-inactiveSelectionBackground: #37373d; --vscode-list-activeSelectionBackground: #04395e; --vscode-focusBorder: #0078d4;
  --vscode-input-background: #313131; --vscode-input-foreground: #cccccc; --vscode-input-border: #3c3c3c;
  --vscode-button-background: #0078d4; --vscode-button-foreground: #ffffff; --vscode-button-hoverBackground: #026ec1;
  --vscode-button-secondaryBackground: #313131; --vscode-button-secondaryForeground: #cccccc; --vscode-button-secondaryHoverBackground: #3c3c3c;
  --vscode-errorForeground: #f85149; --vscode-inputValidation-errorBorder: #be1100; --vscode-editorWidget-background: #202020;
  --vscode-widget-shadow: rgba(0,0,0,0.36); --vscode-badge-background: #616161; --vscode-badge-foreground: #f8f8f8;
  --vscode-charts-blue: #3794ff; --vscode-charts-orange: #d18616; --vscode-charts-red: #f14c4c; --vscode-charts-green: #89d185;
  --vscode-charts-yellow: #cca700; --vscode-textPreformat-foreground: #d0d0d0; --vscode-textCodeBlock-background: #2b2b2b;
  --vscode-editorHoverWidget-background: #202020; --vscode-editorHoverWidget-border: #454545;
  --vscode-notifications-background: #1f1f1f; --vscode-notifications-border: #2b2b2b;
}`;

export class StubUi implements PanelUi {
  answer = true;
  confirms: { message: string; detail: string; action: string }[] = [];
  saved: { name: string; text: string }[] = [];
  progress: string[] = [];
  /** Runs while the modal is "open": what happens meanwhile, unseen. */
  whileConfirming?: () => void;
  async confirm(message: string, detail: string, action: string) {
    this.confirms.push({ message, detail, action });
    this.whileConfirming?.();
    return this.answer;
  }
  async chooseSaveTarget(opts: { suggestedName: string }): Promise<SaveTarget | undefined> {
    return { label: `/work/exports/${opts.suggestedName}`, write: async (text) => void this.saved.push({ name: opts.suggestedName, text }) };
  }
  async withProgress<T>(title: string, task: (p: { report(): void; readonly cancelled: boolean }) => Promise<T>) {
    this.progress.push(title);
    return task({ report() {}, cancelled: false });
  }
}

export interface Panel<T extends Transport = FakeTransport> {
  page: Page;
  transport: T;
  ui: StubUi;
  handler: PanelHandler;
  /** Every request the webview sent, in order. */
  requests: PanelRequest[];
  cspViolations: () => Promise<string[]>;
  /** The ops the webview has sent so far, read in the page (in step with its own timers). */
  sentOps: () => Promise<string[]>;
  /** Deliver a host message to the webview synchronously (with `fakeClock`, before time moves on). */
  deliver: (m: HostMessage) => Promise<void>;
  errors: string[];
  close(): Promise<void>;
}

export async function openPanel<T extends Transport = FakeTransport>(
  browser: Browser,
  transport: T,
  /** fakeClock: Playwright's clock in the page: `page.clock.runFor` moves it, and until a test pauses it (`pauseAt`) it also flows with real time. */
  /** timezoneId: the page's time zone (default UTC), to show what a user elsewhere sees. */
  opts: { state?: unknown; width?: number; height?: number; debounceMs?: number; ref?: QueueRef; fakeClock?: boolean; timezoneId?: string; beforeLoad?: (handler: PanelHandler) => void | Promise<void>; loadedWhen?: string } = {},
): Promise<Panel<T>> {
  const context = await browser.newContext({ viewport: { width: opts.width ?? 1360, height: opts.height ?? 860 }, timezoneId: opts.timezoneId ?? 'UTC', locale: 'en-US' });
  const page = await context.newPage();
  const ui = new StubUi();
  const requests: PanelRequest[] = [];
  const errors: string[] = [];
  const ref = opts.ref ?? { namespace: (transport as unknown as FakeTransport).namespace, queue: (transport as unknown as FakeTransport).queue };
  const handler = new PanelHandler({
    ref,
    transport,
    ui,
    debounceMs: opts.debounceMs ?? 50,
    post: (m) => void page.evaluate((msg) => window.postMessage(msg, '*'), m as unknown).catch(() => {}),
  });
  // What the host did before this page (a hidden panel's page is rebuilt when shown): its posts went nowhere.
  await opts.beforeLoad?.(handler);
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  await page.exposeFunction('__toHost', (json: string) => {
    const m = JSON.parse(json);
    requests.push(m);
    void handler.handleMessage(m);
  });
  // A string, not a function: tsx's keepNames would put `__name(...)` calls into a serialized function.
  await page.addInitScript(`(() => {
    const w = window;
    w.__csp = [];
    w.__sent = [];
    document.addEventListener('securitypolicyviolation', (e) => w.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
    let saved = ${JSON.stringify(opts.state ?? null)};
    let acquired = false;
    w.acquireVsCodeApi = () => {
      if (acquired) throw new Error('acquireVsCodeApi called twice');
      acquired = true;
      return {
        postMessage: (m) => { w.__sent.push(m.op); w.__toHost(JSON.stringify(m)); },
        getState: () => saved,
        setState: (s) => { saved = s; w.__state = s; },
      };
    };
  })();`);

  const html = renderPanelHtml({ cspSource: ORIGIN, scriptUri: `${ORIGIN}/dist/panel.js`, styleUri: `${ORIGIN}/panel.css`, nonce: 'TestNonce0123456789', ref })
    .replace('<link rel="stylesheet"', `<link rel="stylesheet" href="${ORIGIN}/theme.css">\n<link rel="stylesheet"`);
  const bundle = await buildOnce();
  await page.route(`${ORIGIN}/**`, async (route) => {
    const url = new URL(route.request().url());
    const file = (p: string, type: string) => route.fulfill({ status: 200, contentType: type, body: readFileSync(p) });
    switch (url.pathname) {
      case '/index.html':
        return route.fulfill({ status: 200, contentType: 'text/html', body: html });
      case '/theme.css':
        return route.fulfill({ status: 200, contentType: 'text/css', body: DARK_THEME });
      case '/panel.css':
        return file(path.join(ROOT, 'media/panel/panel.css'), 'text/css');
      case '/dist/panel.js':
        return file(bundle, 'application/javascript');
      case '/dist/panel.js.map':
        return file(`${bundle}.map`, 'application/json');
      default:
        return route.fulfill({ status: 404, body: '' });
    }
  });
  // Anything else (e.g. `<img src=x>` in a body, were it ever parsed as HTML) gets nothing.
  await page.route((u) => !u.href.startsWith(ORIGIN), (route) => route.abort());
  if (opts.fakeClock) await page.clock.install();
  await page.goto(`${ORIGIN}/index.html`);
  await page.waitForSelector(opts.loadedWhen ?? '#counts .count');
  return {
    page,
    transport,
    ui,
    handler,
    requests,
    errors,
    cspViolations: () => page.evaluate(() => (window as unknown as { __csp: string[] }).__csp),
    sentOps: () => page.evaluate(() => (window as unknown as { __sent: string[] }).__sent),
    deliver: (m) => page.evaluate((msg) => void window.dispatchEvent(new MessageEvent('message', { data: msg })), m as unknown),
    close: async () => {
      handler.dispose();
      await context.close();
    },
  };
}

const MIN = 60_000;

/** A queue with messages in every state, dead letters with reasons, a day of lag history and some audit entries. */
export function fixtureQueue(opts: { mixed?: boolean } = {}): FakeTransport {
  const t = new FakeTransport({ namespace: 'shop', queue: 'orders' });
  const now = t.now;
  const customers = ['ada', 'grace', 'linus', 'margaret', 'ken', 'barbara', 'dennis'];
  const items = ['espresso-beans', 'grinder', 'kettle', 'filter-papers', 'mug', 'scale'];
  for (let i = 0; i < 137; i++) {
    t.add({
      body: { orderId: `ord-${1000 + i}`, customer: `customer-${customers[i % customers.length]}`, items: [{ sku: items[i % items.length], qty: 1 + (i % 3) }], total: Math.round((12.5 + i * 3.1) * 100) / 100 },
      enqueuedAt: now - (140 - i) * 3_000,
      visibleAt: now - (140 - i) * 3_000,
      attempts: i % 11 === 0 ? 1 : 0,
      attributes: i % 4 === 0 ? { source: 'checkout', region: 'eu-west' } : null,
    });
  }
  for (let i = 0; i < 8; i++)
    t.add({ body: { orderId: `ord-${2000 + i}`, kind: 'reminder', customer: `customer-${customers[i % 7]}` }, state: 'delayed', enqueuedAt: now - 2 * MIN, visibleAt: now + (i + 1) * 5 * MIN });
  for (let i = 0; i < 5; i++)
    t.add({ body: { orderId: `ord-${3000 + i}`, customer: `customer-${customers[i]}`, items: [{ sku: 'grinder', qty: 1 }] }, state: 'leased', attempts: 1 + (i % 3), enqueuedAt: now - 9 * MIN, visibleAt: now - 9 * MIN, leaseUntil: now + (20 + i * 2) * 1000 });
  const reasons = ['nack', 'timeout'];
  const errs = ['PaymentDeclined: card ending 4242 was declined', 'TimeoutError: warehouse API did not answer in 30 s', 'ValidationError: items[0].qty must be positive'];
  for (let i = 0; i < 12; i++)
    t.add({
      body: { orderId: `ord-${4000 + i}`, customer: `customer-${customers[i % 7]}`, total: 99.9 + i },
      state: 'dead',
      attempts: 5,
      enqueuedAt: now - (300 + i * 13) * MIN,
      visibleAt: now - (290 + i * 13) * MIN,
      deadAt: now - (280 + i * 13) * MIN,
      deadReason: reasons[i % 2],
      lastError: i % 2 === 1 ? errs[1] : errs[i % 3 === 2 ? 2 : 0],
      attributes: { source: 'checkout' },
    });
  t.makeLag((i) => {
    const wave = Math.sin((i / 47) * Math.PI * 2 - 1.2) * 0.5 + 0.5;
    const burst = i > 30 && i < 36 ? 180 : 0;
    return { peakDepth: Math.round(20 + wave * 120 + burst + (i % 5) * 3), maxWaitMs: Math.round((20 + wave * 240 + (burst ? 900 : 0) + (i === 47 ? 160 : 0)) * 1000) };
  });
  // In FIFO order, as the emulator lists them (the tests use the grouped order: page 4 is all dead).
  if (opts.mixed) t.messages.sort((a, b) => a.enqueuedAt - b.enqueuedAt || a.id.localeCompare(b.id));
  t.audit = [
    { id: 2, at: now - 95 * MIN, token: 'ops-bot', tokenId: 'tok_2f9c1e7a0b6d', namespace: 'shop', queue: 'orders', action: 'purge_dead', count: 3, detail: 'ids: 3' },
    { id: 1, at: now - 240 * MIN, token: 'ops-bot', tokenId: 'tok_2f9c1e7a0b6d', namespace: 'shop', queue: 'orders', action: 'replay', count: 20, detail: 'oldest 20' },
  ];
  return t;
}
