/**
 * Vocabulary drift analysis: pure functions over plain generation snapshots (no I/O).
 *
 * Input (`DriftInput`): for each side the snapshots of its keyword index, one per
 * generation (`{ generation, entries: IndexEntry[] }`), and optionally the held-out F1
 * per round (`[{ round, side, f1 }]`). Only the generated keyword sets S_e are analysed;
 * the self keyword ({q} or {i}) is not a generated keyword and is ignored. Keywords are
 * passed through `normalizeKeyword` (idempotent on stored keywords), grouped by their
 * match key under the snapshot's analyzer (`analyzer`, default `none`; a store-backed
 * snapshot carries its generation's) and de-duplicated per entity by key; a keyword the
 * normaliser rejects is not counted. Every count below is per key; a keyword in a diff
 * is shown in the surface form its entities use most, with the other forms beside it.
 *
 * Definitions (c_k = number of entities of one snapshot whose S_e contains keyword k,
 * V = the set of k with c_k > 0, n = |V|, T = Σ_k c_k the keyword occurrences):
 *   distinctKeywords   n
 *   keywordsPerEntity  mean and median of |S_e| over the snapshot's entities (0 if none)
 *   lengthShares       share of V with 1, 2 and ≥ 3 words (each 0 when n = 0)
 *   entropyBits        H = −Σ_k (c_k/T)·log2(c_k/T)   (0 when T = 0)
 *   gini               Gini coefficient of the counts (c_k)_k:
 *                      G = Σ_i Σ_j |c_i − c_j| / (2·n²·mean(c)); 0 when n ≤ 1. With the
 *                      counts sorted ascending (1-based i): G = 2·Σ i·c_(i)/(n·T) − (n+1)/n.
 *   churn              against the previous generation of the same side in the analysed
 *                      range (consecutive in the sorted list of generations present, so
 *                      generations 0, 1, 3 give the pairs 0→1 and 1→3): for every entity
 *                      present in both, Jaccard(S_prev, S_cur) = |∩| / |∪| (1 when both
 *                      are empty); reported as meanJaccard, medianJaccard and
 *                      churn = 1 − meanJaccard, with the number of entities compared,
 *                      added and removed. null for the first generation of the range.
 * Alignment (per round r, pairing query generation r with item generation r, for every r
 * present on both sides in the range; V_q, V_i the two vocabularies):
 *   queryCoverage      share of query-keyword occurrences (Σ_q |S_q|) whose keyword is in
 *                      V_i (0 when there are none): how much of what queries say the items
 *                      can hear.
 *   itemCoverage       the same from the item side: share of Σ_i |S_i| in V_q.
 *   jaccard            |V_q ∩ V_i| / |V_q ∪ V_i| (0 when both are empty); shared = |V_q ∩ V_i|.
 * Diff (per side, from the first to the last generation of the range; `diffPrepared`
 * compares any two prepared snapshots): keywords added (in V_to \ V_from, with their c_k in `to`) and
 * dropped (in V_from \ V_to, with their c_k in `from`), largest count first, ties by
 * keyword; each list capped at `limit` (default 50) with the uncapped totals alongside.
 *
 * Output (`DriftReport`, plain JSON; the shape `GET /v1/drift` returns):
 * {
 *   version: 1,
 *   range: { from: number, to: number | null },          // as asked; null = latest
 *   sides: {
 *     item:  { generations: GenerationMetrics[], diff: KeywordDiff | null },
 *     query: { generations: GenerationMetrics[], diff: KeywordDiff | null }
 *   },
 *   alignment: AlignmentPoint[],                         // ascending round
 *   f1: F1Point[],                                       // from ≤ round ≤ to; by round, then side (item, query, refit)
 *   limit: number
 * }
 * GenerationMetrics = { generation, entities, distinctKeywords, occurrences,
 *   keywordsPerEntity: { mean, median }, lengthCounts: { one, two, threePlus },
 *   lengthShares: { one, two, threePlus }, entropyBits, gini,
 *   churn: { previous, compared, added, removed, meanJaccard, medianJaccard, churn } | null }
 * AlignmentPoint = { round, queryCoverage, itemCoverage, jaccard, shared,
 *   queryDistinct, itemDistinct }
 * KeywordDiff = { from, to, added: KeywordUse[], dropped: KeywordUse[], addedTotal,
 *   droppedTotal, kept }, KeywordUse = { keyword, key, forms, entities } (forms: every
 *   surface form of the key, most used first)
 */
