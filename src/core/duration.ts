// "90s", "5m", "1h30m", "250ms", "1500" (ms) → milliseconds. Undefined when it is not a duration.

const UNITS: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase().replace(/\s+/g, '');
  if (!t) return undefined;
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(Number(t));
  const re = /(\d+(?:\.\d+)?)(ms|sec|s|min|m|h|d)/gy;
  let total = 0;
  let end = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(t))) {
    total += Number(m[1]) * UNITS[m[2]];
    end = re.lastIndex;
  }
  if (end !== t.length) return undefined;
  return Math.round(total);
}

/**
 * 950 ms, 12 s, 3 min 5 s, 2 h 10 min, 3 d 4 h: the one way the tree, the palette and the panel
 * say a duration. Whole units are counted down (a lease with 29.6 s left has "29 s left").
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0 s';
  if (ms < 1000) return `${Math.floor(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** What is wrong with an Advance Clock entry, or undefined: a duration, and more than 0 (0 would move nothing). */
export function advanceProblem(text: string): string | undefined {
  const ms = parseDuration(text);
  if (ms === undefined) return 'A duration such as 30s, 5m, 1h or 1500 (ms)';
  return ms === 0 ? 'Advance by more than 0, such as 30s' : undefined;
}
