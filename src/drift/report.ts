/**
 * The drift report as one self-contained HTML file: inline CSS and inline SVG charts
 * drawn here (no chart library, no script, no network, no external fonts).
 *
 * Charts (each `<svg data-chart="...">` has a title, a legend and, where it has axes,
 * tick labels):
 *   bubbles    keywords added and dropped between the first and last generation of the
 *              range, per side; bubble area ∝ number of entities using the keyword
 *              (one scale for the whole chart), packed along a spiral.
 *   ngram      share of distinct keywords with 1, 2 and 3+ words per generation,
 *              stacked bars, one panel per side.
 *   vocab      distinct keywords per side per generation, log-scale y axis.
 *   alignment  query coverage, item coverage and vocabulary Jaccard per round.
 *   f1         held-out F1 per round and side (from the co-evolution metrics).
 *   churn      per-entity churn (1 − mean Jaccard) against the previous generation.
 * followed by summary tables.
 */
import { roundRows, type AlignmentPoint, type DriftReport, type F1Point, type KeywordUse } from './analyze.ts';
import type { Side } from '../../index/core/types.ts';

export const SIDE_COLOURS: Record<Side, string> = { item: '#2563eb', query: '#ea580c' };
/** The final refit's point in the F1 chart. */
const REFIT_COLOUR = '#0f172a';
const ADDED = '#16a34a';
const DROPPED = '#dc2626';
const NGRAM_COLOURS = ['#bfdbfe', '#3b82f6', '#1e3a8a'];
const NGRAM_LABELS = ['1 word', '2 words', '3+ words'];
const FONT = `system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', 'Liberation Sans', Arial, sans-serif`;

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function fx(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}
function pct(x: number, digits = 0): string {
  return `${(x * 100).toFixed(digits)}%`;
}

function text(x: number, y: number, s: string, attrs = ''): string {
  return `<text x="${fx(x)}" y="${fx(y)}" ${attrs}>${escapeHtml(s)}</text>`;
}

function svgOpen(name: string, w: number, h: number, title: string): string {
  return (
    `<svg data-chart="${name}" xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img" aria-label="${escapeHtml(title)}">` +
    `<title>${escapeHtml(title)}</title>` +
    `<rect class="bg" x="0" y="0" width="${w}" height="${h}" fill="#ffffff"/>` +
    text(16, 24, title, 'class="chart-title"')
  );
}

/** Legend items in one row starting at (x, y); returns the markup. */
function legend(x: number, y: number, items: { label: string; colour: string; shape?: 'rect' | 'line' | 'circle' }[]): string {
  let out = '<g class="legend">';
  let cx = x;
  for (const it of items) {
    const shape = it.shape ?? 'rect';
    if (shape === 'rect') out += `<rect x="${cx}" y="${y - 9}" width="12" height="12" rx="2" fill="${it.colour}"/>`;
    else if (shape === 'circle') out += `<circle cx="${cx + 6}" cy="${y - 3}" r="6" fill="${it.colour}" fill-opacity="0.8"/>`;
    else
      out += `<line x1="${cx}" y1="${y - 3}" x2="${cx + 14}" y2="${y - 3}" stroke="${it.colour}" stroke-width="2.5"/><circle cx="${cx + 7}" cy="${y - 3}" r="3.5" fill="${it.colour}"/>`;
    out += text(cx + 18, y + 1, it.label, 'class="legend-label"');
    cx += 18 + it.label.length * 6.6 + 18;
  }
  return out + '</g>';
}

/** "Nice" linear ticks covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, target = 5): number[] {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  const start = Math.floor(lo / step + 1e-9) * step;
  for (let v = start; v <= hi + step * 1e-6 + 1e-12; v += step) out.push(Number(v.toPrecision(12)));
  if (out[out.length - 1] < hi - 1e-12) out.push(Number((out[out.length - 1] + step).toPrecision(12)));
  return out;
}

/** Ticks for a log10 axis covering [lo, hi] (lo > 0): decades, plus 2 and 5 when the range is short. */
export function logTicks(lo: number, hi: number): number[] {
  const a = Math.floor(Math.log10(lo));
  const b = Math.ceil(Math.log10(Math.max(hi, lo * 1.0001)));
  const ticks: number[] = [];
  const mult = b - a <= 2 ? [1, 2, 5] : [1];
  for (let d = a; d <= b; d++) for (const m of mult) ticks.push(m * 10 ** d);
  return ticks.filter((t) => t >= 10 ** a && t <= 10 ** b);
}

