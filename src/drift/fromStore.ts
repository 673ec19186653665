/**
 * Drift over a real keyword index: reads the generations of both sides from a
 * `KeywordIndexStore` (index/store/store.ts) and hands them to the pure analysis.
 *
 *   driftReportFromStore(store, opts)   the JSON of `GET /v1/drift?from=&to=` and of
 *                                       `cogr drift --json`
 *   parseDriftQuery(query)              HTTP query strings → validated options
 *   writeDriftReport(store, opts)       what the co-evolution loop calls after a round,
 *                                       with its F1 per round: writes the JSON and/or
 *                                       HTML report and returns the report
 */
import { cogrError } from '../../index/core/errors.ts';
import type { IndexEntry, Side } from '../../index/core/types.ts';
import type { AnalyzerName } from '../../index/text/analyzer.ts';
import {
  analyzeDrift,
  parseDriftOptions,
  parseF1Points,
  type DriftInput,
  type DriftOptions,
  type DriftReport,
  type F1Point,
  type GenerationSnapshot,
} from './analyze.ts';
import { renderDriftHtml } from './report.ts';
import { writeOutputFile } from '../output.ts';

/** The part of KeywordIndexStore the drift analysis reads. */
export interface DriftSource {
  listGenerations(side: Side): Promise<{ generation: number; analyzer?: AnalyzerName }[]>;
  entries(side: Side, generation: number): Promise<IndexEntry[]>;
}

export interface StoreDriftOptions extends DriftOptions {
  f1ByRound?: readonly F1Point[];
}

/** Load the generations of both sides that fall in [from, to] (to = null: all from `from` on). */
export async function loadDriftInput(store: DriftSource, opts: DriftOptions = {}): Promise<DriftInput> {
  const { from, to } = parseDriftOptions(opts);
  const sides: Record<Side, GenerationSnapshot[]> = { item: [], query: [] };
  for (const side of ['item', 'query'] as const) {
    const gens = (await store.listGenerations(side))
      .filter((g) => g.generation >= from && (to === null || g.generation <= to))
      .sort((a, b) => a.generation - b.generation);
    for (const g of gens)
      sides[side].push({ generation: g.generation, analyzer: g.analyzer, entries: await store.entries(side, g.generation) });
  }
  return { sides };
}

/** The drift report of a store's generations in [from, to]: the `GET /v1/drift` body. */
export async function driftReportFromStore(store: DriftSource, opts: StoreDriftOptions = {}): Promise<DriftReport> {
  const { f1ByRound, ...rest } = opts;
  const input = await loadDriftInput(store, rest);
  return analyzeDrift({ ...input, f1ByRound: f1ByRound ?? [] }, rest);
}

function intParam(name: string, v: unknown, allowLatest: boolean): number | null | undefined {
  if (v === undefined || v === '') return undefined;
  const s = Array.isArray(v) ? v[v.length - 1] : v;
  if (allowLatest && s === 'latest') return null;
  if (typeof s === 'number' && Number.isSafeInteger(s) && s >= 0) return s;
  if (typeof s === 'string' && /^[0-9]+$/.test(s) && Number.isSafeInteger(Number(s))) return Number(s);
  throw cogrError(
    'INVALID_ARGUMENT',
    `${name} must be a non-negative integer${allowLatest ? " or 'latest'" : ''}, got ${JSON.stringify(s)}`,
  );
}

/**
 * Options from query-string values (`from`, `to` = number | 'latest', `limit`); errors
 * name the parameter as the caller knows it: `to` over HTTP, `--to` on the command line.
 */
export function parseDriftQuery(query: Record<string, unknown>, names: 'http' | 'cli' = 'http'): DriftOptions {
  const n = (p: string) => (names === 'cli' ? `--${p}` : p);
  const from = intParam(n('from'), query.from, false);
  const to = intParam(n('to'), query.to, true);
  const limit = intParam(n('limit'), query.limit, false);
  if (to !== undefined && to !== null && to < (from ?? 0)) {
    throw cogrError('INVALID_ARGUMENT', `${n('to')}: must be ≥ ${n('from')} (${from ?? 0}), got ${to}`);
  }
  const opts: DriftOptions = {};
  if (from !== undefined && from !== null) opts.from = from;
  if (to !== undefined) opts.to = to;
  if (limit !== undefined && limit !== null) opts.limit = limit;
  parseDriftOptions(opts);
  return opts;
}

export interface WriteDriftOptions extends StoreDriftOptions {
  /** Write the JSON report here. */
  jsonPath?: string;
  /** Write the HTML report here. */
  htmlPath?: string;
  title?: string;
}

/** Analyse a store (with the loop's F1 per round), write the requested files, return the report. */
export async function writeDriftReport(store: DriftSource, opts: WriteDriftOptions): Promise<DriftReport> {
  const { jsonPath, htmlPath, title, f1ByRound, ...rest } = opts;
  const report = await driftReportFromStore(store, { ...rest, f1ByRound: parseF1Points(f1ByRound ?? []) });
  if (jsonPath) writeOutputFile(jsonPath, JSON.stringify(report, null, 2) + '\n');
  if (htmlPath) writeOutputFile(htmlPath, renderDriftHtml(report, title === undefined ? {} : { title }));
  return report;
}
