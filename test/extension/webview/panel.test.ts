import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { fixtureQueue, launch, openPanel, removeBuild, type Panel } from './harness';
import { FakeTransport } from './fake-transport';
import type { PanelEvent } from '../../../src/panel/messages';
import { checkAttributes } from '../../../src/panel/validate';
import { QuaysideError } from '../../../emulator/errors';
import { startEmulator } from '../../../emulator/emulator';
import { Connection } from '../../../emulator/clients/connection';

const ROOT = path.resolve(__dirname, '../../..');
/**
 * Screenshots of the harness (fake transport, invented data) go to test-results/panel, to look at
 * when a test fails. The README's pictures come from scripts/screens-extension.ts instead.
 */
async function shot(p: Panel, name: string) {
  const dir = path.join(ROOT, 'test-results/panel');
  mkdirSync(dir, { recursive: true });
  await p.page.screenshot({ path: path.join(dir, `panel-${name}.png`) });
}

const rowCount = (p: Panel, tbody = '#msg-rows') => p.page.locator(`${tbody} tr`).count();
const text = (p: Panel, sel: string) => p.page.locator(sel).innerText();
const lastRequest = (p: Panel, op: string) => [...p.requests].reverse().find((r) => r.op === op);

async function waitFor(cond: () => Promise<boolean> | boolean, what: string, ms = 3000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/**
 * The ids of the webview's requests the host has finished answering (its handleMessage settled): a
 * barrier for "nothing more came of that request", in place of a sleep.
 */
function trackAnswers(p: Panel<any>): Set<string> {
  const done = new Set<string>();
  const handle = p.handler.handleMessage.bind(p.handler);
  p.handler.handleMessage = async (raw: unknown) => {
    try {
      await handle(raw);
    } finally {
      done.add((raw as { requestId: string }).requestId);
    }
  };
  return done;
}

describe('queue panel webview (Chromium)', function () {
  this.timeout(30_000);
  let browser: Browser;
  let p: Panel<any>;

  before(async () => {
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await removeBuild();
  });
  afterEach(async function () {
    if (p) {
      const cur = p;
      p = undefined as never;
      const csp = await cur.cspViolations().catch(() => []);
      const errors = cur.errors.filter((e) => !/Failed to load resource/.test(e));
      await cur.close();
      if (this.currentTest?.state === 'passed') {
        assert.deepEqual(csp, [], 'no CSP violations');
        assert.deepEqual(errors, [], 'no page errors');
      }
    }
  });

  it('lists messages in every state, one server-side page at a time', async () => {
    p = await openPanel(browser, fixtureQueue());
    await p.page.waitForSelector('#msg-rows tr');
    assert.equal(await rowCount(p), 50);
    assert.equal(await text(p, '#msg-range'), '1–50 of 162');
    const peek = lastRequest(p, 'peek')!;
    assert.deepEqual(peek.args, { states: ['ready', 'delayed', 'leased', 'dead'], limit: 50 });
    // The header shows the queue's counts.
    assert.match(await text(p, '#counts'), /Ready\s+137\s+Delayed\s+8\s+In flight\s+5\s+Dead\s+12\s+Oldest wait\s+7 min/i);

    await p.page.click('#msg-next');
    await waitFor(async () => (await text(p, '#msg-range')) === '51–100 of 162', 'page 2');
    assert.equal(lastRequest(p, 'peek')!.args && (lastRequest(p, 'peek')!.args as any).cursor, 'c50');
    await p.page.click('#msg-next');
    await p.page.click('#msg-next');
    await waitFor(async () => (await text(p, '#msg-range')) === '151–162 of 162', 'last page');
    assert.equal(await p.page.isDisabled('#msg-next'), true);
    assert.deepEqual([...new Set(await p.page.locator('#msg-rows .badge').allInnerTexts())], ['Dead']);
    await p.page.click('#msg-prev');
    await waitFor(async () => (await text(p, '#msg-range')) === '101–150 of 162', 'back one page');
    assert.deepEqual([...new Set(await p.page.locator('#msg-rows .badge').allInnerTexts())], ['Ready', 'Delayed', 'Leased']);
    // Page size.
    await p.page.selectOption('#msg-page-size', '25');
    await waitFor(async () => (await text(p, '#msg-range')) === '1–25 of 162', 'page size 25');
  });

  it('filters by state and searches bodies on the server', async () => {
    p = await openPanel(browser, fixtureQueue());
    await p.page.waitForSelector('#msg-rows tr');
    for (const s of ['ready', 'delayed', 'leased']) await p.page.click(`#state-filter [data-state=${s}]`);
    await waitFor(async () => (await text(p, '#msg-range')) === '1–12 of 12', 'dead only');
    assert.deepEqual((lastRequest(p, 'peek')!.args as any).states, ['dead']);
    assert.deepEqual([...new Set(await p.page.locator('#msg-rows .badge').allInnerTexts())], ['Dead']);
    // The last state cannot be switched off.
    await p.page.click('#state-filter [data-state=dead]');
    assert.equal(await p.page.getAttribute('#state-filter [data-state=dead]', 'aria-pressed'), 'true');

    await p.page.click('#state-filter [data-state=ready]');
    await p.page.fill('#search', 'customer-grace');
    await waitFor(async () => (lastRequest(p, 'peek')!.args as any).search === 'customer-grace', 'search sent');
    await waitFor(async () => /of 22$/.test(await text(p, '#msg-range')), 'search results');
    for (const b of await p.page.locator('#msg-rows .body-preview').allInnerTexts()) assert.match(b, /customer-grace/);
    // The filter is kept for a reload (vscode.setState).
    const state = await p.page.evaluate(() => (window as any).__state);
    assert.deepEqual(state, { ref: { namespace: 'shop', queue: 'orders' }, dialect: 'cache', tab: 'messages', states: ['ready', 'dead'], search: 'customer-grace', pageSize: 50 });
    await p.page.fill('#search', 'no-such-thing');
    await waitFor(async () => p.page.isVisible('#msg-empty'), 'empty state');
    assert.equal(await text(p, '#msg-empty'), 'No message matches the filter.');
  });

  it('a state chip toggled from the keyboard keeps the focus: Space again toggles it back', async () => {
    p = await openPanel(browser, fixtureQueue());
    await p.page.waitForSelector('#msg-rows tr');
    await p.page.focus('#state-filter [data-state=ready]');
    await p.page.keyboard.press('Space');
    await waitFor(async () => (lastRequest(p, 'peek')!.args as any).states.join() === 'delayed,leased,dead', 'ready off');
    const focused = () => p.page.evaluate(() => document.activeElement?.getAttribute('data-state') ?? document.activeElement?.tagName);
    assert.equal(await focused(), 'ready');
    assert.equal(await p.page.getAttribute('#state-filter [data-state=ready]', 'aria-pressed'), 'false');
    await p.page.keyboard.press('Space');
    await waitFor(async () => (lastRequest(p, 'peek')!.args as any).states.join() === 'ready,delayed,leased,dead', 'ready on again');
    assert.equal(await p.page.getAttribute('#state-filter [data-state=ready]', 'aria-pressed'), 'true');
    assert.equal(await focused(), 'ready', 'still on the chip after the counts and the page came back');
  });

  it('the tabs take the arrow keys, Home and End, and are one Tab stop (the ARIA tabs pattern)', async () => {
    p = await openPanel(browser, fixtureQueue());
    await p.page.waitForSelector('#msg-rows tr');
    const tabIndexes = () => p.page.locator('[role=tab]').evaluateAll((els) => els.map((e) => (e as HTMLElement).tabIndex));
    assert.deepEqual(await tabIndexes(), [0, -1, -1, -1, -1]);
    await p.page.focus('#tab-messages');
    await p.page.keyboard.press('ArrowRight');
    assert.equal(await p.page.getAttribute('#tab-dead', 'aria-selected'), 'true');
    assert.equal(await p.page.evaluate(() => document.activeElement?.id), 'tab-dead');
    assert.equal(await p.page.isVisible('#view-dead'), true);
    assert.deepEqual(await tabIndexes(), [-1, 0, -1, -1, -1]);
    await p.page.keyboard.press('End');
    assert.equal(await p.page.evaluate(() => document.activeElement?.id), 'tab-audit');
    await p.page.keyboard.press('ArrowRight');
    assert.equal(await p.page.evaluate(() => document.activeElement?.id), 'tab-messages', 'wraps around');
    await p.page.keyboard.press('ArrowLeft');
    assert.equal(await p.page.getAttribute('#tab-audit', 'aria-selected'), 'true');
    await p.page.keyboard.press('Home');
    assert.equal(await p.page.getAttribute('#tab-messages', 'aria-selected'), 'true');
    assert.equal(await p.page.getAttribute('#tab-messages', 'aria-controls'), 'view-messages');
  });

  it('shows a message’s detail: pretty body, attributes, attempts, times, lease end, dead reason and last error', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    const ready = t.messages[0];
    await p.page.click(`#msg-rows tr[data-id="${ready.id}"] td.body-col`);
    await waitFor(async () => (await text(p, '#detail .detail-id')) === ready.id, 'detail');
    assert.equal(await p.page.locator('#detail pre.body-json').innerText(), JSON.stringify(ready.body, null, 2));
    assert.equal(await p.page.locator('#detail pre.attributes-json').innerText(), JSON.stringify(ready.attributes, null, 2));
    const facts = await text(p, '#detail .facts');
    assert.match(facts, /Attempts\s+1/);
    assert.match(facts, /Enqueued\s+2026-12-02 /);
    assert.equal((lastRequest(p, 'message.get')!.args as any).id, ready.id);

    const leased = t.messages.find((m) => m.state === 'leased')!;
    await p.page.click('#msg-next');
    await p.page.click('#msg-next');
    await p.page.click(`#msg-rows tr[data-id="${leased.id}"] td.body-col`);
    await waitFor(async () => (await text(p, '#detail .detail-id')) === leased.id, 'leased detail');
    assert.match(await text(p, '#detail .facts'), /Lease ends\s+2026-12-02 15:12:20Z \(in 20 s\)/);

    const dead = t.messages.find((m) => m.state === 'dead' && m.lastError?.startsWith('Timeout'))!;
    await p.page.click('#msg-next');
    await p.page.click(`#msg-rows tr[data-id="${dead.id}"] td.body-col`);
    await waitFor(async () => (await text(p, '#detail .detail-id')) === dead.id, 'dead detail');
    assert.match(await text(p, '#detail .facts'), /Dead reason\s+timeout/);
    assert.equal(await text(p, '#detail pre.last-error'), dead.lastError);
    assert.ok(await p.page.isVisible('#detail [data-action=replay-one]'));
  });

  it('push: bad JSON is refused with a message and nothing is sent; good JSON is sent with delay, dedupe key, attributes and ×N', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-push');
    await p.page.fill('#push-body', '{\n  "orderId": "ord-1",\n  "items": [1, 2,]\n}');
    await p.page.fill('#push-attributes', '["not", "an", "object"]');
    await p.page.click('#push-send');
    assert.match(await text(p, '#push-body-error'), /Expected a value .* \(line 3, column 18\)/);
    // The palette's "Push with options…" checks attributes with the same function and words.
    assert.equal(await text(p, '#push-attributes-error'), (checkAttributes('["not", "an", "object"]') as { error: string }).error);
    assert.equal(await p.page.getAttribute('#push-body', 'aria-invalid'), 'true');
    assert.match(await text(p, '#push-result'), /Not sent/);
    assert.equal(p.requests.filter((r) => r.op === 'push').length, 0, 'nothing sent');
    assert.equal(t.callsOf('push').length + t.callsOf('push.batch').length, 0);
    await shot(p, 'push');

    await p.page.fill('#push-body', '{"orderId": "ord-1", "items": [1, 2]}');
    await p.page.fill('#push-attributes', '{"source": "panel", "retries": 3, "urgent": true}');
    await p.page.fill('#push-delay', '30');
    await p.page.fill('#push-dedupe', 'ord-1');
    await p.page.click('#push-send');
    await waitFor(async () => /^Sent 1 message/.test(await text(p, '#push-result')), 'sent');
    assert.equal(await text(p, '#push-body-error'), '');
    assert.deepEqual(t.callsOf('push')[0].args, { namespace: 'shop', queue: 'orders', body: { orderId: 'ord-1', items: [1, 2] }, delayMs: 30_000, dedupeKey: 'ord-1', attributes: { source: 'panel', retries: 3, urgent: true } });

    await p.page.fill('#push-dedupe', '');
    await p.page.fill('#push-delay', '');
    await p.page.fill('#push-count', '3');
    await p.page.click('#push-send');
    await waitFor(async () => /^Sent 3 messages/.test(await text(p, '#push-result')), 'sent ×3');
    assert.equal(t.callsOf('push.batch')[0].args.messages.length, 3);

    // A ×N the queue refuses part-way: what was sent is said, in red, with why the rest was not.
    t.failNth.set('push.batch', { n: 2, error: new QuaysideError('queue_full', 'queue "orders" is full') });
    await p.page.fill('#push-count', '700');
    await p.page.click('#push-send');
    await waitFor(async () => /^Sent 500 of 700 messages, then not sent: queue "orders" is full$/.test(await text(p, '#push-result')), 'partly sent');
    assert.equal(await p.page.getAttribute('#push-result', 'class'), 'error-text');
  });

  it('dead letters: replay selected, discard selected (confirmed on the host), purge all', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    const answered = trackAnswers(p);
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    assert.equal(await rowCount(p, '#dead-rows'), 12);
    assert.match(await text(p, '#dead-rows'), /PaymentDeclined/);
    const ids = await p.page.locator('#dead-rows tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-id')!));
    await p.page.check(`#dead-rows tr[data-id="${ids[0]}"] input`);
    await p.page.check(`#dead-rows tr[data-id="${ids[3]}"] input`);
    assert.equal(await text(p, '#dead-replay-selected'), 'Replay selected (2)');
    await p.page.click(`#dead-rows tr[data-id="${ids[5]}"] td.error-col`);
    await waitFor(async () => (await p.page.locator('#dead-detail .detail-id').count()) > 0, 'dead detail');
    await shot(p, 'dead-letters');

    await p.page.click('#dead-replay-selected');
    await waitFor(async () => (await text(p, '#toast')) === 'Replayed 2 messages.', 'replayed toast');
    assert.deepEqual(lastRequest(p, 'dead.replay')!.args, { ids: [ids[0], ids[3]] });
    assert.deepEqual(t.callsOf('dead.replay')[0].args.ids, [ids[0], ids[3]]);
    await waitFor(async () => (await rowCount(p, '#dead-rows')) === 10, 'list refreshed');
    assert.equal(await text(p, '#dead-replay-selected'), 'Replay selected');

    // Discard: the host asks first; "no" purges nothing.
    p.ui.answer = false;
    await p.page.check(`#dead-rows tr[data-id="${ids[1]}"] input`);
    await p.page.click('#dead-discard-selected');
    await waitFor(() => p.ui.confirms.length === 1, 'confirmation asked');
    assert.match(p.ui.confirms[0].message, /Discard 1 dead letter from shop\/orders\?/);
    // The host has answered the declined request: anything it was going to purge, it has by now.
    const declined = lastRequest(p, 'dead.purge')!;
    await waitFor(() => answered.has(declined.requestId), 'the declined discard answered');
    assert.equal(t.callsOf('dead.purge').length, 0);
    p.ui.answer = true;
    await p.page.click('#dead-discard-selected');
    await waitFor(async () => (await text(p, '#toast')) === 'Discarded 1 dead letter.', 'discarded');
    assert.deepEqual(t.callsOf('dead.purge')[0].args.ids, [ids[1]]);

    await p.page.click('#dead-purge-all');
    await waitFor(async () => (await text(p, '#toast')) === 'Purged 9 dead letters.', 'purged all');
    assert.match(p.ui.confirms.at(-1)!.message, /Purge all 9 dead letters of shop\/orders\?/);
    await waitFor(async () => p.page.isVisible('#dead-empty'), 'empty dead list');
    assert.equal(await p.page.isDisabled('#dead-purge-all'), true);
  });

  it('replay all asks first and shows progress', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    await p.page.click('#dead-replay-all');
    await waitFor(async () => (await text(p, '#toast')) === 'Replayed 12 messages.', 'replayed all');
    assert.deepEqual(lastRequest(p, 'dead.replay')!.args, { all: true });
    assert.equal(p.ui.confirms.at(-1)!.action, 'Replay All');
    assert.ok(p.ui.progress.some((x) => /Replaying dead letters/.test(x)));
    assert.equal(t.counts().dead, 0);
  });

  for (const [button, done] of [['#dead-purge-all', 'Purged 12 dead letters'], ['#dead-replay-all', 'Replayed 12 messages']] as const) {
    it(`${button.slice(1)} acts on the dead letters its confirmation counted; one dead-lettered while the modal was open is left, and the toast says so`, async () => {
      const t = fixtureQueue();
      p = await openPanel(browser, t);
      await p.page.click('#tab-dead');
      await p.page.waitForSelector('#dead-rows tr');
      let late = '';
      p.ui.whileConfirming = () => {
        late = t.add({ body: { orderId: 'ord-late' }, state: 'dead', attempts: 5, deadAt: t.now, deadReason: 'nack' }).id;
      };
      await p.page.click(button);
      await waitFor(async () => (await text(p, '#toast')) === `${done}; 1 more arrived and was left.`, 'the result with the arrival');
      assert.match(p.ui.confirms[0].message, /all 12 dead letters of shop\/orders\?$/);
      assert.deepEqual(t.messages.filter((m) => m.state === 'dead').map((m) => m.id), [late]);
      await waitFor(async () => (await rowCount(p, '#dead-rows')) === 1, 'the late one listed');
      assert.equal(await p.page.getAttribute('#dead-rows tr', 'data-id'), late);
    });
  }

  it('shows a sub-second oldest wait as "< 1 s" in the header and the metrics, not milliseconds', async () => {
    const t = new FakeTransport();
    t.add({ body: { just: 'pushed' }, enqueuedAt: t.now - 143, visibleAt: t.now - 143 });
    p = await openPanel(browser, t);
    await waitFor(async () => /Oldest wait\s+< 1 s/i.test(await text(p, '#counts')), 'the header');
    await p.page.click('#tab-metrics');
    await waitFor(async () => /Oldest wait\s+< 1 s/i.test(await text(p, '#metric-cards')), 'the card');
    assert.doesNotMatch(await text(p, '#counts'), /\bms\b/);
  });

  it('a narrow panel (beside the side bar) keeps the body column readable: the detail goes under the list', async () => {
    p = await openPanel(browser, fixtureQueue(), { width: 1000, height: 700 });
    await p.page.waitForSelector('#msg-rows tr');
    await p.page.click('#msg-rows tr');
    await p.page.waitForSelector('#detail .detail-id');
    const body = (await p.page.locator('#msg-table th.body-col').boundingBox())!;
    assert.ok(body.width >= 200, `the body column is ${body.width}px wide`);
    const list = (await p.page.locator('#view-messages .list').boundingBox())!;
    const detail = (await p.page.locator('#detail').boundingBox())!;
    assert.ok(detail.y >= list.y + list.height - 1, 'the detail is under the list');
    // Opened from a row, the detail under a page of 50 rows is scrolled into sight.
    const inSight = async () => {
      const r = await p.page.locator('#detail').evaluate((el) => { const b = el.getBoundingClientRect(); return { top: b.top, bottom: b.bottom }; });
      return r.top < 700 && r.bottom > 0;
    };
    await p.page.evaluate(() => window.scrollTo(0, 0));
    await p.page.locator('#msg-rows tr').first().evaluate((el) => el.scrollIntoView());
    assert.equal(await inSight(), false, 'at the top of the list the detail is out of sight');
    await p.page.click('#msg-rows tr >> nth=0');
    await waitFor(inSight, 'the detail scrolled into sight');
    await p.page.evaluate(() => window.scrollTo(0, 0));
    // Wide, they sit side by side.
    await p.page.setViewportSize({ width: 1400, height: 800 });
    await waitFor(async () => (await p.page.locator('#detail').boundingBox())!.y < (await p.page.locator('#view-messages .list').boundingBox())!.y + 50, 'side by side');
  });

  it('draws the 24-hour chart: 48 half-hour steps with the numbers on hover', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-metrics');
    await p.page.waitForSelector('#chart svg');
    assert.equal(await p.page.locator('#chart rect.step').count(), 48);
    assert.equal(await p.page.locator('#chart rect.bar').count(), 48);
    const step = t.lagHistory[33];
    const box = (await p.page.locator('#chart rect.step').nth(33).boundingBox())!;
    await p.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await p.page.waitForSelector('#chart-tip:not(.hidden)');
    assert.equal(await text(p, '#chart-tip .tip-depth'), step.peakDepth.toLocaleString('en-US'));
    const mins = Math.floor(step.maxWaitMs / 60_000);
    const secs = Math.floor(step.maxWaitMs / 1000) % 60;
    assert.equal(await text(p, '#chart-tip .tip-wait'), secs ? `${mins} min ${secs} s` : `${mins} min`);
    const start = new Date(step.start).toISOString().slice(11, 16);
    const end = new Date(step.start + 30 * 60_000).toISOString().slice(11, 16);
    assert.match(await text(p, '#chart-tip .tip-time'), new RegExp(`${start}–${end} UTC$`));
    // Native hover text too (an SVG <title> per step).
    assert.match((await p.page.locator('#chart rect.step').nth(33).locator('title').textContent())!, new RegExp(`peak depth ${step.peakDepth}`));
    assert.match(await text(p, '#metric-cards'), /24 h peak depth\s+\d+/i);
    await shot(p, 'metrics');
    await p.page.mouse.move(5, 5);
    await p.page.waitForSelector('#chart-tip.hidden', { state: 'attached' });
  });

  it('labels the chart in UTC wherever the user is (as the CLI, /metrics and the tree do): the steps are UTC half hours', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t, { timezoneId: 'Asia/Kathmandu' }); // UTC+5:45: local labels would fall on :15 and :45
    await p.page.click('#tab-metrics');
    await p.page.waitForSelector('#chart svg');
    const step = t.lagHistory[33];
    const box = (await p.page.locator('#chart rect.step').nth(33).boundingBox())!;
    await p.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await p.page.waitForSelector('#chart-tip:not(.hidden)');
    const start = new Date(step.start).toISOString().slice(11, 16);
    assert.match(await text(p, '#chart-tip .tip-time'), new RegExp(`${start}–\\d\\d:\\d\\d UTC$`));
    const times = (await p.page.locator('#chart text.axis').allTextContents()).filter((x) => /^\d\d:\d\d$/.test(x));
    assert.ok(times.length >= 4 && times.every((x) => /:(00|30)$/.test(x)), times.join(' '));
    assert.equal(await p.page.locator('#chart text.axis-zone').textContent(), 'UTC');
  });

  it('renders a body with HTML and script as text: nothing runs', async () => {
    const t = new FakeTransport({ namespace: 'x', queue: '<b>q</b>' });
    const evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
    t.add({ id: 'evil1', body: evil, attributes: { '<svg onload=window.__pwned=3>': '<iframe srcdoc="<script>parent.__pwned=4</script>">' }, lastError: '<img src=y onerror=window.__pwned=5>', state: 'dead', deadReason: '<i>nack</i>', deadAt: t.now });
    t.add({ id: 'evil2', body: { html: evil, '</pre><script>window.__pwned=6</script>': 1 } });
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    await p.page.click('#msg-rows tr[data-id=evil1] td.body-col');
    await waitFor(async () => (await p.page.locator('#detail .detail-id').count()) > 0, 'detail');
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    await p.page.click('#dead-rows tr[data-id=evil1] td.body-col');
    await p.page.click('#tab-messages');
    await p.page.click('#msg-rows tr[data-id=evil2] td.body-col');
    await waitFor(async () => (await text(p, '#detail .detail-id')) === 'evil2', 'detail 2');
    // A barrier instead of a sleep: an image of the same bad URL, asked for after everything above
    // was drawn, has failed to load, so an <img src=x onerror> drawn from the bodies would have fired.
    await p.page.evaluate(() => new Promise<void>((resolve) => {
      const img = new Image();
      img.onerror = img.onload = () => resolve();
      img.src = 'x';
    }));
    assert.equal(await p.page.evaluate(() => (window as any).__pwned), undefined);
    assert.equal(await p.page.locator('main img, main script, main iframe, main svg foreignObject, main b, main i').count(), 0);
    assert.ok((await text(p, '#msg-rows')).includes('<img src=x onerror=\\"window.__pwned=1\\"><script>'));
    assert.ok((await text(p, '#detail pre.body-json')).includes('</pre><script>window.__pwned=6</script>'));
    assert.equal(await text(p, '#queue-name'), '<b>q</b>');
    assert.equal(await p.page.title(), '<b>q</b> · x');
  });

  it('live: the queue’s change events refresh the visible page and the counts (debounced)', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t, { debounceMs: 60 });
    await p.page.waitForSelector('#msg-rows tr');
    await waitFor(() => t.subscriptionCount === 1, 'subscribed');
    const peeksBefore = p.requests.filter((r) => r.op === 'peek').length;
    for (let i = 0; i < 20; i++) {
      const m = t.add({ body: { burst: i } });
      t.emitChange('pushed', [m.id]);
    }
    await waitFor(async () => (await text(p, '#msg-range')) === '1–50 of 182', 'refreshed');
    assert.match(await text(p, '#counts'), /Ready\s+157/i);
    // A barrier instead of a sleep: one more change, once its refresh is drawn. Events reach the
    // webview in order and its requests reach the host in order, so every refresh the burst caused
    // was asked for before this one's answer was drawn.
    const m = t.add({ body: { sentinel: true } });
    t.emitChange('pushed', [m.id]);
    await waitFor(async () => (await text(p, '#msg-range')) === '1–50 of 183', 'the sentinel refresh', 10_000);
    const refreshes = p.requests.filter((r) => r.op === 'peek').length - peeksBefore - 1;
    assert.ok(refreshes >= 1 && refreshes <= 2, `20 events → ${refreshes} refreshes`);
  });

  it('live: a queue that stays busy still refreshes while the events keep coming (a throttle, not a debounce)', async () => {
    p = await openPanel(browser, fixtureQueue(), { fakeClock: true });
    await p.page.waitForSelector('#msg-rows tr');
    // Stop the page's clock (installed, it still flows with real time): only runFor moves it, so a
    // slow machine's extra real time between steps cannot fire the throttle more often.
    await p.page.clock.pauseAt(await p.page.evaluate(() => Date.now() + 1000));
    const peeks = async () => (await p.sentOps()).filter((op) => op === 'peek').length;
    const before = await peeks();
    const changed: PanelEvent = { type: 'event', event: 'changed', kinds: ['pushed'], ids: [], counts: null, at: 0 };
    // Two seconds of a busy queue: a change every 100 ms (the host sends at most one per 200 ms).
    const during: number[] = [];
    for (let i = 0; i < 20; i++) {
      await p.deliver(changed);
      await p.page.clock.runFor(100);
      during.push((await peeks()) - before);
    }
    assert.ok(during[5] >= 1, `refreshed within the first 600 ms of the stream (${during.join(',')})`);
    assert.ok(during[19] >= 5 && during[19] <= 8, `about one refresh per 300 ms, not one per event: ${during[19]}`);
  });

  for (const mode of ['virtual', 'system'] as const) {
    it(`times count from the emulator's ${mode} clock: ${mode === 'virtual' ? 'still between advances, moved by one' : 'running with real time'}`, async () => {
      const t = new FakeTransport();
      t.clockMode = mode;
      // Half a second to spare: Playwright's page clock still flows a little between steps.
      t.add({ id: 'later', body: { n: 1 }, state: 'delayed', enqueuedAt: t.now, visibleAt: t.now + 4_500 });
      p = await openPanel(browser, t, { fakeClock: true });
      const when = () => p.page.locator('#msg-rows tr[data-id="later"]').innerText();
      await waitFor(async () => /visible in 4 s/.test(await when()), `the delayed message: ${await when().catch(() => 'none')}`);
      // Three seconds of real time, then a refresh (a change) re-renders the times.
      await p.page.clock.runFor(3_000);
      await p.deliver({ type: 'event', event: 'changed', kinds: ['pushed'], ids: [], counts: null, at: 0 });
      await p.page.clock.runFor(400);
      if (mode === 'system') {
        // At least the three seconds run off (the page clock flows a little more under load).
        await waitFor(async () => /visible (in [01] s|now|\d+ s ago)/.test(await when()), 'real time to count');
        return;
      }
      await waitFor(async () => p.requests.filter((r) => r.op === 'peek').length >= 2, 'the refresh');
      assert.match(await when(), /visible in 4 s/, 'real time is no virtual time');
      // As the host forwards the emulator's clock event (panel-handler.test.ts checks that part).
      t.now += 2_000;
      await p.deliver({ type: 'event', event: 'clock', now: t.now });
      await p.page.clock.runFor(400);
      await waitFor(async () => /visible in 2 s/.test(await when()), 'the advanced clock');
    });
  }

  for (const mode of ['system', 'virtual'] as const) {
    it(`the oldest wait grows with the emulator's ${mode} clock while nothing changes (a backlog sends no events)`, async () => {
      const t = new FakeTransport();
      t.clockMode = mode;
      t.add({ id: 'old', body: { n: 1 }, enqueuedAt: t.now - 3_000, visibleAt: t.now - 3_000 });
      p = await openPanel(browser, t, { fakeClock: true });
      const header = () => text(p, '#counts');
      await waitFor(async () => /Oldest wait\s+3 s/i.test(await header()), `the wait at open: ${await header()}`);
      await p.page.clock.runFor(10_000);
      if (mode === 'system') {
        // Ten seconds on (a little more: the page clock flows between steps), with no event at all.
        await waitFor(async () => /Oldest wait\s+1[3-5] s/i.test(await header()), `the wait 10 s later: ${await header()}`);
        await waitFor(async () => /\b1[3-5] s ago/.test(await text(p, '#msg-rows tr[data-id="old"]')), 'the row\'s enqueued time runs too');
        // The card reads the stats afresh, from an emulator whose clock ran on as well.
        t.now += 10_000;
        await p.page.click('#tab-metrics');
        await waitFor(async () => /Oldest wait\s+1[3-6] s/i.test(await text(p, '#metric-cards')), `the card too: ${await text(p, '#metric-cards')}`);
        // The 24 hours' longest wait is never shorter than the one running now.
        await p.page.clock.runFor(60_000);
        await waitFor(async () => /24 h longest wait\s+1 min 1[3-9] s/i.test(await text(p, '#metric-cards')), `the longest wait runs with it: ${await text(p, '#metric-cards')}`);
        return;
      }
      assert.match(await header(), /Oldest wait\s+3 s/i, 'a virtual clock stands still between advances');
      assert.match(await text(p, '#msg-rows tr[data-id="old"]'), /\b3 s ago/, 'and so do the rows\' times');
      t.now += 60_000;
      await p.deliver({ type: 'event', event: 'clock', now: t.now });
      await waitFor(async () => /Oldest wait\s+1 min 3 s/i.test(await header()), `after an advance of a minute: ${await header()}`);
    });
  }

  it('is told when the emulator stops (banner) and when it runs again (reloads the queue)', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    p.handler.setConnection(false, 'the emulator is stopping');
    await p.page.waitForSelector('#banner:not(.hidden)');
    assert.equal(await text(p, '#banner-text'), 'Emulator not reachable — the emulator is stopping');
    // Told again when the reason changes, so the banner does not keep the first one.
    p.handler.setConnection(false, 'the emulator is stopped');
    await waitFor(async () => (await text(p, '#banner-text')) === 'Emulator not reachable — the emulator is stopped', 'the banner updated');
    assert.equal(await p.page.getAttribute('#live', 'class'), 'live off');
    const inits = p.requests.filter((r) => r.op === 'init').length;
    p.handler.setConnection(true);
    await p.page.waitForSelector('#banner.hidden', { state: 'attached' });
    await waitFor(() => p.requests.filter((r) => r.op === 'init').length === inits + 1, 'the queue reloaded');
  });

  it('a button pressed while the emulator is down says why nothing happened (background reloads stay quiet under the banner)', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    t.down = true;
    p.handler.setConnection(false, 'the emulator is stopped');
    await p.page.waitForSelector('#banner:not(.hidden)');
    await p.page.click('#dead-replay-all');
    // The lifecycle's reason, as the banner gives it, not the transport's bare "not running".
    await waitFor(async () => (await text(p, '#toast')) === 'Replay failed: the emulator is stopped', `the toast: ${await text(p, '#toast')}`);
  });

  it('opens on the tab the host asks for: before it loads (with init) and while it shows (an event)', async () => {
    const t = fixtureQueue();
    // The emulator's own entry (quayside.json at start) has no token id, and is not "before token ids".
    t.audit.unshift({ id: 3, at: t.now - 60_000, token: 'system', tokenId: null, namespace: 'shop', queue: 'orders', action: 'expire', count: 2, detail: 'maxMessageAgeMs 86400000 → 3600000' });
    p = await openPanel(browser, t, { beforeLoad: (h) => h.showTab('audit', false) });
    await p.page.waitForSelector('#audit-rows tr');
    assert.equal(await p.page.locator('#audit-rows tr').first().locator('td').nth(3).getAttribute('title'), 'the emulator itself (quayside.json at start, or an in-process engine call)');
    assert.equal(await p.page.locator('#audit-rows tr').nth(1).locator('td').nth(3).getAttribute('title'), 'token tok_2f9c1e7a0b6d');
    assert.equal(await p.page.isVisible('#view-audit'), true);
    assert.equal(await p.page.getAttribute('#tab-audit', 'aria-selected'), 'true');
    p.handler.showTab('metrics', true);
    await p.page.waitForSelector('#chart svg');
    assert.equal(await p.page.isVisible('#view-metrics'), true);
    // Asked for once: a later reload (a hidden panel coming back) keeps the tab it was on.
    assert.equal((await p.handler.dispatch('init', {})).tab, undefined);
    assert.equal((await p.page.evaluate(() => (window as any).__state)).tab, 'metrics', 'the tab is saved for a reload');
  });

  it('a deleted queue stays deleted when a late change arrives; only its creation brings it back', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    const inits = async () => (await p.sentOps()).filter((op) => op === 'init').length;
    const before = await inits();
    await p.deliver({ type: 'event', event: 'deleted' });
    // The last push before the delete, sent late (delivered synchronously: anything it starts is sent by now).
    await p.deliver({ type: 'event', event: 'changed', kinds: ['pushed'], ids: ['m1'], counts: null, at: 0 });
    assert.equal(await text(p, '#banner-text'), 'This queue was deleted.');
    assert.equal(await p.page.locator('#banner-retry.hidden').count(), 1, 'no Retry: there is nothing to retry');
    assert.equal(await inits(), before, 'not taken for a recreation');
    await p.deliver({ type: 'event', event: 'changed', kinds: ['queue_created'], ids: [], counts: null, at: 0 });
    assert.equal(await inits(), before + 1);
    await p.page.waitForSelector('#banner.hidden', { state: 'attached' });
  });

  it('a dead letter with no error draws no error mark, and a leased message says when it became visible, not "visible since"', async () => {
    const t = new FakeTransport({ namespace: 'shop', queue: 'plain' });
    const now = Date.now();
    t.add({ body: { n: 1 }, state: 'dead', attempts: 5, enqueuedAt: now - 60_000, visibleAt: now - 50_000, deadAt: now - 40_000, deadReason: 'nack' });
    t.add({ body: { n: 2 }, state: 'leased', attempts: 1, enqueuedAt: now - 60_000, visibleAt: now - 60_000, leaseUntil: now + 30_000 });
    p = await openPanel(browser, t);
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    assert.equal(await p.page.$eval('#dead-rows td.error-col', (el) => getComputedStyle(el).boxShadow), 'none');
    await p.page.click('#tab-messages');
    await p.page.click('#msg-rows tr:has(.badge.state-leased)');
    await waitFor(async () => /Lease ends/.test(await text(p, '#detail')), 'the leased detail');
    assert.match(await text(p, '#detail'), /Became visible/);
    assert.doesNotMatch(await text(p, '#detail'), /Visible since/);
  });

  it('a page rebuilt after its queue was deleted while hidden says it was deleted, and names dead letters as its dialect does', async () => {
    const t = fixtureQueue();
    t.dialect = 'env';
    p = await openPanel(browser, t, {
      state: { ref: { namespace: t.namespace, queue: t.queue }, dialect: 'env' },
      beforeLoad: async (handler) => {
        await handler.dispatch('init', {}); // the page before this one read the queue
        await waitFor(() => t.subscriptionCount === 1, 'subscribed');
        t.emitChange('queue_deleted'); // posted while hidden: no page got it
        t.failNext.set('queue.get', new QuaysideError('not_found', `queue ${t.queue} not found`));
      },
      loadedWhen: '#banner:not(.hidden)', // a queue that is gone has no counts to show
    });
    assert.equal(await text(p, '#banner-text'), 'This queue was deleted.');
    assert.match(await text(p, '#tab-dead'), /^Failed/);
    assert.match(await text(p, '#state-filter .chip.state-dead'), /^Failed/);
    // Made again: the page comes back as for a queue deleted in view.
    t.emitChange('queue_created');
    await p.page.waitForSelector('#banner.hidden', { state: 'attached' });
    await waitFor(async () => (await rowCount(p, '#msg-rows')) > 0, 'its messages');
  });

  it('deleted in view, then another emulator without the queue takes over: "not found", as for any emulator without it', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    await waitFor(() => t.subscriptionCount === 1, 'subscribed');
    t.emitChange('queue_deleted');
    await waitFor(async () => (await text(p, '#banner-text')) === 'This queue was deleted.', 'the deleted banner');
    p.handler.setConnection(false, 'the emulator is starting');
    t.failNext.set('queue.get', new QuaysideError('not_found', `queue ${t.queue} not found`));
    p.handler.setConnection(true);
    await waitFor(async () => (await text(p, '#banner-text')) === `Queue ${t.queue} not found in ${t.namespace}.`, 'the not-found banner');
  });

  it('back on an emulator without the queue (another one took over), the panel shows nothing of the last one; back with it, all again', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-audit');
    await p.page.waitForSelector('#audit-rows tr');
    await p.page.click('#tab-messages');
    await p.page.waitForSelector('#msg-rows tr');
    await p.page.click('#msg-rows tr');
    await p.page.waitForSelector('#detail .detail-id');
    p.handler.setConnection(false, 'the emulator is starting');
    t.failNext.set('queue.get', new QuaysideError('not_found', `queue ${t.queue} not found`));
    p.handler.setConnection(true);
    await waitFor(async () => (await text(p, '#banner-text')) === `Queue ${t.queue} not found in ${t.namespace}.`, 'the not-found banner');
    assert.equal(await rowCount(p, '#msg-rows'), 0, 'no rows of the other emulator');
    assert.equal(await text(p, '#counts'), '', 'no counts of the other emulator');
    assert.match(await text(p, '#detail'), /No message selected/);
    assert.equal(await rowCount(p, '#audit-rows'), 0, 'no audit log of the other emulator');
    assert.equal(await p.page.locator('#state-filter .chip-count').count(), 0, 'no counts on the state chips either');
    const toasts = p.requests.length;
    await p.page.click('#tab-dead');
    await p.page.click('#tab-messages');
    assert.equal(p.requests.length, toasts, 'a tab of a queue that is gone loads nothing (and toasts nothing)');
    assert.equal(await p.page.getAttribute('#live', 'class'), 'live off');
    p.handler.setConnection(false, 'the emulator is starting');
    p.handler.setConnection(true);
    await p.page.waitForSelector('#banner.hidden', { state: 'attached' });
    await waitFor(async () => (await rowCount(p, '#msg-rows')) > 0, 'its messages again');
  });

  it('reads the queue again when its settings change (the push form checks the delay against the new limit)', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    const inits = async () => (await p.sentOps()).filter((op) => op === 'init').length;
    const before = await inits();
    await p.deliver({ type: 'event', event: 'changed', kinds: ['queue_updated'], ids: [], counts: null, at: 0 });
    await waitFor(async () => (await inits()) === before + 1, 'the queue read again');
  });

  it('reads the queue again after a gap in its events (changes dropped while the connection fell behind)', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    await waitFor(() => t.subscriptionCount === 1, 'subscribed');
    const inits = async () => (await p.sentOps()).filter((op) => op === 'init').length;
    const before = await inits();
    t.emitGap();
    await waitFor(async () => (await inits()) === before + 1, 'the queue read again');
  });

  it('clears the "deleted" banner when the queue is created again', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    await waitFor(() => t.subscriptionCount === 1, 'subscribed');
    t.emitChange('queue_deleted');
    await p.page.waitForSelector('#banner:not(.hidden)');
    assert.equal(await text(p, '#banner-text'), 'This queue was deleted.');
    assert.equal(await p.page.getAttribute('#live', 'class'), 'live off');
    t.emitChange('queue_created');
    await p.page.waitForSelector('#banner.hidden', { state: 'attached' });
    await waitFor(async () => (await p.page.locator('#banner-retry.hidden').count()) === 0, 'the retry button back for next time');
    assert.equal(await p.page.getAttribute('#live', 'class'), 'live', 'live again');
  });

  it('an env queue calls its dead letters "Failed", as the tree does', async () => {
    const t = fixtureQueue();
    t.dialect = 'env';
    p = await openPanel(browser, t);
    await waitFor(async () => (await text(p, '#tab-dead')).startsWith('Failed'), 'the Failed tab');
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    assert.equal(await text(p, '#dead-detail .placeholder'), 'Select a failed message to see why it failed.');
    assert.equal(await p.page.textContent('#dead-since-head'), 'Failed since');
    await p.page.click('#dead-rows tr');
    await waitFor(async () => /Failed since/.test(await text(p, '#dead-detail')), 'the detail');
    assert.match(await text(p, '#dead-detail'), /Failed reason/);
    assert.doesNotMatch(await text(p, '#dead-detail'), /\bDead\b/);
    // The Messages tab: its state chip, badges and times.
    await p.page.click('#tab-messages');
    // Only the failed ones (the others' chips off), so they are on the first page.
    for (const s of ['ready', 'delayed', 'leased']) await p.page.click(`#state-filter .chip.state-${s}`);
    await waitFor(async () => (await p.page.locator('#msg-rows .badge.state-dead').count()) > 0, 'failed messages in the list');
    assert.match(await text(p, '#state-filter .chip.state-dead'), /^Failed/);
    assert.equal(await p.page.textContent('#msg-rows .badge.state-dead >> nth=0'), 'Failed');
    assert.doesNotMatch(await text(p, '#msg-rows'), /\bdead\b/i);
    await p.page.click('#tab-dead');
    // The header and the metrics say it too.
    assert.equal(await p.page.textContent('#counts .count.dead .label'), 'Failed');
    assert.equal(await p.page.getAttribute('#counts .count.dead', 'title'), 'Their retries ran out');
    await p.page.click('#dead-purge-all');
    await waitFor(async () => (await text(p, '#toast')) === 'Purged 12 failed messages.', 'purged');
    assert.equal(p.ui.confirms.at(-1)?.message, 'Purge all 12 failed messages of shop/orders?');
    assert.equal(await text(p, '#dead-empty'), 'No failed messages. Messages land here when their retries run out.');
    await p.page.click('#tab-metrics');
    await waitFor(async () => (await p.page.locator('#metric-cards .card.dead .card-label').count()) === 1, 'the cards');
    assert.equal(await p.page.textContent('#metric-cards .card.dead .card-label'), 'Failed');
    assert.equal(await p.page.textContent('#metric-cards .card.dead .card-sub'), 'their retries ran out');
    // The audit log names the purge in the same words.
    await p.page.click('#tab-audit');
    await waitFor(async () => (await p.page.locator('#audit-rows .action-purge_dead').count()) === 2, 'the audit entries (the fixture\'s and this purge)');
    assert.deepEqual(await p.page.locator('#audit-rows .action-purge_dead').allTextContents(), ['Purge failed messages', 'Purge failed messages']);
  });

  it('a dead letter that is gone keeps saying so when the queue reloads', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-dead');
    await p.page.waitForSelector('#dead-rows tr');
    const id = (await p.page.getAttribute('#dead-rows tr:first-child', 'data-id'))!;
    t.messages = t.messages.filter((m) => m.id !== id); // discarded elsewhere
    await p.page.click('#dead-rows tr:first-child td.body-col');
    const gone = `Message ${id} is gone (acked, replayed or purged).`;
    await waitFor(async () => (await text(p, '#dead-detail')) === gone, 'the detail says it is gone');
    await p.page.click('#tab-messages');
    // The emulator comes back: the queue reloads (and, on the Messages tab, the dead letters do not).
    const sent = (await p.sentOps()).length;
    p.handler.setConnection(false, 'the emulator is stopped');
    p.handler.setConnection(true);
    await waitFor(async () => (await p.sentOps()).slice(sent).join() === 'init,peek', 'the reload');
    assert.equal(await p.page.evaluate(() => document.getElementById('dead-detail')!.textContent), gone);
  });

  it('audit log lists replays and purges', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.click('#tab-audit');
    await p.page.waitForSelector('#audit-rows tr');
    assert.equal(await rowCount(p, '#audit-rows'), 2);
    const first = await text(p, '#audit-rows tr:first-child');
    assert.match(first, /Purge dead letters\s+3/);
    await t.request('dead.replay', { namespace: 'shop', queue: 'orders', max: 4 });
    await p.page.click('#audit-refresh');
    await waitFor(async () => (await rowCount(p, '#audit-rows')) === 3, 'new entry');
    assert.match(await text(p, '#audit-rows tr:first-child'), /Replay\s+4/);
    await shot(p, 'audit');
  });

  it('exports selected messages (JSON) and everything matching the filter (NDJSON)', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    await p.page.check('#msg-rows tr:nth-child(2) input');
    await p.page.check('#msg-rows tr:nth-child(4) input');
    await p.page.click('#msg-export-selected');
    await waitFor(() => p.ui.saved.length === 1, 'saved');
    const arr = JSON.parse(p.ui.saved[0].text);
    assert.deepEqual(arr.map((m: any) => m.id), [t.messages[1].id, t.messages[3].id]);
    // The file is written (host side) a moment before the webview hears back.
    await waitFor(async () => /Exported 2 messages to \/work\/exports\/shop-orders-.*\.json/.test(await text(p, '#toast')), 'the export toast');
    await p.page.selectOption('#msg-export-format', 'ndjson');
    await p.page.click('#state-filter [data-state=ready]');
    await p.page.click('#msg-export-all');
    await waitFor(() => p.ui.saved.length === 2, 'saved all');
    assert.equal(p.ui.saved[1].text.trimEnd().split('\n').length, 25);
    assert.match(p.ui.saved[1].name, /\.ndjson$/);
  });

  it('stays fast at 100,000 messages: only one page is fetched and drawn', async () => {
    const t = new FakeTransport({ namespace: 'load', queue: 'big' });
    for (let i = 0; i < 100_000; i++) t.add({ body: { i, payload: 'x'.repeat(40) } });
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    assert.equal(await text(p, '#msg-range'), '1–50 of 100,000');
    assert.equal(await rowCount(p), 50);
    // What keeps it fast, asserted directly rather than as a wall-clock budget (which a loaded
    // machine breaks): a page turn fetches one page of 50, and draws 50 rows.
    const peeksBefore = t.callsOf('peek').length;
    await p.page.click('#msg-next');
    await waitFor(async () => (await text(p, '#msg-range')) === '51–100 of 100,000', 'page 2', 10_000);
    const turn = t.callsOf('peek').slice(peeksBefore);
    assert.equal(turn.length, 1, 'one peek for the page turn');
    assert.equal(turn[0].args.limit, 50);
    assert.ok(turn[0].args.cursor, 'from the cursor, not from the start');
    assert.equal(await rowCount(p), 50);
    for (const c of t.callsOf('peek')) assert.ok(c.args.limit <= 200);
  });

  it('screenshot: the message list with a message’s detail', async () => {
    const t = fixtureQueue({ mixed: true });
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    const m = t.messages.find((x) => x.state === 'ready' && x.attributes)!;
    await p.page.click(`#msg-rows tr[data-id="${m.id}"] td.body-col`);
    await waitFor(async () => (await text(p, '#detail .detail-id')) === m.id, 'detail');
    await p.page.check('#msg-rows tr:nth-child(14) input');
    await p.page.check('#msg-rows tr:nth-child(15) input');
    await shot(p, 'messages');
  });

  it('restores its tab and filters from the saved webview state', async () => {
    p = await openPanel(browser, fixtureQueue(), { state: { ref: { namespace: 'shop', queue: 'orders' }, tab: 'dead', states: ['dead'], search: 'ada', pageSize: 25 } });
    await p.page.waitForSelector('#dead-rows tr');
    assert.equal(await p.page.isVisible('#view-dead'), true);
    assert.equal(await p.page.inputValue('#search'), 'ada');
    assert.equal(await p.page.inputValue('#msg-page-size'), '25');
  });

  it('shows a banner when the emulator is unreachable, and recovers', async () => {
    const t = fixtureQueue();
    p = await openPanel(browser, t);
    await p.page.waitForSelector('#msg-rows tr');
    t.failNext.set('peek', new QuaysideError('unavailable', 'cannot reach the emulator at ws://127.0.0.1:7433'));
    await p.page.click('#msg-next');
    await p.page.waitForSelector('#banner:not(.hidden)');
    assert.match(await text(p, '#banner-text'), /Emulator not reachable/);
    const inits = async () => (await p.sentOps()).filter((op) => op === 'init').length;
    const before = await inits();
    await p.page.click('#banner-retry');
    await p.page.waitForSelector('#banner.hidden', { state: 'attached' });
    await waitFor(async () => (await p.sentOps()).lastIndexOf('peek') > (await p.sentOps()).lastIndexOf('init'), 'the list reloaded');
    // The host says `up` just before it answers that init: answering it with another init would load twice.
    assert.equal((await inits()) - before, 1, 'one init for one Retry');
  });

  it('works against the real emulator: list, detail, push, dead-letter replay, chart', async () => {
    const emu = await startEmulator({ clock: 'virtual' });
    const conn = new Connection({ url: emu.url, token: emu.token, client: 'panel-webview-test' });
    try {
      const ref = { namespace: 'shop', queue: 'emails' };
      await conn.request('queue.create', { ...ref, dialect: 'cache' });
      for (let i = 0; i < 30; i++) await conn.request('push', { ...ref, body: { to: `user${i}@example.com`, template: 'welcome' }, attributes: { n: i } });
      const pulled = await conn.request('pull', { ...ref, max: 3 });
      for (const d of pulled.messages) await conn.request('nack', { receipt: d.receipt, dead: true, error: 'SMTP 550 mailbox unavailable' });
      p = await openPanel(browser, conn, { ref, debounceMs: 30 });
      await p.page.waitForSelector('#msg-rows tr');
      assert.equal(await text(p, '#msg-range'), '1–30 of 30');
      assert.match(await text(p, '#counts'), /Ready\s+27[\s\S]*Dead\s+3/i);
      await p.page.click('#msg-rows tr:last-child td.body-col');
      await p.page.waitForSelector('#detail pre.body-json');
      assert.match(await text(p, '#detail pre.body-json'), /"template": "welcome"/);

      await p.page.click('#tab-dead');
      await waitFor(async () => (await rowCount(p, '#dead-rows')) === 3, 'dead letters');
      assert.match(await text(p, '#dead-rows'), /SMTP 550/);
      await p.page.check('#dead-rows tr:first-child input');
      await p.page.click('#dead-replay-selected');
      await waitFor(async () => (await text(p, '#toast')) === 'Replayed 1 message.', 'replayed');
      await waitFor(async () => (await rowCount(p, '#dead-rows')) === 2, 'refreshed');

      await p.page.click('#tab-push');
      await p.page.fill('#push-body', '{"to": "new@example.com"}');
      await p.page.fill('#push-count', '2');
      await p.page.click('#push-send');
      await waitFor(async () => /^Sent 2 messages/.test(await text(p, '#push-result')), 'pushed');
      // The change events update the header counts live.
      await waitFor(async () => /Ready\s+30/i.test(await text(p, '#counts')), 'live counts');

      await p.page.click('#tab-metrics');
      await p.page.waitForSelector('#chart svg');
      assert.equal(await p.page.locator('#chart rect.step').count(), 48);
      assert.deepEqual(await p.cspViolations(), []);
      assert.deepEqual(p.errors, []);
    } finally {
      await p?.close();
      p = undefined as never;
      await conn.close();
      await emu.close();
    }
  });
});

