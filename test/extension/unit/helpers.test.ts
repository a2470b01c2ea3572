import { strict as assert } from 'assert';
import { QuaysideError } from '../../../emulator/errors';
import { envNamespaceProblem, isProgrammatic, isUriLike, messageIdsFromArgs, messageRefFromArg, parseJsonBody, refFromArg, validateName } from '../../../src/core/args';
import { TREE_REFRESH_MS, batchDebounce, type Timers } from '../../../src/core/debounce';
import { advanceProblem, formatDuration, parseDuration } from '../../../src/core/duration';
import { duration } from '../../../src/panel/webview/format';
import { explainFailure, settingsCommand } from '../../../src/core/explain';
import { npmFix } from '../../../src/core/npmFix';
import { RestartQuestion, WarningOnce } from '../../../src/core/notices';
import { portProblem, settingsNeedingRestart, type EmulatorConfig } from '../../../src/core/service';
import { SwitchingTransport } from '../../../src/core/switching';
import { ScriptedTransport, change } from './ext-fakes';

describe('extension: debouncing', () => {
  it('collects everything added within the window into one run', async () => {
    const runs: number[][] = [];
    const d = batchDebounce<number>(20, (xs) => runs.push(xs));
    d.add(1);
    d.add(2);
    assert.equal(d.pending, true);
    await new Promise((r) => setTimeout(r, 5));
    d.add(3);
    assert.deepEqual(runs, []);
    await new Promise((r) => setTimeout(r, 30));
    assert.deepEqual(runs, [[1, 2, 3]]);
    d.add(4);
    d.flush();
    assert.deepEqual(runs, [[1, 2, 3], [4]]);
    d.add(5);
    d.cancel();
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(runs.length, 2);
  });

  it('a steady stream still flushes once per window (no starvation)', () => {
    let fire: (() => void) | undefined;
    const runs: number[][] = [];
    const d = batchDebounce<number>(100, (xs) => runs.push(xs), { set: (fn) => (fire = fn), clear: () => (fire = undefined) });
    for (let i = 0; i < 5; i++) d.add(i);
    fire!();
    assert.deepEqual(runs, [[0, 1, 2, 3, 4]]);
  });
});

describe('extension: the tree under a steady stream of changes', () => {
  /** Timers on a clock the test moves. */
  function manualTimers() {
    let now = 0;
    let seq = 0;
    const due = new Map<number, { at: number; fn: () => void }>();
    const timers: Timers = {
      set: (fn, ms) => (due.set(++seq, { at: now + ms, fn }), seq),
      clear: (t) => void due.delete(t as number),
    };
    const advanceTo = (t: number) => {
      for (;;) {
        const next = [...due.entries()].filter(([, d]) => d.at <= t).sort((a, b) => a[1].at - b[1].at)[0];
        if (!next) break;
        due.delete(next[0]);
        now = next[1].at;
        next[1].fn();
      }
      now = t;
    };
    return { timers, advanceTo, now: () => now };
  }

  it('VS Code, which draws a refresh only after 200 ms without another, still draws while changes keep coming', () => {
    const clock = manualTimers();
    // VS Code's tree view (extHostTreeViews): a debounce of 200 ms, leading, restarted by each refresh.
    const drawn: number[] = [];
    let handle: unknown;
    let calls = 0;
    const vscodeRefresh = () => {
      calls++;
      if (handle === undefined) drawn.push(clock.now());
      if (handle !== undefined) clock.timers.clear(handle);
      handle = clock.timers.set(() => {
        handle = undefined;
        if (calls > 1) drawn.push(clock.now());
        calls = 0;
      }, 200);
    };
    const tree = batchDebounce<number>(TREE_REFRESH_MS, () => vscodeRefresh(), clock.timers);
    // A change every 20 ms for 10 s (a producer at 50 messages a second).
    for (let t = 0; t < 10_000; t += 20) {
      clock.advanceTo(t);
      tree.add(t);
    }
    clock.advanceTo(10_000);
    const whileBusy = drawn.filter((t) => t < 10_000);
    assert.ok(whileBusy.length >= 10, `drawn ${whileBusy.length} times in 10 s of changes: ${whileBusy.slice(0, 5).join(', ')}`);
    const gaps = whileBusy.slice(1).map((t, i) => t - whileBusy[i]);
    assert.ok(Math.max(...gaps) <= 2 * TREE_REFRESH_MS, `the longest wait between draws was ${Math.max(...gaps)} ms`);
  });
});

