// The queue panel in VS Code: one webview panel per queue, restored across reloads.
// The request handling lives in handler.ts (no VS Code there); this file is the thin editor glue:
// creating the panel, its HTML and CSP, the modal confirmations, the save dialog and progress.

import * as vscode from 'vscode';
import { randomBytes } from 'node:crypto';
import type { Transport } from '../../emulator/clients/transport';
import { PanelHandler, type PanelUi, type SaveTarget } from './handler';
import { makeNonce, renderPanelHtml } from './html';
import { QUEUE_PANEL_VIEW_TYPE, isQueueRef, type PanelState, type PanelTab, type QueueRef } from './messages';

export { QUEUE_PANEL_VIEW_TYPE } from './messages';
export type { PanelUi } from './handler';

type TransportSource = () => Transport | undefined;

const key = (ref: QueueRef) => `${ref.namespace}\u0000${ref.queue}`;
/** Queue names repeat across namespaces, so the tab says both. */
export const panelTitle = (ref: QueueRef) => `${ref.queue} · ${ref.namespace}`;

class QueuePanel {
  private readonly handler: PanelHandler;
  private readonly disposables: vscode.Disposable[] = [];
  private transportSource: TransportSource;

  constructor(
    readonly panel: vscode.WebviewPanel,
    private readonly context: vscode.ExtensionContext,
    readonly ref: QueueRef,
    transport: TransportSource,
    private readonly onDispose: () => void,
  ) {
    this.transportSource = transport;
    const media = vscode.Uri.joinPath(context.extensionUri, 'media', 'panel');
    panel.webview.options = { enableScripts: true, enableCommandUris: false, localResourceRoots: [media] };
    panel.title = panelTitle(ref);
    this.handler = new PanelHandler({
      ref,
      transport: () => this.transportSource(),
      ui: vscodeUi(),
      post: (m) => void panel.webview.postMessage(m).then(undefined, () => {}),
    });
    panel.webview.html = renderPanelHtml({
      cspSource: panel.webview.cspSource,
      scriptUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(media, 'dist', 'panel.js')).toString(),
      styleUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(media, 'panel.css')).toString(),
      nonce: makeNonce((n) => randomBytes(n)),
      ref,
    });
    this.disposables.push(
      panel.webview.onDidReceiveMessage((m) => void this.handler.handleMessage(m)),
      panel.onDidDispose(() => this.dispose()),
    );
  }

  setTransport(t: TransportSource) {
    this.transportSource = t;
  }

  reveal() {
    this.panel.reveal(this.panel.viewColumn ?? vscode.ViewColumn.Active);
  }

  /**
   * Bring it to the front on `tab`. A visible panel's webview is told now; a hidden one's is gone (not
   * retained) and, like a new panel's (`loaded` false), gets the tab when it loads.
   */
  show(tab: PanelTab, loaded = this.panel.visible) {
    this.handler.showTab(tab, loaded);
    this.reveal();
  }

  setConnection(up: boolean, message?: string) {
    this.handler.setConnection(up, message);
  }

  dispose() {
    this.handler.dispose();
    for (const d of this.disposables.splice(0)) d.dispose();
    this.onDispose();
  }
}

const panels = new Map<string, QueuePanel>();

function track(panel: vscode.WebviewPanel, context: vscode.ExtensionContext, ref: QueueRef, transport: TransportSource): QueuePanel {
  const k = key(ref);
  const qp = new QueuePanel(panel, context, ref, transport, () => {
    if (panels.get(k) === qp) panels.delete(k);
  });
  panels.set(k, qp);
  return qp;
}

/** Open the panel of a queue (on `tab`, if given), or bring its open panel to the front. */
export function openQueuePanel(context: vscode.ExtensionContext, transport: Transport, ref: { namespace: string; queue: string }, opts: { tab?: PanelTab } = {}): void {
  const r = { namespace: ref.namespace, queue: ref.queue };
  const open = panels.get(key(r));
  if (open) {
    open.setTransport(() => transport);
    if (opts.tab) open.show(opts.tab);
    else open.reveal();
    return;
  }
  const panel = vscode.window.createWebviewPanel(QUEUE_PANEL_VIEW_TYPE, panelTitle(r), vscode.ViewColumn.Active, {
    enableScripts: true,
    enableCommandUris: false,
    localResourceRoots: [vscode.Uri.joinPath(context.extensionUri, 'media', 'panel')],
    // The webview keeps its own state (vscode.setState) and reloads its page; no need to keep it alive hidden.
    retainContextWhenHidden: false,
  });
  const qp = track(panel, context, r, () => transport);
  // Not loaded yet: the tab goes with the answer to its first request.
  if (opts.tab) qp.show(opts.tab, false);
}

/**
 * Restore queue panels after a window reload. `"activationEvents"` is deliberately `[]`: a saved
 * panel comes back once the extension activates for its view or a command (docs/extension.md).
 */
export function registerQueuePanelSerializer(context: vscode.ExtensionContext, getTransport: () => Transport | undefined): vscode.Disposable {
  return vscode.window.registerWebviewPanelSerializer(QUEUE_PANEL_VIEW_TYPE, {
    async deserializeWebviewPanel(panel: vscode.WebviewPanel, state: unknown) {
      const ref = (state as Partial<PanelState> | undefined)?.ref;
      if (!isQueueRef(ref)) {
        panel.dispose();
        return;
      }
      const existing = panels.get(key(ref));
      if (existing) {
        panel.dispose();
        existing.reveal();
        return;
      }
      track(panel, context, { namespace: ref.namespace, queue: ref.queue }, getTransport);
    },
  });
}

/** Tell every open panel that the emulator stopped (`up` false, with why) or runs again. */
export function setQueuePanelsConnection(up: boolean, message?: string): void {
  for (const p of panels.values()) p.setConnection(up, message);
}

/**
 * The extension deactivates: let go of every panel's handler (its subscription and listeners). The
 * webview panels stay VS Code's, so a window reload still saves and restores them.
 */
export function disposeQueuePanels(): void {
  for (const p of [...panels.values()]) p.dispose();
}

/** The editor side of PanelUi: modal confirmations, a save dialog, notification progress. */
export function vscodeUi(): PanelUi {
  return {
    async confirm(message, detail, action) {
      const pick = await vscode.window.showWarningMessage(message, { modal: true, detail }, action);
      return pick === action;
    },
    async chooseSaveTarget({ suggestedName, format }): Promise<SaveTarget | undefined> {
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      const uri = await vscode.window.showSaveDialog({
        defaultUri: folder ? vscode.Uri.joinPath(folder, suggestedName) : undefined,
        filters: format === 'ndjson' ? { 'Newline-delimited JSON': ['ndjson', 'jsonl'] } : { JSON: ['json'] },
        saveLabel: 'Export',
        title: 'Export messages',
      });
      if (!uri) return undefined;
      return {
        label: uri.scheme === 'file' ? uri.fsPath : uri.toString(),
        write: async (text) => {
          await vscode.workspace.fs.writeFile(uri, Buffer.from(text, 'utf8'));
        },
      };
    },
    withProgress(title, task) {
      return Promise.resolve(
        vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, async (progress, token) => {
          let last = 0;
          return task({
            report(done, total) {
              if (total && total > 0) {
                const pct = Math.min(100, (done / total) * 100);
                progress.report({ increment: pct - last, message: `${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')}` });
                last = pct;
              } else progress.report({ message: done.toLocaleString('en-US') });
            },
            get cancelled() {
              return token.isCancellationRequested;
            },
          });
        }),
      );
    },
  };
}
