// The composition root: everything the extension makes is created and registered here.
import * as vscode from 'vscode';
import { registerCommands } from './commands';
import { readConfig } from './config';
import type { Snapshot } from './core/lifecycle';
import { RestartQuestion, WarningOnce } from './core/notices';
import { EmulatorService } from './core/service';
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
  const warnings = new WarningOnce();
  const svc = new EmulatorService({
    getConfig: () => readConfig(context.extensionPath, context.globalStorageUri.fsPath),
    log: (line) => log.info(line),
    warn: (message) => {
      if (warnings.show(message)) void vscode.window.showWarningMessage(`Quayside: ${message}`);
    },
  });
  service = svc;

  const tree = new QueueTreeProvider(svc.transport);
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, canSelectMany: true, showCollapseAll: true });
  tree.attach(view);
  const status = new StatusBar(() => svc.runAttachUrl);

  const restartQuestion = new RestartQuestion(() => svc.pendingSettings());
  const askRestart = (changed: string[]) => {
    if (!changed.length) return;
    void vscode.window
      .showInformationMessage(`Quayside: restart the emulator to apply the change of ${changed.join(', ')}.`, 'Restart')
      .then((p) => p && vscode.commands.executeCommand('quayside.restart'));
  };

  // Attached or started: the welcome and the status bar say which, for the run under way (a crash
  // restart keeps its mode), else as quayside.url says. The context key first: the status bar reads the same.
  const showMode = (s: Snapshot = svc.snapshot()) => {
    void vscode.commands.executeCommand('setContext', 'quayside.attachMode', !!svc.runAttachUrl);
    status.update(s);
  };

  const onState = (s: Snapshot) => {
    showMode(s);
    askRestart(restartQuestion.stateChanged(s.state));
    warnings.stateChanged(s.state);
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
      showMode();
      // A running emulator read them when it started: say so, or the change seems ignored.
      if (svc.state === 'running') askRestart(restartQuestion.settingsChanged((k) => e.affectsConfiguration(k)));
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
