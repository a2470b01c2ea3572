// Formatting for the webview: numbers, durations, times, JSON (as DOM text nodes, never HTML).

import { formatDuration } from '../../core/duration';
import { formatCount } from '../../core/wording';
import { h } from './dom';

export const num = formatCount;

/** The extension's one duration format (src/core/duration.ts). */
export const duration = formatDuration;

/** How long something waited: "< 1 s" under a second (a wait is not timed to the millisecond), else as `duration`. */
export function waitTime(ms: number): string {
  return ms > 0 && ms < 1000 ? '< 1 s' : duration(ms);
}

/** Short axis labels: 0, 45s, 12m, 3h */
export function durationShort(ms: number): string {
  if (ms <= 0) return '0';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${Math.round(ms / 1000)}s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m`;
  if (ms < 86_400_000) return `${+(ms / 3_600_000).toFixed(1)}h`;
  return `${+(ms / 86_400_000).toFixed(1)}d`;
}

export function relative(at: number, now: number): string {
  const d = at - now;
  if (Math.abs(d) < 1000) return 'now';
  return d > 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}

/** One unit only, for table cells: "5 h ago", "13 min ago", "in 20 s". */
export function relativeShort(at: number, now: number): string {
  const d = at - now;
  const a = Math.abs(d);
  if (a < 1000) return 'now';
  const v = a < 60_000 ? `${Math.floor(a / 1000)} s` : a < 3_600_000 ? `${Math.floor(a / 60_000)} min` : a < 86_400_000 ? `${Math.floor(a / 3_600_000)} h` : `${Math.floor(a / 86_400_000)} d`;
  return d > 0 ? `in ${v}` : `${v} ago`;
}

export function isoTime(at: number): string {
  return new Date(at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** HH:MM in UTC: the half-hour steps are aligned in UTC, and the CLI, /metrics and the tree say UTC too. */
export function clockTime(at: number): string {
  const d = new Date(at);
  return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}

export function shortId(id: string): string {
  return id.length > 14 ? `${id.slice(0, 6)}…${id.slice(-6)}` : id;
}

export function pretty(v: unknown): string {
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
}

const TOKEN = /("(?:[^"\\]|\\.)*")(\s*:)?|\b(true|false)\b|\bnull\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/** Pretty JSON as a <pre> of coloured spans; every piece is a text node. */
export function jsonBlock(v: unknown, cls = 'json'): HTMLPreElement {
  const text = pretty(v);
  const pre = h('pre', { class: cls });
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    const i = m.index ?? 0;
    if (i > last) pre.appendChild(document.createTextNode(text.slice(last, i)));
    let kind = 'num';
    if (m[1] !== undefined) kind = m[2] !== undefined ? 'key' : 'str';
    else if (m[3] !== undefined) kind = 'bool';
    else if (m[0] === 'null') kind = 'null';
    if (m[1] !== undefined && m[2] !== undefined) {
      pre.appendChild(h('span', { class: `j-${kind}` }, m[1]));
      pre.appendChild(document.createTextNode(m[2]));
    } else pre.appendChild(h('span', { class: `j-${kind}` }, m[0]));
    last = i + m[0].length;
  }
  if (last < text.length) pre.appendChild(document.createTextNode(text.slice(last)));
  return pre;
}
