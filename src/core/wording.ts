// How the extension words counts and dead letters, in the tree, the palette, the panel and its
// webview alike. Pure functions: the webview bundle imports this too.
import type { Dialect, QueueRef } from '../../emulator/protocol';

/** "shop/orders": a queue as the palette and the dialogs name it. */
export const qname = (r: QueueRef) => `${r.namespace}/${r.queue}`;

/**
 * What a dialect calls its dead letters (env: "Failed", as the tree says), in every place that names
 * them; `state` is the state's word in running text ("3 failed", "dead · nack").
 */
export function deadWords(dialect: Dialect | undefined) {
  return dialect === 'env'
    ? { area: 'Failed', short: 'Failed', state: 'failed', one: 'failed message', many: 'failed messages', where: 'their retries ran out' }
    : { area: 'Dead letters', short: 'Dead', state: 'dead', one: 'dead letter', many: 'dead letters', where: 'in the dead-letter queue' };
}

/** The area's name: a tab, a tree folder. */
export function deadAreaLabel(dialect: Dialect | undefined): string {
  return deadWords(dialect).area;
}

/** "dead letter(s)" / "failed message(s)" for a count. */
export function deadNoun(dialect: Dialect | undefined, n: number): string {
  const w = deadWords(dialect);
  return n === 1 ? w.one : w.many;
}

/** "5,001": counts as the panel and the tree show them. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** "1 message", "5,001 messages": a count and its noun. */
export function plural(n: number, one: string, many = one + 's'): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`;
}

/** "The emulator…" from "the emulator…". */
export function capital(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** "; 1 more arrived and was left": what an "all" left that its confirmation had not counted. */
export function arrivedNote(arrived: number | undefined): string {
  if (!arrived) return '';
  return `; ${formatCount(arrived)} more arrived and ${arrived === 1 ? 'was' : 'were'} left`;
}

/**
 * A body as one line of compact JSON, cut at `max` characters: the tree's labels, the pick lists
 * and the panel's rows. Runs of whitespace in its strings count as one space.
 */
export function bodyPreview(body: unknown, max = 60): string {
  let s: string;
  try {
    s = JSON.stringify(body) ?? String(body);
  } catch {
    s = String(body);
  }
  s = s.replace(/\s+/g, ' ');
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}
