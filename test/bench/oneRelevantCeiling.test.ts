import { describe, expect, it } from 'vitest';
import { oneRelevantCorpus } from '../../bench/oneRelevantCorpus.ts';
import { adaptiveF1, ceilingOf, elementarySymmetric, generatorLikelihood } from '../../scripts/one-relevant-ceiling.ts';

describe('the one-relevant ceiling (scripts/one-relevant-ceiling.ts)', () => {
  it('elementary symmetric polynomials by hand', () => {
    // e1(1,2,3) = 6, e2 = 1·2 + 1·3 + 2·3 = 11, e3 = 6
    expect(elementarySymmetric([1, 2, 3], 3)).toEqual([1, 6, 11, 6]);
    expect(elementarySymmetric([0, 5], 2)).toEqual([1, 5, 0]);
  });

  it('the adaptive set maximises 2·Σp/(k + 1), by hand', () => {
    // p = .5 .4 .1: k = 1 gives 0.5, k = 2 gives 0.6, k = 3 gives 0.5, so the set is the best two.
    expect(adaptiveF1([0.5, 0.4, 0.1], 1)).toBeCloseTo(2 / 3, 12);
    expect(adaptiveF1([0.5, 0.4, 0.1], 2)).toBe(0);
    // A sure posterior keeps one item: F1 1 when it is the relevant one.
    expect(adaptiveF1([0, 1, 0], 1)).toBe(1);
  });

  it("the generator's likelihood is positive for every query's own item, and zero for items lacking its own word", () => {
    const corpus = oneRelevantCorpus({ items: 60, queries: 80, seed: 5 });
    const like = generatorLikelihood(corpus.items);
    const ordinal = new Map(corpus.items.map((it, i) => [it.id, i]));
    let withOwn = 0;
    for (const q of corpus.queries) {
      const words = q.text.split(' ');
      const l = like(words);
      const target = ordinal.get([...corpus.relevant.get(q.id)!][0])!;
      expect(l[target]).toBeGreaterThan(0);
      const own = words.find((w) => w.startsWith('own'));
      if (own) {
        withOwn++;
        // Only the item owning the word can have made the query.
        expect(l.filter((x, i) => i !== target && x > 0)).toEqual([]);
      }
    }
    expect(withOwn).toBeGreaterThan(0);
  });

  it("a draw: the generator's best item is right on every query that holds an own word; shares are counts of 60 queries", () => {
    const corpus = oneRelevantCorpus({ items: 80, queries: 60, seed: 3 });
    const row = ceilingOf(corpus, 3);
    const withOwn = corpus.queries.filter((q) => q.text.split(' ').some((w) => w.startsWith('own'))).length;
    expect(withOwn).toBeGreaterThan(0);
    expect(row.generator.top1).toBeGreaterThanOrEqual(withOwn / 60);
    for (const x of [row.bm25Top1, row.generator.top1, ...row.ql.map((q) => q.top1)])
      expect(Math.abs(x * 60 - Math.round(x * 60))).toBeLessThan(1e-9);
    expect(row.ql.map((q) => q.lambda)).toEqual([0.3, 0.5, 0.7]);
  });
});