describe('queue panel stylesheet', () => {
  const css = readFileSync(path.join(ROOT, 'media/panel/panel.css'), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
  /** The panel's own variables and what they stand for (`--orange` → `--vscode-charts-orange`). */
  const vars = new Map([...css.matchAll(/(--[\w-]+):\s*([^;]+);/g)].map((m) => [m[1], m[2]]));
  const resolves = (value: string, seen = new Set<string>()): string =>
    value.replace(/var\((--[\w-]+)[^)]*\)?/g, (whole, name: string) => (vars.has(name) && !seen.has(name) ? resolves(vars.get(name)!, new Set([...seen, name])) : whole));

  it('colours no text with a chart colour (translucent or too light in several themes); they only mark', () => {
    const offenders = [...css.matchAll(/([^{}]+)\{([^}]*)\}/g)].flatMap(([, selector, body]) =>
      [...body.matchAll(/(?:^|;)\s*(color|fill)\s*:\s*([^;]+)/g)]
        .filter(([, , value]) => /charts-/.test(resolves(value)))
        .map(([, prop, value]) => `${selector.trim()} { ${prop}: ${value.trim()} }`),
    );
    // The chart's bars and dots are shapes, not text.
    assert.deepEqual(offenders.filter((o) => !/^\.chart-svg (\.wait-dots circle|\.bar) /.test(o)), []);
  });

  it('draws the buttons\' focus ring outside them, where a primary button of the focus colour cannot hide it', () => {
    const rule = /button:focus-visible\s*\{([^}]*)\}/.exec(css);
    assert.ok(rule, 'a button focus rule');
    const offset = /outline-offset:\s*(-?\d+)px/.exec(rule[1]);
    assert.ok(offset && Number(offset[1]) > 0, `outline-offset ${offset?.[1]}`);
  });

  it('draws the theme\'s button border (Dark Modern\'s secondary buttons have no background, only a border)', () => {
    const rule = /(?:^|\})\s*button\s*\{([^}]*)\}/.exec(css);
    assert.ok(rule, 'a button rule');
    assert.match(rule[1], /border:\s*1px solid var\(--vscode-button-border\b/);
  });
});

