/**
 * The scale rewrites (issue 21) against transcriptions of the loops they replaced, on a
 * small synthetic collection: the neighbour similarities counted from the items' side,
 * the one-pass relevance fit and α tuned query by query must give the same numbers, to
 * the last bit.
 */
import { describe, expect, it } from 'vitest';
import { judgedCollection } from '../../bench/judgedCollection.ts';
import { fitLogistic, RowBuilder } from '../../generators/planner/logistic.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { ALPHA_GRID, setF1 } from '../../generators/planner/training.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';
import { TextIndex } from '../../generators/planner/textIndex.ts';
import { RM3_DEFAULTS, Rm3Feedback } from '../../generators/planner/feedback.ts';
import { KeywordView } from '../../index/view/view.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { TUNING_QUERIES, tuningQueries } from '../../generators/sft.ts';

const corpus = judgedCollection({ items: 400, queries: 60, relevant: 12, seed: 11 });
const trainQ = corpus.queries.slice(0, 45);
const training = trainQ.map((q) => [{ id: q.id, text: q.text }, [...corpus.relevant.get(q.id)!]] as const);
const opts = { neighbours: 5, profileDepth: 20, queryTf: true } as const;

/** The judgement features 6.. as the loops before issue 21 computed them (T × depth and T × |relevant| per query). */
function referenceShares(m: RelevanceModel, q: { id: string; text: string }): Float64Array {
  const T = training.length;
  const N = m.size;
  const pr = m.profile(q.text);
  const self = training.findIndex(([t]) => t.id === q.id);
  const rels = training.map(([t]) => m.trainingRelevant(t.id));
  const tops = training.map(([t]) => m.profile(t.text).top);
  const qi = new TextIndex(
    training.map(([t]) => t.text),
    m.analyzer,
  );
  const sims = [new Float64Array(T), new Float64Array(T), new Float64Array(T)];
  const qs = qi.score(q.text);
  let mx = 0;
  for (let t = 0; t < T; t++) if (t !== self && qs.scores[t] > mx) mx = qs.scores[t];
  if (mx > 0) for (let t = 0; t < T; t++) if (t !== self) sims[0][t] = qs.scores[t] / mx;
  const mark = new Uint8Array(N);
  for (const i of pr.top) mark[i] = 1;
  for (let t = 0; t < T; t++) {
    if (t === self) continue;
    let ov = 0;
    for (const i of tops[t]) if (mark[i]) ov++;
    sims[1][t] = ov / opts.profileDepth;
  }
  if (pr.sMax > 0) {
    for (let t = 0; t < T; t++) {
      if (t === self || rels[t].length === 0) continue;
      let s = 0;
      for (const i of rels[t]) s += pr.scores[i];
      sims[2][t] = s / pr.sMax / rels[t].length;
    }
  }
  const out = new Float64Array(N * 6);
  sims.forEach((sim, f) => {
    const order: number[] = [];
    for (let t = 0; t < T; t++) if (sim[t] > 0) order.push(t);
    order.sort((a, b) => sim[b] - sim[a] || a - b);
    const top = order.slice(0, opts.neighbours);
    let den = 0;
    for (const t of top) den += sim[t];
    if (den <= 0) return;
    for (const t of top) {
      for (const i of rels[t]) {
        out[i * 6 + 2 * f] += sim[t] / den;
        if (sim[t] > out[i * 6 + 2 * f + 1]) out[i * 6 + 2 * f + 1] = sim[t];
      }
    }
  });
  return out;
}

/**
 * The text, query-tf and logJudged columns (0–5 and the last two) as the dense loops
 * before the row-by-row features computed them: every item's bias and unmatched logRank,
 * then the matched items by rank, the query-tf scores, ln(1 + judged count) with the
 * query's own judgements left out.
 */
