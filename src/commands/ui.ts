// Prompts shared by the commands: which queue, a modal confirmation, progress, errors.
import * as vscode from 'vscode';
import type { Dialect, MessageView, QueueInfo, QueueRef } from '../../emulator/protocol';
import type { Transport } from '../../emulator/clients/transport';
import { refFromArg } from '../core/args';
import { countsDetail } from '../tree/model';
import { messageItems, namespaceItems, plain, type MessageItem, type NamespaceItem } from './picks';

/** The queue the command is about: from the node or argument, or a quick pick. */
export async function pickQueue(transport: Transport, arg: unknown, title: string, filter?: (q: QueueInfo) => boolean): Promise<QueueRef | undefined> {
  const given = refFromArg(arg);
  if (given) return given;
  const { queues } = await transport.request('queue.list', {});
  const list = queues.filter((q) => !filter || filter(q));
  if (list.length === 0) {
    void vscode.window.showInformationMessage(queues.length === 0 ? 'Quayside: there are no queues yet. Create one with "Quayside: Create Queue".' : 'Quayside: no queue fits.');
    return undefined;
  }
  const items = list
    .sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name))
    .map((q) => ({ label: plain(q.name), description: `${plain(q.namespace)} · ${q.dialect}`, detail: countsDetail(q.counts, q.dialect), ref: { namespace: q.namespace, queue: q.name } }));
  const pick = await vscode.window.showQuickPick(items, { title, placeHolder: 'Pick a queue', matchOnDescription: true });
  return pick?.ref;
}

/**
 * A quick pick whose items follow what is typed (`itemsFor`): the accepted item, or undefined when
 * dismissed. An item `acceptable` refuses keeps the pick open.
 */
function typedPick<T extends vscode.QuickPickItem>(title: string, placeholder: string, itemsFor: (typed: string) => T[], acceptable: (item: T) => boolean = () => true, matchOnAll = false): Promise<T | undefined> {
  const qp = vscode.window.createQuickPick<T>();
  qp.title = title;
  qp.placeholder = placeholder;
  qp.matchOnDetail = matchOnAll;
  qp.matchOnDescription = matchOnAll;
  qp.items = itemsFor('');
  return new Promise((resolve) => {
    qp.onDidChangeValue((v) => (qp.items = itemsFor(v)));
    qp.onDidAccept(() => {
      const item = qp.activeItems[0];
      if (!item || !acceptable(item)) return;
      resolve(item);
      qp.hide();
    });
    qp.onDidHide(() => {
      resolve(undefined);
      qp.dispose();
    });
    qp.show();
  });
}

/**
 * A namespace from a quick pick that also takes a typed new name (see namespaceItems): the picked
 * item, or undefined when dismissed. An item whose name is not valid keeps the pick open.
 */
export function pickNamespace(namespaces: readonly { namespace: string; queues: number }[], title: string): Promise<NamespaceItem | undefined> {
  return typedPick<NamespaceItem & vscode.QuickPickItem>(title, 'Pick a namespace, or type the name of a new one', (v) => namespaceItems(namespaces, v), (item) => !item.error);
}

/**
 * A message from a peeked page, or any other of the queue's by its typed id (see messageItems):
 * its id, or undefined when dismissed.
 */
export async function pickMessage(messages: readonly MessageView[], title: string, placeholder: string, dialect?: Dialect): Promise<string | undefined> {
  return (await typedPick<MessageItem>(title, placeholder, (v) => messageItems(messages, v, dialect), undefined, true))?.id;
}

/** A modal "are you sure"; true only when the user picked `action`. */
export async function confirm(message: string, detail: string, action: string): Promise<boolean> {
  const pick = await vscode.window.showWarningMessage(message, { modal: true, detail }, action);
  return pick === action;
}

export function withProgress<T>(title: string, task: (report: (message: string) => void) => Promise<T>): Promise<T> {
  return Promise.resolve(
    vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: false }, (p) => task((message) => p.report({ message }))),
  );
}

/** A quiet status-bar spinner, for a short step before a prompt (a notification would flash). */
export function withStatusProgress<T>(title: string, task: () => Promise<T>): Promise<T> {
  return Promise.resolve(vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title }, task));
}