function intTicks(xs: number[]): number[] {
  if (xs.length === 0) return [];
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  const step = Math.max(1, Math.ceil((hi - lo) / 12));
  const out: number[] = [];
  for (let v = lo; v <= hi; v += step) out.push(v);
  return out;
}

function fmtTick(v: number): string {
  if (v >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toPrecision(3)}k`;
  return String(+v.toPrecision(4));
}

function noData(w: number, h: number, msg: string): string {
  return text(w / 2, h / 2, msg, 'class="no-data" text-anchor="middle"');
}

// ---------------------------------------------------------------------------
// Line charts (vocab, alignment, f1).

export interface Series {
  name: string;
  colour: string;
  points: { x: number; y: number }[];
  dash?: string;
}

export interface LineChartSpec {
  name: string;
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  yScale: 'linear' | 'log';
  yFormat: (v: number) => string;
  yDomain?: [number, number];
  width?: number;
  height?: number;
}

export function lineChart(spec: LineChartSpec): string {
  const w = spec.width ?? 580;
  const h = spec.height ?? 340;
  const m = { l: 64, r: 20, t: 62, b: 50 };
  const pw = w - m.l - m.r;
  const ph = h - m.t - m.b;
  let out = svgOpen(spec.name, w, h, spec.title);
  out += legend(
    m.l,
    46,
    spec.series.map((s) => ({ label: s.name, colour: s.colour, shape: 'line' as const })),
  );
  const pts = spec.series.flatMap((s) => s.points);
  const ys = pts.map((p) => p.y).filter((y) => spec.yScale === 'linear' || y > 0);
  if (pts.length === 0 || ys.length === 0) return out + noData(w, h, 'no data in this range') + '</svg>';
  const xs = pts.map((p) => p.x);
  let x0 = Math.min(...xs);
  let x1 = Math.max(...xs);
  if (x0 === x1) {
    x0 -= 0.5;
    x1 += 0.5;
  }
  const xPad = (x1 - x0) * 0.04;
  const X = (x: number) => m.l + ((x - x0 + xPad) / (x1 - x0 + 2 * xPad)) * pw;
  let yTicks: number[];
  let Y: (y: number) => number;
  if (spec.yScale === 'log') {
    yTicks = logTicks(Math.min(...ys), Math.max(...ys));
    const l0 = Math.log10(yTicks[0]);
    const l1 = Math.log10(yTicks[yTicks.length - 1]);
    Y = (y) => m.t + ph - ((Math.log10(Math.max(y, yTicks[0])) - l0) / (l1 - l0 || 1)) * ph;
  } else {
    const [d0, d1] = spec.yDomain ?? [Math.min(0, ...ys), Math.max(...ys)];
    yTicks = niceTicks(d0, d1 > d0 ? d1 : d0 + 1);
    const t0 = yTicks[0];
    const t1 = yTicks[yTicks.length - 1];
    Y = (y) => m.t + ph - ((y - t0) / (t1 - t0 || 1)) * ph;
  }
  // Grid and axes.
  out += '<g class="axis y-axis">';
  for (const t of yTicks) {
    const y = Y(t);
    out += `<line class="grid" x1="${m.l}" x2="${m.l + pw}" y1="${fx(y)}" y2="${fx(y)}"/>`;
    out += text(m.l - 8, y + 4, spec.yFormat(t), 'class="tick" text-anchor="end"');
  }
  out += `<line class="axis-line" x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${m.t + ph}"/>`;
  out += text(16, m.t + ph / 2, spec.yLabel, `class="axis-label" text-anchor="middle" transform="rotate(-90 16 ${fx(m.t + ph / 2)})"`);
  out += '</g><g class="axis x-axis">';
  for (const t of intTicks(xs)) {
    const x = X(t);
    out += `<line class="tick-mark" x1="${fx(x)}" x2="${fx(x)}" y1="${m.t + ph}" y2="${m.t + ph + 5}"/>`;
    out += text(x, m.t + ph + 19, String(t), 'class="tick" text-anchor="middle"');
  }
  out += `<line class="axis-line" x1="${m.l}" x2="${m.l + pw}" y1="${m.t + ph}" y2="${m.t + ph}"/>`;
  out += text(m.l + pw / 2, h - 10, spec.xLabel, 'class="axis-label" text-anchor="middle"');
  out += '</g>';
  // Series.
  for (const s of spec.series) {
    const p = [...s.points].filter((q) => spec.yScale === 'linear' || q.y > 0).sort((a, b) => a.x - b.x);
    if (p.length === 0) continue;
    out += `<g class="series" data-series="${escapeHtml(s.name)}">`;
    if (p.length > 1) {
      const d = p.map((q, i) => `${i ? 'L' : 'M'}${fx(X(q.x))},${fx(Y(q.y))}`).join(' ');
      out += `<path class="mark line" d="${d}" fill="none" stroke="${s.colour}" stroke-width="2.5" stroke-linejoin="round"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`;
    }
    for (const q of p) {
      out += `<circle class="mark" cx="${fx(X(q.x))}" cy="${fx(Y(q.y))}" r="4.5" fill="${s.colour}" stroke="#fff" stroke-width="1.5"><title>${escapeHtml(`${s.name}, ${spec.xLabel.toLowerCase()} ${q.x}: ${spec.yFormat(q.y)}`)}</title></circle>`;
    }
    out += '</g>';
  }
  return out + '</svg>';
}

