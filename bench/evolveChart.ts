/**
 * The chart of `npm run bench -- evolve --sizes …`: one stacked horizontal bar per size,
 * the process's CPU seconds (on a shared machine the comparable figure; wall seconds
 * measure the queue too) split into phase groups (relevance fit, M trials, α tuning, item policy,
 * indexing, query generation and targets, floor and ranker choices, GRPO, evaluation,
 * setup), with the CPU and wall totals, cores used and peak RSS at the bar's end. Self-contained SVG
 * (no script, no external font), drawn in the style of the drift report (src/drift/report.ts).
 */
import { escapeHtml } from '../src/drift/report.ts';
import type { RunConfig } from '../src/run/config.ts';

/** One phase of a measured run (evolve.ts's phase clock). */
export interface PhaseTiming {
  phase: string;
  seconds: number;
  cpuSeconds: number;
  cores: number;
}

export interface EvolveBenchResult {
  items: number;
  queries: number;
  relevant: number;
  rounds: number;
  seed: number;
  /** The run's `--served-set` when the bench was given one (else the run's default). */
  servedSet?: RunConfig['servedSet'];
  /** Training queries outside the dev split, dev and held-out queries of fold 0. */
  split: { core: number; dev: number; eval: number };
  collectionSeconds: number;
  phases: PhaseTiming[];
  /** Seconds per step (sft, r1-query, r1-item, …). */
  steps: { step: string; seconds: number; cores: number; heldOutF1: number; devF1: number | null; adopted: boolean }[];
  wallSeconds: number;
  cpuSeconds: number;
  cores: number;
  peakRssMiB: number;
  loadBefore: number[];
  loadAfter: number[];
  node: string;
  finishedAt: string;
}

const GROUPS: { name: string; colour: string; test: (phase: string) => boolean }[] = [
  { name: 'relevance fit', colour: '#1e3a8a', test: (p) => p.endsWith('relevance fit') },
  { name: 'M trials', colour: '#3b82f6', test: (p) => p.endsWith('M trials') },
  { name: 'α tuning', colour: '#93c5fd', test: (p) => p.includes('α tuning') },
  { name: 'item policy', colour: '#16a34a', test: (p) => p.endsWith('item policy') },
  { name: 'indexing', colour: '#86efac', test: (p) => p.endsWith('indexing') },
  { name: 'query generation / targets', colour: '#ea580c', test: (p) => p.includes('query generation') || p.includes('query targets') },
  { name: 'floor + ranker', colour: '#fdba74', test: (p) => p.includes('floor') || p.includes('ranker') },
  { name: 'GRPO', colour: '#7c3aed', test: (p) => p.endsWith('GRPO') },
  { name: 'dev + held-out evaluation', colour: '#dc2626', test: (p) => p.includes('evaluation') },
  { name: 'set guard / refit test', colour: '#a16207', test: (p) => p.endsWith('set guard') || p.endsWith('refit test') },
  { name: 'setup / other', colour: '#9ca3af', test: () => true },
];

export function phaseGroup(phase: string): number {
  return GROUPS.findIndex((g) => g.test(phase));
}

function fx(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

export function renderEvolveChart(results: readonly EvolveBenchResult[]): string {
  const w = 860;
  const barH = 30;
  const gap = 26;
  const m = { l: 170, r: 300, t: 92, b: 48 };
  const h = m.t + results.length * (barH + gap) + m.b;
  const pw = w - m.l - m.r;
  const maxT = Math.max(1, ...results.map((r) => r.cpuSeconds));
  const X = (s: number) => m.l + (s / maxT) * pw;
  const title = 'cogr evolve --folds 5 --fold 0 on synthetic collections: CPU seconds per phase';
  let out =
    `<svg data-chart="evolve" xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img" aria-label="${escapeHtml(title)}" font-family="system-ui, 'DejaVu Sans', Arial, sans-serif" font-size="12">` +
    `<title>${escapeHtml(title)}</title><rect x="0" y="0" width="${w}" height="${h}" fill="#ffffff"/>` +
    `<text x="16" y="24" font-size="15" font-weight="600">${escapeHtml(title)}</text>`;
  // Legend, two rows.
  GROUPS.forEach((g, i) => {
    const x = 16 + (i % 5) * 168;
    const y = 48 + Math.floor(i / 5) * 18;
    out += `<rect x="${x}" y="${y - 10}" width="12" height="12" rx="2" fill="${g.colour}"/><text x="${x + 17}" y="${y}">${escapeHtml(g.name)}</text>`;
  });
  results.forEach((r, k) => {
    const y = m.t + k * (barH + gap);
    const secs = new Array<number>(GROUPS.length).fill(0);
    for (const p of r.phases) secs[phaseGroup(p.phase)] += p.cpuSeconds;
    out += `<text x="${m.l - 8}" y="${y + barH / 2 + 4}" text-anchor="end">${escapeHtml(`${r.items.toLocaleString('en')} × ${r.queries.toLocaleString('en')} × ${r.relevant}`)}</text>`;
    let acc = 0;
    secs.forEach((s, g) => {
      if (s <= 0) return;
      out += `<rect x="${fx(X(acc))}" y="${y}" width="${fx(Math.max(0.5, X(acc + s) - X(acc)))}" height="${barH}" fill="${GROUPS[g].colour}"><title>${escapeHtml(`${GROUPS[g].name}: ${s.toFixed(1)} s`)}</title></rect>`;
      acc += s;
    });
    out += `<text x="${fx(X(acc) + 6)}" y="${y + barH / 2 + 4}">${escapeHtml(`${r.cpuSeconds.toFixed(0)} CPU s, ${r.wallSeconds.toFixed(0)} s wall, ${r.cores.toFixed(2)} cores, ${r.peakRssMiB.toFixed(0)} MiB`)}</text>`;
  });
  const axisY = m.t + results.length * (barH + gap) - gap / 2;
  out += `<line x1="${m.l}" x2="${m.l + pw}" y1="${axisY}" y2="${axisY}" stroke="#6b7280"/>`;
  for (let i = 0; i <= 4; i++) {
    const s = (maxT * i) / 4;
    out += `<line x1="${fx(X(s))}" x2="${fx(X(s))}" y1="${axisY}" y2="${axisY + 5}" stroke="#6b7280"/><text x="${fx(X(s))}" y="${axisY + 18}" text-anchor="middle">${s.toFixed(0)}</text>`;
  }
  out += `<text x="${m.l + pw / 2}" y="${h - 8}" text-anchor="middle">CPU seconds, reward workers included (1 fold, --rounds ${results[0]?.rounds ?? ''})</text>`;
  return out + '</svg>';
}
