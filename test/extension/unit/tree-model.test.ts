import { strict as assert } from 'assert';
import { bodyPreview } from '../../../src/core/wording';
import { CONTEXT, TreeModel, countsDescription, countsDetail, folderLabel, messageDescription, messageTooltip, type TreeNode } from '../../../src/tree/model';
import { ScriptedTransport, change, message, queue } from './ext-fakes';

async function tree(t: ScriptedTransport, opts: { pageSize?: number } = {}) {
  const m = new TreeModel({ pageSize: opts.pageSize ?? 2, now: () => 10_000 });
  m.setTransport(t);
  return m;
}

/** One queue ns/q holding m1, its tree loaded down to the open messages folder. */
async function openFolder(opts: { pageSize?: number } = {}) {
  const t = new ScriptedTransport();
  t.queues = [queue('ns', 'q', { ready: 1 })];
  t.messages.set('ns/q', [message('m1', 'ready')]);
  const m = await tree(t, opts);
  const [ns] = await m.children();
  const [q] = await m.children(ns);
  const [live] = await m.children(q);
  await m.children(live);
  return { t, m, ns, q, live };
}

describe('extension: tree model', () => {
  it('is empty without an emulator, and empty-but-loaded with no queues', async () => {
    const m = new TreeModel();
    assert.deepEqual(await m.children(), []);
    assert.equal(m.isEmpty, false);
    const t = new ScriptedTransport();
    m.setTransport(t);
    assert.deepEqual(await m.children(), []);
    assert.equal(m.isEmpty, true);
  });

  it('namespaces → queues → Messages / Dead letters, with counts and contextValues', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('b', 'jobs', { ready: 3, delayed: 1, leased: 2, dead: 4 }), queue('a', 'mail', { ready: 1 }), queue('a', 'billing', {}, 'env')];
    const m = await tree(t);
    const ns = await m.children();
    assert.deepEqual(ns.map((n) => m.view(n).label), ['a', 'b']);
    assert.equal(m.view(ns[0]).contextValue, CONTEXT.namespace);
    assert.equal(m.view(ns[0]).description, '2 queues');
    assert.equal(m.view(ns[1]).description, '1 queue · 4 dead');

    const qs = await m.children(ns[0]);
    assert.deepEqual(qs.map((n) => m.view(n).label), ['billing', 'mail']);
    const jobs = (await m.children(ns[1]))[0];
    const v = m.view(jobs);
    assert.equal(v.description, '3 ready · 1 delayed · 2 in flight · 4 dead');
    assert.equal(v.contextValue, 'quayside.queue.dead');
    assert.deepEqual(v.icon, { id: 'warning', color: 'list.warningForeground' });
    assert.equal(m.view(qs[1]).contextValue, CONTEXT.queue);
    assert.equal(m.view(qs[1]).icon?.id, 'inbox');

    const folders = await m.children(jobs);
    assert.deepEqual(folders.map((f) => m.view(f).label), ['Messages', 'Dead letters']);
    assert.deepEqual(folders.map((f) => m.view(f).description), ['6', '4']);
    assert.deepEqual(folders.map((f) => m.view(f).contextValue), [CONTEXT.messages, CONTEXT.deadLetters]);
    // env queues call it "Failed"
    const envFolders = await m.children(qs[0]);
    assert.equal(m.view(envFolders[1]).label, 'Failed');
    assert.equal(m.view(envFolders[1]).contextValue, CONTEXT.deadLettersEmpty);
    assert.equal(m.deadTotal(), 4);
    assert.equal(m.deadTooltip(), '4 dead letters');
  });

  it('namespaces and queues sort alike: case aside, numbers as numbers', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('acme', 'x'), queue('Zeta-ns', 'x'), queue('shop', 'Zebra'), queue('shop', '10-items'), queue('shop', 'alpha'), queue('shop', '9-items')];
    const m = await tree(t);
    const ns = await m.children();
    const name = (n: TreeNode) => (n.kind === 'namespace' ? n.namespace : n.kind);
    assert.deepEqual(ns.map(name), ['acme', 'shop', 'Zeta-ns']);
    const shop = ns[1];
    assert.deepEqual((await m.children(shop)).map((n) => (n.kind === 'queue' ? n.queue : n.kind)), ['9-items', '10-items', 'alpha', 'Zebra']);
  });

  it('the view\'s badge tooltip names env failed messages as env does', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('a', 'mail', { dead: 5 }), queue('p/e', 'orders', { dead: 1 }, 'env'), queue('b', 'jobs', { dead: 1 })];
    const m = await tree(t);
    await m.children();
    assert.equal(m.deadTotal(), 7);
    assert.equal(m.deadTooltip(), '6 dead letters, 1 failed message');
  });

  it('a leased message\'s tooltip says "in flight", as its description and the queue\'s counts do', () => {
    assert.match(messageTooltip(message('m1', 'leased')), /^state: in flight$/m);
    assert.match(messageTooltip(message('m2', 'dead'), 'env'), /^state: failed$/m);
  });

  it('messages are peeked (never pulled), a page at a time, with a load-more node', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q', { ready: 3, dead: 1 })];
    t.messages.set('ns/q', [message('m1', 'ready'), message('m2', 'leased', 'hi', { leaseUntil: 40_000, attempts: 1 }), message('m3', 'delayed', [1], { visibleAt: 70_000 }), message('d1', 'dead', { x: 1 }, { deadReason: 'timeout', attempts: 5 })]);
    const m = await tree(t);
    const [ns] = await m.children();
    const [q] = await m.children(ns);
    const [live, dead] = await m.children(q);
    const first = await m.children(live);
    assert.deepEqual(first.map((n) => n.kind), ['message', 'message', 'loadMore']);
    assert.equal(m.view(first[0]).contextValue, CONTEXT.messageLive);
    assert.equal(m.view(first[0]).label, '{"n":"m1"}');
    assert.match(m.view(first[1]).description!, /^in flight \(30 s left\) · 1 attempt · m2$/);
    assert.equal(m.view(first[2]).contextValue, CONTEXT.loadMore);
    assert.equal(m.view(first[2]).description, '2 of 3 shown');
    assert.equal(m.view(first[2]).command?.command, 'quayside.loadMore');
    await m.loadMore(first[2] as Extract<TreeNode, { kind: 'loadMore' }>);
    const all = await m.children(live);
    assert.deepEqual(all.map((n) => (n.kind === 'message' ? n.messageId : n.kind)), ['m1', 'm2', 'm3']);
    const deadKids = await m.children(dead);
    assert.equal(m.view(deadKids[0]).contextValue, CONTEXT.messageDead);
    assert.match(m.view(deadKids[0]).description!, /^dead · timeout · 5 attempts/);
    assert.ok(t.calls.every((c) => c.op !== 'pull'), 'the tree never leases');
    const peeks = t.calls.filter((c) => c.op === 'peek').map((c) => (c.args as { states: string[] }).states.join(','));
    assert.deepEqual(peeks, ['ready,delayed,leased', 'ready,delayed,leased', 'dead']);
  });

  it('a change keeps the pages "Load more" added: the folder is peeked again as far as it was shown', async () => {
    const t = new ScriptedTransport();
    const msgs = Array.from({ length: 7 }, (_, i) => message(`m${i + 1}`, 'ready'));
    t.queues = [queue('ns', 'q', { ready: 7 })];
    t.messages.set('ns/q', msgs);
    const m = await tree(t);
    const [ns] = await m.children();
    const [q] = await m.children(ns);
    const [live] = await m.children(q);
    const first = await m.children(live);
    await m.loadMore(first[2] as Extract<TreeNode, { kind: 'loadMore' }>);
    const shown = await m.children(live);
    await m.loadMore(shown[4] as Extract<TreeNode, { kind: 'loadMore' }>);
    assert.equal((await m.children(live)).filter((n) => n.kind === 'message').length, 6);
    t.messages.get('ns/q')!.push(message('m8', 'ready'));
    m.apply(change('ns', 'q', 'pushed', { ready: 8 }));
    const after = await m.children(live);
    assert.deepEqual(after.map((n) => (n.kind === 'message' ? n.messageId : n.kind)), ['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'loadMore']);
    assert.equal(m.view(after[6]).description, '6 of 8 shown');
    // One peek for all six, not three of the page size.
    assert.equal((t.calls.filter((c) => c.op === 'peek').at(-1)!.args as { limit: number }).limit, 6);
  });

  it('nodes are stable objects (VS Code refreshes by identity)', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q')];
    const m = await tree(t);
    const a = await m.children();
    const b = await m.children();
    assert.equal(a[0], b[0]);
    assert.equal(m.parent((await m.children(a[0]))[0]), a[0]);
  });

  it('a change event updates the counts from the event and marks the folder stale (no queue.list)', async () => {
    const { t, m, q, live } = await openFolder();
    const before = t.calls.length;
    t.messages.get('ns/q')!.push(message('m2', 'ready'));
    const eff = m.apply(change('ns', 'q', 'pushed', { ready: 2 }));
    assert.equal(eff.root, false);
    assert.deepEqual(eff.nodes, [q]);
    assert.equal(m.view(q).description, '2 ready');
    assert.equal(t.calls.length, before, 'nothing fetched until VS Code asks');
    const kids = await m.children(live);
    assert.equal(kids.length, 2, 'the stale folder is peeked again');
  });

  it('a folder peeked afresh keeps the nodes of messages still shown and lets go of the others (a busy queue does not grow the tree\'s memory)', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q', { ready: 2 })];
    t.messages.set('ns/q', [message('m1', 'ready'), message('m2', 'ready')]);
    const m = await tree(t);
    const [ns] = await m.children();
    const [q] = await m.children(ns);
    const [live] = await m.children(q);
    const [m1, m2] = await m.children(live);
    t.messages.set('ns/q', [message('m2', 'ready')]);
    m.apply(change('ns', 'q', 'acked', { ready: 1 }));
    const after = await m.children(live);
    assert.equal(after.length, 1);
    assert.equal(after[0], m2, 'a message still shown keeps its node');
    t.messages.set('ns/q', [message('m1', 'ready'), message('m2', 'ready')]);
    m.apply(change('ns', 'q', 'pushed', { ready: 2 }));
    const back = await m.children(live);
    assert.notEqual(back[0], m1, 'the node of m1 was dropped when m1 was no longer shown');
    assert.equal(back[1], m2);
  });

  it('a change of the dead count refreshes the namespace (its description) and the badge total', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q', { ready: 1 })];
    const m = await tree(t);
    await m.children();
    const eff = m.apply(change('ns', 'q', 'dead', { dead: 1 }));
    assert.equal(eff.nodes[0].kind, 'namespace');
    assert.equal(m.deadTotal(), 1);
  });

  it('queue created / deleted / unknown queues reload the root', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q')];
    const m = await tree(t);
    await m.children();
    assert.equal(m.apply(change('ns', 'new', 'queue_created', null)).root, true);
    // A known queue: the root reload must come from the event kind, not the unknown-queue fallback.
    assert.equal(m.apply(change('ns', 'q', 'queue_created', null)).root, true, 'queue_created reloads the root');
    assert.equal(m.apply(change('ns', 'q', 'queue_deleted', null)).root, true, 'queue_deleted reloads the root');
    assert.equal(m.apply(change('ns', 'other', 'pushed', { ready: 1 })).root, true, 'an unknown queue reloads the root');
    assert.equal(m.apply(change('ns', 'q', 'pushed', { ready: 1 })).root, false, 'a known queue\'s change does not');
    assert.equal(m.apply({ event: 'clock', now: 1 }).root, false);
    t.queues = [];
    assert.deepEqual(await m.children(), []);
    assert.equal(m.isEmpty, true);
  });

  it('a gap in the events (changes dropped while the connection fell behind) reloads the root and reads every queue again', async () => {
    const { t, m, q, live } = await openFolder();
    const peeks = () => t.calls.filter((c) => c.op === 'peek').length;
    const before = peeks();
    assert.equal((await m.children(live)).length, 1);
    assert.equal(peeks(), before, 'a folder no event marked stale is not peeked again');
    // What the dropped events would have said: one more message.
    t.queues = [queue('ns', 'q', { ready: 2 })];
    t.messages.get('ns/q')!.push(message('m2', 'ready'));
    assert.equal(m.apply({ event: 'gap', subscription: 's1' }).root, true);
    const [ns2] = await m.children();
    const [q2] = await m.children(ns2);
    assert.equal(m.view(q2).description, '2 ready', 'the counts as they are now');
    const [live2] = await m.children(q2);
    assert.equal((await m.children(live2)).length, 2, 'the folder is peeked again');
    assert.equal(peeks(), before + 1);
  });

  it('a peek answered after a change (or a gap) that came while it was on its way is shown, and read again next time', async () => {
    // Found in review: the answer, computed before the change, was kept as fresh, so the folder
    // showed what the emulator no longer had until some later change.
    const { t, m, live } = await openFolder({ pageSize: 50 });
    for (const event of ['change', 'gap'] as const) {
      const real = t.request.bind(t);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      t.request = (async (op: string, args: unknown) => {
        const answer = await real(op as never, args as never);
        if (op === 'peek') await held; // the answer is made now, and arrives later
        return answer;
      }) as typeof t.request;
      const shown = t.messages.get('ns/q')!;
      shown.push(message(`m${shown.length + 1}`, 'ready'));
      m.apply(change('ns', 'q', 'pushed', { ready: shown.length }));
      const loading = m.children(live);
      await new Promise((r) => setImmediate(r)); // the peek is on its way
      shown.push(message(`m${shown.length + 1}`, 'ready'));
      m.apply(event === 'gap' ? { event: 'gap', subscription: 's1' } : change('ns', 'q', 'pushed', { ready: shown.length }));
      release();
      assert.equal((await loading).length, shown.length - 1, `${event}: the answer as it was made`);
      t.request = real;
      assert.equal((await m.children(event === 'gap' ? m.folderNode('ns', 'q', 'messages') : live)).length, shown.length, `${event}: read again`);
    }
  });

  it('a queue deleted and made again under its name shows the new queue\'s messages, not the old one\'s (its folders were loaded, open or closed)', async () => {
    // Found by a breadth probe: a test's beforeEach deletes and re-creates its queue; when both
    // landed before the tree's reload, the folders kept the old queue's rows under a count of 0.
    const { t, m, q } = await openFolder();
    t.messages.set('ns/q', [message('m1', 'ready'), message('old-dead', 'dead')]);
    const [, deadFolder] = await m.children(q);
    assert.deepEqual((await m.children(deadFolder)).map((n) => (n as { messageId: string }).messageId), ['old-dead']);
    // Deleted and made again: the list now has another queue (another id) under the name, empty.
    t.queues = [{ ...queue('ns', 'q'), id: 'ns-q-2' }];
    t.messages.set('ns/q', []);
    assert.equal(m.apply(change('ns', 'q', 'queue_deleted', null)).root, true);
    assert.equal(m.apply(change('ns', 'q', 'queue_created', null)).root, true);
    const [ns2] = await m.children();
    const [q2] = await m.children(ns2);
    const [live2, dead2] = await m.children(q2);
    assert.deepEqual(await m.children(live2), []);
    assert.deepEqual(await m.children(dead2), []);
    assert.deepEqual(m.loadedMessages('ns', 'q', 'dead'), []);
  });

  it('a queue list read while change events came keeps their counts, which are as new or newer (the events of its commit go out before its answer)', async () => {
    // Found by a breadth probe: a reload's list overwrote the counts of a push event that came
    // while it was on its way, and an idle queue then showed 1 ready where it had 2 until a Refresh.
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q', { ready: 1 }), queue('ns', 'other', { ready: 5 })];
    const m = await tree(t);
    await m.children();
    const real = t.request.bind(t);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    t.request = (async (op: string, args: unknown) => {
      const answer = await real(op as never, args as never);
      if (op === 'queue.list') await held; // read now (1 ready), answered after the push's event
      return answer;
    }) as typeof t.request;
    // Another queue made elsewhere: the tree reads the list again, keeping what it has meanwhile.
    t.queues.push(queue('ns', 'new'));
    assert.equal(m.apply(change('ns', 'new', 'queue_created', null)).root, true);
    const loading = m.children();
    await new Promise((r) => setImmediate(r));
    assert.equal(m.apply(change('ns', 'q', 'pushed', { ready: 2 })).root, false, 'the queue is still known: no second list');
    release();
    const [ns] = await loading;
    const [, other, q] = await m.children(ns);
    assert.equal(m.view(q).description, '2 ready', 'the event\'s counts stand');
    assert.equal(m.view(other).description, '5 ready', 'a queue no event named takes the list\'s');
    t.request = real;
    // With no event on the way, the next list's counts are taken as they are.
    t.queues[0] = queue('ns', 'q', { ready: 7 });
    const [ns3] = await m.children();
    assert.equal(m.view((await m.children(ns3))[2]).description, '7 ready');
  });

  it('a list sent before a gap (or a Refresh) does not undo a change event that came after it', async () => {
    // Found in review: the old list's counts were taken, and the next list then kept them as the event's.
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q', { ready: 1 })];
    const m = await tree(t);
    await m.children();
    const real = t.request.bind(t);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let lists = 0;
    t.request = (async (op: string, args: unknown) => {
      const answer = await real(op as never, args as never);
      if (op === 'queue.list' && ++lists === 1) await held; // the first list, read at 2 ready, comes last
      return answer;
    }) as typeof t.request;
    t.queues = [queue('ns', 'q', { ready: 2 }), queue('ns', 'new')];
    m.apply(change('ns', 'new', 'queue_created', null));
    const first = m.children();
    await new Promise((r) => setImmediate(r));
    m.apply({ event: 'gap', subscription: 's1' });
    const second = m.children(); // read at 2 ready, answered after the event below
    t.queues[0] = queue('ns', 'q', { ready: 3 });
    m.apply(change('ns', 'q', 'pushed', { ready: 3 }));
    await second;
    release();
    const [ns] = await first;
    t.request = real;
    assert.equal(m.view((await m.children(ns)).find((n) => (n as { queue: string }).queue === 'q')!).description, '3 ready');
  });

  it('queues that go take their nodes with them, and only theirs: a namespace whose name ends like another\'s keeps its nodes; an emptied namespace\'s node goes', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('shop', 'jobs', { ready: 1 }), queue('myshop', 'jobs', { ready: 1 }), queue('gone', 'x')];
    const m = await tree(t);
    for (const ns of await m.children()) for (const q of await m.children(ns)) await m.children(q);
    const nodes = () => (m as unknown as { nodes: Map<string, unknown> }).nodes;
    const kept = m.queueNode('myshop', 'jobs');
    const keptFolder = m.folderNode('myshop', 'jobs', 'messages');
    t.queues = [queue('myshop', 'jobs', { ready: 1 })];
    await m.children();
    assert.equal(m.queueNode('myshop', 'jobs'), kept, 'the same object, as VS Code refreshes by identity');
    assert.equal(m.folderNode('myshop', 'jobs', 'messages'), keptFolder);
    assert.deepEqual([...nodes().keys()].filter((id) => id.includes('shop\u0000jobs') && !id.includes('myshop')), [], 'shop/jobs left nothing');
    assert.equal([...nodes().keys()].some((id) => id === 'ns:gone' || id === 'ns:shop'), false, 'emptied namespaces left nothing');
  });

  it('merge: root wins; a namespace refresh covers its queues', () => {
    const m = new TreeModel();
    const ns = m.namespaceNode('a');
    const qa = m.queueNode('a', 'x');
    const qb = m.queueNode('b', 'y');
    assert.deepEqual(TreeModel.merge([{ root: false, nodes: [qa] }, { root: false, nodes: [ns] }, { root: false, nodes: [qb, qb] }]).nodes, [ns, qb]);
    assert.equal(TreeModel.merge([{ root: false, nodes: [qa] }, { root: true, nodes: [] }]).root, true);
  });

  it('a failing queue.list shows an error node', async () => {
    const t = new ScriptedTransport();
    t.request = (async () => {
      throw new Error('not connected');
    }) as typeof t.request;
    const m = await tree(t);
    const kids = await m.children();
    assert.equal(kids[0].kind, 'error');
    assert.match(m.view(kids[0]).label, /not connected/);
  });

  it('labels and descriptions', () => {
    assert.equal(folderLabel('env', 'dead'), 'Failed');
    assert.equal(folderLabel('sync', 'dead'), 'Dead letters');
    assert.equal(bodyPreview({ a: 'x'.repeat(100) }).length, 60);
    assert.equal(bodyPreview('text'), '"text"');
    assert.equal(countsDescription({ ready: 1, delayed: 2, leased: 3, dead: 4, depth: 3, bytes: 0, oldestReadyAgeMs: 0 }), '1 ready · 2 delayed · 3 in flight · 4 dead');
    assert.equal(countsDescription({ ready: 0, delayed: 0, leased: 0, dead: 4, depth: 0, bytes: 0, oldestReadyAgeMs: 0 }), '0 ready · 4 dead');
    assert.equal(countsDescription({ ready: 5001, delayed: 0, leased: 0, dead: 12345, depth: 5001, bytes: 0, oldestReadyAgeMs: 0 }), '5,001 ready · 12,345 dead', 'as the panel formats them');
    assert.equal(countsDetail({ ready: 0, delayed: 0, leased: 0, dead: 0, depth: 0, bytes: 0, oldestReadyAgeMs: 0 }), '0 ready · 0 delayed · 0 in flight · 0 dead');
    // env calls them failed, as its folder does.
    assert.equal(countsDescription({ ready: 1, delayed: 0, leased: 0, dead: 3, depth: 1, bytes: 0, oldestReadyAgeMs: 0 }, 'env'), '1 ready · 3 failed');
    assert.equal(countsDetail({ ready: 0, delayed: 0, leased: 0, dead: 2, depth: 0, bytes: 0, oldestReadyAgeMs: 0 }, 'env'), '0 ready · 0 delayed · 0 in flight · 2 failed');
    assert.equal(messageDescription(message('x', 'delayed', 1, { visibleAt: 70_000, attempts: 2 }), 10_000), 'delayed 1 min · 2 attempts');
  });

  it('an env project says "failed" in its namespace row and in its failed messages\' rows and tooltips; a namespace of mixed dialects says "dead"', async () => {
    const t = new ScriptedTransport();
    t.queues = [queue('shop/dev', 'orders', { ready: 1, dead: 2 }, 'env'), queue('mixed', 'a', { dead: 1 }, 'env'), queue('mixed', 'b', { dead: 1 }, 'cache')];
    t.messages.set('shop/dev/orders', [message('f1', 'dead', { id: 1 }, { deadReason: 'retry', attempts: 4, deadAt: 9_000 })]);
    const m = await tree(t);
    const [mixed, shop] = await m.children();
    assert.equal(m.view(shop).description, '1 queue · 2 failed');
    assert.equal(m.view(mixed).description, '2 queues · 2 dead');
    const [orders] = await m.children(shop);
    const [, failed] = await m.children(orders);
    const [f1] = await m.children(failed);
    assert.equal(m.view(f1).description, 'failed · retry · 4 attempts · f1');
    assert.match(String(m.view(f1).tooltip), /^state: failed$/m);
    assert.match(String(m.view(f1).tooltip), /^failed since: /m);
  });

  it('a queue\'s tooltip gives the oldest wait as it is now: it grows between events (a backlog sends none)', async () => {
    let local = 1_000_000;
    const t = new ScriptedTransport();
    t.queues = [queue('ns', 'q', { ready: 2, oldestReadyAgeMs: 3_000 })];
    const m = new TreeModel({ now: () => local });
    m.setTransport(t);
    await m.children();
    const node = m.queueNode('ns', 'q');
    const wait = () => /oldest ready message waiting (.+) \(since/.exec(String(m.view(node).tooltip))?.[1];
    assert.equal(wait(), '3 s');
    // The instant too, as VS Code keeps a tooltip once shown: 1,000,000 ms − 3 s is 00:16:37 UTC.
    assert.match(String(m.view(node).tooltip), /waiting 3 s \(since 00:16:37 UTC\)/);
    local += 60_000;
    assert.equal(wait(), '1 min 3 s', 'a minute later, with no event');
    m.apply({ ...change('ns', 'q', 'leased', { ready: 1, oldestReadyAgeMs: 2_000 }), at: local });
    assert.equal(wait(), '2 s', 'an event resets it to what it says');
    local += 5_000;
    assert.equal(wait(), '7 s');
    m.apply({ ...change('ns', 'q', 'leased', { ready: 0, leased: 2 }), at: local });
    assert.equal(wait(), undefined, 'nothing ready: no wait');
  });

  describe('times against the emulator\'s clock', () => {
    async function delayedTree(mode: 'system' | 'virtual') {
      let local = 1_000_000;
      const t = new ScriptedTransport();
      t.queues = [queue('ns', 'q', { delayed: 1 })];
      // The emulator's (virtual) time is 5,000: the message becomes visible 4 s later.
      t.messages.set('ns/q', [message('m1', 'delayed', 1, { visibleAt: 9_000 })]);
      const m = new TreeModel({ now: () => local });
      m.clock.setMode(mode);
      m.clock.observe(5_000);
      m.setTransport(t);
      await m.children();
      const folder = m.folderNode('ns', 'q', 'messages');
      const [msg] = await m.children(folder);
      return { m, folder, describe: () => m.view(msg).description, tick: (ms: number) => (local += ms) };
    }

    it('virtual: stands still while real time passes, and moves with the clock event', async () => {
      const { m, folder, describe, tick } = await delayedTree('virtual');
      assert.match(describe()!, /^delayed 4 s/);
      tick(60_000);
      assert.match(describe()!, /^delayed 4 s/, 'a minute of real time is no virtual time');
      const effect = m.apply({ event: 'clock', now: 8_000 });
      assert.deepEqual(effect.nodes, [folder], 'the loaded folder re-renders');
      assert.match(describe()!, /^delayed 1 s/);
    });

    it('system: runs with real time (from the emulator\'s time when it answered)', async () => {
      const { m, describe, tick } = await delayedTree('system');
      assert.match(describe()!, /^delayed 4 s/);
      tick(3_000);
      assert.match(describe()!, /^delayed 1 s/);
      assert.deepEqual(m.apply({ event: 'clock', now: 0 }).nodes, [], 'a system clock ignores clock events');
    });
  });
});
