// Read-only documents showing one message (peeked with message.get, never leased):
// quayside-message:/<namespace>/<queue>/<id>.json
import * as vscode from 'vscode';
import type { Transport } from '../emulator/clients/transport';
import { refreshOnChanges, type MessageAddress } from './core/messageRefresh';
import { messageText } from './core/messageText';

export const MESSAGE_SCHEME = 'quayside-message';

export function messageUri(r: MessageAddress): vscode.Uri {
  return vscode.Uri.from({ scheme: MESSAGE_SCHEME, path: `/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.queue)}/${encodeURIComponent(r.id)}.json` });
}

export function parseMessageUri(uri: vscode.Uri): MessageAddress | undefined {
  const parts = uri.path.split('/').filter(Boolean);
  if (parts.length !== 3) return undefined;
  return { namespace: decodeURIComponent(parts[0]), queue: decodeURIComponent(parts[1]), id: decodeURIComponent(parts[2].replace(/\.json$/, '')) };
}

/**
 * The message documents' provider. VS Code caches a virtual document's text, so it is told to read
 * again (`onDidChange`) when a message is shown again (at once) and when change events name an open
 * one (coalesced: see refreshOnChanges). Events come from the subscriptions others hold on the
 * shared transport (the tree subscribes to all).
 */
export class MessageDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly watch: { dispose(): void };

  constructor(private readonly transport: Transport) {
    this.watch = refreshOnChanges({
      transport,
      openDocuments: () => openMessageDocuments(),
      refresh: (uri) => this.changed.fire(uri),
      key: (uri) => uri.toString(),
    });
  }

  provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    return messageText(this.transport, parseMessageUri(uri));
  }

  /** Read the message again the next time (or now, if open) its document is shown. */
  refresh(uri: vscode.Uri): void {
    this.changed.fire(uri);
  }

  dispose(): void {
    this.watch.dispose();
    this.changed.dispose();
  }
}

function* openMessageDocuments(): Generator<{ uri: vscode.Uri; message: MessageAddress }> {
  for (const doc of vscode.workspace.textDocuments) {
    if (doc.uri.scheme !== MESSAGE_SCHEME || doc.isClosed) continue;
    const message = parseMessageUri(doc.uri);
    if (message) yield { uri: doc.uri, message };
  }
}

export function registerMessageDocuments(transport: Transport): { docs: MessageDocuments; disposable: vscode.Disposable } {
  const docs = new MessageDocuments(transport);
  const registration = vscode.workspace.registerTextDocumentContentProvider(MESSAGE_SCHEME, docs);
  return { docs, disposable: vscode.Disposable.from(registration, docs) };
}
