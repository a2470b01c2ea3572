import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { checkAttributes, checkJson, delayProblem, lineColumn, typedDelayProblem, validatePushForm } from '../../../src/panel/validate';
import { contentSecurityPolicy, escapeHtml, renderPanelHtml } from '../../../src/panel/html';

describe('panel push-form validation and HTML shell', () => {
  it('checkJson says where the JSON is wrong', () => {
    assert.deepEqual(checkJson('{"a": [1, 2]}'), { ok: true, value: { a: [1, 2] } });
    const bad = checkJson('{\n  "a": 1,\n  "b": }');
    assert.equal(bad.ok, false);
    assert.equal(bad.line, 3);
    assert.match(bad.error!, /line 3, column \d+/);
    assert.equal(checkJson('   ').ok, false);
    assert.equal(checkJson('{"a":').ok, false);
    assert.deepEqual(lineColumn('ab\ncd', 4), { line: 2, column: 2 });
    assert.equal(checkJson('{"a": 1} x').error, "Expected the end of the JSON (only one value is allowed) but found 'x' (line 1, column 10)");
    assert.equal(checkJson("{'a': 1}").error, "Expected a property name in double quotes but found ''' (line 1, column 2)");
    assert.match(checkJson('"abc').error!, /Unterminated string/);
    assert.match(checkJson('[1,]').error!, /Expected a value/);
  });

  it('validatePushForm turns the form into a push plan', () => {
    const v = validatePushForm({ body: '[1]', delaySeconds: '2', dedupeKey: 'k', attributes: '{"x":1}', count: '5' });
    assert.deepEqual(v, { ok: true, plan: { body: [1], delayMs: 2000, dedupeKey: 'k', attributes: { x: 1 }, count: 5 } });
    // A key goes as typed, spaces and all (the emulator matches keys exactly); spaces alone are refused, as they look like no key.
    assert.equal((validatePushForm({ body: '1', delaySeconds: '', dedupeKey: ' k ', attributes: '', count: '' }) as any).plan.dedupeKey, ' k ');
    assert.equal((validatePushForm({ body: '1', delaySeconds: '', dedupeKey: '   ', attributes: '', count: '' }) as any).errors.dedupeKey, 'Dedupe key is only spaces: type a key, or leave the field empty for none');
    const w = validatePushForm({ body: 'nope', delaySeconds: '-3', dedupeKey: '', attributes: '"s"', count: 'x' });
    assert.equal(w.ok, false);
    assert.deepEqual(Object.keys((w as any).errors).sort(), ['attributes', 'body', 'count', 'delaySeconds']);
    // A delay past the queue's maxDelayMs (cache: 7 days) is caught in the form, in its seconds, not by the emulator in ms.
    const form = { body: '1', delaySeconds: '99999999', dedupeKey: '', attributes: '', count: '' };
    const far = validatePushForm(form, { maxDelayMs: 7 * 86_400_000 });
    assert.equal(far.ok, false);
    assert.equal((far as any).errors.delaySeconds, 'Delay must be at most 604,800 seconds (7 d) on this queue');
    assert.equal(validatePushForm({ ...form, delaySeconds: '604800' }, { maxDelayMs: 7 * 86_400_000 }).ok, true, 'the limit itself is taken');
    assert.equal(validatePushForm(form).ok, true, 'no limit known: the emulator decides');
    for (const odd of ['0x10', '1e3', ' 5s', '-1']) assert.equal(validatePushForm({ ...form, delaySeconds: odd }).ok, false, `${odd} is no number of seconds`);
    assert.deepEqual(validatePushForm({ ...form, delaySeconds: ' 2.5 ' }), { ok: true, plan: { body: 1, delayMs: 2500, count: 1 } });
    assert.equal(delayProblem(691_200_000, 43_200_000), 'Delay must be at most 43,200 seconds (12 h) on this queue');
  });

  it('attributes: one check for the Push tab and the palette, taking what the protocol takes (a JSON object, any JSON values)', () => {
    assert.deepEqual(checkAttributes(''), { ok: true, value: undefined });
    assert.deepEqual(checkAttributes(' {} '), { ok: true, value: undefined });
    assert.deepEqual(checkAttributes('null'), { ok: true, value: undefined });
    // Not only strings: the engine stores any JSON value (emulator/engine/validate.ts optRecord).
    const mixed = '{"source": "vscode", "retries": 3, "urgent": true, "tags": ["a"], "meta": {"k": null}}';
    assert.deepEqual(checkAttributes(mixed), { ok: true, value: { source: 'vscode', retries: 3, urgent: true, tags: ['a'], meta: { k: null } } });
    for (const notObject of ['["a"]', '"s"', '3', 'true']) {
      const r = checkAttributes(notObject);
      assert.ok(!r.ok && /must be a JSON object/.test(r.error), notObject);
    }
    const bad = checkAttributes('{\n  n: 1}');
    assert.ok(!bad.ok && /line 2, column 3/.test(bad.error), 'says where the JSON breaks');
    // The Push tab's form goes through the same check, with the same words.
    const form = { body: '1', delaySeconds: '', dedupeKey: '', attributes: '', count: '' };
    assert.deepEqual(validatePushForm({ ...form, attributes: mixed }), { ok: true, plan: { body: 1, count: 1, attributes: JSON.parse(mixed) } });
    const refused = validatePushForm({ ...form, attributes: '[1]' });
    assert.deepEqual(refused, { ok: false, errors: { attributes: (checkAttributes('[1]') as { error: string }).error } });
  });

  it('the shell has a strict CSP with a nonce and escapes the queue name', () => {
    const html = renderPanelHtml({ cspSource: 'https://x.test', scriptUri: 'https://x.test/p.js', styleUri: 'https://x.test/p.css', nonce: 'N0nce', ref: { namespace: 'ns', queue: '<img src=x onerror=alert(1)>' } });
    assert.match(contentSecurityPolicy('https://x.test', 'N0nce'), /script-src 'nonce-N0nce'/);
    assert.ok(html.includes(escapeHtml(contentSecurityPolicy('https://x.test', 'N0nce'))));
    assert.doesNotMatch(contentSecurityPolicy('https://x.test', 'n'), /unsafe-(inline|eval)/);
    assert.match(html, /<script nonce="N0nce" src="https:\/\/x.test\/p.js"><\/script>/);
    assert.doesNotMatch(html, /<img src=x/);
    assert.ok(html.includes(escapeHtml('<img src=x onerror=alert(1)>')));
    const plain = renderPanelHtml({ cspSource: 'https://x.test', scriptUri: 'p.js', styleUri: 'p.css', nonce: 'n', ref: { namespace: 'ns', queue: 'jobs' } });
    assert.doesNotMatch(plain, /\son[a-z]+=/i, 'no inline event handlers');
    assert.doesNotMatch(plain, /<script(?![^>]*\bsrc=)/, 'no inline script');
  });

  it('the webview code never turns data into HTML (no innerHTML, outerHTML, insertAdjacentHTML, document.write, eval)', () => {
    const dir = path.join(__dirname, '../../../src/panel/webview');
    for (const f of readdirSync(dir)) {
      const src = readFileSync(path.join(dir, f), 'utf8');
      assert.doesNotMatch(src, /\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(/, f);
    }
  });
});

describe("the palette's push delay", () => {
  it('needs a unit on a bare number (seconds in the Push tab, ms on the CLI), and keeps to the queue\'s limit', () => {
    assert.equal(typedDelayProblem('', undefined), undefined);
    assert.equal(typedDelayProblem('30', undefined), 'Give a unit: 30s or 30ms');
    assert.equal(typedDelayProblem(' 1.5 ', undefined), 'Give a unit: 1.5s or 1.5ms');
    assert.equal(typedDelayProblem('30s', undefined), undefined);
    assert.equal(typedDelayProblem('1500ms', undefined), undefined);
    assert.match(typedDelayProblem('soon', undefined)!, /A duration such as/);
    assert.match(typedDelayProblem('2h', 3_600_000)!, /at most 3,600 seconds/);
  });
});
