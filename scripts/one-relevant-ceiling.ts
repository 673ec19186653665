/**
 * How far above BM25 any scorer can get on the synthetic one-relevant collection
 * (bench/oneRelevantCorpus.ts), draw by draw, over all its queries:
 *
 *   npx tsx scripts/one-relevant-ceiling.ts [--seeds 11-31] [--items 400] [--queries 200] [--json]
 *
 * For each scorer, the share of queries whose best item is the relevant one (F1 of a
 * one-item set, what BM25 with a cut-off of 1 scores) and the F1 of an adaptive set: the
 * k best items maximising the expected F1 2·Σp/(k + 1) under the scorer's posterior, with a
 * uniform prior over items (the cut of generators/planner/expectedCut.ts):
 *
 *   bm25       the baseline's BM25 (Lucene analysis, k1 1.2, b 0.75), top 1 only;
 *   ql λ       query likelihood with Jelinek-Mercer smoothing, P(w | item) = λ·tf/|item| +
 *              (1 − λ)·cf/|collection|, over the items' title + text words (λ 0.3, 0.5, 0.7);
 *   generator  the generator's own likelihood of the query's words as a bag: ⌈L/2⌉ of the L
 *              words drawn from the item's 16 background words, the others uniform over the
 *              60 background words, and an item's own word only in its own queries — the
 *              elementary symmetric polynomial e_⌈L/2⌉ of the likelihood ratios. It knows how
 *              the queries were made, which no retrieval model does: an upper reference.
 *
 * No judgement is used to fit anything (no parameter is tuned), so the figures are over
 * all queries, not held out.
 */
import { parseArgs } from 'node:util';
import { oneRelevantCorpus, ONE_RELEVANT_SHAPE } from '../bench/oneRelevantCorpus.ts';
import { Bm25Index } from '../src/baseline/bm25.ts';
import { expectedF1Cut, sortByP } from '../generators/planner/expectedCut.ts';
import { renderTable } from '../src/table.ts';
import type { Corpus } from '../index/core/types.ts';

/** e_0..e_k of the values (e_j: the sum over j-subsets of their products). */
export function elementarySymmetric(values: readonly number[], k: number): number[] {
  const e = new Array<number>(k + 1).fill(0);
  e[0] = 1;
  for (const v of values) for (let j = k; j >= 1; j--) e[j] += e[j - 1] * v;
  return e;
}

/** The adaptive set of a posterior: its expected-F1 cut (generators/planner/expectedCut.ts at α 1: the k best maximising 2·Σp/(k + 1)); its F1 against the one relevant item. */
export function adaptiveF1(posterior: readonly number[], relevant: number): number {
  const sorted = sortByP(Float64Array.from(posterior));
  const k = expectedF1Cut(sorted, 1);
  return sorted.order.subarray(0, k).includes(relevant) ? 2 / (k + 1) : 0;
}

/** A posterior from log-likelihoods (uniform prior); all −∞ gives all 0. */
function posteriorOf(logLik: readonly number[]): number[] {
  const m = Math.max(...logLik);
  if (!Number.isFinite(m)) return logLik.map(() => 0);
  const w = logLik.map((x) => Math.exp(x - m));
  const z = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / z);
}

const argmax = (xs: readonly number[]): number => xs.reduce((b, x, i) => (x > xs[b] ? i : b), 0);

/**
 * The generator's likelihood of a query's words (as a bag) under each item, up to a factor
 * common to all items: its ⌈L/2⌉ item-drawn words come from the item's background words
 * (text words 6..21), the others are uniform over the background vocabulary, and an own
 * word occurs only in its own item's queries (then in a background slot). With r_w the
 * ratio of the two probabilities of word w, the bag's likelihood is e_⌈L/2⌉(r) times the
 * uniform part.
 */
export function generatorLikelihood(items: Corpus['items']): (words: readonly string[]) => number[] {
  const S = ONE_RELEVANT_SHAPE;
  const near = items.map((it) => {
    const m = new Map<string, number>();
    for (const w of it.text.split(' ').slice(S.ownInText, S.ownInText + S.backgroundInText)) m.set(w, (m.get(w) ?? 0) + 1);
    return m;
  });
  const ordinal = new Map(items.map((it, i) => [it.id, i]));
  const ownOf = (w: string): number => {
    const m = /^own(\d+)x\d+$/.exec(w);
    return m ? (ordinal.get(`d${m[1]}`) ?? -2) : -1;
  };
  return (words) => {
    const k = Math.ceil(words.length / 2);
    return items.map((_, i) => {
      const ratios: number[] = [];
      for (const w of words) {
        const o = ownOf(w);
        if (o !== -1) {
          if (o !== i) return 0;
          continue;
        }
        ratios.push(((near[i].get(w) ?? 0) / S.backgroundInText) * S.backgroundWords);
      }
      return elementarySymmetric(ratios, k)[k];
    });
  };
}

export interface CeilingRow {
  seed: number;
  bm25Top1: number;
  ql: { lambda: number; top1: number; adaptive: number }[];
  generator: { top1: number; adaptive: number };
}