function referenceRows(m: RelevanceModel, q: { id: string; text: string }): Float64Array {
  const N = m.size;
  const d = m.dim;
  const x = new Float64Array(N * d);
  const pr = m.profile(q.text);
  const logN = Math.log1p(N);
  for (let i = 0; i < N; i++) {
    x[i * d] = 1;
    x[i * d + 2] = Math.log1p(N) / logN;
  }
  for (let r = 0; r < pr.ranked.length; r++) {
    const i = pr.ranked[r];
    const s = pr.scores[i];
    x[i * d + 1] = pr.sMax > 0 ? s / pr.sMax : 0;
    x[i * d + 3] = pr.sumIdf > 0 ? s / pr.sumIdf : 0;
    x[i * d + 4] = 1;
    x[i * d + 2] = Math.log1p(r + 1) / logN;
  }
  const col = m.textScoreColumn;
  const texts = new TextIndex(
    m.itemIds.map((id) => {
      const it = corpus.items.find((x) => x.id === id)!;
      return it.title === '' || it.text.startsWith(it.title) ? it.text : `${it.title} ${it.text}`;
    }),
    m.analyzer,
  );
  const rc = m.featureNames.indexOf('rm3Norm');
  if (rc >= 0) {
    const r = new Rm3Feedback(texts, { ...RM3_DEFAULTS, docVectors: 'length' }).score(q.text);
    const best = r.ranked.length > 0 ? r.scores[r.ranked[0]] : 0;
    r.ranked.forEach((i, k) => {
      x[i * d + rc] = r.scores[i] / best;
      x[i * d + rc + 1] = 1 - Math.log1p(k + 1) / logN;
    });
  }
  if (col !== 1) {
    const tf = texts.scoreCounts(q.text);
    const sMax = tf.ranked.length > 0 ? tf.scores[tf.ranked[0]] : 0;
    for (let i = 0; i < N; i++) {
      if (tf.scores[i] <= 0) continue;
      x[i * d + col] = sMax > 0 ? tf.scores[i] / sMax : 0;
      x[i * d + col + 1] = tf.sumIdf > 0 ? tf.scores[i] / tf.sumIdf : 0;
    }
  }
  if (!m.usesJudgements) return x;
  const counts = new Int32Array(N);
  for (const [t] of training) for (const i of m.trainingRelevant(t.id)) counts[i]++;
  const own = new Set(m.trainingRelevant(q.id));
  for (let i = 0; i < N; i++) x[i * d + 5] = Math.log1p(own.has(i) ? counts[i] - 1 : counts[i]);
  return x;
}

