// The composition root: everything the extension makes is created and registered here.
import * as vscode from 'vscode';
import { registerCommands } from './commands';
import { readConfig } from './config';
import type { Snapshot } from './core/lifecycle';
import { EmulatorService, warningShape } from './core/service';
import { registerMessageDocuments } from './messageDocs';
import { disposeQueuePanels, openQueuePanel, registerQueuePanelSerializer, setQueuePanelsConnection } from './panel';
import { connectionNotice } from './panel/handler';
import { StatusBar } from './statusBar';
import { QueueTreeProvider, VIEW_ID } from './tree/provider';
import type { TreeNode } from './tree/model';

/** What activate() returns: for tests and for other extensions. */
export interface QuaysideApi {
  service: EmulatorService;
  tree: QueueTreeProvider;
  view: vscode.TreeView<TreeNode>;
  /** Resolves once the emulator is in `state` (or rejects after `timeoutMs`). */
  waitForState(state: Snapshot['state'], timeoutMs?: number): Promise<Snapshot>;
}

let service: EmulatorService | undefined;

export function activate(context: vscode.ExtensionContext): QuaysideApi {
  const log = vscode.window.createOutputChannel('Quayside', { log: true });
  let lastWarning: string | undefined;
  const svc = new EmulatorService({
    getConfig: () => readConfig(context.extensionPath, context.globalStorageUri.fsPath),
    log: (line) => log.info(line),
    // The same warning again (an automatic restart on the same data) is in the log, not another pop-up.
    warn: (message) => {
      const shape = warningShape(message);
      if (shape === lastWarning) return;
      lastWarning = shape;
      void vscode.window.showWarningMessage(`Quayside: ${message}`);
    },
  });
  service = svc;

  const tree = new QueueTreeProvider(svc.transport);
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, canSelectMany: true, showCollapseAll: true });
  tree.attach(view);
  const status = new StatusBar(() => svc.attachUrl);

  // "Restart to apply": asked when a setting changes under a running emulator, and once it runs
  // when one changed while it started (that start had read the old one). `asked`: the settings the
  // last question named, so a crash restart on the old settings does not ask again.
  let asked = '';
  const askRestart = (always: boolean) => {
    const changed = svc.pendingSettings();
    const key = changed.join(', ');
    if (!always && key === asked) return;
    asked = key;
    if (!changed.length) return;
    void vscode.window
      .showInformationMessage(`Quayside: restart the emulator to apply the change of ${key}.`, 'Restart')
      .then((p) => p && vscode.commands.executeCommand('quayside.restart'));
  };

  const onState = (s: Snapshot) => {
    status.update(s);
    if (s.state === 'running') askRestart(false);
    void vscode.commands.executeCommand('setContext', 'quayside.state', s.state);
    void vscode.commands.executeCommand('setContext', 'quayside.virtualClock', s.state === 'running' && s.endpoint?.clock === 'virtual');
    // The view title's Stop button also cancels a pending restart.
    void vscode.commands.executeCommand('setContext', 'quayside.restartPending', s.state === 'crashed' && s.restartAt !== undefined);
    // (No view.message for a crash: a view with a message shows no welcome, and the crashed
    // welcome holds the Start button.)
    if (s.state === 'running' && !tree.model.hasTransport) tree.setRunning(true, s.endpoint?.clock);
    else if (s.state !== 'running' && tree.model.hasTransport) tree.setRunning(false);
    const notice = connectionNotice(s);
    setQueuePanelsConnection(notice.up, notice.message);
    // (A crash that is not restarted is reported by the commands, with the fixes for its cause.)
  };
  const offState = svc.lifecycle.onDidChange(onState);
  onState(svc.snapshot());
  // With quayside.url set the extension attaches rather than starts: the welcome and the status bar say so.
  const setAttachMode = () => {
    void vscode.commands.executeCommand('setContext', 'quayside.attachMode', !!svc.attachUrl);
    status.update(svc.snapshot());
  };
  setAttachMode();
  const messageDocs = registerMessageDocuments(svc.transport);

  context.subscriptions.push(
    log,
    view,
    tree,
    status,
    { dispose: offState },
    messageDocs.disposable,
    registerQueuePanelSerializer(context, () => svc.transport),
    { dispose: disposeQueuePanels },
    ...registerCommands({
      context,
      service: svc,
      tree,
      log,
      messageDocs: messageDocs.docs,
      openQueuePanel: (ref, opts) => openQueuePanel(context, svc.transport, ref, opts),
    }),
    // A port picked for one start (Use a Free Port) holds until the settings change.
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration('quayside')) return;
      svc.settingsChanged();
      setAttachMode();
      // A running emulator read them when it started: say so, or the change seems ignored.
      if (svc.state === 'running') askRestart(true);
    }),
    { dispose: () => void svc.dispose() },
  );

  if (vscode.workspace.getConfiguration('quayside').get<boolean>('autoStart')) {
    void vscode.commands.executeCommand('quayside.start');
  }

  return {
    service: svc,
    tree,
    view,
    waitForState: (state, timeoutMs = 20000) =>
      new Promise<Snapshot>((resolve, reject) => {
        const now = svc.snapshot();
        if (now.state === state) return resolve(now);
        const timer = setTimeout(() => {
          off();
          reject(new Error(`the emulator did not reach ${state} within ${timeoutMs} ms (it is ${svc.state})`));
        }, timeoutMs);
        const off = svc.lifecycle.onDidChange((s) => {
          if (s.state !== state) return;
          clearTimeout(timer);
          off();
          resolve(s);
        });
      }),
  };
}

/** No emulator is left behind: stop the one we started (it also exits when our stdin closes). */
export async function deactivate(): Promise<void> {
  const s = service;
  service = undefined;
  await s?.dispose();
}