function vocabChart(r: DriftReport): string {
  return lineChart({
    name: 'vocab',
    title: 'Distinct keywords per side (log scale)',
    xLabel: 'Generation',
    yLabel: 'distinct keywords',
    yScale: 'log',
    yFormat: fmtTick,
    series: (['item', 'query'] as const).map((side) => ({
      name: `${side} side`,
      colour: SIDE_COLOURS[side],
      points: r.sides[side].generations.map((g) => ({ x: g.generation, y: g.distinctKeywords })),
    })),
  });
}

function alignmentChart(a: AlignmentPoint[]): string {
  return lineChart({
    name: 'alignment',
    title: 'Alignment between the sides (query gen r vs item gen r)',
    xLabel: 'Round',
    yLabel: 'share',
    yScale: 'linear',
    yDomain: [0, 1],
    yFormat: (v) => pct(v),
    series: [
      { name: 'query kw in item vocab', colour: SIDE_COLOURS.query, points: a.map((p) => ({ x: p.round, y: p.queryCoverage })) },
      { name: 'item kw in query vocab', colour: SIDE_COLOURS.item, points: a.map((p) => ({ x: p.round, y: p.itemCoverage })) },
      { name: 'vocab Jaccard', colour: '#7c3aed', points: a.map((p) => ({ x: p.round, y: p.jaccard })), dash: '6 4' },
    ],
  });
}

function churnChart(r: DriftReport): string {
  return lineChart({
    name: 'churn',
    title: 'Per-entity churn vs the previous generation (1 − mean Jaccard)',
    xLabel: 'Generation',
    yLabel: 'churn',
    yScale: 'linear',
    yDomain: [0, 1],
    yFormat: (v) => pct(v),
    series: (['item', 'query'] as const).map((side) => ({
      name: `${side} side`,
      colour: SIDE_COLOURS[side],
      points: r.sides[side].generations.filter((g) => g.churn !== null).map((g) => ({ x: g.generation, y: g.churn!.churn })),
    })),
  });
}

function f1Chart(f1: F1Point[]): string {
  const maxF1 = f1.length ? Math.max(...f1.map((p) => p.f1)) : 1;
  return lineChart({
    name: 'f1',
    title: 'Held-out F1 per round',
    xLabel: 'Round',
    yLabel: 'F1',
    yScale: 'linear',
    yDomain: [0, Math.min(1, Math.max(0.1, Math.ceil(maxF1 * 10 + 0.5) / 10))],
    yFormat: (v) => v.toFixed(2),
    series: (['query', 'item', 'refit'] as const)
      .map((side) => ({
        name: side === 'refit' ? 'final refit (served)' : `after ${side} step`,
        colour: side === 'refit' ? REFIT_COLOUR : SIDE_COLOURS[side],
        points: f1.filter((p) => p.side === side).map((p) => ({ x: p.round, y: p.f1 })),
      }))
      .filter((s) => s.points.length > 0),
  });
}

// ---------------------------------------------------------------------------
// N-gram length shares: stacked bars per side.

