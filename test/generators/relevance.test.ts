import { describe, expect, it } from 'vitest';
import { createRng } from '../../index/core/random.ts';
import { fitLogistic, RowBuilder, sigmoid } from '../../generators/planner/logistic.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';
import { TextIndex } from '../../generators/planner/textIndex.ts';
import { getAnalyzer } from '../../index/text/analyzer.ts';

describe('logistic regression', () => {
  it('merged rows fit exactly like the same pairs one by one', () => {
    const rng = createRng(4);
    const one = new RowBuilder(3);
    const merged = new RowBuilder(3);
    for (let i = 0; i < 400; i++) {
      const x = [1, Math.floor(rng() * 3), rng() < 0.5 ? 0 : 1];
      const y = rng() < sigmoid(-1 + 0.8 * x[1] - 1.2 * x[2]);
      one.add(x, y);
      merged.add(x, y, x.join(','));
    }
    const a = fitLogistic(one.build(), { l2: 0.5 });
    const b = fitLogistic(merged.build(), { l2: 0.5 });
    expect(merged.build().rows).toBeLessThanOrEqual(6);
    for (let j = 0; j < 3; j++) expect(b.weights[j]).toBeCloseTo(a.weights[j], 9);
  });

  it('stores rows past its first buffers exactly (typed storage: no JS array length limit at scale)', () => {
    const rng = createRng(5);
    const rb = new RowBuilder(4);
    const want: { x: number[]; n: number; y: number }[] = [];
    const at = new Map<number, number>();
    for (let i = 0; i < 3000; i++) {
      const x = [1, rng(), rng() < 0.5 ? 0 : rng(), i % 7];
      const pos = rng() < 0.3;
      const w = 0.5 + rng();
      if (i % 3 === 0) {
        // merged by x[3]: 7 rows take every third pair
        rb.addMerged(x, pos, x[3], w);
        const r = at.get(x[3]);
        if (r === undefined) {
          at.set(x[3], want.length);
          want.push({ x, n: w, y: pos ? w : 0 });
        } else {
          want[r].n += w;
          if (pos) want[r].y += w;
        }
      } else {
        rb.add(x, pos, undefined, w);
        want.push({ x, n: w, y: pos ? w : 0 });
      }
    }
    const rows = rb.build();
    expect(rows.rows).toBe(want.length);
    expect(rows.x.length).toBe(4 * want.length);
    expect(Array.from(rows.x)).toEqual(want.flatMap((r) => r.x));
    expect(Array.from(rows.n)).toEqual(want.map((r) => r.n));
    expect(Array.from(rows.y)).toEqual(want.map((r) => r.y));
  });

  it('recovers the generating weights from many pairs (weak L2)', () => {
    const rng = createRng(9);
    const rb = new RowBuilder(3);
    for (let i = 0; i < 40_000; i++) {
      const x = [1, rng() * 2 - 1, rng() * 2 - 1];
      rb.add(x, rng() < sigmoid(-0.5 + 2 * x[1] - 1 * x[2]));
    }
    const w = fitLogistic(rb.build(), { l2: 1e-6 }).weights;
    expect(w[0]).toBeCloseTo(-0.5, 1);
    expect(w[1]).toBeCloseTo(2, 1);
    expect(w[2]).toBeCloseTo(-1, 1);
  });
});