import { z } from 'zod';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import { keywordWords, normalizeKeyword } from '../../index/text/normalize.ts';
import { getAnalyzer, type AnalyzerName } from '../../index/text/analyzer.ts';
import type { IndexEntry, Side } from '../../index/core/types.ts';

export interface GenerationSnapshot {
  generation: number;
  entries: readonly IndexEntry[];
  /** How the generation matches keywords (default `none`: the surface form is the key). */
  analyzer?: AnalyzerName;
}

/**
 * Held-out F1 after a step: `side` is the half-round's side (round 0, SFT, is given for
 * both), or `refit` for the run's final refit (round R + 1: the step the run serves).
 */
export interface F1Point {
  round: number;
  side: Side | 'refit';
  f1: number;
}

export interface DriftInput {
  sides: { item: readonly GenerationSnapshot[]; query: readonly GenerationSnapshot[] };
  f1ByRound?: readonly F1Point[];
}

export interface ChurnMetrics {
  /** The generation compared against. */
  previous: number;
  /** Entities present in both generations. */
  compared: number;
  /** Entities only in the current generation. */
  added: number;
  /** Entities only in the previous generation. */
  removed: number;
  meanJaccard: number;
  medianJaccard: number;
  /** 1 − meanJaccard. */
  churn: number;
}

export interface LengthBreakdown {
  one: number;
  two: number;
  threePlus: number;
}

export interface GenerationMetrics {
  generation: number;
  entities: number;
  distinctKeywords: number;
  occurrences: number;
  keywordsPerEntity: { mean: number; median: number };
  lengthCounts: LengthBreakdown;
  lengthShares: LengthBreakdown;
  entropyBits: number;
  gini: number;
  churn: ChurnMetrics | null;
}

export interface AlignmentPoint {
  round: number;
  queryCoverage: number;
  itemCoverage: number;
  jaccard: number;
  shared: number;
  queryDistinct: number;
  itemDistinct: number;
}

export interface KeywordUse {
  /** The surface form the entities use most (ties: the smallest). */
  keyword: string;
  /** The match key. */
  key: string;
  /** Every surface form of the key, most used first. */
  forms: string[];
  entities: number;
}

export interface KeywordDiff {
  from: number;
  to: number;
  added: KeywordUse[];
  dropped: KeywordUse[];
  addedTotal: number;
  droppedTotal: number;
  kept: number;
}

export interface SideDrift {
  generations: GenerationMetrics[];
  diff: KeywordDiff | null;
}

export interface DriftReport {
  version: 1;
  range: { from: number; to: number | null };
  sides: Record<Side, SideDrift>;
  alignment: AlignmentPoint[];
  f1: F1Point[];
  limit: number;
}

export const DEFAULT_DIFF_LIMIT = 50;

/** One row of the report's per-round tables: the round's alignment point and its F1 points by side. */
export interface RoundRow {
  round: number;
  alignment: AlignmentPoint | undefined;
  f1: Partial<Record<F1Point['side'], number>>;
}

/**
 * The per-round rows the HTML and CLI tables show: every round with an alignment or an F1
 * point, ascending; `refit` tells whether the run has a final refit (its column is shown
 * only then).
 */
export function roundRows(r: Pick<DriftReport, 'alignment' | 'f1'>): { rows: RoundRow[]; refit: boolean } {
  const rounds = [...new Set([...r.alignment.map((a) => a.round), ...r.f1.map((p) => p.round)])].sort((a, b) => a - b);
  const rows = rounds.map((round) => {
    const f1: RoundRow['f1'] = {};
    for (const p of r.f1) if (p.round === round && f1[p.side] === undefined) f1[p.side] = p.f1;
    return { round, alignment: r.alignment.find((a) => a.round === round), f1 };
  });
  return { rows, refit: r.f1.some((p) => p.side === 'refit') };
}