describe('exactness of the scale rewrites', () => {
  const m = RelevanceModel.create(corpus.items, training, opts);

  it('neighbour shares counted from the items side equal the per-neighbour loops', () => {
    const d = m.dim;
    for (const q of [...trainQ.slice(0, 8), ...corpus.queries.slice(45, 53)]) {
      const x = m.features(q);
      const ref = referenceShares(m, q);
      const got = new Float64Array(m.size * 6);
      for (let i = 0; i < m.size; i++) for (let c = 0; c < 6; c++) got[i * 6 + c] = x[i * d + 6 + c];
      expect(Array.from(got)).toEqual(Array.from(ref));
    }
  });

  it('rows written one by one equal the dense loops, and p and the text scores without the matrix equal those from it', () => {
    const queries = [...trainQ.slice(0, 8), ...corpus.queries.slice(45, 53)];
    for (const o of [opts, { ...opts, queryTf: false }, { ...opts, judgements: false }, { ...opts, rm3: false }]) {
      const fitted = RelevanceModel.fit(corpus.items, training, o);
      const d = fitted.dim;
      const w = fitted.getWeights();
      for (const q of queries) {
        // fresh models, so nothing comes from a memo of the dense rows
        const a = RelevanceModel.create(corpus.items, training, o);
        a.setWeights(w);
        const { p, text } = a.queryScores(q);
        const x = a.features(q);
        const ref = referenceRows(a, q);
        const tfCol = a.textScoreColumn === 1 ? d : a.textScoreColumn;
        for (let i = 0; i < a.size; i++)
          for (let j = 0; j < d; j++) if (j < 6 || j >= tfCol) expect(x[i * d + j], `item ${i} column ${j}`).toBe(ref[i * d + j]);
        const dense = new Float64Array(a.size);
        for (let i = 0; i < a.size; i++) {
          let z = 0;
          for (let j = 0; j < d; j++) z += w[j] * x[i * d + j];
          dense[i] = z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z));
        }
        expect(Array.from(p)).toEqual(Array.from(dense));
        expect(Array.from(a.probabilities(q, x))).toEqual(Array.from(dense));
        expect(Array.from(text)).toEqual(Array.from({ length: a.size }, (_, i) => x[i * d + a.textScoreColumn]));
      }
    }
  });

  it('the scores kept between passes equal those computed afresh, and new weights are not answered from the old', () => {
    const fitted = RelevanceModel.fit(corpus.items, training, opts);
    const w = fitted.getWeights();
    const queries = [...trainQ.slice(0, 6), ...corpus.queries.slice(45, 51)];
    const a = RelevanceModel.create(corpus.items, training, opts);
    a.setWeights(w);
    const first = queries.map((q) => a.queryScores(q));
    // Second pass: from the memo (sparse rows + one p per judged count), bit for bit.
    queries.forEach((q, k) => {
      const again = a.queryScores(q);
      expect(again.p).not.toBe(first[k].p);
      expect(Array.from(again.p)).toEqual(Array.from(first[k].p));
      expect(Array.from(again.text)).toEqual(Array.from(first[k].text));
    });
    // Other weights: the memo's entries are stale and recomputed, as a fresh model computes them.
    const w2 = Float64Array.from(w, (v, j) => v * (1 + 0.1 * (j + 1)));
    a.setWeights(w2);
    for (const q of queries) {
      const b = RelevanceModel.create(corpus.items, training, opts);
      b.setWeights(w2);
      const got = a.queryScores(q);
      const ref = b.queryScores(q);
      expect(Array.from(got.p)).toEqual(Array.from(ref.p));
      expect(Array.from(got.text)).toEqual(Array.from(ref.text));
    }
    expect(Array.from(a.queryScores(queries[0]).p)).not.toEqual(Array.from(first[0].p));
  });

  it('the one-pass fit equals counting first and then adding the rows', () => {
    const fitted = RelevanceModel.fit(corpus.items, training, opts);
    const d = m.dim;
    const rb = new RowBuilder(d);
    for (const [q, rel] of training) {
      const x = m.features(q);
      const relSet = new Set(rel.map((id) => m.itemOrdinal(id)));
      for (let i = 0; i < m.size; i++) {
        const o = i * d;
        const row = x.subarray(o, o + d);
        let plain = x[o + 4] === 0;
        for (let j = 6; j < d && plain; j++) if (x[o + j] !== 0) plain = false;
        if (plain) rb.add(row, relSet.has(i), `j${x[o + 5]}`);
        else rb.add(row, relSet.has(i));
      }
    }
    const ref = fitLogistic(rb.build(), { l2: 1 });
    expect(Array.from(fitted.getWeights())).toEqual(Array.from(ref.weights));
    expect(fitted.lastFit!.rows).toBe(rb.build().rows);
  });

  it('the subsampled fit (more individual rows than maxRows) is seeded and keeps every positive', () => {
    const a = RelevanceModel.fit(corpus.items, training, { ...opts, maxRows: 500 });
    const b = RelevanceModel.fit(corpus.items, training, { ...opts, maxRows: 500 });
    expect(Array.from(a.getWeights())).toEqual(Array.from(b.getWeights()));
    expect(a.lastFit!.rows).toBeLessThan(RelevanceModel.fit(corpus.items, training, opts).lastFit!.rows);
  });

  it('α tuned query by query equals α by α', () => {
    const rel = RelevanceModel.fit(corpus.items, training, opts);
    const policy = new EmbeddedPolicy('item');
    policy.fitStats(corpus.items.map((it) => ({ id: it.id, title: it.title, text: it.text })));
    const view = KeywordView.build(
      'item',
      0,
      corpus.items.map((it) => ({ id: it.id, self: it.title, keywords: policy.rank({ id: it.id, title: it.title, text: it.text }, 5) })),
      { analyzer: 'english' },
    );
    const relOf = (id: string) => new Set([...corpus.relevant.get(id)!].map((x) => view.ordinalOf(x)));
    const planner = new KeywordPlanner(rel);
    planner.attachOpposite(view);
    const inputs = trainQ.map((q) => ({ id: q.id, text: q.text }));
    const ref: [number, number][] = ALPHA_GRID.map((a) => {
      planner.alpha = a;
      let s = 0;
      for (const q of inputs) s += setF1(planner.plan(q, { asHeldOut: true }).matched, relOf(q.id));
      return [a, s / inputs.length];
    });
    const t = planner.tuneAlpha(inputs, relOf);
    expect(t.curve).toEqual(ref);
    expect(planner.alpha).toBe(t.alpha);
  });
});

describe('the tuning sample (an approximation above TUNING_QUERIES only)', () => {
  it('is every query up to the threshold, else a seeded sample in the original order', () => {
    const few = Array.from({ length: TUNING_QUERIES }, (_, i) => i);
    expect(tuningQueries(few, 1)).toBe(few);
    const many = Array.from({ length: 5000 }, (_, i) => i);
    const a = tuningQueries(many, 1);
    expect(a).toHaveLength(TUNING_QUERIES);
    expect([...a].sort((x, y) => x - y)).toEqual(a);
    expect(tuningQueries(many, 1)).toEqual(a);
    expect(tuningQueries(many, 2)).not.toEqual(a);
    expect(tuningQueries(many, 1, 10)).toHaveLength(10);
  });
});