function ngramChart(r: DriftReport): string {
  const w = 1180;
  const h = 360;
  let out = svgOpen('ngram', w, h, 'Share of distinct keywords by length (words)');
  out += legend(
    w - 330,
    24,
    NGRAM_LABELS.map((label, i) => ({ label, colour: NGRAM_COLOURS[i] })),
  );
  const panelW = (w - 40) / 2;
  (['item', 'query'] as const).forEach((side, pi) => {
    const gens = r.sides[side].generations;
    const m = { l: 20 + pi * (panelW + 20) + 50, t: 66, b: 44 };
    const pw = panelW - 60;
    const ph = h - m.t - m.b;
    out += `<g class="panel" data-side="${side}">`;
    out += text(m.l, m.t - 12, `${side} side`, `class="panel-title" fill="${SIDE_COLOURS[side]}"`);
    for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
      const y = m.t + ph - t * ph;
      out += `<line class="grid" x1="${m.l}" x2="${m.l + pw}" y1="${fx(y)}" y2="${fx(y)}"/>`;
      out += text(m.l - 8, y + 4, pct(t), 'class="tick" text-anchor="end"');
    }
    out += `<line class="axis-line" x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${m.t + ph}"/>`;
    out += `<line class="axis-line" x1="${m.l}" x2="${m.l + pw}" y1="${m.t + ph}" y2="${m.t + ph}"/>`;
    out += text(m.l + pw / 2, h - 8, 'Generation', 'class="axis-label" text-anchor="middle"');
    if (gens.length === 0) {
      out += text(m.l + pw / 2, m.t + ph / 2, 'no generations in this range', 'class="no-data" text-anchor="middle"');
    }
    const slot = pw / Math.max(gens.length, 1);
    const bw = Math.min(56, slot * 0.7);
    const every = Math.max(1, Math.ceil(gens.length / 16));
    gens.forEach((g, i) => {
      const x = m.l + slot * i + (slot - bw) / 2;
      const parts = [g.lengthShares.one, g.lengthShares.two, g.lengthShares.threePlus];
      let acc = 0;
      parts.forEach((s, j) => {
        if (s <= 0) return;
        const y = m.t + ph - (acc + s) * ph;
        const hh = s * ph;
        out += `<rect class="mark" x="${fx(x)}" y="${fx(y)}" width="${fx(bw)}" height="${fx(hh)}" fill="${NGRAM_COLOURS[j]}"><title>${escapeHtml(`${side} gen ${g.generation}, ${NGRAM_LABELS[j]}: ${pct(s, 1)}`)}</title></rect>`;
        if (hh >= 16 && bw >= 30) {
          out += text(
            x + bw / 2,
            y + hh / 2 + 4,
            pct(s),
            `class="bar-label" text-anchor="middle" fill="${j === 0 ? '#1e293b' : '#ffffff'}"`,
          );
        }
        acc += s;
      });
      if (i % every === 0) out += text(x + bw / 2, m.t + ph + 18, String(g.generation), 'class="tick" text-anchor="middle"');
    });
    out += '</g>';
  });
  return out + '</svg>';
}

// ---------------------------------------------------------------------------
// Bubbles: added and dropped keywords, packed along a spiral.

interface Placed {
  x: number;
  y: number;
  r: number;
  use: KeywordUse;
}

/** Place circles (largest first) on an Archimedean spiral around the region's centre, without overlap. */
export function packCircles(radii: readonly number[], w: number, h: number, gap = 2): ({ x: number; y: number } | null)[] {
  const placed: { x: number; y: number; r: number }[] = [];
  const out: ({ x: number; y: number } | null)[] = [];
  const cx = w / 2;
  const cy = h / 2;
  const aspect = w / h;
  for (const r of radii) {
    let pos: { x: number; y: number } | null = null;
    for (let t = 0; t < 400; t += 0.05) {
      const rad = 1.6 * t;
      const x = cx + rad * Math.cos(t) * Math.sqrt(aspect);
      const y = cy + (rad * Math.sin(t)) / Math.sqrt(aspect);
      if (x - r < 0 || x + r > w || y - r < 0 || y + r > h) {
        if (rad > Math.max(w, h)) break;
        continue;
      }
      let ok = true;
      for (const p of placed) {
        const dx = p.x - x;
        const dy = p.y - y;
        const min = p.r + r + gap;
        if (dx * dx + dy * dy < min * min) {
          ok = false;
          break;
        }
      }
      if (ok) {
        pos = { x, y };
        break;
      }
    }
    if (pos) placed.push({ ...pos, r });
    out.push(pos);
  }
  return out;
}

