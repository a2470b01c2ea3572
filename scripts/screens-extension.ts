/**
 * The README's screenshots, all from one run of a real VS Code workbench (offline VS Code server +
 * headless Chromium, see docs/vscode-testing.md) against a real emulator: the welcome view, the tree,
 * and the queue panel (messages with a detail, dead letters, the 24-hour chart, the push form, the
 * audit log).
 *
 *     npm run build && npm run build:ext && node scripts/build-panel.js && npx tsx scripts/screens-extension.ts [--out-dir docs/images] [--vsix quayside.vsix]
 *
 * The seed runs an emulator in this process on the workspace's .quayside/ with a virtual clock that
 * starts 24 hours ago, and plays a day of work on shop/orders through the protocol (pushes, pulls,
 * acks, nacks, crashed workers whose leases run out, a consumer outage, a payment-gateway incident,
 * a replay and a purge of dead letters) in 5-minute ticks over 48 half-hour steps, moving the clock
 * up to a few minutes before now. So the chart, the dead letters and the audit log hold what the
 * engine itself recorded. The extension then starts its own emulator (system clock) on the same
 * data directory, and the script opens the queue with "Quayside: Open Queue" (palette, then the
 * quick pick) and clicks through the panel's tabs. The list-and-detail tabs are taken with the side
 * bar hidden (beside the tree their body column is a few characters wide), the others beside it.
 */
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import type { Frame } from 'playwright-core';
import { Connection } from '../emulator/clients/connection';
import { startEmulator } from '../emulator/emulator';
import { openWorkbench, REPO_ROOT } from './vscode/screenshots';
import { rng } from './seeded-random';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });

const MINUTE = 60_000;
const HALF_HOUR = 30 * MINUTE;
const TICK = 5 * MINUTE;

type Fate = 'ok' | 'flaky' | 'discontinued' | 'invalid' | 'crash';

const CUSTOMERS = ['cus_ada', 'cus_grace', 'cus_linus', 'cus_margaret', 'cus_alan', 'cus_barbara', 'cus_ken', 'cus_radia', 'cus_edsger', 'cus_frances'];
const SKUS: [string, number][] = [['ESP-BEANS-1KG', 24.5], ['FLT-FILTER-100', 4.2], ['GRN-GRINDER-C2', 89], ['MUG-STONE-350', 12], ['KTL-GOOSENECK', 54.9], ['SCL-DRIP-01', 31]];