describe('extension: command arguments', () => {
  it('queue refs from nodes and objects', () => {
    assert.deepEqual(refFromArg({ kind: 'queue', id: 'x', namespace: 'n', queue: 'q' }), { namespace: 'n', queue: 'q' });
    assert.deepEqual(refFromArg({ namespace: 'n', queue: 'q', body: 1 }), { namespace: 'n', queue: 'q' });
    assert.equal(refFromArg({ kind: 'namespace', id: 'x', namespace: 'n' }), undefined);
    assert.equal(refFromArg(undefined), undefined);
  });

  it('programmatic calls are plain objects, not tree nodes or an editor menu\'s Uri', () => {
    assert.equal(isProgrammatic({ namespace: 'n', queue: 'q' }), true);
    assert.equal(isProgrammatic({ kind: 'queue', id: 'queue:x', namespace: 'n', queue: 'q' }), false);
    assert.equal(isProgrammatic(undefined), false);
    // What editor/context and editor/title/context pass: a vscode.Uri.
    const uri = { scheme: 'file', authority: '', path: '/w/a.json', query: '', fragment: '', fsPath: '/w/a.json', with: () => uri };
    assert.equal(isUriLike(uri), true);
    assert.equal(isProgrammatic(uri), false);
    assert.equal(isUriLike({ scheme: 'file', path: '/x' }), false, 'a plain object with those fields is still a caller\'s argument');
  });

  it('message ids: the dead letters selected in the clicked node\'s queue, else the clicked node, else ids', () => {
    const m = (id: string, over: Record<string, string> = {}) => ({ kind: 'message', id: `m:${id}`, namespace: 'n', queue: 'q', folder: 'dead', messageId: id, ...over });
    assert.deepEqual(messageIdsFromArgs(m('a'), [m('a'), m('b'), { kind: 'queue', id: 'q' }]), ['a', 'b']);
    // Live messages and other queues' dead letters in the selection are left out.
    assert.deepEqual(messageIdsFromArgs(m('a'), [m('a'), m('live', { folder: 'messages' }), m('other', { queue: 'q2' }), m('ns', { namespace: 'n2' }), m('b')]), ['a', 'b']);
    // A selection without the clicked node: just the clicked one.
    assert.deepEqual(messageIdsFromArgs(m('a'), [m('b'), m('c')]), ['a']);
    assert.deepEqual(messageIdsFromArgs(m('a'), undefined), ['a']);
    // A live message node names nothing to replay or discard...
    assert.deepEqual(messageIdsFromArgs(m('a', { folder: 'messages' }), [m('a', { folder: 'messages' })]), []);
    assert.deepEqual(messageIdsFromArgs(m('a', { folder: 'messages' }), [m('b')]), []);
    // ...but one clicked within a selection stands for the selection's dead letters (of its queue).
    assert.deepEqual(messageIdsFromArgs(m('live', { folder: 'messages' }), [m('a'), m('live', { folder: 'messages' }), m('other', { queue: 'q2' }), m('b')]), ['a', 'b']);
    assert.deepEqual(messageIdsFromArgs({ namespace: 'n', queue: 'q', ids: ['x'] }, undefined), ['x']);
    assert.equal(messageIdsFromArgs({ kind: 'folder', id: 'f' }, undefined), undefined);
  });

  it('one message: a message node (its messageId) or { namespace, queue, id }; other nodes name no message', () => {
    const node = { kind: 'message', id: 'm:n/q/a', namespace: 'n', queue: 'q', folder: 'dead', messageId: 'a' };
    assert.deepEqual(messageRefFromArg(node), { namespace: 'n', queue: 'q', id: 'a' });
    assert.deepEqual(messageRefFromArg({ namespace: 'n', queue: 'q', id: 'b' }), { namespace: 'n', queue: 'q', id: 'b' });
    assert.equal(messageRefFromArg({ kind: 'folder', id: 'f:n/q/dead', namespace: 'n', queue: 'q', folder: 'dead' }), undefined, 'a folder\'s node id is no message id');
    assert.equal(messageRefFromArg({ kind: 'queue', id: 'q:n/q', namespace: 'n', queue: 'q' }), undefined);
    assert.equal(messageRefFromArg({ namespace: 'n', queue: 'q' }), undefined);
    assert.equal(messageRefFromArg({ namespace: 'n', queue: 'q', id: '' }), undefined);
    assert.equal(messageRefFromArg({ namespace: 'n', queue: 'q', id: 7 }), undefined);
    assert.equal(messageRefFromArg(undefined), undefined);
  });

  it('names and JSON bodies', () => {
    assert.equal(validateName('jobs', 'queue'), undefined);
    assert.match(validateName(' ', 'queue')!, /needed/);
    // The emulator's rule and no other: every name an app can use can be made here too.
    for (const ok of ['Acme Corp', 'shop/dev', 'shop/dev/eu', 'a\\b', 'send email', 'a/b', '--weird', 'x'.repeat(200), '\u{1F600}']) {
      assert.equal(validateName(ok, 'namespace'), undefined, ok);
      assert.equal(validateName(ok, 'queue'), undefined, ok);
    }
    assert.equal(validateName('x'.repeat(201), 'queue'), 'A queue name must be at most 200 characters');
    // Checked as it will be used: the input box's text loses the spaces (and a pasted tab) at its ends.
    assert.equal(validateName(`${'x'.repeat(200)} `, 'queue'), undefined);
    assert.equal(validateName('jobs\t', 'queue'), undefined);
    assert.equal(validateName('a\tb', 'namespace'), 'A namespace name must not contain control characters');
    assert.match(validateName('a\ud800', 'queue')!, /^A queue name must be well-formed Unicode/);
    assert.equal(envNamespaceProblem('shop/dev'), undefined);
    assert.equal(envNamespaceProblem('shop/dev/eu'), undefined);
    for (const bad of ['acme:staging', '/dev', 'shop/', `${'p'.repeat(101)}/dev`, `shop/${'e'.repeat(101)}`]) {
      assert.match(envNamespaceProblem(bad)!, /<project>\/<environment>/, bad);
    }
    assert.deepEqual(parseJsonBody('{"a":1}'), { ok: true, value: { a: 1 } });
    assert.deepEqual(parseJsonBody('"s"'), { ok: true, value: 's' });
    const bad = parseJsonBody('{a:1}');
    assert.equal(bad.ok, false);
    assert.equal(parseJsonBody('').ok, false);
  });
});