describe('TextIndex and the text features, by hand', () => {
  // Three documents; "statins" and "statin" are one analysed word.
  const docs = ['statins and heart disease', 'heart failure', 'statin trials in heart patients with statin'];
  const idx = new TextIndex(docs, getAnalyzer('english'));

  it('scores BM25 (k1 1.2, b 0.75, Lucene idf) over analysed words', () => {
    // tokens: d0 [statin, heart, diseas] (3), d1 [heart, failur] (2), d2 [statin, trial, heart, patient, statin] (5); avgdl 10/3
    const { scores, sumIdf, ranked } = idx.score('statins');
    const idf = Math.log(1 + (3 - 2 + 0.5) / (2 + 0.5));
    const bm = (tf: number, dl: number) => (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * dl) / (10 / 3)));
    expect(scores[0]).toBeCloseTo(bm(1, 3), 12);
    expect(scores[1]).toBe(0);
    expect(scores[2]).toBeCloseTo(bm(2, 5), 12);
    expect(sumIdf).toBeCloseTo(idf, 12);
    expect(Array.from(ranked)).toEqual(scores[2] > scores[0] ? [2, 0] : [0, 2]);
  });

  it('gives sNorm, logRank, sIdf and matched per item', () => {
    const items = docs.map((text, i) => ({ id: `d${i}`, title: '', text }));
    const m = RelevanceModel.create(items, [], { judgements: false, queryTf: false, rm3: false });
    expect(m.featureNames).toEqual(['bias', 'sNorm', 'logRank', 'sIdf', 'matched']);
    const x = m.features({ id: 'q', text: 'statins' });
    const { scores, sumIdf } = idx.score('statins');
    const best = Math.max(...scores);
    const rank = [scores[0] > scores[2] ? 1 : 2, 3, scores[2] > scores[0] ? 1 : 2];
    for (let i = 0; i < 3; i++) {
      const row = Array.from(x.subarray(i * 5, i * 5 + 5));
      expect(row[0]).toBe(1);
      expect(row[1]).toBeCloseTo(scores[i] / best, 12);
      expect(row[2]).toBeCloseTo(Math.log1p(rank[i]) / Math.log1p(3), 12);
      expect(row[3]).toBeCloseTo(scores[i] / sumIdf, 12);
      expect(row[4]).toBe(scores[i] > 0 ? 1 : 0);
    }
  });

  it('queryTf adds the BM25 of the query with each word weighted by its count: 2·s(statins) + s(heart), normalised by its best and by Σ idf', () => {
    const items = docs.map((text, i) => ({ id: `d${i}`, title: '', text }));
    const m = RelevanceModel.create(items, [], { judgements: false, queryTf: true, rm3: false });
    expect(m.featureNames).toEqual(['bias', 'sNorm', 'logRank', 'sIdf', 'matched', 'sTfNorm', 'sTfIdf']);
    expect(m.textScoreColumn).toBe(5);
    const x = m.features({ id: 'q', text: 'statins statins heart' });
    const st = idx.score('statins').scores;
    const he = idx.score('heart').scores;
    const sumIdf = idx.score('statins heart').sumIdf;
    const tf = [0, 1, 2].map((i) => 2 * st[i] + he[i]);
    const best = Math.max(...tf);
    for (let i = 0; i < 3; i++) {
      expect(x[i * 7 + 5]).toBeCloseTo(tf[i] > 0 ? tf[i] / best : 0, 12);
      expect(x[i * 7 + 6]).toBeCloseTo(tf[i] > 0 ? tf[i] / sumIdf : 0, 12);
    }
    // A model saved before queryTf reads back without its features.
    const old = m.toJSON();
    delete (old.options as Partial<typeof old.options>).queryTf;
    old.features = old.features.slice(0, 5);
    old.weights = old.weights.slice(0, 5);
    expect(RelevanceModel.fromJSON(old, items).featureNames).toEqual(['bias', 'sNorm', 'logRank', 'sIdf', 'matched']);
  });

  it('rm3 adds BM25 + RM3 of the query (feedback words over the matched items, half the original query), normalised by its best, and its rank', () => {
    // 20 items: "statin" and "cholesterol" each in 2 (df/N = 0.1, kept as feedback words), the rest one word each.
    const filler = [
      'alpha',
      'bravo',
      'charlie',
      'delta',
      'echo',
      'foxtrot',
      'golf',
      'hotel',
      'india',
      'juliet',
      'kilo',
      'lima',
      'mike',
      'november',
    ];
    const texts = ['statin cholesterol', 'statin statin myopathy', 'cholesterol diet', 'diet plans', 'diet again', ...filler, 'zulu'];
    expect(texts).toHaveLength(20);
    const items = texts.map((text, i) => ({ id: `d${String(i).padStart(2, '0')}`, title: '', text }));
    const m = RelevanceModel.create(items, [], { judgements: false, queryTf: false, rm3: true });
    expect(m.featureNames).toEqual(['bias', 'sNorm', 'logRank', 'sIdf', 'matched', 'rm3Norm', 'rm3Rank']);
    const ix = new TextIndex(texts, getAnalyzer('english'));
    const o = (w: string) => ix.wordOrdinal(ix.tokens(w)[0]);
    // First stage: the query's words at tf / |q|; items 0 and 1 match.
    const first = ix.scoreWeighted(new Map([[o('statin'), 1]]));
    const [s0, s1] = [first.scores[0], first.scores[1]];
    // P(w | R) ∝ Σ_d s(d) · tf(w, d) / |d|: item 0 has 2 words, item 1 has 3.
    const raw = new Map([
      [o('statin'), s0 / 2 + (2 * s1) / 3],
      [o('cholesterol'), s0 / 2],
      [o('myopathy'), s1 / 3],
    ]);
    const sum = [...raw.values()].reduce((a, b) => a + b, 0);
    const expanded = new Map([...raw].map(([w, x]) => [w, 0.5 * (x / sum) + (w === o('statin') ? 0.5 : 0)]));
    const want = ix.scoreWeighted(expanded);
    const best = Math.max(...want.scores);
    const x = m.features({ id: 'q', text: 'statin' });
    const d = m.dim;
    const rank = new Map(Array.from(want.ranked, (i, r) => [i, r + 1]));
    for (let i = 0; i < items.length; i++) {
      expect(x[i * d + 5]).toBeCloseTo(want.scores[i] / best, 12);
      expect(x[i * d + 6]).toBeCloseTo(rank.has(i) ? 1 - Math.log1p(rank.get(i)!) / Math.log1p(items.length) : 0, 12);
    }
    // Item 2 shares no word with the query: the feedback word "cholesterol" alone matches it.
    expect(x[2 * d + 4]).toBe(0);
    expect(x[2 * d + 5]).toBeGreaterThan(0);
    // p from the one-pass scores equals p from the feature rows, bit for bit, with weights on every column.
    m.setWeights([-3, 1, -0.5, 0.7, 0.4, 2, 1.5]);
    const { p } = m.queryScores({ id: 'q', text: 'statin' });
    expect(Array.from(p)).toEqual(Array.from(m.probabilities({ id: 'q', text: 'statin' }, x)));
    expect(p[2]).not.toBe(p[3]);
    // A model saved before rm3 reads back without its features.
    const old = m.toJSON();
    delete (old.options as Partial<typeof old.options>).rm3;
    old.features = old.features.slice(0, 5);
    old.weights = old.weights.slice(0, 5);
    expect(RelevanceModel.fromJSON(old, items).featureNames).toEqual(['bias', 'sNorm', 'logRank', 'sIdf', 'matched']);
  });

  it('counts judgements of other training queries only (leave-one-out)', () => {
    const items = docs.map((text, i) => ({ id: `d${i}`, title: '', text }));
    const m = RelevanceModel.create(items, [
      [{ id: 'a', text: 'statin' }, ['d0', 'd2']],
      [{ id: 'b', text: 'heart failure' }, ['d1', 'd2']],
    ]);
    const d = m.dim;
    const col = m.featureNames.indexOf('logJudged');
    const own = m.features({ id: 'a', text: 'statin' });
    const fresh = m.features({ id: 'new', text: 'statin' });
    // d2 is judged by a and b: a held-out query sees 2, query a itself sees only b's judgement.
    expect(fresh[2 * d + col]).toBeCloseTo(Math.log1p(2), 12);
    expect(own[2 * d + col]).toBeCloseTo(Math.log1p(1), 12);
    expect(own[0 * d + col]).toBeCloseTo(0, 12);
  });
});