export const DriftOptionsSchema = z
  .object({
    from: z.number({ error: 'from must be a number' }).int('from must be an integer').min(0, 'from must be ≥ 0').default(0),
    to: z
      .number({ error: 'to must be a number or null (latest)' })
      .int('to must be an integer')
      .min(0, 'to must be ≥ 0')
      .nullable()
      .default(null),
    limit: z
      .number({ error: 'limit must be a number' })
      .int('limit must be an integer')
      .min(1, 'limit must be ≥ 1')
      .max(10_000, 'limit must be ≤ 10000')
      .default(DEFAULT_DIFF_LIMIT),
  })
  .strict();
export type DriftOptions = z.input<typeof DriftOptionsSchema>;

export const F1PointsSchema = z.array(
  z
    .object({
      round: z.number({ error: 'round must be a number' }).int('round must be an integer').min(0, 'round must be ≥ 0'),
      side: z.enum(['item', 'query', 'refit'], { error: "side must be 'item', 'query' or 'refit'" }),
      f1: z.number({ error: 'f1 must be a number' }).min(0, 'f1 must be ≥ 0').max(1, 'f1 must be ≤ 1'),
    })
    .strict(),
);

/** Validate drift options (from, to, limit); throws INVALID_ARGUMENT naming the field. */
export function parseDriftOptions(opts: unknown): z.output<typeof DriftOptionsSchema> {
  const r = DriftOptionsSchema.safeParse(opts ?? {});
  if (!r.success) throw schemaError('INVALID_ARGUMENT', r.error, { what: 'drift options' });
  if (r.data.to !== null && r.data.to < r.data.from) {
    throw cogrError('INVALID_ARGUMENT', `drift options.to (${r.data.to}) must be ≥ from (${r.data.from})`);
  }
  return r.data;
}

/** Validate a list of `{round, side, f1}` points; throws INVALID_ARGUMENT naming the field. */
export function parseF1Points(data: unknown, what = 'f1ByRound'): F1Point[] {
  const r = F1PointsSchema.safeParse(data);
  if (!r.success) throw schemaError('INVALID_ARGUMENT', r.error, { what });
  return r.data;
}

// ---------------------------------------------------------------------------
// Elementary metrics (exported for tests and reuse).

/** Median of a list of numbers (mean of the middle two for even lengths); 0 when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Shannon entropy in bits of the distribution proportional to `counts` (0 when Σ = 0). */
export function entropyBits(counts: readonly number[]): number {
  let total = 0;
  for (const c of counts) total += c;
  if (total <= 0) return 0;
  // Summed in ascending order so that the result does not depend on the input order.
  const sorted = [...counts].sort((a, b) => a - b);
  let h = 0;
  for (const c of sorted) {
    if (c <= 0) continue;
    const p = c / total;
    h -= p * Math.log2(p);
  }
  return h;
}

/** Gini coefficient of non-negative counts (0 = all equal, → 1 = one holds all); 0 when n ≤ 1 or Σ = 0. */
export function gini(counts: readonly number[]): number {
  const n = counts.length;
  if (n <= 1) return 0;
  const s = [...counts].sort((a, b) => a - b);
  let total = 0;
  let weighted = 0;
  for (let i = 0; i < n; i++) {
    total += s[i];
    weighted += (i + 1) * s[i];
  }
  if (total <= 0) return 0;
  return Math.max(0, (2 * weighted) / (n * total) - (n + 1) / n);
}

/** Jaccard similarity |a ∩ b| / |a ∪ b|; 1 when both are empty. */
export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let inter = 0;
  for (const x of small) if (large.has(x)) inter++;
  return inter / (a.size + b.size - inter);
}

// ---------------------------------------------------------------------------
// Snapshots.

/** A snapshot reduced to what the analysis needs: per-entity key sets, counts and surface forms. */
export interface PreparedSnapshot {
  generation: number;
  sets: Map<string, Set<string>>;
  /** match key → number of entities using it. */
  counts: Map<string, number>;
  /** match key → surface form → number of entities using that form. */
  forms: Map<string, Map<string, number>>;
  occurrences: number;
}

