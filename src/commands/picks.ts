// The palette's quick-pick items as plain data (no VS Code here), so their wording and choices are
// unit-tested; ui.ts and index.ts show them.
import type { MessageView } from '../../emulator/protocol';
import { validateName } from '../core/args';
import { attemptsText, bodyPreview } from '../tree/model';

/**
 * Text from the emulator (a body, a queue or namespace name, an error) as a quick pick shows it: a
 * `$(name)` in it stays text instead of turning into an icon.
 */
export function plain(text: string): string {
  return text.replace(/\$\(/g, '\\$(');
}

/** Peek Messages: one message. */
export function peekItem(m: MessageView) {
  return { label: plain(bodyPreview(m.body, 80)), description: plain(`${m.state} · ${attemptsText(m.attempts)}${m.deadReason ? ` · ${m.deadReason}` : ''}`), detail: m.id, m };
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
