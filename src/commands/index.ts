// Every command of the extension. A command run from the palette asks for what it needs; from the
// tree it takes the node (and the selected nodes); with a plain object argument it skips the prompts
// (that is how the tests and other extensions call them) and returns its result.
import * as fs from 'fs';
import * as vscode from 'vscode';
import { resolveUrl } from '../../emulator/clients/transport';
import { QuaysideError } from '../../emulator/errors';
import type { Dialect, MessageView, PushInput, QueueRef } from '../../emulator/protocol';
import { DIALECTS, envNamespaceProblem, isProgrammatic, isUriLike, messageIdsFromArgs, messageRefFromArg, parseJsonBody, refFromArg, validateName } from '../core/args';
import { advanceProblem, formatDuration, parseDuration } from '../core/duration';
import { toggleAction, type Snapshot } from '../core/lifecycle';
import type { EmulatorService } from '../core/service';
import { explainFailure, fixStillApplies, settingsCommand, type FixAction } from '../core/explain';
import { npmFix, type NpmFixKind } from '../core/npmFix';
import { workspaceFolders } from '../config';
import type { TreeNode } from '../tree/model';
import type { QueueTreeProvider } from '../tree/provider';
import { confirm, pickMessage, pickNamespace, pickQueue, withProgress, withStatusProgress } from './ui';
import { NEW_NAMESPACE_LABEL, deadLetterItem, dialectItems, messagePickHint, type NamespaceItem } from './picks';
import { MESSAGE_SCHEME, messageUri, type MessageDocuments } from '../messageDocs';
import { checkAttributes, checkDedupeKey, typedDelayProblem } from '../panel/validate';
import { ALL_STATES, isPanelTab, type ExportFormat, type PanelTab } from '../panel/messages';
import { PanelHandler } from '../panel/handler';
import { vscodeUi } from '../panel';
import { arrivedNote, capital, deadWords, qname } from '../core/wording';
import { actOnAllDead, actOnSelectedDead, type DeadAction, type DeadUi } from '../core/deadLetters';

export interface CommandContext {
  context: vscode.ExtensionContext;
  service: EmulatorService;
  tree: QueueTreeProvider;
  log: vscode.LogOutputChannel;
  messageDocs: MessageDocuments;
  openQueuePanel: (ref: QueueRef, opts?: { tab?: PanelTab }) => void;
}

type Handler = (arg?: unknown, selected?: unknown) => Promise<unknown>;

