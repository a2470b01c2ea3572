// The palette's quick-pick items as plain data (no VS Code here), so their wording and choices are
// unit-tested; ui.ts and index.ts show them.
import type { Dialect, MessageView } from '../../emulator/protocol';
import { validateName } from '../core/args';
import { bodyPreview, deadWords } from '../core/wording';
import { attemptsText } from '../tree/model';

/**
 * Text from the emulator (a body, a queue or namespace name, an error) as a quick pick shows it: a
 * `$(name)` in it stays text instead of turning into an icon.
 */
export function plain(text: string): string {
  return text.replace(/\$\(/g, '\\$(');
}

const DIALECT_ITEMS: readonly { label: Dialect; description: string }[] = [
  { label: 'cache', description: 'push / pull / ack / nack, dead letters (5 deliveries, 30 s lease)' },
  { label: 'env', description: 'send / consumer apps / HTTP API, "Failed" area (maxRetries 3)' },
  { label: 'sync', description: 'send / recv / stream, dlq (10 deliveries)' },
];

/**
 * Create Queue's dialect step: the dialect of the namespace's own queues first (the pick's first
 * item is the one Enter takes), the others after in their usual order.
 */
export function dialectItems(inNamespace: readonly Dialect[]) {
  const count = (d: Dialect) => inNamespace.filter((x) => x === d).length;
  return [...DIALECT_ITEMS].sort((a, b) => count(b.label) - count(a.label));
}

/** Peek Messages: one message (a dead one in its queue's word: env says "failed"). */
export function peekItem(m: MessageView, dialect?: Dialect) {
  const state = m.state === 'dead' ? deadWords(dialect).state : m.state;
  return { label: plain(bodyPreview(m.body, 80)), description: plain(`${state} · ${attemptsText(m.attempts)}${m.deadReason ? ` · ${m.deadReason}` : ''}`), detail: m.id, m };
}

/** What a message id looks like (`m_` and a number), so a typed one can be offered before asking the emulator. */
const MESSAGE_ID = /^m_[1-9][0-9]{0,15}$/;

export interface MessageItem {
  label: string;
  description?: string;
  detail?: string;
  alwaysShow?: boolean;
  /** The message to show. */
  id: string;
}

/**
 * Show Message and Peek Messages: the page of messages peeked, and a typed message id that is not
 * on it (a queue holds more than one page), offered first, so any message can be opened by its id.
 */
export function messageItems(messages: readonly MessageView[], typed: string, dialect?: Dialect): MessageItem[] {
  const items: MessageItem[] = messages.map((m) => ({ ...peekItem(m, dialect), id: m.id }));
  const id = typed.trim();
  if (MESSAGE_ID.test(id) && !messages.some((m) => m.id === id)) items.unshift({ label: `$(go-to-file) Show ${id}`, description: 'by its id', id, alwaysShow: true });
  return items;
}

/** A message pick's hint: how much of the queue it lists, and that any other opens by its id. */
export function messagePickHint(shown: number, total: number): string {
  return shown < total ? `The first ${shown} of ${total}: type a message id (m_…) to open any other` : 'Pick a message, or type its id (m_…)';
}

/** Replay / Purge Dead Letters: one dead letter to tick. */
export function deadLetterItem(m: MessageView) {
  return { label: plain(bodyPreview(m.body, 80)), description: plain(`${m.deadReason ?? 'dead'} · ${attemptsText(m.attempts)}`), detail: plain(m.lastError ? `${m.id} · ${m.lastError}` : m.id), id: m.id };
}

export interface NamespaceItem {
  label: string;
  description?: string;
  detail?: string;
  alwaysShow?: boolean;
  /** An existing namespace. */
  namespace?: string;
  /** The typed name, to create. */
  create?: string;
  /** Why the typed name cannot be used: accepting this item does nothing. */
  error?: string;
  /** "New namespace…": ask in an input box. */
  ask?: true;
}

export const NEW_NAMESPACE_LABEL = '$(add) New namespace…';

/**
 * Create Queue's first step: the namespaces, "New namespace…", and, once something is typed that is
 * not one of them, that text as an item of its own (the filter would otherwise leave nothing to
 * accept), checked as the input box checks it.
 */
export function namespaceItems(namespaces: readonly { namespace: string; queues: number }[], typed: string): NamespaceItem[] {
  const items: NamespaceItem[] = namespaces.map((n) => ({ label: plain(n.namespace), description: `${n.queues} ${n.queues === 1 ? 'queue' : 'queues'}`, namespace: n.namespace }));
  const name = typed.trim();
  if (name && !namespaces.some((n) => n.namespace === name)) {
    const error = validateName(name, 'namespace');
    // alwaysShow: the label's quotes and icon must not let the filter hide it.
    items.unshift(
      error
        ? { label: `$(error) Cannot create namespace "${plain(name)}"`, detail: error, error, alwaysShow: true }
        : { label: `$(add) Create namespace "${plain(name)}"`, description: 'new', create: name, alwaysShow: true },
    );
  }
  items.push({ label: NEW_NAMESPACE_LABEL, ask: true });
  return items;
}
