// What a command was called with: a tree node, the nodes selected with it, or a plain object
// (from tests, other extensions, keybindings). No VS Code here.
import { nameProblem, type Dialect, type QueueRef } from '../../emulator/protocol';

interface Refish {
  kind?: string;
  namespace?: unknown;
  queue?: unknown;
}

export function isTreeNode(a: unknown): boolean {
  return !!a && typeof a === 'object' && typeof (a as Refish).kind === 'string' && typeof (a as { id?: unknown }).id === 'string';
}

/** A `vscode.Uri` (what editor menus pass), told apart without importing VS Code. */
export function isUriLike(a: unknown): boolean {
  const u = a as { scheme?: unknown; path?: unknown; with?: unknown } | null;
  return !!u && typeof u === 'object' && typeof u.scheme === 'string' && typeof u.path === 'string' && typeof u.with === 'function';
}

/** A plain object argument (not a tree node, not an editor's Uri, not nothing): a caller that wants results, not prompts. */
export function isProgrammatic(a: unknown): boolean {
  return !!a && typeof a === 'object' && !Array.isArray(a) && !isTreeNode(a) && !isUriLike(a);
}

/** The queue a node or an argument names, if it names one. */
export function refFromArg(a: unknown): QueueRef | undefined {
  if (!a || typeof a !== 'object') return undefined;
  const r = a as Refish;
  if (typeof r.namespace === 'string' && typeof r.queue === 'string' && r.namespace && r.queue) return { namespace: r.namespace, queue: r.queue };
  return undefined;
}

interface MessageNodeish {
  kind?: unknown;
  folder?: unknown;
  namespace?: unknown;
  queue?: unknown;
  messageId?: unknown;
}

const isMessageNode = (n: unknown): n is MessageNodeish & { messageId: string } =>
  !!n && typeof n === 'object' && (n as MessageNodeish).kind === 'message' && typeof (n as MessageNodeish).messageId === 'string';

/**
 * The one message a command acts on: a message node of the tree, or `{ namespace, queue, id }` (tests,
 * keybindings, other extensions). Undefined for anything else.
 */
export function messageRefFromArg(a: unknown): (QueueRef & { id: string }) | undefined {
  const ref = refFromArg(a);
  if (!ref) return undefined;
  // Another tree node (a queue, a folder) has an `id` too, but it is the node's, not a message's.
  const id = isMessageNode(a) ? a.messageId : isProgrammatic(a) ? (a as { id?: unknown }).id : undefined;
  return typeof id === 'string' && id ? { ...ref, id } : undefined;
}

/**
 * The dead letters a replay / discard acts on: for a clicked dead-message node, the selected dead
 * messages of the same queue (when the selection holds the clicked node) or just that one; `[]` for
 * a live message node (nothing to act on); else the argument's `ids`.
 */
export function messageIdsFromArgs(arg: unknown, selected: unknown): string[] | undefined {
  if (isMessageNode(arg)) {
    const sel = (Array.isArray(selected) ? selected : []).filter((n): n is MessageNodeish & { messageId: string } => isMessageNode(n) && n.namespace === arg.namespace && n.queue === arg.queue);
    // Clicked within the selection (even on a live message of it): the selection's dead letters of
    // the clicked node's queue, as the command acts on that queue alone.
    if (sel.some((n) => n.folder === arg.folder && n.messageId === arg.messageId)) return [...new Set(sel.filter((n) => n.folder === 'dead').map((n) => n.messageId))];
    return arg.folder === 'dead' ? [arg.messageId] : [];
  }
  const ids = (arg as { ids?: unknown } | undefined)?.ids;
  if (Array.isArray(ids) && ids.every((x) => typeof x === 'string')) return ids as string[];
  return undefined;
}

export { DIALECTS } from '../../emulator/protocol';

/**
 * Why a typed namespace or queue name cannot be made, or undefined: the emulator's own rule
 * (protocol.ts nameProblem), so that every name an app can use can be made and addressed here too
 * (a sync tenant "Acme Corp", a cache queue "a/b"). A name that is only spaces is taken as none typed.
 */
export function validateName(s: string, what: 'namespace' | 'queue'): string | undefined {
  // Checked as it will be used: a typed name loses the spaces at its ends.
  const t = s.trim();
  if (!t) return `A ${what} name is needed`;
  const problem = nameProblem(t);
  return problem ? `A ${what} name ${problem}` : undefined;
}

/** The env product's bounds on a project and an environment (emulator/http/env-naming.ts). */
const ENV_SCOPE_CHARS = 100;

/**
 * Why `namespace` cannot hold an env queue, or undefined: env clients reach `<project>/<environment>`
 * only, the project without a slash and each part 1 to 100 characters, as env.queue checks them.
 */
export function envNamespaceProblem(ns: string): string | undefined {
  const slash = ns.indexOf('/');
  const project = slash < 0 ? '' : ns.slice(0, slash);
  const environment = slash < 0 ? '' : ns.slice(slash + 1);
  if (project && environment && project.length <= ENV_SCOPE_CHARS && environment.length <= ENV_SCOPE_CHARS) return undefined;
  return `An env queue's namespace is <project>/<environment> (each 1 to ${ENV_SCOPE_CHARS} characters), such as shop/dev; "${ns.length > 60 ? ns.slice(0, 60) + '…' : ns}" is not, and env.queue could not reach a queue there`;
}

/** Parse a JSON body typed by a user; a message that says where it broke. */
export function parseJsonBody(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (!text.trim()) return { ok: false, error: 'The body is empty; type JSON such as {"hello": "world"} or "a string"' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: `Not valid JSON: ${(e as Error).message}` };
  }
}
