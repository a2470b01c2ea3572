// What a command was called with: a tree node, the nodes selected with it, or a plain object
// (from tests, other extensions, keybindings). No VS Code here.
import type { Dialect, QueueRef } from '../../emulator/protocol';

interface Refish {
  kind?: string;
  namespace?: unknown;
  queue?: unknown;
}

export function isTreeNode(a: unknown): boolean {
  return !!a && typeof a === 'object' && typeof (a as Refish).kind === 'string' && typeof (a as { id?: unknown }).id === 'string';
}

/** A plain object argument (not a tree node, not nothing): a caller that wants results, not prompts. */
export function isProgrammatic(a: unknown): boolean {
  return !!a && typeof a === 'object' && !Array.isArray(a) && !isTreeNode(a);
}

/** The queue a node or an argument names, if it names one. */
export function refFromArg(a: unknown): QueueRef | undefined {
  if (!a || typeof a !== 'object') return undefined;
  const r = a as Refish;
  if (typeof r.namespace === 'string' && typeof r.queue === 'string' && r.namespace && r.queue) return { namespace: r.namespace, queue: r.queue };
  return undefined;
}

/** The message ids a command acts on: the selection (when it holds the clicked node), the node, or `ids`. */
export function messageIdsFromArgs(arg: unknown, selected: unknown): string[] | undefined {
  const pick = (n: unknown): string | undefined => {
    const o = n as { kind?: string; messageId?: unknown };
    return o && o.kind === 'message' && typeof o.messageId === 'string' ? o.messageId : undefined;
  };
  if (Array.isArray(selected) && selected.length > 0) {
    const ids = selected.map(pick).filter((x): x is string => !!x);
    if (ids.length) return [...new Set(ids)];
  }
  const one = pick(arg);
  if (one) return [one];
  const ids = (arg as { ids?: unknown } | undefined)?.ids;
  if (Array.isArray(ids) && ids.every((x) => typeof x === 'string')) return ids as string[];
  return undefined;
}

export const DIALECTS: readonly Dialect[] = ['cache', 'env', 'sync'];

/** Namespace and queue names the emulator accepts (kept permissive; the emulator has the last word). */
export function validateName(s: string, what: 'namespace' | 'queue'): string | undefined {
  const t = s.trim();
  if (!t) return `A ${what} name is needed`;
  if (t.length > 200) return `That ${what} name is too long`;
  if (/[\s/\\]/.test(t)) return `A ${what} name has no spaces or slashes`;
  return undefined;
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