/** Seeds the data directory; returns ids the screenshots click on. */
async function seed(dataDir: string): Promise<{ retried: string; invalid: string; discontinued: string[] }> {
  const rand = rng(20261202);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)];
  const now = Date.now();
  const emu = await startEmulator({ dataDir, clock: { start: now - 24 * 3600_000 } });
  const clock = emu.clock!;
  const c = new Connection({ url: emu.url, token: emu.token });
  let oncallConnection: Connection | undefined;
  try {
    // The queues of the tree picture.
    await c.request('queue.create', { namespace: 'shop', queue: 'orders', dialect: 'cache' });
    await c.request('queue.create', { namespace: 'shop', queue: 'emails', dialect: 'cache' });
    await c.request('queue.create', { namespace: 'acme/staging', queue: 'thumbnails', dialect: 'env' });
    await c.request('queue.create', { namespace: 'tenant-42', queue: 'webhooks', dialect: 'sync' });
    const { token: oncallToken } = await c.request('token.create', { access: 'readwrite', name: 'oncall' });
    const oncall = (oncallConnection = new Connection({ url: emu.url, token: oncallToken }));

    // A day of shop/orders: 48 half-hour steps, six 5-minute ticks each. A tick pushes the orders
    // that arrived, lets a minute pass, then the workers pull up to their capacity and settle each
    // delivery by the order's fate; the rest of the tick passes (the leases of crashed workers run
    // out then, retries fall due). The day ends a few minutes before the real now.
    const orders = { namespace: 'shop', queue: 'orders' };
    const fates = new Map<string, Fate>();
    const tries = new Map<string, number>();
    const firstOrder = 10_400;
    let orderNo = firstOrder;
    const ago = (k: number) => 47 - k; // half hours before now
    const gatewayDown = (k: number) => ago(k) === 9 || ago(k) === 8; // payments answer 503
    const workersDown = (k: number) => ago(k) >= 14 && ago(k) <= 17; // a bad deploy, rolled back 2 h later
    const onePod = (k: number) => ago(k) >= 36 && ago(k) <= 41; // a node drained: half the workers
    const catchUp = (k: number) => ago(k) === 13 || ago(k) === 12 || ago(k) === 35;
    const orderOf = (m: { body: unknown }) => (m.body as { orderId: string }).orderId;
    const deadLetters = async () => (await oncall.request('dead.list', { ...orders, limit: 500 })).messages;
    const pushOrders = async (n: number, fateOf: () => Fate) => {
      for (let i = 0; i < n; i++) {
        const fate = fateOf();
        const items = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => {
          const [sku, price] = pick(SKUS);
          return { sku, qty: 1 + Math.floor(rand() * 3), price };
        });
        if (fate === 'discontinued') items[0] = { sku: 'ESP-DECAF-250', qty: 2, price: 9.9 };
        const total = Math.round(items.reduce((s, x) => s + x.qty * x.price, 0) * 100) / 100;
        const body = { orderId: `ord-${orderNo++}`, customer: pick(CUSTOMERS), items, total: fate === 'invalid' ? -total : total, currency: 'EUR' };
        const attributes = { source: fate === 'invalid' ? 'pos' : pick(['checkout', 'checkout', 'mobile', 'pos']), region: pick(['eu-west', 'eu-west', 'eu-central']) };
        const { id } = await c.request('push', { ...orders, body, attributes });
        fates.set(id, fate);
      }
    };
    const randomFate = (): Fate => (rand() < 0.06 ? 'flaky' : 'ok');
    // The orders that end as dead letters arrive at set times, so every run ends with about the
    // same handful: a discontinued product (5 failed deliveries), a worker that crashes on an
    // order (5 leases run out), and refunds that pos sends as orders (dead at once).
    const special = new Map<number, Fate>([
      [44, 'discontinued'], [31, 'discontinued'], [22, 'discontinued'], [10, 'discontinued'],
      [40, 'crash'], [27, 'crash'], [24, 'crash'],
      [33, 'invalid'], [19, 'invalid'], [12, 'invalid'], [3, 'invalid'],
    ]);
    const FLAKY = ['TimeoutError: inventory-service did not answer within 5000 ms', 'FetchError: connect ECONNRESET 10.0.3.17:8443 (tax-service)', 'SqliteError: SQLITE_BUSY: database is locked (reservations)'];
    const settle = async (k: number, m: { id: string; receipt: string; body: unknown }) => {
      const fate = fates.get(m.id) ?? 'ok';
      const n = (tries.get(m.id) ?? 0) + 1;
      tries.set(m.id, n);
      if (gatewayDown(k)) {
        await c.request('nack', { receipt: m.receipt, delayMs: 4 * MINUTE, error: `PaymentGatewayError: POST https://payments.internal/v2/charges answered 503 Service Unavailable (${orderOf(m)})` });
      } else if (fate === 'crash') {
        // The worker dies mid-order (out of memory on a huge invoice): no ack, the lease runs out.
      } else if (fate === 'invalid') {
        const total = (m.body as { total: number }).total;
        await c.request('nack', { receipt: m.receipt, dead: true, error: `ValidationError: total must be >= 0, got ${total} (${orderOf(m)}, a refund sent as an order by pos)` });
      } else if (fate === 'discontinued') {
        await c.request('nack', { receipt: m.receipt, delayMs: 2 * MINUTE, error: `InventoryError: SKU ESP-DECAF-250 is discontinued; cannot reserve 2 units at warehouse AMS-1 (${orderOf(m)})` });
      } else if (fate === 'flaky' && n === 1) {
        await c.request('nack', { receipt: m.receipt, delayMs: MINUTE, error: pick(FLAKY) });
      } else {
        await c.request('ack', { receipt: m.receipt });
      }
    };

    const t0 = clock.now();
    for (let k = 0; k < 48; k++) {
      const at = new Date(t0 + k * HALF_HOUR);
      const hour = at.getHours() + at.getMinutes() / 60;
      // Orders follow the day: few at night, busy from late morning, an evening peak.
      const day = Math.max(0, Math.sin((Math.PI * (hour - 7)) / 16));
      const evening = Math.exp(-((hour - 20) ** 2) / 3);
      const perTick = 0.8 + 7 * day + 5 * evening;
      for (let tick = 0; tick < 6; tick++) {
        const n = Math.max(0, Math.round(perTick * (0.6 + 0.8 * rand())));
        await pushOrders(n, randomFate);
        if (tick === 1 && special.has(ago(k))) await pushOrders(1, () => special.get(ago(k))!);
        await clock.advance(MINUTE);
        const capacity = workersDown(k) ? 0 : catchUp(k) ? 60 : onePod(k) ? Math.max(1, Math.round(perTick * 0.55)) : 14;
        if (capacity > 0) {
          const { messages } = await c.request('pull', { ...orders, max: capacity });
          for (const m of messages) await settle(k, m);
        }
        // The very last tick stops 4 minutes early: the last minutes come below, ending before the real now.
        if (k < 47 || tick < 5) await clock.advance(TICK - MINUTE);
      }
      if (ago(k) === 6) {
        // After the gateway incident, on call replays what it dead-lettered ...
        const gateway = (await deadLetters()).filter((m) => m.lastError?.startsWith('PaymentGatewayError'));
        if (gateway.length) await oncall.request('dead.replay', { ...orders, ids: gateway.map((m) => m.id) });
      } else if (ago(k) === 5) {
        // ... and drops the refunds that pos sent as orders (they were sent again as refunds).
        const refunds = (await deadLetters()).filter((m) => m.lastError?.startsWith('ValidationError'));
        if (refunds.length) await oncall.request('dead.purge', { ...orders, ids: refunds.map((m) => m.id) });
      }
    }
    // The last minutes: fresh orders, a few with a worker now (one of them failed once already and
    // waits for its retry), and a pre-order scheduled for later.
    await pushOrders(11, () => 'ok');
    await clock.advance(MINUTE);
    const { messages: last } = await c.request('pull', { ...orders, max: 5, leaseMs: 15 * MINUTE });
    await c.request('nack', { receipt: last[0].receipt, delayMs: 10 * MINUTE, error: FLAKY[0] });
    await c.request('nack', { receipt: last[1].receipt, error: FLAKY[1] });
    await c.request('push', { ...orders, body: { orderId: `ord-${orderNo++}`, note: 'pre-order, ship on release day', customer: 'cus_grace', total: 349, currency: 'EUR' }, delayMs: 3_600_000 });

    // The other queues, as before.
    for (let i = 1; i <= 3; i++) await c.request('push', { namespace: 'shop', queue: 'emails', body: { to: `user${i}@example.com`, template: 'welcome' } });
    const { messages } = await c.request('pull', { namespace: 'shop', queue: 'emails', max: 2 });
    for (const m of messages) await c.request('nack', { receipt: m.receipt, dead: true, error: 'SMTP 550 mailbox unavailable' });
    await c.request('push', { namespace: 'acme/staging', queue: 'thumbnails', body: { image: 'cat.png', sizes: [64, 128] } });
    const stats = await c.request('stats', orders);
    console.log(`seeded shop/orders: ${orderNo - firstOrder} orders, now ${JSON.stringify(stats.counts)}; the virtual clock ends ${Math.round((Date.now() - clock.now()) / 1000)} s before the real now`);
    const ids = (f: Fate) => [...fates].filter(([, x]) => x === f).map(([id]) => id);
    return { retried: last[1].id, invalid: ids('invalid').pop()!, discontinued: ids('discontinued') };
  } finally {
    await oncallConnection?.close();
    await c.close();
    await emu.close();
  }
}

