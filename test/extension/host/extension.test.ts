// Runs inside a real VS Code against a real emulator started by the extension's own command.
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { Connection } from '../../../emulator/clients/connection';
import type { QuaysideApi } from '../../../src/extension';
import type { TreeNode } from '../../../src/tree/model';

const NS = 'demo';
const Q = 'jobs';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 10000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('Quayside extension in VS Code', function () {
  this.timeout(60000);
  let api: QuaysideApi;
  let app: Connection | undefined;
  let pid = 0;

  const root = () => api.tree.getChildren();
  const queueNode = async (namespace = NS): Promise<TreeNode | undefined> => {
    const ns = (await root()).find((n) => n.kind === 'namespace' && n.namespace === namespace);
    if (!ns) return undefined;
    return (await api.tree.getChildren(ns)).find((n) => n.kind === 'queue' && n.queue === Q);
  };
  const description = async (namespace = NS) => {
    const q = await queueNode(namespace);
    return q ? String(api.tree.getTreeItem(q).description ?? '') : '';
  };
  const folders = async (namespace = NS) => {
    const q = await queueNode(namespace);
    assert.ok(q, 'the queue is in the tree');
    return api.tree.getChildren(q);
  };

  before(async () => {
    const ext = vscode.extensions.getExtension<QuaysideApi>('quayside.quayside');
    assert.ok(ext, 'the extension is installed');
    api = await ext.activate();
    assert.equal(api.service.state, 'stopped', 'auto-start is off by default');
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    const cfg = vscode.workspace.getConfiguration('quayside');
    await cfg.update('port', await freePort(), target);
    if (process.env.QUAYSIDE_TEST_NODE) await cfg.update('nodePath', process.env.QUAYSIDE_TEST_NODE, target);
    await vscode.commands.executeCommand('workbench.view.extension.quayside');
  });

  after(async () => {
    await app?.close();
    await vscode.commands.executeCommand('quayside.stop');
  });

  it('starts the emulator from the command (the packaged copy, data in the workspace .quayside/)', async () => {
    const snap = (await vscode.commands.executeCommand('quayside.start')) as { state: string; error?: { message: string }; endpoint?: { url: string; pid?: number } };
    assert.equal(snap.state, 'running', snap.error?.message);
    pid = snap.endpoint!.pid!;
    assert.ok(pid > 0 && alive(pid));
    assert.equal(api.service.lastLaunch?.source, 'packaged');
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (folder) assert.ok(fs.existsSync(path.join(folder, '.quayside')), 'the data directory is the workspace .quayside/');
    const settings = (await vscode.commands.executeCommand('quayside.copyConnectionSettings')) as string;
    assert.match(settings, /^QUAYSIDE_URL=ws:\/\/127\.0\.0\.1:\d+ QUAYSIDE_TOKEN=\S+$/);
    assert.equal(await vscode.env.clipboard.readText(), settings);
    app = new Connection({ url: snap.endpoint!.url, token: api.service.token, client: 'test-app' });
  });

  it('shows a created queue in the tree, with its folders', async () => {
    const q = await vscode.commands.executeCommand('quayside.createQueue', { namespace: NS, queue: Q, dialect: 'cache' });
    assert.ok(q);
    const node = await until('the queue in the tree', queueNode);
    assert.equal(api.tree.getTreeItem(node).contextValue, 'quayside.queue');
    assert.equal(await description(), '0 ready');
    const f = await folders();
    assert.deepEqual(f.map((n) => api.tree.getTreeItem(n).label), ['Messages', 'Dead letters']);
    // the view really shows it: reveal works only for nodes VS Code resolved
    await api.view.reveal(node, { expand: true, select: true });
    assert.ok(api.view.visible, 'the Quayside view is visible');
  });

  it('a pushed message shows up live (change events, no polling)', async () => {
    const seen = api.tree.eventsSeen;
    const r = (await vscode.commands.executeCommand('quayside.pushMessage', { namespace: NS, queue: Q, body: { hello: 'world' } })) as { id: string };
    assert.ok(r.id);
    await until('1 ready', async () => (await description()).startsWith('1 ready'));
    assert.ok(api.tree.eventsSeen > seen, 'the tree heard a change event');
    // a push by an app (not through the extension) shows up too
    await app!.request('push', { namespace: NS, queue: Q, body: { from: 'app' } });
    await until('2 ready', async () => (await description()).startsWith('2 ready'));
    const [messages] = await folders();
    const kids = await api.tree.getChildren(messages);
    assert.equal(kids.length, 2);
    assert.equal(api.tree.getTreeItem(kids[0]).contextValue, 'quayside.message.live');
    assert.equal(api.tree.getTreeItem(kids[0]).label, '{"hello":"world"}');
  });

  it('hears each change once while another subscription shares its connection (as a queue panel\'s does)', async () => {
    const t = api.service.transport;
    const { subscription } = await t.request('subscribe', {});
    try {
      const seen = api.tree.eventsSeen;
      await app!.request('queue.create', { namespace: NS, queue: 'echo', dialect: 'cache' });
      await app!.request('queue.delete', { namespace: NS, queue: 'echo' });
      await until('the change events', () => api.tree.eventsSeen >= seen + 2);
      // Both subscriptions' copies were sent before this reply: the tree had its chance to count them.
      await t.request('clock.now', {});
      assert.equal(api.tree.eventsSeen - seen, 2, 'created and deleted, once each');
    } finally {
      await t.request('unsubscribe', { subscription });
    }
  });

  it('Push Message from Active Editor sends the open JSON document', async () => {
    const doc = await vscode.workspace.openTextDocument({ language: 'json', content: '{ "fromEditor": true }' });
    await vscode.window.showTextDocument(doc);
    const r = (await vscode.commands.executeCommand('quayside.pushMessageFromEditor', { namespace: NS, queue: Q })) as { id: string };
    const m = await app!.request('message.get', { namespace: NS, queue: Q, id: r.id });
    assert.deepEqual(m.body, { fromEditor: true });
    await until('3 ready', async () => (await description()).startsWith('3 ready'));
    await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
  });

  it('Push Message from Active Editor from an editor menu pushes that menu\'s document (its Uri), interactively', async () => {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? fs.mkdtempSync(path.join(os.tmpdir(), 'qs-host-'));
    await vscode.commands.executeCommand('quayside.createQueue', { namespace: NS, queue: 'editor', dialect: 'cache' });
    const good = path.join(folder, 'menu-body.json');
    const bad = path.join(folder, 'menu-bad.json');
    fs.writeFileSync(good, '{ "fromMenu": true }');
    fs.writeFileSync(bad, '{ "broken": ');
    try {
      // Another document is the active editor: the menu's Uri decides, not the active editor.
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument({ language: 'json', content: '{ "active": true }' }));
      // Invalid JSON from a menu is reported to the user, not thrown (it is not a scripted call).
      assert.equal(await vscode.commands.executeCommand('quayside.pushMessageFromEditor', vscode.Uri.file(bad)), undefined);
      // Valid: it asks for the queue (a quick pick; demo/editor is listed first), then pushes.
      let settled = false;
      const pushing = Promise.resolve(vscode.commands.executeCommand('quayside.pushMessageFromEditor', vscode.Uri.file(good))).finally(() => (settled = true));
      await until('the queue picked', async () => {
        await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
        return settled;
      });
      const r = (await pushing) as { id: string } | undefined;
      assert.ok(r?.id, 'pushed');
      const m = await app!.request('message.get', { namespace: NS, queue: 'editor', id: r.id });
      assert.deepEqual(m.body, { fromMenu: true });
      assert.equal((await app!.request('queue.get', { namespace: NS, queue: 'editor' })).counts.ready, 1, 'the invalid document pushed nothing');
    } finally {
      await vscode.commands.executeCommand('quayside.deleteQueue', { namespace: NS, queue: 'editor', confirm: false });
      // The untitled document is dirty: revert it, or closing would ask to save it.
      await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');
      fs.rmSync(good, { force: true });
      fs.rmSync(bad, { force: true });
    }
  });

  it('a message shown again shows its current state (the virtual document is read afresh)', async () => {
    await vscode.commands.executeCommand('quayside.createQueue', { namespace: NS, queue: 'docs', dialect: 'cache' });
    try {
      const { id } = await app!.request('push', { namespace: NS, queue: 'docs', body: { doc: 1 }, dedupeKey: 'doc-1', attributes: { a: 1 }, orderingKey: 'k', meta: { m: 1 } });
      const first = (await vscode.commands.executeCommand('quayside.showMessage', { namespace: NS, queue: 'docs', id })) as vscode.TextDocument;
      assert.match(first.getText(), /"state": "ready"/);
      const { messages } = await app!.request('pull', { namespace: NS, queue: 'docs', max: 1 });
      await app!.request('nack', { receipt: messages[0].receipt, dead: true, error: 'doc test' });
      const copied = await vscode.commands.executeCommand('quayside.copyMessageBody', { namespace: NS, queue: 'docs', id });
      assert.equal(copied, '{\n  "doc": 1\n}');
      assert.equal(await vscode.env.clipboard.readText(), copied);
      const again = (await vscode.commands.executeCommand('quayside.showMessage', { namespace: NS, queue: 'docs', id })) as vscode.TextDocument;
      const open = () => vscode.workspace.textDocuments.find((d) => !d.isClosed && d.uri.toString() === again.uri.toString());
      await until('the dead state shown', () => /"state": "dead"/.test(open()?.getText() ?? ''));
      // Open, it follows the message: a replay (a change event naming it) is read again without showing it anew.
      await vscode.commands.executeCommand('quayside.replayMessage', { namespace: NS, queue: 'docs', ids: [id] });
      await until('the replayed message read again as ready', () => /"state": "ready"/.test(open()?.getText() ?? ''));
      // Pushed from its message document, a message is pushed again with its own body, not the view around it.
      await vscode.window.showTextDocument(open()!);
      // Not its dedupe key (the copy would be deduplicated onto it); what it carries besides, yes.
      const copy = (await vscode.commands.executeCommand('quayside.pushMessageFromEditor', { namespace: NS, queue: 'docs' })) as { id: string; deduped: boolean };
      assert.deepEqual([copy.deduped, copy.id === id], [false, false]);
      const pushed = await app!.request('message.get', { namespace: NS, queue: 'docs', id: copy.id });
      assert.deepEqual([pushed.body, pushed.attributes, pushed.orderingKey, pushed.meta, pushed.dedupeKey], [{ doc: 1 }, { a: 1 }, 'k', { m: 1 }, null]);
    } finally {
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');
      await vscode.commands.executeCommand('quayside.deleteQueue', { namespace: NS, queue: 'docs', confirm: false });
    }
  });

  it('peeking never leases', async () => {
    const r = (await vscode.commands.executeCommand('quayside.peekMessages', { namespace: NS, queue: Q })) as { messages: { state: string }[] };
    assert.equal(r.messages.length, 3);
    assert.ok(r.messages.every((m) => m.state === 'ready'));
  });

  it('a dead-lettered message turns the queue into a warning and counts in the badge; replay brings it back', async () => {
    const { messages } = await app!.request('pull', { namespace: NS, queue: Q, max: 1 });
    assert.equal(messages.length, 1);
    await app!.request('nack', { receipt: messages[0].receipt, dead: true, error: 'boom' });
    await until('1 dead', async () => (await description()).endsWith('1 dead'));
    assert.match(await description(), /^2 ready · 1 dead$/);
    const q = (await queueNode())!;
    const item = api.tree.getTreeItem(q);
    assert.equal(item.contextValue, 'quayside.queue.dead');
    // The tooltip comes on hover (VS Code would keep one set by getTreeItem, with its wait frozen).
    assert.equal(item.tooltip, undefined);
    assert.match(String(api.tree.resolveTreeItem(item, q).tooltip), /oldest ready message waiting \d+/);
    assert.equal((item.iconPath as vscode.ThemeIcon).id, 'warning');
    await until('the badge', () => api.view.badge?.value === 1);
    const [, dead] = await folders();
    assert.equal(api.tree.getTreeItem(dead).contextValue, 'quayside.deadLetters');
    const deadKids = await api.tree.getChildren(dead);
    assert.equal(deadKids.length, 1);
    assert.equal(api.tree.getTreeItem(deadKids[0]).contextValue, 'quayside.message.dead');

    // replay the selected node, as the tree's context menu does
    const r = (await vscode.commands.executeCommand('quayside.replayDeadLetters', deadKids[0], [deadKids[0]])) as { replayed: number } | undefined;
    // a tree node is not a programmatic call, so no result is promised; the tree tells
    void r;
    await until('0 dead, 3 ready', async () => {
      const d = await description();
      return d === '3 ready';
    });
    await until('no badge', () => api.view.badge === undefined);
  });

  it('Export Messages writes the queue\'s messages to a file, as the panel\'s Export does (JSON or NDJSON)', async () => {
    const all = await app!.request('peek', { namespace: NS, queue: Q, states: ['ready', 'delayed', 'leased', 'dead'], limit: 1000 });
    assert.ok(all.total > 0, 'the queue has messages to export');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quayside-export-'));
    try {
      const json = path.join(dir, 'all.json');
      const r = (await vscode.commands.executeCommand('quayside.exportMessages', { namespace: NS, queue: Q, format: 'json', states: ['ready', 'delayed', 'leased', 'dead'], file: json })) as { exported: number };
      assert.equal(r.exported, all.total);
      assert.deepEqual((JSON.parse(fs.readFileSync(json, 'utf8')) as { id: string }[]).map((m) => m.id), all.messages.map((m) => m.id));
      // An object that names no states skips the prompt too: every message (a quick pick here would hang the call).
      const every = path.join(dir, 'every.json');
      const r2 = (await vscode.commands.executeCommand('quayside.exportMessages', { namespace: NS, queue: Q, format: 'json', file: every })) as { exported: number };
      assert.equal(r2.exported, all.total);
      const nd = path.join(dir, 'dead.ndjson');
      const dead = (await vscode.commands.executeCommand('quayside.exportMessages', { namespace: NS, queue: Q, format: 'ndjson', states: ['dead'], file: nd })) as { exported: number };
      const lines = fs.readFileSync(nd, 'utf8').split('\n').filter(Boolean);
      assert.equal(lines.length, dead.exported);
      assert.ok(lines.every((l) => (JSON.parse(l) as { state: string }).state === 'dead'));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('purges dead letters and the queue (confirmations skipped by the argument)', async () => {
    const { messages } = await app!.request('pull', { namespace: NS, queue: Q, max: 2 });
    for (const m of messages) await app!.request('nack', { receipt: m.receipt, dead: true });
    await until('2 dead', async () => (await description()).endsWith('2 dead'));
    const pd = (await vscode.commands.executeCommand('quayside.purgeDeadLetters', { namespace: NS, queue: Q, confirm: false })) as { purged: number };
    assert.equal(pd.purged, 2);
    await until('0 dead', async () => !(await description()).includes('dead'));
    const p = (await vscode.commands.executeCommand('quayside.purgeQueue', { namespace: NS, queue: Q, confirm: false })) as { purged: number };
    assert.equal(p.purged, 1);
    await until('empty', async () => (await description()) === '0 ready');
  });

  it('Open Queue opens the queue panel (titled with the queue and its namespace); so do Show Audit Log and Show Depth and Lag Chart', async () => {
    const panelTabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputWebview && t.label === `${Q} · ${NS}`);
    await vscode.commands.executeCommand('quayside.openQueue', { namespace: NS, queue: Q });
    await until('a panel tab', () => panelTabs().length === 1);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    for (const command of ['quayside.showAuditLog', 'quayside.showMetrics']) {
      assert.deepEqual(await vscode.commands.executeCommand(command, { namespace: NS, queue: Q }), { namespace: NS, queue: Q });
      await until(`the panel from ${command}`, () => panelTabs().length === 1);
    }
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('Advance Clock refuses on the system clock', async () => {
    await assert.rejects(Promise.resolve(vscode.commands.executeCommand('quayside.advanceClock', { ms: 1000 })), /system clock/);
  });

  it('deleting the queue removes it from the tree', async () => {
    await vscode.commands.executeCommand('quayside.deleteQueue', { namespace: NS, queue: Q, confirm: false });
    await until('the queue gone', async () => !(await queueNode()));
  });

  it('restarts the emulator after a crash (kill -9), on the same port', async () => {
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await vscode.workspace.getConfiguration('quayside').update('inMemory', true, target);
    const snap = (await vscode.commands.executeCommand('quayside.restart')) as { state: string; endpoint?: { pid?: number; port: number } };
    assert.equal(snap.state, 'running');
    const crashed = api.waitForState('crashed', 5000);
    process.kill(snap.endpoint!.pid!, 'SIGKILL');
    const c = await crashed;
    assert.ok(c.restartAt, 'a restart is scheduled');
    const back = await api.waitForState('running', 15000);
    assert.equal(back.endpoint!.port, snap.endpoint!.port);
    assert.notEqual(back.endpoint!.pid, snap.endpoint!.pid);
    pid = back.endpoint!.pid!;
    // the tree follows the new emulator (in memory: empty)
    await vscode.commands.executeCommand('quayside.createQueue', { namespace: NS, queue: Q, dialect: 'sync' });
    await until('the queue in the new emulator', queueNode);
  });

  it('on a virtual clock, Advance Clock moves delayed messages to ready (live in the tree)', async () => {
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await vscode.workspace.getConfiguration('quayside').update('clock', 'virtual', target);
    const snap = (await vscode.commands.executeCommand('quayside.restart')) as { state: string; endpoint?: { pid?: number; clock?: string } };
    assert.equal(snap.state, 'running');
    assert.equal(snap.endpoint?.clock, 'virtual');
    pid = snap.endpoint!.pid!;
    // An env queue lives in project/environment, where env.queue reaches it; elsewhere it is refused.
    await assert.rejects(Promise.resolve(vscode.commands.executeCommand('quayside.createQueue', { namespace: NS, queue: Q, dialect: 'env' })), /<project>\/<environment>/);
    const ENV_NS = `${NS}/dev`;
    await vscode.commands.executeCommand('quayside.createQueue', { namespace: ENV_NS, queue: Q, dialect: 'env' });
    const f = await until('env folders', async () => ((await queueNode(ENV_NS)) ? folders(ENV_NS) : undefined));
    assert.equal(api.tree.getTreeItem(f[1]).label, 'Failed', 'env queues call it Failed');
    await vscode.commands.executeCommand('quayside.pushMessage', { namespace: ENV_NS, queue: Q, body: 'later', delayMs: 30_000 });
    await until('1 delayed', async () => (await description(ENV_NS)) === '0 ready · 1 delayed');
    const r = (await vscode.commands.executeCommand('quayside.advanceClock', { ms: 31_000 })) as { now: number };
    assert.ok(r.now > 0);
    await until('1 ready', async () => (await description(ENV_NS)) === '1 ready');
  });

  it('stops the emulator, leaving no process behind', async () => {
    await app?.close();
    app = undefined;
    await vscode.commands.executeCommand('quayside.stop');
    assert.equal(api.service.state, 'stopped');
    await until('the process gone', () => !alive(pid), 5000);
    assert.deepEqual(await root(), [], 'the tree is empty (the welcome view shows)');
  });

  it('a command called with an argument object while stopped fails at once (no Start offer waits for a click)', async () => {
    assert.equal(api.service.state, 'stopped');
    for (const [id, arg] of [
      ['quayside.pushMessage', { namespace: NS, queue: Q, body: 1 }],
      ['quayside.peekMessages', { namespace: NS, queue: Q }],
      ['quayside.purgeDeadLetters', { namespace: NS, queue: Q, confirm: false }],
    ] as const) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${id} did not answer`)), 5000)));
      try {
        await assert.rejects(Promise.race([Promise.resolve(vscode.commands.executeCommand(id, arg)), bound]), /the Quayside emulator is not running \(stopped\)/, id);
      } finally {
        clearTimeout(timer);
      }
    }
  });

  it('a quayside.port out of range fails bad_port, naming the setting, rather than starting on 7433', async () => {
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    const cfg = vscode.workspace.getConfiguration('quayside');
    const before = cfg.inspect<number>('port');
    await cfg.update('port', 70000, target);
    try {
      const s = await api.service.start();
      assert.equal(s.state, 'stopped');
      assert.equal(s.error?.code, 'bad_port');
      assert.match(s.error!.message, /"quayside\.port" must be a whole number from 0 to 65535 \(0: a free port\), and it is 70000/);
    } finally {
      await cfg.update('port', target === vscode.ConfigurationTarget.Workspace ? before?.workspaceValue : before?.globalValue, target);
    }
  });
});