function bubbleCluster(
  uses: KeywordUse[],
  colour: string,
  ox: number,
  oy: number,
  w: number,
  h: number,
  k: number,
): { svg: string; shown: number } {
  const radii = uses.map((u) => Math.max(3, Math.sqrt((k * u.entities) / Math.PI)));
  const pos = packCircles(radii, w, h);
  const placed: Placed[] = [];
  pos.forEach((p, i) => {
    if (p) placed.push({ x: ox + p.x, y: oy + p.y, r: radii[i], use: uses[i] });
  });
  let svg = '';
  for (const p of placed) {
    svg += `<g class="bubble"><circle class="mark" cx="${fx(p.x)}" cy="${fx(p.y)}" r="${fx(p.r)}" fill="${colour}" fill-opacity="0.78" stroke="${colour}" stroke-width="1"><title>${escapeHtml(`${p.use.keyword}: ${p.use.entities} entities`)}</title></circle>`;
    const fs = Math.min(13, Math.max(8, p.r / 2.6));
    const label = p.use.keyword;
    const fits = label.length * fs * 0.56 <= 2 * p.r - 4;
    if (fits) {
      svg += text(p.x, p.y + fs * 0.35, label, `class="bubble-label" text-anchor="middle" font-size="${fx(fs)}"`);
    } else if (p.r >= 9) {
      const short = label.slice(0, Math.max(1, Math.floor((2 * p.r - 4) / (fs * 0.56)) - 1)) + '…';
      svg += text(p.x, p.y + fs * 0.35, short, `class="bubble-label" text-anchor="middle" font-size="${fx(fs)}"`);
    }
    svg += '</g>';
  }
  return { svg, shown: placed.length };
}

function bubbleChart(r: DriftReport): string {
  const w = 1180;
  const rowH = 300;
  const top = 56;
  const sides = (['item', 'query'] as const).filter((s) => r.sides[s].diff !== null);
  const cw = (w - 60) / 2;
  const ch = rowH - 30;
  // One area scale for the whole chart: the busiest cluster fills ~38% of its box; max radius 56.
  const clusters = sides.flatMap((s) => [r.sides[s].diff!.added, r.sides[s].diff!.dropped]);
  let k = Infinity;
  for (const c of clusters) {
    const total = c.reduce((a, u) => a + u.entities, 0);
    if (total > 0) k = Math.min(k, (0.38 * cw * ch) / total);
  }
  const maxUse = Math.max(1, ...clusters.flatMap((c) => c.map((u) => u.entities)));
  if (!Number.isFinite(k)) k = 1;
  k = Math.min(k, (Math.PI * 56 * 56) / maxUse);
  const radius = (v: number) => Math.max(3, Math.sqrt((k * v) / Math.PI));
  const legendH = 2 * radius(maxUse) + 24;
  const h = top + Math.max(1, sides.length) * (rowH + 12) + legendH;
  let out = svgOpen('bubbles', w, h, 'Keywords added and dropped (bubble area ∝ entities using the keyword)');
  out += legend(16, 46, [
    { label: 'added (size = entities in the later generation)', colour: ADDED, shape: 'circle' },
    { label: 'dropped (size = entities in the earlier one)', colour: DROPPED, shape: 'circle' },
  ]);
  // Size legend at the bottom, drawn at the real scale.
  const anyBubble = clusters.some((c) => c.length > 0);
  const ref = anyBubble ? [maxUse, Math.round(maxUse / 4), 1].filter((v, i, a) => v >= 1 && a.indexOf(v) === i) : [];
  const refR = ref.map(radius);
  const ly = h - legendH / 2 - 2;
  let lx = 20;
  out += '<g class="legend size-legend">' + (anyBubble ? text(lx, ly + 4, 'bubble size:', 'class="legend-label"') : '');
  lx += 84;
  ref.forEach((v, i) => {
    out += `<circle cx="${fx(lx + refR[i])}" cy="${fx(ly)}" r="${fx(refR[i])}" fill="none" stroke="#64748b" stroke-width="1.2"/>`;
    out += text(lx + 2 * refR[i] + 6, ly + 4, `${v} ${v === 1 ? 'entity' : 'entities'}`, 'class="legend-label"');
    lx += 2 * refR[i] + 90;
  });
  out += '</g>';
  if (sides.length === 0) return out + noData(w, h, 'no generations in this range') + '</svg>';
  sides.forEach((side, si) => {
    const d = r.sides[side].diff!;
    const oy = top + si * (rowH + 12);
    out += `<g class="panel" data-side="${side}">`;
    out += text(20, oy + 22, `${side} side, generation ${d.from} → ${d.to}`, `class="panel-title" fill="${SIDE_COLOURS[side]}"`);
    const parts: [KeywordUse[], number, string, string][] = [
      [d.added, d.addedTotal, ADDED, 'added'],
      [d.dropped, d.droppedTotal, DROPPED, 'dropped'],
    ];
    parts.forEach(([uses, total, colour, label], ci) => {
      const ox = 20 + ci * (cw + 20);
      out += `<rect class="cluster-box" x="${fx(ox)}" y="${fx(oy + 30)}" width="${fx(cw)}" height="${fx(ch)}" rx="8"/>`;
      if (uses.length === 0) {
        out += text(ox + cw / 2, oy + 30 + ch / 2, `no keywords ${label}`, 'class="no-data" text-anchor="middle"');
      } else {
        const c = bubbleCluster(uses, colour, ox, oy + 30, cw, ch, k);
        out += c.svg;
        const note = `${label}: ${total} keyword${total === 1 ? '' : 's'}${c.shown < total ? `, top ${c.shown} shown` : ''}`;
        out += text(ox + cw - 10, oy + 22, note, `class="cluster-note" text-anchor="end" fill="${colour}"`);
      }
    });
    out += '</g>';
  });
  return out + '</svg>';
}