describe('extension: durations', () => {
  it('parses and formats', () => {
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('1500'), 1500);
    assert.equal(parseDuration('2 min'), 120_000);
    assert.equal(parseDuration('soon'), undefined);
    assert.equal(parseDuration('5x'), undefined);
    assert.equal(formatDuration(90_000), '1 min 30 s');
    assert.equal(formatDuration(500), '500 ms');
  });

  it('Advance Clock takes a duration of more than 0', () => {
    assert.equal(advanceProblem('30s'), undefined);
    assert.equal(advanceProblem('1500'), undefined);
    assert.equal(advanceProblem('0'), 'Advance by more than 0, such as 30s');
    assert.equal(advanceProblem('0s'), 'Advance by more than 0, such as 30s');
    assert.equal(advanceProblem('soon'), 'A duration such as 30s, 5m, 1h or 1500 (ms)');
  });

  it('says a duration as the panel does, in the tree and the palette too', () => {
    // The panel said "1 d 6 h" where the tree said "30 h", and "1 s" where it said "2 s".
    assert.equal(duration, formatDuration);
    assert.equal(formatDuration(30 * 3_600_000), '1 d 6 h');
    assert.equal(formatDuration(47 * 3_600_000 + 59 * 60_000), '1 d 23 h');
    assert.equal(formatDuration(7 * 86_400_000), '7 d');
    assert.equal(formatDuration(1_500), '1 s');
    assert.equal(formatDuration(29_900), '29 s');
    assert.equal(formatDuration(2 * 3_600_000 + 10 * 60_000), '2 h 10 min');
    assert.equal(formatDuration(999.6), '999 ms');
    assert.equal(formatDuration(0), '0 s');
    assert.equal(formatDuration(Number.NaN), '0 s');
  });
});

