// What the palette's commands show and offer, as plain data: quick-pick items, message documents,
// and which fixes an (old) error toast may still run.
import assert from 'node:assert/strict';
import { NEW_NAMESPACE_LABEL, deadLetterItem, dialectItems, messageItems, messagePickHint, namespaceItems, peekItem, plain } from '../../../src/commands/picks';
import { fixStillApplies } from '../../../src/core/explain';
import { messageText } from '../../../src/core/messageText';
import { attemptsText } from '../../../src/tree/model';
import { FakeTransport } from '../webview/fake-transport';
import { message } from './ext-fakes';

describe('extension: command quick picks and documents', () => {
  const namespaces = [
    { namespace: 'acme:prod', queues: 2 },
    { namespace: 'billing', queues: 1 },
  ];

  it('Create Queue step 1: the namespaces and "New namespace…", nothing extra until something is typed', () => {
    const items = namespaceItems(namespaces, '  ');
    assert.deepEqual(items.map((i) => [i.label, i.description]), [['acme:prod', '2 queues'], ['billing', '1 queue'], [NEW_NAMESPACE_LABEL, undefined]]);
    assert.deepEqual(items.map((i) => i.namespace ?? (i.ask ? 'ask' : '')), ['acme:prod', 'billing', 'ask']);
  });

  it('Create Queue step 1: typed text offers itself (always shown, so the filter cannot empty the list)', () => {
    const [first] = namespaceItems(namespaces, ' acme:staging ');
    assert.deepEqual(first, { label: '$(add) Create namespace "acme:staging"', description: 'new', create: 'acme:staging', alwaysShow: true });
    // An existing name is picked as it is, not created again.
    assert.ok(namespaceItems(namespaces, 'billing').every((i) => i.create === undefined && i.error === undefined));
  });

  it('Create Queue step 1: a typed name is checked as the input box checks it; a bad one cannot be accepted', () => {
    const [first] = namespaceItems(namespaces, 'acme\tstaging');
    assert.equal(first.create, undefined);
    assert.equal(first.error, 'A namespace name must not contain control characters');
    assert.equal(first.alwaysShow, true);
    assert.match(first.label, /Cannot create namespace "acme\tstaging"/);
    // Whatever the emulator takes: a sync tenant with a space, an env project/environment, a backslash.
    for (const ok of ['Acme Corp', 'a/b', 'a\\b']) assert.equal(namespaceItems(namespaces, ok)[0].create, ok);
    assert.match(namespaceItems(namespaces, 'x'.repeat(201))[0].error!, /at most 200 characters/);
  });

  it('text from the emulator shows as text: a $(icon) in a body, a name or an error is escaped', () => {
    assert.equal(plain('$(zap) a $(b)'), '\\$(zap) a \\$(b)');
    assert.equal(peekItem(message('m1', 'ready', '$(flame) hot', { attempts: 1 })).label, '"\\$(flame) hot"');
    assert.match(deadLetterItem(message('m2', 'dead', 1, { attempts: 1, deadReason: 'nack', lastError: 'boom $(x)' })).detail, /boom \\\$\(x\)$/);
    assert.equal(namespaceItems([{ namespace: '$(gear)', queues: 1 }], '')[0].label, '\\$(gear)');
  });

  it('Peek and Replay / Purge pick lists say "1 attempt", as the tree does', () => {
    assert.deepEqual([0, 1, 2].map(attemptsText), ['0 attempts', '1 attempt', '2 attempts']);
    assert.equal(peekItem(message('m1', 'ready', { a: 1 }, { attempts: 1 })).description, 'ready · 1 attempt');
    assert.equal(peekItem(message('m2', 'dead', 'x', { attempts: 5, deadReason: 'nack' })).description, 'dead · 5 attempts · nack');
    // An env queue's failed message says so, as its tree row does.
    assert.equal(peekItem(message('m3', 'dead', 'x', { attempts: 4, deadReason: 'retry' }), 'env').description, 'failed · 4 attempts · retry');
    assert.equal(messageItems([message('m3', 'dead', 'x', { attempts: 4, deadReason: 'retry' })], '', 'env')[0].description, 'failed · 4 attempts · retry');
    const d = deadLetterItem(message('m3', 'dead', { a: 1 }, { attempts: 1, deadReason: 'timeout', lastError: 'boom' }));
    assert.deepEqual(d, { label: '{"a":1}', description: 'timeout · 1 attempt', detail: 'm3 · boom', id: 'm3' });
  });

  it('Show Message / Peek pick: the page peeked, and a typed message id not on it offered first (any message opens by its id)', () => {
    const page = [message('m_1', 'ready', { a: 1 }, { attempts: 0 }), message('m_2', 'dead', 'x', { attempts: 5, deadReason: 'nack' })];
    assert.deepEqual(messageItems(page, '').map((i) => i.id), ['m_1', 'm_2']);
    // Text that is not an id just filters (VS Code matches it against label, description, detail).
    assert.deepEqual(messageItems(page, 'order').map((i) => i.id), ['m_1', 'm_2']);
    const typed = messageItems(page, ' m_250 ');
    assert.deepEqual(typed[0], { label: '$(go-to-file) Show m_250', description: 'by its id', id: 'm_250', alwaysShow: true });
    assert.equal(typed.length, 3);
    // One on the page is that item (its detail is the id), not offered twice.
    assert.deepEqual(messageItems(page, 'm_2').map((i) => i.id), ['m_1', 'm_2']);
    for (const notAnId of ['m_', 'm_0', 'm_01', 'm_1x', 'x_5']) assert.equal(messageItems(page, notAnId).length, 2, notAnId);
    assert.equal(messagePickHint(2, 2), 'Pick a message, or type its id (m_…)');
    assert.equal(messagePickHint(100, 2500), 'The first 100 of 2500: type a message id (m_…) to open any other');
  });

  it('a message document is valid JSON, also once the message is gone', async () => {
    const t = new FakeTransport();
    const m = t.add({ body: { order: 42 } });
    const ref = { namespace: t.namespace, queue: t.queue };
    assert.deepEqual(JSON.parse(await messageText(t, { ...ref, id: m.id })).body, { order: 42 });
    const gone = JSON.parse(await messageText(t, { ...ref, id: 'm_10' }));
    assert.deepEqual(gone, { error: 'not_found', message: 'message m_10 not found' });
    assert.deepEqual(JSON.parse(await messageText(t, undefined)), { error: 'invalid_argument', message: 'not a Quayside message address' });
  });

  it('an error toast picked after a later start succeeded does not start again; its other fixes still run', () => {
    assert.equal(fixStillApplies('retry', 'crashed'), true);
    assert.equal(fixStillApplies('useFreePort', 'stopped'), true);
    assert.equal(fixStillApplies('retry', 'running'), false);
    assert.equal(fixStillApplies('useFreePort', 'starting'), false);
    assert.equal(fixStillApplies('openSettings', 'running'), true);
    assert.equal(fixStillApplies('showLog', 'running'), true);
  });
});

describe('extension: Create Queue\'s dialect step', () => {
  it('offers the dialect of the namespace\'s own queues first (Enter takes it), the others in their usual order', () => {
    assert.deepEqual(dialectItems([]).map((i) => i.label), ['cache', 'env', 'sync']);
    assert.deepEqual(dialectItems(['env', 'env']).map((i) => i.label), ['env', 'cache', 'sync']);
    assert.deepEqual(dialectItems(['sync', 'cache', 'sync']).map((i) => i.label), ['sync', 'cache', 'env']);
  });
});