// ---------------------------------------------------------------------------
// Tables and page.

function sideTable(r: DriftReport): string {
  let rows = '';
  for (const side of ['item', 'query'] as const) {
    for (const g of r.sides[side].generations) {
      rows +=
        `<tr><td><span class="dot" style="background:${SIDE_COLOURS[side]}"></span>${side}</td><td>${g.generation}</td>` +
        `<td>${g.entities}</td><td>${g.distinctKeywords}</td><td>${g.keywordsPerEntity.mean.toFixed(2)} / ${fx(g.keywordsPerEntity.median)}</td>` +
        `<td>${pct(g.lengthShares.one)} / ${pct(g.lengthShares.two)} / ${pct(g.lengthShares.threePlus)}</td>` +
        `<td>${g.entropyBits.toFixed(2)}</td><td>${g.gini.toFixed(3)}</td>` +
        `<td>${g.churn ? `${pct(g.churn.churn, 1)} <small>(${g.churn.compared} vs gen ${g.churn.previous})</small>` : '—'}</td></tr>`;
    }
  }
  return (
    '<table class="summary"><caption>Per side and generation</caption><thead><tr><th>side</th><th>gen</th><th>entities</th><th>distinct</th>' +
    '<th>kw/entity mean / median</th><th>1 / 2 / 3+ words</th><th>entropy (bits)</th><th>Gini</th><th>churn (1 − mean Jaccard)</th></tr></thead>' +
    `<tbody>${rows}</tbody></table>`
  );
}

function alignmentTable(r: DriftReport): string {
  if (r.alignment.length === 0 && r.f1.length === 0) return '';
  // A run with a final refit has a column for it (its round is past the last half-round).
  const { rows: perRound, refit } = roundRows(r);
  const f = (v: number | undefined) => (v === undefined ? '—' : v.toFixed(3));
  let rows = '';
  for (const { round, alignment: a, f1 } of perRound) {
    rows +=
      `<tr><td>${round}</td><td>${a ? pct(a.queryCoverage, 1) : '—'}</td><td>${a ? pct(a.itemCoverage, 1) : '—'}</td>` +
      `<td>${a ? pct(a.jaccard, 1) : '—'}</td><td>${a ? a.shared : '—'}</td><td>${f(f1.query)}</td><td>${f(f1.item)}</td>` +
      (refit ? `<td>${f(f1.refit)}</td>` : '') +
      '</tr>';
  }
  return (
    '<table class="summary"><caption>Per round</caption><thead><tr><th>round</th><th>query occ. in item vocab</th><th>item occ. in query vocab</th>' +
    `<th>vocab Jaccard</th><th>shared keywords</th><th>F1 (query step)</th><th>F1 (item step)</th>${refit ? '<th>F1 (final refit)</th>' : ''}</tr></thead>` +
    `<tbody>${rows}</tbody></table>`
  );
}

