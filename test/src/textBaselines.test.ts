import { describe, expect, it } from 'vitest';
import type { Item } from '../../index/core/types.ts';
import { Rm3Index } from '../../src/baseline/rm3.ts';
import { expectedF1Cut, expectedF1Top, sortByP } from '../../generators/planner/expectedCut.ts';
import { createRng } from '../../index/core/random.ts';

const close = (a: number, b: number): void => expect(a).toBeCloseTo(b, 12);

// 20 items: three that share words, seventeen fillers of one unique word each (df 1).
const fill = 'abcdefghijklmnopq'.split('').map((c, i): Item => ({ id: `f${i}`, title: '', text: `filler${c}` }));
const items: Item[] = [
  { id: 'i0', title: '', text: 'apple banana' },
  { id: 'i1', title: '', text: 'apple cherry cherry' },
  { id: 'i2', title: '', text: 'banana date' },
  ...fill,
];
const N = items.length;
const avgdl = (2 + 3 + 2 + 17) / N;
const bm25 = (tf: number, df: number, dl: number) => {
  const idf = Math.log(1 + (N - df + 0.5) / (df + 0.5));
  return (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * dl) / avgdl));
};

describe('BM25 + RM3 on a tiny corpus, by hand', () => {
  // The by-hand figures count unstemmed words: the wink analysis.
  const rm3 = new Rm3Index(items, { fbDocs: 2, fbTerms: 3, originalQueryWeight: 0.5, analysis: 'wink' });
  // First stage for "apple": i0 (dl 2) and i1 (dl 3), df(apple) = 2.
  const s0 = bm25(1, 2, 2);
  const s1 = bm25(1, 2, 3);
  it('the first stage is BM25 of the query words', () => {
    expect(s0).toBeGreaterThan(s1);
    expect(rm3.searchBm25('apple', 10).map((h) => h.id)).toEqual(['i0', 'i1']);
    close(rm3.searchBm25('apple', 10)[1].score, s1);
  });
  it('the relevance model weighs each word Σ_d s(d)·tf/|d|, keeps fbTerms, sums to 1, and mixes 0.5 with the query', () => {
    // apple: s0/2 + s1/3; banana: s0/2 (df 2 = 10%: kept); cherry: 2·s1/3.
    const raw = { apple: s0 / 2 + s1 / 3, banana: s0 / 2, cherry: (2 * s1) / 3 };
    const sum = raw.apple + raw.banana + raw.cherry;
    const { terms } = rm3.expand('apple');
    const w = Object.fromEntries(terms.map((t) => [t.word, t.weight]));
    expect(Object.keys(w).sort()).toEqual(['apple', 'banana', 'cherry']);
    close(w.apple, 0.5 + (0.5 * raw.apple) / sum);
    close(w.banana, (0.5 * raw.banana) / sum);
    close(w.cherry, (0.5 * raw.cherry) / sum);
  });
  it('the expanded query retrieves i2 through banana, ranked by weighted BM25', () => {
    const { terms } = rm3.expand('apple');
    const w = Object.fromEntries(terms.map((t) => [t.word, t.weight]));
    const score = {
      i0: w.apple * bm25(1, 2, 2) + w.banana * bm25(1, 2, 2),
      i1: w.apple * bm25(1, 2, 3) + w.cherry * bm25(2, 1, 3),
      i2: w.banana * bm25(1, 2, 2),
    };
    const expected = (Object.keys(score) as (keyof typeof score)[]).sort((a, b) => score[b] - score[a]);
    expect(rm3.search('apple', 10).map((h) => h.id)).toEqual(expected);
    for (const h of rm3.search('apple', 10)) close(h.score, score[h.id as keyof typeof score]);
  });
  it('with the Lucene analysis (the default) the same feedback words arrive Porter-stemmed', () => {
    const { terms } = new Rm3Index(items, { fbDocs: 2, fbTerms: 3 }).expand('apples');
    expect(terms.map((t) => t.word).sort()).toEqual(['appl', 'banana', 'cherri']);
  });
  it('words in more than 10% of the items are not feedback terms', () => {
    const dense = [
      ...items.slice(0, 3).map((it) => ({ ...it, text: `${it.text} common` })),
      ...fill.slice(0, 3).map((it) => ({ ...it, text: `${it.text} common` })),
      ...fill.slice(3),
    ];
    const { terms } = new Rm3Index(dense, { fbDocs: 2, fbTerms: 10, analysis: 'wink' }).expand('apple');
    expect(terms.map((t) => t.word)).not.toContain('common'); // df 6 of 20
    expect(terms.map((t) => t.word)).toContain('banana');
  });
});

describe('the model baseline: expected-F1 cut over items sorted by p, by hand', () => {
  it('takes the k maximising 2·Σ_{i≤k} p / (k + α·E)', () => {
    // p sorted 0.9 0.6 0.3 0.1, E = 1.9; α = 1: k=1 1.8/2.9, k=2 3.0/3.9 (best), k=3 3.6/4.9, k=4 3.8/5.9
    const s = sortByP(Float64Array.from([0.3, 0.9, 0.1, 0.6]));
    expect(Array.from(s.order)).toEqual([1, 3, 0, 2]);
    expect(expectedF1Cut(s, 1)).toBe(2);
    // α = 4: k=1 1.8/8.6 = 0.209, k=2 3.0/9.6 = 0.3125, k=3 3.6/10.6 = 0.3396, k=4 3.8/11.6 = 0.3276
    expect(expectedF1Cut(s, 4)).toBe(3);
    // Without sorting every item: the same items, best first.
    expect(expectedF1Top(Float64Array.from([0.3, 0.9, 0.1, 0.6]), 1)).toEqual([1, 3]);
    expect(expectedF1Top(Float64Array.from([0.3, 0.9, 0.1, 0.6]), 4)).toEqual([1, 3, 0]);
    expect(expectedF1Top(new Float64Array(0), 1)).toEqual([]);
  });

  it("expectedF1Top gives the full sort's cut on seeded random p: sizes across its window steps, ties, heavy tails, every α of the grid", () => {
    const rng = createRng(20261205);
    const shapes: ((u: number) => number)[] = [
      (u) => u,
      (u) => u ** 8,
      (u) => Math.round(u * 20) / 20, // many ties
      (u) => 1 / (1 + Math.exp(12 * u - 2)), // a logistic p: a few likely items, a long tail
      (u) => (u < 0.01 ? 0.9 : 1e-4 * u),
    ];
    let cases = 0;
    for (const n of [1, 2, 5, 63, 64, 65, 255, 256, 257, 1000, 5000])
      for (const shape of shapes)
        for (let rep = 0; rep < 4; rep++) {
          const p = Float64Array.from({ length: n }, () => shape(rng()));
          const sorted = sortByP(p);
          for (const alpha of [0.125, 0.177, 0.25, 0.354, 0.5, 0.707, 1, 1.41, 2, 2.83, 4]) {
            expect(expectedF1Top(p, alpha)).toEqual(Array.from(sorted.order.subarray(0, expectedF1Cut(sorted, alpha))));
            cases++;
          }
        }
    expect(cases).toBe(11 * 5 * 4 * 11);
  });
});
