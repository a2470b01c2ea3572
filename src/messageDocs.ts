// Read-only documents showing one message (peeked with message.get, never leased):
// quayside-message:/<namespace>/<queue>/<id>.json
import * as vscode from 'vscode';
import type { QueueRef } from '../emulator/protocol';
import type { Transport } from '../emulator/clients/transport';

export const MESSAGE_SCHEME = 'quayside-message';

export function messageUri(r: QueueRef & { id: string }): vscode.Uri {
  return vscode.Uri.from({ scheme: MESSAGE_SCHEME, path: `/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.queue)}/${encodeURIComponent(r.id)}.json` });
}

export function parseMessageUri(uri: vscode.Uri): (QueueRef & { id: string }) | undefined {
  const parts = uri.path.split('/').filter(Boolean);
  if (parts.length !== 3) return undefined;
  return { namespace: decodeURIComponent(parts[0]), queue: decodeURIComponent(parts[1]), id: decodeURIComponent(parts[2].replace(/\.json$/, '')) };
}

export function registerMessageDocuments(transport: Transport): vscode.Disposable {
  const provider: vscode.TextDocumentContentProvider = {
    async provideTextDocumentContent(uri) {
      const r = parseMessageUri(uri);
      if (!r) return '// not a Quayside message address';
      try {
        const m = await transport.request('message.get', r);
        return JSON.stringify(m, null, 2) + '\n';
      } catch (e) {
        return `// ${(e as Error).message}\n`;
      }
    },
  };
  return vscode.workspace.registerTextDocumentContentProvider(MESSAGE_SCHEME, provider);
}