function diffTable(r: DriftReport): string {
  let out = '';
  for (const side of ['item', 'query'] as const) {
    const d = r.sides[side].diff;
    if (!d) continue;
    const list = (u: KeywordUse[]) =>
      u.length
        ? u
            .slice(0, 12)
            .map((x) => `${escapeHtml(x.keyword)} <small>(${x.entities})</small>`)
            .join(', ')
        : '—';
    out +=
      `<tr><td><span class="dot" style="background:${SIDE_COLOURS[side]}"></span>${side}</td><td>${d.from} → ${d.to}</td><td>${d.kept}</td>` +
      `<td>${d.addedTotal}</td><td class="kw">${list(d.added)}</td><td>${d.droppedTotal}</td><td class="kw">${list(d.dropped)}</td></tr>`;
  }
  if (!out) return '';
  return (
    '<table class="summary"><caption>Keywords added and dropped (entities using each)</caption><thead><tr><th>side</th><th>generations</th><th>kept</th>' +
    '<th>added</th><th>largest added</th><th>dropped</th><th>largest dropped</th></tr></thead>' +
    `<tbody>${out}</tbody></table>`
  );
}

export const CSS = `
*{box-sizing:border-box}
body{margin:0;padding:24px 32px 40px;background:#f1f5f9;color:#0f172a;font-family:${FONT};font-size:14px}
h1{font-size:22px;margin:0 0 4px}
.sub{color:#475569;margin:0 0 18px}
.card{background:#fff;border:1px solid #e2e8f0;border-radius:10px;padding:8px;margin:0 0 16px;box-shadow:0 1px 2px rgba(15,23,42,.05)}
.grid2{display:grid;grid-template-columns:repeat(2,max-content);gap:16px;margin-bottom:16px}
.grid2 .card{margin:0}
svg{display:block;font-family:${FONT}}
svg .chart-title{font-size:15px;font-weight:600;fill:#0f172a}
svg .panel-title{font-size:13px;font-weight:600}
svg .legend-label{font-size:11.5px;fill:#334155}
svg .tick{font-size:11px;fill:#475569}
svg .axis-label{font-size:12px;fill:#334155}
svg .grid{stroke:#e2e8f0;stroke-width:1}
svg .axis-line,svg .tick-mark{stroke:#94a3b8;stroke-width:1}
svg .no-data{font-size:13px;fill:#94a3b8}
svg .bar-label{font-size:10.5px}
svg .bubble-label{fill:#fff;font-weight:600;pointer-events:none}
svg .cluster-box{fill:#f8fafc;stroke:#e2e8f0}
svg .cluster-note{font-size:12px;font-weight:600}
table.summary{border-collapse:collapse;background:#fff;margin:0 0 16px;width:100%;border:1px solid #e2e8f0;border-radius:10px;font-variant-numeric:tabular-nums}
table.summary caption{text-align:left;font-weight:600;font-size:15px;padding:6px 0}
table.summary th,table.summary td{padding:5px 10px;border-bottom:1px solid #eef2f7;text-align:right;vertical-align:top}
table.summary th{background:#f8fafc;color:#334155;font-weight:600}
table.summary td:first-child,table.summary th:first-child{text-align:left}
table.summary td.kw{text-align:left;max-width:330px}
small{color:#64748b}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px}
`;

/** The whole report as one self-contained HTML document. */
export function renderDriftHtml(report: DriftReport, opts: { title?: string } = {}): string {
  const title = opts.title ?? 'cogr vocabulary drift';
  const gensOf = (s: Side) => report.sides[s].generations.map((g) => g.generation);
  const span = (s: Side) => {
    const g = gensOf(s);
    return g.length ? `${s}: generations ${g[0]}–${g[g.length - 1]} (${g.length})` : `${s}: none`;
  };
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${CSS}</style></head>
<body>
<h1>${escapeHtml(title)}</h1>
<p class="sub">Range ${report.range.from} → ${report.range.to ?? 'latest'} · ${escapeHtml(span('item'))} · ${escapeHtml(span('query'))} · diff lists capped at ${report.limit}</p>
<div class="card">${bubbleChart(report)}</div>
<div class="card">${ngramChart(report)}</div>
<div class="grid2">
<div class="card">${vocabChart(report)}</div>
<div class="card">${alignmentChart(report.alignment)}</div>
<div class="card">${f1Chart(report.f1)}</div>
<div class="card">${churnChart(report)}</div>
</div>
${sideTable(report)}
${alignmentTable(report)}
${diffTable(report)}
</body></html>
`;
}