export function prepareSnapshot(s: GenerationSnapshot): PreparedSnapshot {
  const an = getAnalyzer(s.analyzer ?? 'none');
  const sets = new Map<string, Set<string>>();
  const counts = new Map<string, number>();
  const forms = new Map<string, Map<string, number>>();
  let occurrences = 0;
  for (const e of s.entries) {
    if (sets.has(e.id)) throw cogrError('DUPLICATE_ID', `entity id ${JSON.stringify(e.id)} occurs twice in generation ${s.generation}`);
    const set = new Set<string>();
    for (const raw of e.keywords) {
      const k = normalizeKeyword(raw);
      if (k === null) continue;
      const key = an.key(k);
      if (set.has(key)) continue;
      set.add(key);
      let f = forms.get(key);
      if (!f) forms.set(key, (f = new Map()));
      f.set(k, (f.get(k) ?? 0) + 1);
    }
    sets.set(e.id, set);
    for (const k of set) counts.set(k, (counts.get(k) ?? 0) + 1);
    occurrences += set.size;
  }
  return { generation: s.generation, sets, counts, forms, occurrences };
}

/** A key's use: its surface forms, most used first (ties: the smaller string). */
function use(p: PreparedSnapshot, key: string, entities: number): KeywordUse {
  const forms = [...(p.forms.get(key) ?? new Map([[key, 0]]))]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([f]) => f);
  return { keyword: forms[0] ?? key, key, forms, entities };
}

function share(part: number, whole: number): number {
  return whole > 0 ? part / whole : 0;
}

/** Per-generation metrics of one prepared snapshot; `previous` adds the churn block. */
export function generationMetrics(cur: PreparedSnapshot, previous?: PreparedSnapshot): GenerationMetrics {
  const sizes: number[] = [];
  for (const set of cur.sets.values()) sizes.push(set.size);
  const lengthCounts: LengthBreakdown = { one: 0, two: 0, threePlus: 0 };
  for (const k of cur.counts.keys()) {
    const w = keywordWords(k).length;
    if (w <= 1) lengthCounts.one++;
    else if (w === 2) lengthCounts.two++;
    else lengthCounts.threePlus++;
  }
  const n = cur.counts.size;
  const countList = [...cur.counts.values()];
  return {
    generation: cur.generation,
    entities: cur.sets.size,
    distinctKeywords: n,
    occurrences: cur.occurrences,
    keywordsPerEntity: { mean: share(cur.occurrences, cur.sets.size), median: median(sizes) },
    lengthCounts,
    lengthShares: {
      one: share(lengthCounts.one, n),
      two: share(lengthCounts.two, n),
      threePlus: share(lengthCounts.threePlus, n),
    },
    entropyBits: entropyBits(countList),
    gini: gini(countList),
    churn: previous ? churnMetrics(previous, cur) : null,
  };
}

/** Per-entity Jaccard churn from `prev` to `cur` over the entities present in both. */
export function churnMetrics(prev: PreparedSnapshot, cur: PreparedSnapshot): ChurnMetrics {
  const sims: number[] = [];
  let added = 0;
  for (const [id, set] of cur.sets) {
    const before = prev.sets.get(id);
    if (before === undefined) added++;
    else sims.push(jaccard(before, set));
  }
  const removed = prev.sets.size - sims.length;
  sims.sort((a, b) => a - b); // order-independent sum
  let sum = 0;
  for (const s of sims) sum += s;
  const meanJ = sims.length ? sum / sims.length : 0;
  return {
    previous: prev.generation,
    compared: sims.length,
    added,
    removed,
    meanJaccard: meanJ,
    medianJaccard: median(sims),
    churn: sims.length ? 1 - meanJ : 0,
  };
}

