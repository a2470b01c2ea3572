/**
 * Screenshots of the extension's tree, status bar and welcome views in a real VS Code workbench
 * (offline VS Code server + headless Chromium, see docs/vscode-testing.md).
 *
 *     npm run build && npm run build:ext && npx tsx scripts/screens-extension.ts [--out-dir docs/images] [--vsix quayside.vsix]
 *
 * Seeds a workspace's .quayside/ with a few queues (through the emulator CLI and a client
 * connection), then opens it, starts the emulator from the palette and expands the tree.
 */
import * as cp from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { Connection } from '../emulator/clients/connection';
import { openWorkbench, REPO_ROOT } from './vscode/screenshots';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });

async function seed(dataDir: string): Promise<void> {
  const port = await freePort();
  const child = cp.spawn(process.execPath, [path.join(REPO_ROOT, 'dist/emulator/cli.js'), 'start', '--port', String(port), '--data', dataDir, '--token', 'seed', '--json'], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => (d.toString().includes('"listening"') ? resolve() : undefined));
    child.on('exit', (c) => reject(new Error(`seed emulator exited ${c}`)));
  });
  const c = new Connection({ url: `ws://127.0.0.1:${port}`, token: 'seed' });
  await c.request('queue.create', { namespace: 'shop', queue: 'orders', dialect: 'cache' });
  await c.request('queue.create', { namespace: 'shop', queue: 'emails', dialect: 'cache' });
  await c.request('queue.create', { namespace: 'acme:staging', queue: 'thumbnails', dialect: 'env' });
  await c.request('queue.create', { namespace: 'tenant-42', queue: 'webhooks', dialect: 'sync' });
  for (let i = 1; i <= 7; i++) await c.request('push', { namespace: 'shop', queue: 'orders', body: { orderId: 1000 + i, total: 19.99 * i } });
  await c.request('push', { namespace: 'shop', queue: 'orders', body: { orderId: 2000, note: 'later' }, delayMs: 3_600_000 });
  for (let i = 1; i <= 3; i++) await c.request('push', { namespace: 'shop', queue: 'emails', body: { to: `user${i}@example.com`, template: 'welcome' } });
  const { messages } = await c.request('pull', { namespace: 'shop', queue: 'emails', max: 2 });
  for (const m of messages) await c.request('nack', { receipt: m.receipt, dead: true, error: 'SMTP 550 mailbox unavailable' });
  await c.request('push', { namespace: 'acme:staging', queue: 'thumbnails', body: { image: 'cat.png', sizes: [64, 128] } });
  await c.close();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

async function main() {
  const outIdx = process.argv.indexOf('--out-dir');
  const outDir = outIdx > 0 ? path.resolve(process.argv[outIdx + 1]) : path.join(REPO_ROOT, 'docs', 'images');
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-screens-'));
  await seed(path.join(ws, '.quayside'));
  fs.mkdirSync(path.join(ws, '.vscode'));
  fs.writeFileSync(path.join(ws, '.vscode', 'settings.json'), JSON.stringify({ 'quayside.port': await freePort() }));
  const vsixIdx = process.argv.indexOf('--vsix');
  const vsix = vsixIdx > 0 ? path.resolve(process.argv[vsixIdx + 1]) : undefined;
  const wb = await openWorkbench({ folder: ws, screenshotDir: outDir, viewport: { width: 1280, height: 720 }, ...(vsix ? { vsix } : {}) });
  try {
    await wb.clickActivityBar('Quayside');
    await sleep(1000);
    console.log(await wb.screenshot('extension-stopped'));
    await wb.runCommand('Quayside: Start Emulator');
    await wb.page.waitForSelector('.part.sidebar .monaco-list-row:has-text("shop")', { timeout: 20000 });
    await sleep(800);
    const row = (text: string) => wb.page.locator('.part.sidebar .monaco-list-row', { hasText: text }).first();
    await row('emails').click();
    await sleep(400);
    await row('Dead letters').click();
    await sleep(600);
    await row('orders').click();
    await sleep(400);
    await wb.page.locator('.part.sidebar .monaco-list-row', { hasText: 'Messages' }).nth(1).click();
    await sleep(800);
    console.log(await wb.screenshot('extension-tree'));
    console.log('notifications:', await wb.notifications());
  } finally {
    await wb.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
