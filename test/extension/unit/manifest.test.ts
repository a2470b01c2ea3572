// The manifest's tree menus against the tree's fixed contextValues: what each kind of node offers, no
// menu keyed on a contextValue the tree never gives, and a handler for every contributed command.
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { CONTEXT } from '../../../src/tree/model';

const REPO = path.resolve(__dirname, '..', '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8'));
const itemMenus: { command: string; when: string; group?: string }[] = manifest.contributes.menus['view/item/context'];

/** Whether a view/item/context `when` holds for a node of the Quayside view with this contextValue (one of several selected: `many`). */
function holds(when: string, contextValue: string, many = false): boolean {
  return when.split('&&').every((raw) => {
    const term = raw.trim();
    if (term === 'listMultiSelection') return many;
    let m = /^view == (\S+)$/.exec(term);
    if (m) return m[1] === 'quayside.queues';
    m = /^viewItem == (\S+)$/.exec(term);
    if (m) return m[1] === contextValue;
    m = /^viewItem =~ \/(.+)\/$/.exec(term);
    if (m) return new RegExp(m[1]).test(contextValue);
    throw new Error(`a when clause this test cannot read: ${term}`);
  });
}

const offered = (contextValue: string, many = false) => [...new Set(itemMenus.filter((e) => holds(e.when, contextValue, many)).map((e) => e.command))].sort();

describe('extension: manifest menus', () => {
  it('each kind of tree node offers its commands (context menu and inline)', () => {
    const queue = ['deleteQueue', 'exportMessages', 'openQueue', 'peekMessages', 'purgeQueue', 'pushMessage', 'pushMessageFromEditor', 'showAuditLog', 'showMetrics'];
    const q = (names: string[]) => names.map((n) => `quayside.${n}`).sort();
    assert.deepEqual(offered(CONTEXT.queue), q(queue));
    assert.deepEqual(offered(CONTEXT.queueWithDead), q([...queue, 'purgeDeadLetters', 'replayDeadLetters']));
    assert.deepEqual(offered(CONTEXT.messages), q(['peekMessages', 'purgeQueue', 'pushMessage']));
    assert.deepEqual(offered(CONTEXT.deadLetters), q(['peekMessages', 'purgeDeadLetters', 'replayDeadLetters']));
    assert.deepEqual(offered(CONTEXT.deadLettersEmpty), [], 'nothing to peek, replay or purge');
    assert.deepEqual(offered(CONTEXT.messageLive), q(['copyMessageBody', 'showMessage']));
    assert.deepEqual(offered(CONTEXT.messageDead), q(['copyMessageBody', 'discardMessage', 'replayMessage', 'showMessage']));
    // VS Code shows for a selection only what every selected node offers: a live message among
    // selected dead letters must not take Replay and Discard away (they act on the dead ones).
    const common = (...nodes: string[]) => nodes.map((n) => offered(n, true)).reduce((a, b) => a.filter((c) => b.includes(c)));
    assert.deepEqual(common(CONTEXT.messageDead, CONTEXT.messageLive), q(['copyMessageBody', 'discardMessage', 'replayMessage', 'showMessage']));
  });

  it('the empty view has a welcome for every lifecycle state; stopped and crashed-for-good offer Start, and the extension sets no view message over it', () => {
    const welcome: { contents: string; when: string }[] = manifest.contributes.viewsWelcome;
    type Ctx = { state?: string; restartPending?: boolean; empty?: boolean; attachMode?: boolean };
    const holdsFor = (when: string, c: Ctx) =>
      when.split('||').some((alt) =>
        alt.split('&&').every((raw) => {
          const t = raw.trim();
          if (t === '!quayside.state') return c.state === undefined;
          let m = /^quayside\.state == (\w+)$/.exec(t);
          if (m) return c.state === m[1];
          m = /^(!?)quayside\.(restartPending|empty|attachMode)$/.exec(t);
          if (m) return Boolean(c[m[2] as 'restartPending' | 'empty' | 'attachMode']) === !m[1];
          throw new Error(`a when clause this test cannot read: ${t}`);
        }),
      );
    const shown = (c: Ctx) => welcome.filter((w) => holdsFor(w.when, c)).map((w) => w.contents);
    for (const c of [{}, { state: 'stopped' }, { state: 'crashed' }] as Ctx[]) {
      assert.equal(shown(c).length, 1, JSON.stringify(c));
      assert.match(shown(c)[0], /\[Start Emulator\]\(command:quayside\.start\)/, JSON.stringify(c));
    }
    assert.match(shown({ state: 'crashed' })[0], /crashed and was not restarted/);
    assert.deepEqual(shown({ state: 'crashed', restartPending: true }), ['The Quayside emulator crashed; restarting it…']);
    for (const state of ['starting', 'stopping']) assert.equal(shown({ state }).length, 1, state);
    // With quayside.url set, stopped means detached from an emulator that runs on its own.
    for (const c of [{ attachMode: true }, { state: 'stopped', attachMode: true }] as Ctx[]) {
      assert.equal(shown(c).length, 1, JSON.stringify(c));
      assert.match(shown(c)[0], /^Not attached to the emulator at quayside\.url\. It runs on its own/);
      assert.match(shown(c)[0], /\[Attach\]\(command:quayside\.start\)/);
    }
    assert.deepEqual(shown({ state: 'starting', attachMode: true }), ['Attaching to the Quayside emulator at quayside.url…']);
    // Lost an attached emulator: Attach again, not Start (which would attach anyway, under the wrong name).
    assert.equal(shown({ state: 'crashed', attachMode: true }).length, 1);
    assert.match(shown({ state: 'crashed', attachMode: true })[0], /^Lost the emulator at quayside\.url, and no longer attaching to it again\.\n\[Attach\]\(command:quayside\.start\)/);
    assert.deepEqual(shown({ state: 'crashed', restartPending: true, attachMode: true }), ['Lost the emulator at quayside.url; attaching to it again…']);
    assert.equal(shown({ state: 'running', empty: true }).length, 1);
    assert.deepEqual(shown({ state: 'running' }), [], 'a running emulator with queues shows the tree');
    const ext = fs.readFileSync(path.join(REPO, 'src', 'extension.ts'), 'utf8');
    assert.doesNotMatch(ext, /view\.message\s*=/, 'a view message would hide the welcome (and its Start button)');
  });

  it('every viewItem a menu keys on is a contextValue the tree gives', () => {
    const values: string[] = Object.values(CONTEXT);
    for (const e of itemMenus) assert.ok(values.some((v) => holds(e.when, v) || holds(e.when, v, true)), `${e.command}: ${e.when} matches no node`);
  });

  it('every contributed command has a handler, and every menu entry names a contributed command', () => {
    const declared = new Set<string>(manifest.contributes.commands.map((c: { command: string }) => c.command));
    const source = fs.readFileSync(path.join(REPO, 'src', 'commands', 'index.ts'), 'utf8');
    for (const id of declared) assert.ok(source.includes(`'${id}': async`), `a handler for ${id}`);
    for (const [menu, entries] of Object.entries(manifest.contributes.menus as Record<string, { command?: string }[]>)) {
      for (const e of entries) if (e.command) assert.ok(declared.has(e.command), `${menu}: ${e.command} is contributed`);
    }
  });
});