/** Alignment of the query vocabulary of one generation with the item vocabulary of one generation. */
export function alignment(round: number, query: PreparedSnapshot, item: PreparedSnapshot): AlignmentPoint {
  let qIn = 0;
  for (const [k, c] of query.counts) if (item.counts.has(k)) qIn += c;
  let iIn = 0;
  let shared = 0;
  for (const [k, c] of item.counts) {
    if (query.counts.has(k)) {
      iIn += c;
      shared++;
    }
  }
  const union = query.counts.size + item.counts.size - shared;
  return {
    round,
    queryCoverage: share(qIn, query.occurrences),
    itemCoverage: share(iIn, item.occurrences),
    jaccard: share(shared, union),
    shared,
    queryDistinct: query.counts.size,
    itemDistinct: item.counts.size,
  };
}

function byUse(a: KeywordUse, b: KeywordUse): number {
  return b.entities - a.entities || (a.keyword < b.keyword ? -1 : a.keyword > b.keyword ? 1 : 0);
}

/** Keywords added and dropped from `from` to `to`, largest use first, each list capped at `limit`. */
export function diffPrepared(from: PreparedSnapshot, to: PreparedSnapshot, limit = DEFAULT_DIFF_LIMIT): KeywordDiff {
  const added: KeywordUse[] = [];
  const dropped: KeywordUse[] = [];
  let kept = 0;
  for (const [k, c] of to.counts) {
    if (from.counts.has(k)) kept++;
    else added.push(use(to, k, c));
  }
  for (const [k, c] of from.counts) if (!to.counts.has(k)) dropped.push(use(from, k, c));
  added.sort(byUse);
  dropped.sort(byUse);
  return {
    from: from.generation,
    to: to.generation,
    added: added.slice(0, limit),
    dropped: dropped.slice(0, limit),
    addedTotal: added.length,
    droppedTotal: dropped.length,
    kept,
  };
}

// ---------------------------------------------------------------------------
// The whole report.

function inRange(snaps: readonly GenerationSnapshot[], from: number, to: number | null, side: Side): GenerationSnapshot[] {
  const seen = new Set<number>();
  for (const s of snaps) {
    if (!Number.isInteger(s.generation) || s.generation < 0) {
      throw cogrError('INVALID_ARGUMENT', `${side} snapshot generation must be a non-negative integer, got ${String(s.generation)}`);
    }
    if (seen.has(s.generation)) throw cogrError('INVALID_ARGUMENT', `${side} generation ${s.generation} is given twice`);
    seen.add(s.generation);
  }
  return snaps.filter((s) => s.generation >= from && (to === null || s.generation <= to)).sort((a, b) => a.generation - b.generation);
}

/**
 * The drift report of the generations in [from, to] (to = null: the latest) of both sides.
 * Throws NOT_FOUND when neither side has a generation in the range, INVALID_ARGUMENT on
 * bad options. The result is plain JSON: this is what `GET /v1/drift` returns.
 */
export function analyzeDrift(input: DriftInput, options: DriftOptions = {}): DriftReport {
  const { from, to, limit } = parseDriftOptions(options);
  const f1 = parseF1Points(input.f1ByRound ?? [])
    .filter((p) => p.round >= from && (to === null || p.round <= to))
    .sort((a, b) => a.round - b.round || (a.side < b.side ? -1 : a.side > b.side ? 1 : 0));
  const prepared: Record<Side, PreparedSnapshot[]> = { item: [], query: [] };
  const sides = {} as Record<Side, SideDrift>;
  for (const side of ['item', 'query'] as const) {
    const snaps = inRange(input.sides[side], from, to, side).map(prepareSnapshot);
    prepared[side] = snaps;
    const generations = snaps.map((s, i) => generationMetrics(s, i > 0 ? snaps[i - 1] : undefined));
    const diff = snaps.length > 0 ? diffPrepared(snaps[0], snaps[snaps.length - 1], limit) : null;
    sides[side] = { generations, diff };
  }
  if (prepared.item.length === 0 && prepared.query.length === 0) {
    throw cogrError('NOT_FOUND', `no generation in the range from ${from} to ${to ?? 'latest'} on either side`, { from, to });
  }
  const items = new Map(prepared.item.map((s) => [s.generation, s]));
  const align: AlignmentPoint[] = [];
  for (const q of prepared.query) {
    const it = items.get(q.generation);
    if (it) align.push(alignment(q.generation, q, it));
  }
  return { version: 1, range: { from, to }, sides, alignment: align, f1, limit };
}