export function registerCommands(c: CommandContext): vscode.Disposable[] {
  const { service, tree, log } = c;
  const t = service.transport;

  /**
   * Whether the emulator runs, offering to start it when not. A call with a plain-object argument
   * (a test, another extension) is told at once instead: no one may be there to answer the offer.
   */
  const ensureRunning = async (arg?: unknown): Promise<boolean> => {
    if (service.state === 'running') return true;
    if (isProgrammatic(arg)) throw new QuaysideError('unavailable', `the Quayside emulator is not running (${service.state}): start it first (quayside.start)`);
    const pick = await vscode.window.showWarningMessage('The Quayside emulator is not running.', 'Start Emulator');
    if (pick === 'Start Emulator') return (await startWithUi()).state === 'running';
    return false;
  };

  /** Open the Settings editor on `key` where it can be set (see settingsCommand). */
  const openSetting = async (key: string): Promise<void> => {
    const { command, args } = settingsCommand(key, { folderOpen: !!vscode.workspace.workspaceFolders?.length, remote: !!vscode.env.remoteName });
    await vscode.commands.executeCommand(command, ...args);
  };

  /** `npm i -D quayside` / `npm rebuild better-sqlite3` in a terminal, under the Node the emulator runs on. */
  const runNpmFix = async (kind: NpmFixKind): Promise<void> => {
    const last = service.lastLaunch;
    const fix = npmFix({
      kind,
      nodePath: last?.nodePath,
      folder: last?.source === 'workspace' ? last.folder : undefined,
      workspaceFolders: workspaceFolders(),
      env: process.env,
      exists: (p) => fs.existsSync(p),
    });
    if (!fix.cwd) {
      void vscode.window.showWarningMessage('Quayside: open your project folder first; npm installs into it.');
      return;
    }
    if (fix.createsPackageJson) {
      const go = 'Create package.json and Install';
      const picked = await vscode.window.showWarningMessage(
        `${fix.cwd} has no package.json.`,
        { modal: true, detail: 'npm i -D quayside would create one there, with quayside as its only dev dependency.' },
        go,
      );
      if (picked !== go) return;
    }
    const term = vscode.window.createTerminal({ name: fix.name, cwd: fix.cwd, env: fix.env });
    term.show();
    for (const line of fix.lines) term.sendText(line);
  };

  const doFix = async (a: FixAction): Promise<void> => {
    switch (a) {
      case 'installWorkspace':
        return runNpmFix('install');
      case 'rebuildWorkspace':
        return runNpmFix('rebuild');
      case 'setNodePath':
        return openSetting('quayside.nodePath');
      case 'changePort':
        return openSetting('quayside.port');
      case 'openSettings':
        return openSetting('quayside');
      case 'showLog':
        log.show(true);
        return;
      case 'useFreePort':
        await startWithUi({ port: 0 });
        return;
      case 'attachRunning':
        return attachRunning();
      case 'retry':
        await startWithUi();
        return;
    }
  };
  /**
   * The port is taken, most likely by `npm start` in this project: set quayside.url to it and
   * quayside.token to the token it printed, then attach. The token goes to the user's settings, not
   * the workspace's, so that it does not end up in a committed .vscode/settings.json.
   */
  const attachRunning = async (): Promise<void> => {
    const port = service.lastLaunch?.port ?? vscode.workspace.getConfiguration('quayside').get<number>('port') ?? 7433;
    const url = await vscode.window.showInputBox({
      title: 'Attach to a Running Emulator',
      prompt: 'Its address (quayside.url)',
      value: `ws://127.0.0.1:${port}`,
      ignoreFocusOut: true,
      validateInput: (v) => {
        try {
          resolveUrl(v);
          return undefined;
        } catch (e) {
          return (e as Error).message;
        }
      },
    });
    if (!url) return;
    const token = await vscode.window.showInputBox({
      title: 'Attach to a Running Emulator',
      prompt: 'Its read-write token: QUAYSIDE_TOKEN as `npm start` / `quayside start` printed it (quayside.token)',
      password: true,
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'the token is needed to attach'),
    });
    if (!token) return;
    const cfg = vscode.workspace.getConfiguration('quayside');
    await cfg.update('url', url.trim(), vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global);
    await cfg.update('token', token.trim(), vscode.ConfigurationTarget.Global);
    await startWithUi();
  };

  const FIX_LABEL: Record<FixAction, string> = {
    installWorkspace: 'Run npm i -D quayside',
    rebuildWorkspace: 'Run npm rebuild better-sqlite3',
    setNodePath: 'Set quayside.nodePath',
    useFreePort: 'Use a Free Port',
    attachRunning: 'Attach to It…',
    changePort: 'Change quayside.port',
    openSettings: 'Open Settings',
    showLog: 'Show Log',
    retry: 'Retry',
  };

  /** An error toast with the fixes explainFailure offers; `crashed`: it ran, crashed and was not restarted. */
  const reportFailure = (err: { code: string; message: string; detail?: string }, crashed = false) => {
    const last = service.lastLaunch;
    const ex = explainFailure(err, { source: last?.source, nodePath: last?.nodePath, folder: last?.folder, port: last?.port, url: last?.url });
    // The explanation of a failed restart is about starting; say first that it had crashed.
    const lead = last?.source === 'attached' ? 'The attached emulator went away and attaching again failed.' : 'The emulator crashed and restarting it failed.';
    const text = crashed && err.code !== 'crashed' ? `${lead} ${ex.message}` : ex.message;
    log.error(text);
    if (err.detail) log.error(err.detail);
    // Not awaited: a command must not hang on a toast nobody clicks.
    void vscode.window.showErrorMessage(`Quayside: ${text}`, ...ex.actions.map((a) => FIX_LABEL[a])).then((picked) => {
      const action = ex.actions.find((a) => FIX_LABEL[a] === picked);
      if (!action) return;
      if (fixStillApplies(action, service.state)) void doFix(action);
      else void vscode.window.showInformationMessage(`Quayside: the emulator is ${service.state} now; that error was from an earlier start.`);
    });
  };

  /**
   * Start (or restart) with progress, and report a failure. Only this reports it: a start replaces an
   * automatic restart under way (Lifecycle.start), so the crash listener below never sees its outcome.
   */
  const startWithUi = async (opts: { port?: number; restart?: boolean } = {}): Promise<Snapshot> => {
    const { restart, ...start } = opts;
    const title = service.attachUrl ? `${restart ? 'Re-attaching' : 'Attaching'} to the Quayside emulator…` : restart ? 'Restarting the Quayside emulator…' : 'Starting the Quayside emulator…';
    const snap = await withProgress(title, () =>
      restart ? service.restart(start) : service.start(start),
    );
    if (snap.state !== 'running' && snap.error) reportFailure(snap.error);
    return snap;
  };

  // A crash that will not be restarted ends visibly, with the fixes for its cause.
  const offCrash = service.lifecycle.onDidChange((s) => {
    if (s.state === 'crashed' && s.restartAt === undefined && s.error) reportFailure(s.error, true);
  });

  // ---- commands ------------------------------------------------------------------------------

  const handlers: Record<string, Handler> = {
    'quayside.start': async (arg) => {
      const port = (arg as { port?: unknown } | undefined)?.port;
      return startWithUi(typeof port === 'number' ? { port } : {});
    },
    'quayside.stop': async (arg) => {
      // Nothing to stop: say so, rather than a "Stopping…" that stops nothing.
      if (service.state === 'stopped') {
        if (!isProgrammatic(arg)) void vscode.window.showInformationMessage('Quayside: the emulator is not running.');
        return service.snapshot();
      }
      const attached = service.snapshot().endpoint?.attached;
      await withProgress(attached ? 'Detaching from the Quayside emulator (it keeps running)…' : 'Stopping the Quayside emulator…', () => service.stop());
      return service.snapshot();
    },
    'quayside.restart': async () => startWithUi({ restart: true }),
    'quayside.toggle': async () => {
      const action = toggleAction(service.state);
      if (action === 'start') return startWithUi();
      if (action === 'stop') await service.stop();
      return service.snapshot();
    },
    'quayside.showLog': async () => log.show(),
    'quayside.refresh': async () => tree.refresh(),

    'quayside.createQueue': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const a = (arg ?? {}) as { namespace?: string; queue?: string; name?: string; dialect?: Dialect; policy?: object };
      let namespace = a.namespace;
      if (!namespace && arg && typeof arg === 'object' && (arg as TreeNode).kind === 'namespace') namespace = (arg as { namespace: string }).namespace;
      if (!namespace) {
        const { namespaces } = await t.request('namespace.list', {});
        const title = 'Create Queue (1/3): namespace';
        const pick: NamespaceItem | undefined = namespaces.length ? await pickNamespace(namespaces, title) : { label: NEW_NAMESPACE_LABEL, ask: true };
        if (!pick) return;
        // Typed names lose the spaces at their ends (a slip of the keyboard); a picked one is used as it is.
        namespace = pick.ask
          ? (await vscode.window.showInputBox({ title, prompt: 'The namespace (a cache namespace, an env project/environment such as shop/dev, a sync tenant)', value: 'default', validateInput: (s) => validateName(s, 'namespace') }))?.trim()
          : (pick.create ?? pick.namespace);
        if (!namespace) return;
      }
      const name = a.queue ?? a.name ?? (await vscode.window.showInputBox({ title: 'Create Queue (2/3): name', prompt: `A queue in ${namespace}`, validateInput: (s) => validateName(s, 'queue') }))?.trim();
      if (!name) return;
      let dialect = a.dialect;
      if (!dialect) {
        const picked = await vscode.window.showQuickPick(dialectItems(tree.model.dialectsIn(namespace)), { title: 'Create Queue (3/3): dialect' });
        dialect = picked?.label as Dialect | undefined;
      }
      if (!dialect || !DIALECTS.includes(dialect)) return;
      const envProblem = dialect === 'env' ? envNamespaceProblem(namespace) : undefined;
      if (envProblem) {
        if (isProgrammatic(arg)) throw new Error(envProblem);
        void vscode.window.showErrorMessage(`Quayside: ${envProblem}.`);
        return;
      }
      const q = await t.request('queue.create', { namespace, queue: name, dialect, ...(a.policy ? { policy: a.policy } : {}) });
      if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(`Quayside: created ${dialect} queue ${q.namespace}/${q.name}.`);
      return q;
    },

    'quayside.deleteQueue': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const ref = await pickQueue(t, arg, 'Delete Queue');
      if (!ref) return;
      if (!skipConfirm(arg) && !(await confirm(`Delete the queue ${qname(ref)}?`, 'Every message in it, live and dead, is deleted too. This cannot be undone.', 'Delete Queue'))) return;
      const r = await t.request('queue.delete', ref);
      tree.flush();
      return r;
    },

    'quayside.pushMessage': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const ref = await pickQueue(t, arg, 'Push Message');
      if (!ref) return;
      const a = (arg ?? {}) as Partial<PushInput> & { body?: unknown };
      let body: unknown;
      if (isProgrammatic(arg) && 'body' in (arg as object)) body = a.body;
      else {
        const text = await vscode.window.showInputBox({
          title: `Push Message to ${qname(ref)}`,
          prompt: 'The body as JSON (use "Push Message from Active Editor" for bigger ones)',
          value: '{"hello": "world"}',
          validateInput: (s) => {
            const r = parseJsonBody(s);
            return r.ok ? undefined : r.error;
          },
        });
        if (text === undefined) return;
        const r = parseJsonBody(text);
        if (!r.ok) return;
        body = r.value;
      }
      const input = pushInput(a, body);
      if (!isProgrammatic(arg)) {
        const options = await askPushOptions(ref);
        if (!options) return;
        Object.assign(input, options);
      }
      const res = await t.request('push', { ...ref, ...input });
      if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(pushedText(res, ref));
      return res;
    },

    'quayside.pushMessageFromEditor': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      // Editor menus pass the document's Uri (an interactive call); the palette passes nothing.
      const uri = isUriLike(arg) ? (arg as vscode.Uri) : undefined;
      const text = (arg as { text?: unknown } | undefined)?.text;
      const active = vscode.window.activeTextEditor;
      const editor = uri ? (active?.document.uri.toString() === uri.toString() ? active : undefined) : active;
      const selection = editor && !editor.selection.isEmpty ? editor.selection : undefined;
      let source: string | undefined;
      /** The document the text came from (not a `text` argument). */
      let from: vscode.TextDocument | undefined;
      if (typeof text === 'string') source = text;
      else if (editor) {
        from = editor.document;
        source = from.getText(selection);
      } else if (uri) {
        from = await vscode.workspace.openTextDocument(uri);
        source = from.getText();
      }
      if (source === undefined) {
        void vscode.window.showErrorMessage('Quayside: open a JSON document first; its content is the message body.');
        return;
      }
      // One of Quayside's own message documents (Show Message): that message is pushed again (its
      // body, content type, attributes, and a sync message's orderingKey and meta), not the view (id,
      // state, attempts…) around it; the document of a message that is gone shows none. Not its
      // dedupe key: the copy would be deduplicated onto the message it copies, and nothing sent.
      let again: Partial<PushInput> = {};
      if (from?.uri.scheme === MESSAGE_SCHEME && !selection) {
        const shown = parseJsonBody(source);
        const view = shown.ok && shown.value !== null && typeof shown.value === 'object' ? (shown.value as Record<string, unknown>) : undefined;
        if (!view || !('body' in view) || !('state' in view)) {
          const msg = 'Quayside: this message document shows no message (it is gone); there is no body to push.';
          if (isProgrammatic(arg)) throw new Error(msg);
          void vscode.window.showErrorMessage(msg);
          return;
        }
        source = JSON.stringify(view.body);
        again = copyOf(view as Partial<MessageView>);
      }
      const parsed = parseJsonBody(source);
      if (!parsed.ok) {
        const msg = `Quayside: the ${selection ? 'selection' : 'document'} is not a valid JSON body. ${parsed.error}`;
        if (isProgrammatic(arg)) throw new Error(msg);
        void vscode.window.showErrorMessage(msg);
        return;
      }
      const ref = await pickQueue(t, arg, 'Push Message from Active Editor'); // a Uri names no queue: the pick is offered
      if (!ref) return;
      const res = await t.request('push', { ...ref, ...again, ...pushInput((isProgrammatic(arg) ? arg : {}) as Partial<PushInput>, parsed.value) });
      if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(pushedText(res, ref));
      return res;
    },

    'quayside.peekMessages': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const ref = await pickQueue(t, arg, 'Peek Messages');
      if (!ref) return;
      // From a folder, just that folder's messages; from a queue (or the palette), all of them.
      const folder = (arg as TreeNode | undefined)?.kind === 'folder' ? (arg as { folder: string }).folder : undefined;
      const states: MessageView['state'][] = folder === 'dead' ? ['dead'] : folder === 'messages' ? ['ready', 'delayed', 'leased'] : ['ready', 'delayed', 'leased', 'dead'];
      const r = await t.request('peek', { ...ref, states, limit: 100 });
      if (isProgrammatic(arg)) return r;
      if (r.messages.length === 0) {
        void vscode.window.showInformationMessage(`Quayside: ${qname(ref)} holds no messages.`);
        return r;
      }
      const { dialect } = await t.request('queue.get', ref);
      const id = await pickMessage(r.messages, `Peek ${qname(ref)}: ${r.messages.length} of ${r.total} (nothing is leased)`, messagePickHint(r.messages.length, r.total), dialect);
      if (id) await showMessage({ ...ref, id });
      return r;
    },

    'quayside.openQueue': async (arg) => openQueue(arg, 'Open Queue'),
    'quayside.showAuditLog': async (arg) => openQueue(arg, 'Show Audit Log', 'audit'),
    'quayside.showMetrics': async (arg) => openQueue(arg, 'Show Depth and Lag Chart', 'metrics'),

    // The panel's Export, from the palette or a queue's menu: the same host-side code, no webview.
    'quayside.exportMessages': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const ref = await pickQueue(t, arg, 'Export Messages');
      if (!ref) return;
      const programmatic = isProgrammatic(arg);
      const given = programmatic ? (arg as { format?: unknown; states?: unknown; file?: unknown }) : {};
      // A caller's object that names no states exports every message (it skips the prompts).
      let states = (given.states ?? (programmatic ? [...ALL_STATES] : undefined)) as MessageView['state'][] | undefined;
      if (states === undefined) {
        // The dead ones in the queue's own words (env: failed messages).
        const words = deadWords((await t.request('queue.get', ref)).dialect);
        const what = await vscode.window.showQuickPick(
          [
            { label: 'Every message', detail: `ready, delayed, in flight and ${words.state}`, states: [...ALL_STATES] },
            { label: 'Live messages', detail: 'ready, delayed and in flight', states: ['ready', 'delayed', 'leased'] as MessageView['state'][] },
            { label: capital(words.many), states: ['dead'] as MessageView['state'][] },
          ],
          { title: `Export Messages of ${qname(ref)}`, placeHolder: 'Which messages?' },
        );
        if (!what) return;
        states = what.states;
      }
      const format =
        given.format !== undefined
          ? given.format
          : (
              await vscode.window.showQuickPick(
                [
                  { label: 'JSON', description: 'one array of every message', format: 'json' },
                  { label: 'NDJSON', description: 'one message per line', format: 'ndjson' },
                ],
                { title: `Export Messages of ${qname(ref)}`, placeHolder: 'In which format?' },
              )
            )?.format;
      if (!format) return;
      const ui = vscodeUi();
      // Called with { file }: no save dialog, as every prompt is skipped for a programmatic call.
      const file = typeof given.file === 'string' && given.file !== '' ? given.file : undefined;
      if (file) ui.chooseSaveTarget = async () => ({ label: file, write: (text) => fs.promises.writeFile(file, text, 'utf8') });
      const handler = new PanelHandler({ ref, transport: t, ui, post: () => {} });
      try {
        const r = await handler.dispatch('export', { format: format as ExportFormat, states });
        if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(`Quayside: exported ${r.exported} message(s) of ${qname(ref)} to ${r.target}.`);
        return r;
      } catch (e) {
        if ((e as { code?: unknown }).code === 'cancelled') return;
        throw e;
      } finally {
        handler.dispose();
      }
    },

    'quayside.replayDeadLetters': async (arg, selected) => deadLettersCommand('replay', arg, selected),
    'quayside.purgeDeadLetters': async (arg, selected) => deadLettersCommand('purge', arg, selected),

    'quayside.purgeQueue': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const ref = await pickQueue(t, arg, 'Purge Queue');
      if (!ref) return;
      if (!skipConfirm(arg) && !(await confirm(`Purge every live message of ${qname(ref)}?`, 'Ready, delayed and in-flight messages are deleted (dead letters stay). This cannot be undone.', 'Purge Queue'))) return;
      const r = await withProgress(`Purging ${qname(ref)}`, () => t.request('purge', { ...ref, confirm: ref.queue }));
      if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(`Quayside: purged ${r.purged} from ${qname(ref)}.`);
      return r;
    },

    'quayside.copyConnectionSettings': async () => {
      const s = service.connectionSettings() ?? ((await ensureRunning()) ? service.connectionSettings() : undefined);
      if (!s) return;
      await vscode.env.clipboard.writeText(s);
      void vscode.window.showInformationMessage('Quayside: copied QUAYSIDE_URL and QUAYSIDE_TOKEN to the clipboard.');
      return s;
    },

    'quayside.advanceClock': async (arg) => {
      if (!(await ensureRunning(arg))) return;
      const clock = await t.request('clock.now', {});
      if (clock.mode !== 'virtual') {
        const setting = vscode.workspace.getConfiguration('quayside').get<string>('clock');
        const attached = service.lastLaunch?.source === 'attached';
        // Set already: the emulator was started before, and reads the setting only when it starts.
        const restart = !attached && setting === 'virtual';
        const msg = attached
          ? 'Quayside: the attached emulator runs on the system clock, so there is nothing to advance. Start it with `--clock virtual`.'
          : restart
            ? 'Quayside: the emulator was started on the system clock; "quayside.clock" is "virtual" now, so restart the emulator to use it.'
            : 'Quayside: the emulator runs on the system clock, so there is nothing to advance. Set "quayside.clock" to "virtual" and restart the emulator.';
        if (isProgrammatic(arg)) throw new Error(msg);
        if (attached) void vscode.window.showWarningMessage(msg);
        else if (restart) void vscode.window.showWarningMessage(msg, 'Restart Emulator').then((p) => p && startWithUi({ restart: true }));
        else void vscode.window.showWarningMessage(msg, 'Open Setting').then((p) => p && openSetting('quayside.clock'));
        return;
      }
      let ms = typeof arg === 'number' ? arg : typeof (arg as { ms?: unknown })?.ms === 'number' ? (arg as { ms: number }).ms : undefined;
      if (ms === undefined) {
        const text = await vscode.window.showInputBox({
          title: 'Advance Clock',
          prompt: `Virtual time is ${new Date(clock.now).toISOString()}. How far to move it (e.g. 30s, 5m, 1h30m, 250ms)?`,
          value: '30s',
          validateInput: advanceProblem,
        });
        if (text === undefined) return;
        ms = parseDuration(text);
        if (!ms) return;
      }
      const r = await withProgress(`Advancing the clock by ${ms % 1000 ? `${ms.toLocaleString('en-US')} ms` : formatDuration(ms)}`, () => t.request('clock.advance', { ms: ms! }));
      if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(`Quayside: the clock is now ${new Date(r.now).toISOString()}.`);
      return r;
    },

    // Tree-only helpers.
    'quayside.loadMore': async (arg) => {
      if (arg && typeof arg === 'object') await tree.loadMore(arg as TreeNode);
    },
    'quayside.showMessage': async (arg) => {
      const ref = messageRefFromArg(arg);
      if (ref) return showMessage(ref);
      // From the palette: which queue, then which message (one of the first page, or any by its id).
      if (isProgrammatic(arg) && !refFromArg(arg)) return noMessageGiven('Show Message');
      if (!(await ensureRunning(arg))) return;
      const q = await pickQueue(t, arg, 'Show Message');
      if (!q) return;
      const [r, { dialect }] = await Promise.all([t.request('peek', { ...q, states: ['ready', 'delayed', 'leased', 'dead'], limit: 100 }), t.request('queue.get', q)]);
      const id = await pickMessage(r.messages, `Show Message: ${qname(q)}`, messagePickHint(r.messages.length, r.total), dialect);
      return id ? showMessage({ ...q, id }) : undefined;
    },
    'quayside.replayMessage': async (arg, selected) => handlers['quayside.replayDeadLetters'](arg, selected),
    'quayside.discardMessage': async (arg, selected) => handlers['quayside.purgeDeadLetters'](arg, selected),
    'quayside.copyMessageBody': async (arg) => {
      const ref = messageRefFromArg(arg);
      if (!ref) return noMessageGiven('Copy Body');
      const node = arg as TreeNode;
      const m = (node.kind === 'message' ? tree.model.message(node) : undefined) ?? (await t.request('message.get', ref));
      const text = JSON.stringify(m.body, null, 2);
      await vscode.env.clipboard.writeText(text);
      return text;
    },
  };

  /** A message command run with no message (a keybinding, the palette): say where it works instead of doing nothing. */
  function noMessageGiven(what: string): undefined {
    void vscode.window.showInformationMessage(`Quayside: ${what} works on a message: run it from a message in the Quayside view, or use Peek Messages.`);
    return undefined;
  }

  async function showMessage(r: QueueRef & { id: string }): Promise<vscode.TextDocument> {
    const uri = messageUri(r);
    // Shown again: VS Code would show its cached text; have it read the message afresh.
    c.messageDocs.refresh(uri);
    // Setting the language reopens the document: keep the one it gives back.
    const doc = await vscode.languages.setTextDocumentLanguage(await vscode.workspace.openTextDocument(uri), 'json');
    await vscode.window.showTextDocument(doc, { preview: true });
    return doc;
  }

  async function openQueue(arg: unknown, title: string, tab?: PanelTab): Promise<QueueRef | undefined> {
    // A given queue's panel opens while stopped too (it says so); picking one needs the emulator,
    // so from the palette it offers Start and goes on once it runs.
    let ref = refFromArg(arg);
    if (!ref) {
      if (!(await ensureRunning(arg))) return;
      ref = await pickQueue(t, arg, title);
      if (!ref) return;
    }
    const asked = (arg as { tab?: unknown } | undefined)?.tab;
    c.openQueuePanel(ref, { tab: tab ?? (isProgrammatic(arg) && isPanelTab(asked) ? asked : undefined) });
    return ref;
  }

  /**
   * Replay / Purge Dead Letters: the selected ones (tree, palette pick, `ids`) or all of them. "All"
   * lists the ids first, confirms with their count and acts on just those (core/deadLetters).
   */
  async function deadLettersCommand(action: DeadAction, arg: unknown, selected: unknown) {
    const replay = action === 'replay';
    const result = (n: number, arrived?: number) => ({ [replay ? 'replayed' : 'purged']: n, ...(arrived ? { arrived } : {}) });
    if (!(await ensureRunning(arg))) return;
    let ids = messageIdsFromArgs(arg, selected);
    if (ids?.length === 0) return nothingSelected(arg, result(0));
    const ref = await pickQueue(t, arg, replay ? 'Replay Dead Letters' : 'Purge Dead Letters', (q) => q.counts.dead > 0);
    if (!ref) return;
    const { dialect } = await t.request('queue.get', ref);
    const area = deadWords(dialect).many;
    if (!arg) {
      const picked = await pickDeadLetters(ref, area, replay ? 'Replay' : 'Purge');
      if (!picked) return;
      if (picked !== 'all') ids = picked;
    }
    const tell = (text: string) => {
      if (!isProgrammatic(arg)) void vscode.window.showInformationMessage(`Quayside: ${text}`);
    };
    // The flow and its wording are core/deadLetters' (shared with the panel); `confirm: false` skips the modal.
    const ui: DeadUi = {
      confirm: (question, detail, button) => (skipConfirm(arg) ? Promise.resolve(true) : confirm(question, detail, button)),
      withProgress: (title, task) => withProgress(title, (report) => task({ report: (d, n) => report(`${d} of ${n}`) })),
      listing: withStatusProgress,
    };
    if (ids) {
      const r = await actOnSelectedDead(t, ref, action, ids, dialect, ui);
      if (!r) return;
      tell(`${replay ? 'replayed' : 'discarded'} ${r.done} of ${ids.length} from ${qname(ref)}.`);
      return result(r.done);
    }
    const r = await actOnAllDead(t, ref, action, dialect, ui);
    if (!r) return;
    if (r.listed === 0) {
      tell(`${qname(ref)} has no ${area}.`);
      return result(0);
    }
    tell(`${replay ? 'replayed' : 'purged'} ${r.done} from ${qname(ref)}${arrivedNote(r.arrived)}.`);
    return result(r.done, r.arrived);
  }

  /** The tree's clicked node was a live message: nothing to replay or discard. */
  function nothingSelected<T>(arg: unknown, result: T): T {
    if (!isProgrammatic(arg)) void vscode.window.showInformationMessage('Quayside: only dead letters can be replayed or discarded.');
    return result;
  }

  /** The palette's choice of dead letters: 'all', some ids, or undefined (cancelled, or nothing ticked). */
  async function pickDeadLetters(ref: QueueRef, area: string, verb: 'Replay' | 'Purge'): Promise<'all' | string[] | undefined> {
    const page = await t.request('dead.list', { ...ref, limit: 200 });
    if (page.total === 0) return 'all'; // the "all" path says there are none
    const ALL = { label: `$(check-all) All ${page.total} ${area}`, description: 'every one, not only those listed', all: true as const };
    const items = page.messages.map(deadLetterItem);
    const picked = await vscode.window.showQuickPick<vscode.QuickPickItem & { all?: true; id?: string }>([ALL, ...items], {
      title: `${verb} ${area} of ${qname(ref)}${page.next ? ` (${page.messages.length} of ${page.total} listed)` : ''}`,
      placeHolder: `Tick the ones to ${verb.toLowerCase()}, or "All"`,
      canPickMany: true,
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (!picked) return undefined;
    if (picked.length === 0) {
      // Accepted with nothing ticked: a cancel, but say so rather than do nothing silently.
      void vscode.window.showInformationMessage(`Quayside: nothing picked, so nothing was ${verb === 'Replay' ? 'replayed' : 'purged'}.`);
      return undefined;
    }
    if (picked.some((p) => p.all)) return 'all';
    return picked.map((p) => p.id!).filter(Boolean);
  }

  /** Push Message's optional second step: "Push" as is, or a delay, a dedupe key and attributes. */
  async function askPushOptions(ref: QueueRef): Promise<Partial<PushInput> | undefined> {
    const title = `Push Message to ${qname(ref)}`;
    const how = await vscode.window.showQuickPick(
      [
        { label: 'Push', description: 'now, as it is' },
        { label: 'Push with options…', description: 'a delay, a dedupe key, attributes' },
      ],
      { title },
    );
    if (!how) return undefined;
    if (how.label === 'Push') return {};
    // The queue's own limit, so a delay it would refuse is caught before the other questions.
    const maxDelayMs = await t.request('queue.get', ref).then((q) => q.policy.maxDelayMs, () => undefined);
    const delay = await vscode.window.showInputBox({
      title: `${title}: delay`,
      prompt: 'Deliver after this long (e.g. 30s, 5m, 1h, 500ms); empty for now',
      validateInput: (s) => typedDelayProblem(s, maxDelayMs),
    });
    if (delay === undefined) return undefined;
    const key = await vscode.window.showInputBox({ title: `${title}: dedupe key`, prompt: 'A dedupe key; empty for none', validateInput: (s) => (s === '' ? undefined : checkDedupeKey(s)) });
    if (key === undefined) return undefined;
    const attrs = await vscode.window.showInputBox({
      title: `${title}: attributes`,
      prompt: 'Attributes as a JSON object, e.g. {"source": "vscode", "retries": 3}; empty for none',
      validateInput: (s) => {
        const r = checkAttributes(s);
        return r.ok ? undefined : r.error;
      },
    });
    if (attrs === undefined) return undefined;
    const options: Partial<PushInput> = {};
    const delayMs = delay.trim() ? parseDuration(delay) : undefined;
    if (delayMs) options.delayMs = delayMs;
    // As typed, spaces and all: the emulator matches keys exactly, as the app's own pushes do.
    if (key !== '') options.dedupeKey = key;
    const a = checkAttributes(attrs);
    if (a.ok && a.value) options.attributes = a.value;
    return options;
  }

  const registered = Object.entries(handlers).map(([id, fn]) =>
    vscode.commands.registerCommand(id, async (arg?: unknown, selected?: unknown) => {
      try {
        return await fn(arg, selected);
      } catch (e) {
        const err = e as { code?: string; message?: string };
        const text = err.message ?? String(e);
        log.error(`${id}: ${text}`);
        if (err.code === 'unavailable' && service.state !== 'running') {
          void vscode.window.showErrorMessage('Quayside: the emulator is not running.', 'Start Emulator').then((p) => p && startWithUi());
        } else {
          void vscode.window.showErrorMessage(text.startsWith('Quayside') ? text : `Quayside: ${text}`);
        }
        if (isProgrammatic(arg) || typeof arg === 'number') throw e;
        return undefined;
      }
    }),
  );
  return [...registered, { dispose: offCrash }];
}

function skipConfirm(arg: unknown): boolean {
  return isProgrammatic(arg) && (arg as { confirm?: unknown }).confirm === false;
}

/** What a push did, in words: a deduplicated one enqueued nothing. */
function pushedText(res: { id: string; deduped: boolean }, ref: QueueRef): string {
  return res.deduped ? `Quayside: deduplicated — the key already belongs to ${res.id}.` : `Quayside: pushed ${res.id} to ${qname(ref)}.`;
}

/** What a shown message carries that a copy of it keeps (see Push Message from Active Editor). */
function copyOf(view: Partial<MessageView>): Partial<PushInput> {
  const out: Partial<PushInput> = {};
  if (view.attributes && typeof view.attributes === 'object') out.attributes = view.attributes;
  if (typeof view.contentType === 'string') out.contentType = view.contentType;
  if (typeof view.orderingKey === 'string') out.orderingKey = view.orderingKey;
  if (view.meta !== null && view.meta !== undefined) out.meta = view.meta;
  return out;
}

function pushInput(a: Partial<PushInput>, body: unknown): PushInput {
  const input: PushInput = { body };
  if (typeof a.delayMs === 'number') input.delayMs = a.delayMs;
  if (typeof a.dedupeKey === 'string') input.dedupeKey = a.dedupeKey;
  if (a.attributes && typeof a.attributes === 'object') input.attributes = a.attributes;
  if (typeof a.contentType === 'string') input.contentType = a.contentType;
  return input;
}

export type { MessageView };