/** Waits until `cond` holds in the frame (polling; the webview renders after its requests answer). */
async function until(frame: Frame, what: string, cond: () => boolean, timeoutMs = 20000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await frame.evaluate(cond).catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

async function main() {
  const outIdx = process.argv.indexOf('--out-dir');
  const outDir = outIdx > 0 ? path.resolve(process.argv[outIdx + 1]) : path.join(REPO_ROOT, 'docs', 'images');
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-screens-'));
  const seeded = await seed(path.join(ws, '.quayside'));
  fs.mkdirSync(path.join(ws, '.vscode'));
  fs.writeFileSync(path.join(ws, '.vscode', 'settings.json'), JSON.stringify({ 'quayside.port': await freePort() }));
  const vsixIdx = process.argv.indexOf('--vsix');
  const vsix = vsixIdx > 0 ? path.resolve(process.argv[vsixIdx + 1]) : undefined;
  // A bit larger than 1280x720 so the panel is readable beside the tree (and keeps its list and
  // detail side by side: it stacks them below 900 px).
  const wb = await openWorkbench({ folder: ws, screenshotDir: outDir, viewport: { width: 1440, height: 900 }, ...(vsix ? { vsix } : {}) });
  const { page } = wb;
  /** The pointer off to a spot with nothing to hover, so no hover state or tooltip shows. */
  const rest = () => page.mouse.move(1150, 12);
  const shot = async (name: string) => {
    await rest();
    await sleep(400);
    if (await page.locator('.notification-toast').count()) {
      console.log(`${name}: clearing notifications: ${(await wb.notifications()).join(' | ')}`);
      await wb.runCommand('Notifications: Clear All Notifications');
      await rest();
      await sleep(400);
    }
    console.log(await wb.screenshot(name));
  };
  try {
    await wb.clickActivityBar('Quayside');
    await sleep(1000);
    await shot('extension-stopped');
    await wb.runCommand('Quayside: Start Emulator');
    await page.waitForSelector('.part.sidebar .monaco-list-row:has-text("shop")', { timeout: 20000 });
    await sleep(800);
    const row = (text: string) => page.locator('.part.sidebar .monaco-list-row', { hasText: text }).first();
    await row('emails').click();
    await sleep(400);
    await row('Dead letters').click();
    await sleep(600);
    await row('orders').click();
    await sleep(400);
    await page.locator('.part.sidebar .monaco-list-row', { hasText: 'Messages' }).nth(1).click();
    await sleep(800);
    await shot('extension-tree');

    // The queue panel, from the palette: "Open Queue" asks for the queue with a quick pick.
    await wb.runCommand('Quayside: Open Queue');
    const pickOrders = page.locator('.quick-input-list .monaco-list-row', { hasText: 'shop · cache' }).filter({ hasText: 'orders' }).first();
    await pickOrders.waitFor({ state: 'visible', timeout: 20000 });
    await pickOrders.click();
    const frame = await wb.webviewFrame({ selector: '#msg-rows tr', timeoutMs: 30000 });

    // The list-and-detail views need the width: beside the tree the body column is a few characters
    // wide, so these two are taken with the side bar hidden.
    const sideBar = () => wb.runCommand('View: Toggle Primary Side Bar Visibility');
    await sideBar();
    await page.locator('.part.sidebar').waitFor({ state: 'hidden', timeout: 10000 });

    // Messages: every state; the detail of the order whose first delivery failed.
    await frame.click(`#msg-rows tr[data-id="${seeded.retried}"] td.body-col`);
    await until(frame, 'the message detail', () => !!document.querySelector('#detail .last-error'));
    await frame.evaluate(() => window.scrollTo(0, 0));
    await shot('panel-messages');

    // Dead letters: a few selected, the detail of one.
    await frame.click('#tab-dead');
    await until(frame, 'the dead letters', () => document.querySelectorAll('#dead-rows tr').length > 0);
    const deadIds = await frame.$$eval('#dead-rows tr', (trs) => trs.map((tr) => tr.getAttribute('data-id') ?? ''));
    for (const id of seeded.discontinued.filter((x) => deadIds.includes(x)).slice(-3)) await frame.click(`#dead-rows tr[data-id="${id}"] input[type=checkbox]`);
    await frame.click(`#dead-rows tr[data-id="${seeded.invalid}"] td.error-col`);
    await until(frame, 'the dead letter detail', () => !!document.querySelector('#dead-detail .last-error'));
    await shot('panel-dead-letters');
    await sideBar();
    await page.locator('.part.sidebar').waitFor({ state: 'visible', timeout: 10000 });

    // Metrics: the 24-hour chart, 48 half-hour steps.
    await frame.click('#tab-metrics');
    await until(frame, 'the chart', () => document.querySelectorAll('#chart rect.bar').length === 48);
    await shot('panel-metrics');

    // Push: an order typed into the form, sent.
    await frame.click('#tab-push');
    await frame.fill('#push-body', '{\n  "orderId": "ord-20001",\n  "customer": "cus_ada",\n  "items": [{ "sku": "GRN-GRINDER-C2", "qty": 1, "price": 89 }],\n  "total": 89,\n  "currency": "EUR"\n}');
    await frame.fill('#push-attributes', JSON.stringify({ source: 'panel', region: 'eu-west' }));
    await frame.fill('#push-dedupe', 'ord-20001');
    await frame.click('#push-send');
    await until(frame, 'the push result', () => /Sent 1 message/.test(document.getElementById('push-result')?.textContent ?? ''));
    await shot('panel-push');

    // Audit log: the replay and the purge from the seed.
    await frame.click('#tab-audit');
    await until(frame, 'the audit log', () => document.querySelectorAll('#audit-rows tr').length >= 2);
    await shot('panel-audit');
  } finally {
    await wb.close();
    if (!process.env.QUAYSIDE_VSCODE_KEEP_TMP) fs.rmSync(ws, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