describe('extension: failure explanations', () => {
  it('a native module in the packaged copy offers npm i -D quayside and quayside.nodePath', () => {
    const ex = explainFailure({ code: 'native_module', message: 'better-sqlite3 does not load under Node v24 (x). Fix: run `npm i -D quayside`' }, { source: 'packaged', nodePath: '/usr/bin/node' });
    assert.match(ex.message, /npm i -D quayside/);
    assert.match(ex.message, /quayside\.nodePath/);
    assert.doesNotMatch(ex.message, /Fix: run `npm i -D quayside`.*Fix:/s);
    assert.deepEqual(ex.actions.slice(0, 2), ['installWorkspace', 'setNodePath']);
  });

  it("a quayside.json the emulator refused says it is the file, not the emulator, that needs fixing", () => {
    const ex = explainFailure({ code: 'config', message: '/w/quayside.json: queues[0].slug must be a string' });
    assert.match(ex.message, /^The workspace's quayside\.json could not be applied, so the emulator did not start: \/w\/quayside\.json: queues\[0\]\.slug must be a string\. Fix the file/);
    assert.deepEqual(ex.actions, ['showLog', 'retry']);
  });

  it('a taken port offers to attach to the emulator there (npm start\'s), or a free port', () => {
    const ex = explainFailure({ code: 'port_in_use', message: 'in use' }, { port: 7433 });
    assert.match(ex.message, /Port 7433 is already in use/);
    assert.match(ex.message, /attach to it with the token it printed/);
    assert.deepEqual(ex.actions, ['attachRunning', 'useFreePort', 'changePort']);
  });

  it('a crash points to the output for an emulator we ran; for a lost attach, to the emulator itself', () => {
    const ran = explainFailure({ code: 'crashed', message: 'the emulator exited unexpectedly (exit code 1); automatic restarts are off' }, { source: 'packaged' });
    assert.match(ran.message, /The Quayside output has what it printed/);
    const lost = explainFailure({ code: 'crashed', message: 'lost the connection to the attached emulator at ws://127.0.0.1:7433; automatic restarts are off' }, { source: 'attached' });
    assert.doesNotMatch(lost.message, /output/, 'an attached emulator prints nothing into our output');
    assert.match(lost.message, /^Lost the connection to the attached emulator at ws:\/\/127\.0\.0\.1:7433; automatic restarts are off\. It stopped answering: it was stopped, or it is paused/);
    assert.match(lost.message, /quayside\.url/);
    assert.deepEqual(lost.actions, ['retry', 'openSettings']);
  });

  it('no node says how to fix it', () => {
    const ex = explainFailure({ code: 'node_not_found', message: '"node" is not on PATH' });
    assert.match(ex.message, /quayside\.nodePath/);
    assert.ok(ex.actions.includes('setNodePath'));
  });

  it('a nodePath that does not exist says so, not to put node on PATH', () => {
    const ex = explainFailure({ code: 'node_not_found', message: '"/opt/node22/bin/node" does not exist' }, { nodePath: '/opt/node22/bin/node' });
    assert.match(ex.message, /"quayside\.nodePath" is set to \/opt\/node22\/bin\/node, and no Node\.js is there/);
    assert.doesNotMatch(ex.message, /make sure/);
    assert.deepEqual(ex.actions, ['setNodePath', 'showLog']);
  });

  it('the workspace copy that fails to load names its folder and offers npm rebuild there', () => {
    const ex = explainFailure({ code: 'native_module', message: 'NODE_MODULE_VERSION 115 vs 127' }, { source: 'workspace', nodePath: '/n/bin/node', folder: '/w/api' });
    assert.match(ex.message, /`npm rebuild better-sqlite3` in \/w\/api/);
    assert.deepEqual(ex.actions, ['rebuildWorkspace', 'setNodePath', 'showLog']);
  });
});

describe('extension: the npm fixes for a native module', () => {
  const base = { workspaceFolders: ['/w/web', '/w/api'], env: { PATH: '/usr/bin:/bin', HOME: '/h' }, platform: 'linux', exists: () => true };

  it('install runs npm with the configured Node first on PATH, in the first folder, and says which Node', () => {
    const f = npmFix({ ...base, kind: 'install', nodePath: '/opt/node22/bin/node' });
    assert.equal(f.cwd, '/w/web');
    assert.deepEqual(f.env, { PATH: '/opt/node22/bin:/usr/bin:/bin' });
    assert.deepEqual(f.lines, ['node --version', 'npm i -D quayside']);
    assert.match(f.name, /\/opt\/node22\/bin\/node/);
    assert.equal(f.createsPackageJson, false);
  });

  it('rebuild runs in the folder whose copy failed', () => {
    const f = npmFix({ ...base, kind: 'rebuild', nodePath: '/opt/node22/bin/node', folder: '/w/api' });
    assert.equal(f.cwd, '/w/api');
    assert.deepEqual(f.lines, ['node --version', 'npm rebuild better-sqlite3']);
    assert.equal(f.env.PATH, '/opt/node22/bin:/usr/bin:/bin');
  });

  it('install in a folder without package.json says it would create one; no folder, no cwd', () => {
    const seen: string[] = [];
    const f = npmFix({ ...base, kind: 'install', nodePath: '/n/node', exists: (p) => (seen.push(p), false) });
    assert.equal(f.createsPackageJson, true);
    assert.deepEqual(seen, ['/w/web/package.json']);
    assert.equal(npmFix({ ...base, kind: 'rebuild', exists: () => false }).createsPackageJson, false, 'rebuild creates nothing');
    assert.equal(npmFix({ ...base, workspaceFolders: [], kind: 'install' }).cwd, undefined);
  });

  it('Windows: the Path variable keeps its name and ; separates; an unresolved node changes nothing', () => {
    const f = npmFix({ ...base, platform: 'win32', env: { Path: 'C:\\Windows' }, kind: 'install', nodePath: 'C:\\node22\\node.exe' });
    assert.deepEqual(f.env, { Path: 'C:\\node22;C:\\Windows' });
    assert.deepEqual(npmFix({ ...base, kind: 'install', nodePath: 'node' }).env, {});
  });
});

describe('extension: settings', () => {
  it('opens a setting where it can be set: Workspace with a folder, else Remote in a remote window, else User', () => {
    assert.deepEqual(settingsCommand('quayside.nodePath', { folderOpen: true, remote: true }), { command: 'workbench.action.openWorkspaceSettings', args: [{ query: 'quayside.nodePath' }] });
    assert.deepEqual(settingsCommand('quayside.nodePath', { folderOpen: false, remote: true }), { command: 'workbench.action.openRemoteSettings', args: [{ query: 'quayside.nodePath' }] });
    assert.deepEqual(settingsCommand('quayside.port', { folderOpen: false, remote: false }), { command: 'workbench.action.openSettings', args: ['quayside.port'] });
  });

  it('a change of what the emulator read at start asks for a restart, counted as it applies; autoStart, restartOnCrash and a value written again do not', () => {
    const base: EmulatorConfig = {
      url: '', token: '', nodePath: 'node', port: 7433, host: '127.0.0.1', dataDir: '/w/.quayside', memory: false, clock: 'system',
      restartOnCrash: true, workspaceFolders: ['/w'], extensionPath: '/ext', env: {},
    };
    const now = (over: Partial<EmulatorConfig>) => ({ ...base, ...over });
    assert.deepEqual(settingsNeedingRestart(base, now({ port: 7500, dataDir: '/w/alt' })), ['quayside.port', 'quayside.dataDir']);
    assert.deepEqual(settingsNeedingRestart(base, now({ restartOnCrash: false })), []);
    // A setting removed whose default is the value it had ("clock": "system" taken out) changed nothing.
    assert.deepEqual(settingsNeedingRestart(base, now({})), []);
    assert.deepEqual(settingsNeedingRestart(base, now({ clock: 'virtual', nodePath: '/opt/node' })), ['quayside.nodePath', 'quayside.clock']);
    // The emulator the extension starts makes its own token; in memory it has no data directory.
    assert.deepEqual(settingsNeedingRestart(base, now({ token: 'x' })), []);
    assert.deepEqual(settingsNeedingRestart(now({ memory: true }), now({ memory: true, dataDir: '/w/other' })), []);
    assert.deepEqual(settingsNeedingRestart(base, now({ memory: true })), ['quayside.inMemory']);
    assert.deepEqual(settingsNeedingRestart(base, now({ memory: true, dataDir: '/w/other' })), ['quayside.inMemory'], 'going to memory, the data directory is not used');
    assert.deepEqual(settingsNeedingRestart(now({ memory: true }), now({ dataDir: '/w/other' })), ['quayside.dataDir', 'quayside.inMemory']);
    // Attached, only url and token count: the port, data and clock are the owner's.
    const attached = now({ url: 'ws://127.0.0.1:7433', token: 't' });
    assert.deepEqual(settingsNeedingRestart(attached, { ...attached, port: 9000, memory: true, clock: 'virtual' }), []);
    assert.deepEqual(settingsNeedingRestart(attached, { ...attached, token: 'u' }), ['quayside.token']);
    assert.deepEqual(settingsNeedingRestart(base, attached), ['quayside.url', 'quayside.token'], 'set: a restart attaches instead, with that token');
    assert.deepEqual(settingsNeedingRestart(attached, base), ['quayside.url'], 'cleared: a restart starts one, which takes no token');
    // A port that is not a number, as it was: no change either.
    assert.deepEqual(settingsNeedingRestart(now({ port: NaN }), now({ port: NaN })), []);
  });

  it('a start warning pops up once across automatic restarts (its figures aside), and again after a stop', () => {
    const ahead = (min: number) => `a virtual clock moved this data directory's time on to 2026-12-08T03:0${min % 10}:00.000Z, ${min} min ahead of the system clock`;
    const w = new WarningOnce();
    assert.equal(w.show(ahead(52)), true);
    for (const state of ['crashed', 'starting', 'running']) w.stateChanged(state);
    assert.equal(w.show(ahead(53)), false, 'an automatic restart a minute later: the log has it');
    assert.equal(w.show('another warning'), true);
    w.stateChanged('stopped');
    assert.equal(w.show('another warning'), true, 'after a stop, a start\'s warning is new news');
  });

  it('asks to restart for a change that applies while it runs, once it runs after a change while it started, never twice for one crash restart, and afresh after a stop', () => {
    let pending: string[] = [];
    const q = new RestartQuestion(() => pending);
    const touched = (...keys: string[]) => (k: string) => keys.includes(k);
    assert.deepEqual(q.stateChanged('running'), [], 'a start on the settings as they are');
    pending = ['quayside.port'];
    assert.deepEqual(q.settingsChanged(touched('quayside.port')), ['quayside.port']);
    assert.deepEqual(q.settingsChanged(touched('quayside.autoStart')), [], 'another setting changed: not asked again');
    assert.deepEqual(q.settingsChanged(touched('quayside.port')), ['quayside.port'], 'the port changed again: asked again');
    // A crash restart on the old settings runs again: not asked again.
    for (const state of ['crashed', 'starting']) assert.deepEqual(q.stateChanged(state), []);
    assert.deepEqual(q.stateChanged('running'), []);
    // Stop, then a start that read the new port; the port changes again while it starts.
    q.stateChanged('stopping');
    q.stateChanged('stopped');
    pending = [];
    q.stateChanged('starting');
    pending = ['quayside.port'];
    assert.deepEqual(q.stateChanged('running'), ['quayside.port'], 'changed while it started: asked once it runs');
    pending = ['quayside.port', 'quayside.clock'];
    assert.deepEqual(q.settingsChanged(touched('quayside.clock')), ['quayside.port', 'quayside.clock']);
  });

  it('a quayside.port outside 0–65535, or not a whole number, is named with what it is', () => {
    for (const ok of [0, 7433, 65535]) assert.equal(portProblem(ok), null);
    assert.equal(portProblem(70000), '"quayside.port" must be a whole number from 0 to 65535 (0: a free port), and it is 70000');
    assert.match(portProblem(-1)!, /and it is -1$/);
    assert.match(portProblem(1.5)!, /and it is 1\.5$/);
    assert.match(portProblem(NaN)!, /and it is not a number$/);
  });
});

describe('extension: the switching transport', () => {
  it('fails unavailable with nothing behind it, forwards requests and events, and reconnects on a switch', async () => {
    const s = new SwitchingTransport();
    await assert.rejects(s.request('queue.list', {}), (e: QuaysideError) => e.code === 'unavailable');
    const events: string[] = [];
    let reconnects = 0;
    s.onEvent((e) => events.push(e.event === 'change' ? e.kind : e.event));
    s.onReconnect(() => reconnects++);
    const a = new ScriptedTransport();
    s.set(a);
    assert.equal(reconnects, 1);
    assert.deepEqual(await s.request('queue.list', {}), { queues: [] });
    a.emit(change('n', 'q', 'pushed', null));
    a.reconnect();
    assert.equal(reconnects, 2);
    const b = new ScriptedTransport();
    s.set(b);
    a.emit(change('n', 'q', 'acked', null)); // the old one is no longer heard
    b.emit(change('n', 'q', 'dead', null));
    assert.deepEqual(events, ['pushed', 'dead']);
    s.set(undefined);
    await assert.rejects(s.request('queue.list', {}));
  });
});
