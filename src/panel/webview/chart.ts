// The 24-hour chart: peak depth (bars, left axis) and the oldest message's wait (line, right axis)
// in half-hour steps, drawn as inline SVG. Hovering a step shows its numbers.

import type { LagStep } from '../messages';
import { h, replace, s, show } from './dom';
import { clockTime, durationShort, num, waitTime } from './format';

const W = 960;
const H = 260;
const PAD = { left: 52, right: 56, top: 14, bottom: 30 };

/** A "nice" axis maximum and tick step for values up to `max`. */
export function niceScale(max: number, ticks = 4): { max: number; step: number } {
  if (!(max > 0)) return { max: ticks, step: 1 };
  const raw = max / ticks;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const norm = raw / mag;
  const step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
  return { max: step * Math.ceil(max / step), step };
}

const TIME_STEPS = [1000, 5000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000];

/** A time axis with exactly `ticks` steps (so its labels sit on the depth axis's grid lines). */
export function niceTimeScale(max: number, ticks = 4): { max: number; step: number } {
  const t = Math.max(1, Math.round(ticks));
  if (!(max > 0)) return { max: t * 1000, step: 1000 };
  const step = TIME_STEPS.find((x) => x * t >= max) ?? Math.ceil(max / t / 86_400_000) * 86_400_000;
  return { max: step * t, step };
}

export function stepLabel(step: LagStep): string {
  return `${clockTime(step.start)}–${clockTime(step.start + 30 * 60_000)} UTC`;
}

export function renderChart(container: HTMLElement, tip: HTMLElement, steps: LagStep[]): void {
  const n = Math.max(steps.length, 1);
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const bw = iw / n;
  const dScale = niceScale(Math.max(0, ...steps.map((x) => x.peakDepth)));
  const wScale = niceTimeScale(Math.max(0, ...steps.map((x) => x.maxWaitMs)), dScale.max / dScale.step);
  const yD = (v: number) => PAD.top + ih - (v / dScale.max) * ih;
  const yW = (v: number) => PAD.top + ih - (v / wScale.max) * ih;

  const grid = s('g', { class: 'grid-lines' });
  for (let v = 0; v <= dScale.max + 1e-9; v += dScale.step) {
    const y = yD(v);
    grid.appendChild(s('line', { x1: PAD.left, x2: W - PAD.right, y1: y, y2: y }));
    grid.appendChild(s('text', { x: PAD.left - 8, y: y + 4, class: 'axis', 'text-anchor': 'end' }, num(Math.round(v * 100) / 100)));
  }
  for (let v = 0; v <= wScale.max + 1e-9; v += wScale.step) {
    grid.appendChild(s('text', { x: W - PAD.right + 8, y: yW(v) + 4, class: 'axis', 'text-anchor': 'start' }, durationShort(v)));
  }

  const bars = s('g', { class: 'bars' });
  const xlabels = s('g', { class: 'x-labels' });
  steps.forEach((st, i) => {
    const x = PAD.left + i * bw;
    const y = yD(st.peakDepth);
    bars.appendChild(s('rect', { class: 'bar', x: x + bw * 0.15, y, width: Math.max(1, bw * 0.7), height: Math.max(0, PAD.top + ih - y), 'data-index': i }));
    if (i % 6 === 0) xlabels.appendChild(s('text', { x: x, y: H - 10, class: 'axis', 'text-anchor': 'start' }, clockTime(st.start)));
  });
  // The times are UTC (the steps are UTC half hours): said at the axis's end.
  xlabels.appendChild(s('text', { x: W - PAD.right, y: H - 10, class: 'axis axis-zone', 'text-anchor': 'end' }, 'UTC'));

  const pts = steps.map((st, i) => `${(PAD.left + (i + 0.5) * bw).toFixed(1)},${yW(st.maxWaitMs).toFixed(1)}`);
  const line = s('polyline', { class: 'wait-line', points: pts.join(' '), fill: 'none' });
  const dots = s('g', { class: 'wait-dots' });
  steps.forEach((st, i) => dots.appendChild(s('circle', { cx: PAD.left + (i + 0.5) * bw, cy: yW(st.maxWaitMs), r: 2.5 })));

  const cursor = s('rect', { class: 'hover-col', x: 0, y: PAD.top, width: bw, height: ih, visibility: 'hidden' });
  const hits = s('g', { class: 'hits' });
  steps.forEach((st, i) => {
    const text = `${stepLabel(st)}  peak depth ${num(st.peakDepth)}, oldest wait ${waitTime(st.maxWaitMs)}`;
    hits.appendChild(
      s('rect', { class: 'step', x: PAD.left + i * bw, y: PAD.top, width: bw, height: ih, 'data-index': i, 'data-depth': st.peakDepth, 'data-wait': st.maxWaitMs },
        s('title', null, text)),
    );
  });

  const axis = s('line', { class: 'axis-line', x1: PAD.left, x2: W - PAD.right, y1: PAD.top + ih, y2: PAD.top + ih });
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Peak depth and oldest wait, ${steps.length} half-hour steps`, preserveAspectRatio: 'none', class: 'chart-svg' },
    grid, cursor, bars, line, dots, axis, xlabels, hits);
  replace(container, svg);

  const hide = () => {
    show(tip, false);
    cursor.setAttribute('visibility', 'hidden');
  };
  hits.addEventListener('mouseleave', hide);
  hits.addEventListener('mousemove', (ev) => {
    const t = ev.target as Element;
    const i = Number(t.getAttribute('data-index'));
    const st = steps[i];
    if (!st) return hide();
    cursor.setAttribute('x', String(PAD.left + i * bw));
    cursor.setAttribute('visibility', 'visible');
    const day = new Date(st.start).toLocaleDateString('en-US', { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });
    replace(tip,
      h('div', { class: 'tip-time' }, `${day} · ${stepLabel(st)}`),
      h('div', null, h('span', { class: 'swatch depth' }), 'Peak depth ', h('b', { class: 'tip-depth' }, num(st.peakDepth))),
      h('div', null, h('span', { class: 'swatch wait' }), 'Oldest wait ', h('b', { class: 'tip-wait' }, waitTime(st.maxWaitMs))));
    show(tip, true);
    const box = container.getBoundingClientRect();
    const parent = (tip.offsetParent as HTMLElement | null)?.getBoundingClientRect() ?? box;
    const px = box.left - parent.left + ((PAD.left + (i + 0.5) * bw) / W) * box.width;
    const left = Math.min(Math.max(px + 12, 0), parent.width - tip.offsetWidth - 4);
    tip.style.left = `${px + 12 + tip.offsetWidth > parent.width ? px - tip.offsetWidth - 12 : left}px`;
    tip.style.top = `${box.top - parent.top + 16}px`;
  });
}