/** The ceiling figures of one draw. */
export function ceilingOf(corpus: Corpus, seed: number): CeilingRow {
  const items = corpus.items;
  const words = items.map((it) => `${it.title} ${it.text}`.split(' '));
  const tf = words.map((ws) => {
    const m = new Map<string, number>();
    for (const w of ws) m.set(w, (m.get(w) ?? 0) + 1);
    return m;
  });
  const cf = new Map<string, number>();
  let total = 0;
  for (const ws of words) for (const w of ws) (cf.set(w, (cf.get(w) ?? 0) + 1), total++);
  const generator = generatorLikelihood(items);
  const bm25 = new Bm25Index(items, { analysis: 'lucene' });
  const index = new Map(items.map((it, i) => [it.id, i]));
  const lambdas = [0.3, 0.5, 0.7];
  const acc = { bm25: 0, ql: lambdas.map(() => ({ top1: 0, adaptive: 0 })), gen: { top1: 0, adaptive: 0 } };
  for (const q of corpus.queries) {
    const rel = index.get([...corpus.relevant.get(q.id)!][0])!;
    const qw = q.text.split(' ');
    const hits = bm25.search(q.text, 1);
    if (hits.length > 0 && hits[0].score > 0 && index.get(hits[0].id) === rel) acc.bm25++;
    lambdas.forEach((lambda, l) => {
      const ll = words.map((ws, i) =>
        qw.reduce((s, w) => s + Math.log((lambda * (tf[i].get(w) ?? 0)) / ws.length + ((1 - lambda) * (cf.get(w) ?? 0.5)) / total), 0),
      );
      const post = posteriorOf(ll);
      if (argmax(post) === rel) acc.ql[l].top1++;
      acc.ql[l].adaptive += adaptiveF1(post, rel);
    });
    const like = generator(qw);
    const z = like.reduce((a, b) => a + b, 0);
    const post = like.map((x) => (z > 0 ? x / z : 0));
    if (z > 0 && argmax(post) === rel) acc.gen.top1++;
    if (z > 0) acc.gen.adaptive += adaptiveF1(post, rel);
  }
  const m = corpus.queries.length;
  return {
    seed,
    bm25Top1: acc.bm25 / m,
    ql: lambdas.map((lambda, l) => ({ lambda, top1: acc.ql[l].top1 / m, adaptive: acc.ql[l].adaptive / m })),
    generator: { top1: acc.gen.top1 / m, adaptive: acc.gen.adaptive / m },
  };
}

function seedsOf(spec: string): number[] {
  const out: number[] = [];
  for (const part of spec.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`--seeds: expected numbers and ranges like 11-31,40 (got ${JSON.stringify(part)})`);
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (b < a) throw new Error(`--seeds: range ${part} runs backwards`);
    for (let s = a; s <= b; s++) out.push(s);
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { seeds: { type: 'string' }, items: { type: 'string' }, queries: { type: 'string' }, json: { type: 'boolean' } },
  });
  const whole = (name: 'items' | 'queries', def: number): number => {
    const raw = values[name];
    const v = raw === undefined ? def : Number(raw);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a whole number ≥ 1 (got ${raw})`);
    return v;
  };
  const seeds = seedsOf(values.seeds ?? '11-31');
  const items = whole('items', 400);
  const queries = whole('queries', 200);
  const rows: CeilingRow[] = [];
  for (const [i, seed] of seeds.entries()) {
    const t0 = Date.now();
    rows.push(ceilingOf(oneRelevantCorpus({ items, queries, seed }), seed));
    process.stderr.write(`draw ${seed}: ${i + 1}/${seeds.length} in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`);
  }
  const mean = (f: (r: CeilingRow) => number) => rows.reduce((s, r) => s + f(r), 0) / rows.length;
  if (values.json) process.stdout.write(JSON.stringify({ items, queries, rows }, null, 2) + '\n');
  else {
    const f = (x: number) => x.toFixed(4);
    const cells = (r: CeilingRow) => [
      f(r.bm25Top1),
      ...r.ql.flatMap((x) => [f(x.top1), f(x.adaptive)]),
      f(r.generator.top1),
      f(r.generator.adaptive),
    ];
    const head = [
      'draw',
      'BM25 top 1',
      ...[0.3, 0.5, 0.7].flatMap((l) => [`QL ${l} top 1`, `QL ${l} adaptive`]),
      'generator top 1',
      'generator adaptive',
    ];
    const body = rows.map((r) => [String(r.seed), ...cells(r)]);
    body.push([
      'mean',
      f(mean((r) => r.bm25Top1)),
      ...[0, 1, 2].flatMap((l) => [f(mean((r) => r.ql[l].top1)), f(mean((r) => r.ql[l].adaptive))]),
      f(mean((r) => r.generator.top1)),
      f(mean((r) => r.generator.adaptive)),
    ]);
    process.stdout.write(renderTable(head, body, { right: head.map((_, i) => i) }) + '\n');
  }
}
