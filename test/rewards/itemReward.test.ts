import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/core/errors.ts';
import { normalizeKeywordSet } from '../../index/text/normalize.ts';
import { KeywordView } from '../../index/view/view.ts';
import {
  buildItemRewardCache,
  cachedReferenceQueries,
  fullQueryCounts,
  itemRewardFull,
  itemRewardIncremental,
  mergeItemRewardCaches,
  normalizeCandidate,
  type ItemRewardContext,
} from '../../rewards/itemReward.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { sumF } from './_oracles.ts';
import { candidateArb, kMaxArb, modelItemReward, smallCorpusArb, type SmallCorpus } from './_model.ts';

function context(c: SmallCorpus, kMax: number, beta: number): ItemRewardContext {
  const itemView = KeywordView.build('item', 0, c.items);
  const queryView = KeywordView.build('query', 0, c.queries);
  return { itemView, queryView, relevance: buildRelevance(queryView, itemView, c.relevant, c.counted), kMax, beta };
}

describe('item reward: incremental vs full recompute vs naive model', () => {
  it('agree within 1e-12 on random corpora, keyword sets, candidates, budgets and betas', () => {
    const seen = { nonZero: 0, overBudget: 0 };
    fc.assert(
      fc.property(
        smallCorpusArb,
        fc.array(fc.tuple(fc.nat(20), candidateArb), { minLength: 1, maxLength: 4 }),
        kMaxArb,
        fc.constantFrom(1, 0.5, 2),
        (corpus, cands, kMax, beta) => {
          const ctx = context(corpus, kMax, beta);
          const cache = buildItemRewardCache(ctx);
          for (const [pick, cand] of cands) {
            const item = pick % ctx.itemView.size;
            const id = ctx.itemView.id(item);
            const inc = itemRewardIncremental(ctx, cache, item, cand);
            const full = itemRewardFull(ctx, item, cand);
            const model = modelItemReward(corpus, id, cand, kMax, beta);
            expect(Math.abs(inc - full)).toBeLessThanOrEqual(1e-12);
            expect(Math.abs(inc - model)).toBeLessThanOrEqual(1e-12);
            if (inc === -1) seen.overBudget++;
            else if (inc !== 0) seen.nonZero++;
          }
        },
      ),
      { numRuns: 300 },
    );
    // The generator must exercise real changes and budget cases, not only zeros.
    expect(seen.nonZero).toBeGreaterThan(50);
    expect(seen.overBudget).toBeGreaterThan(20);
  });

  it('the cache holds exactly what the query view matches for each item, and ranges merge to the whole', () => {
    fc.assert(
      fc.property(smallCorpusArb, fc.integer({ min: 1, max: 4 }), (corpus, parts) => {
        const ctx = context(corpus, 30, 1);
        const cache = buildItemRewardCache(ctx);
        const n = ctx.itemView.size;
        for (let i = 0; i < n; i++) {
          const e = ctx.itemView.entry(i);
          expect([...cachedReferenceQueries(cache, i)]).toEqual([...ctx.queryView.match({ self: e.self, keywords: e.keywords })]);
        }
        const ref = fullQueryCounts(ctx);
        expect([...cache.nRet]).toEqual([...ref.nRet]);
        expect([...cache.nTp]).toEqual([...ref.nTp]);
        const pieces = [];
        for (let p = 0; p < parts; p++)
          pieces.push(buildItemRewardCache(ctx, { start: Math.floor((p * n) / parts), end: Math.floor(((p + 1) * n) / parts) }));
        const merged = mergeItemRewardCaches(pieces.reverse());
        expect([...merged.nRet]).toEqual([...cache.nRet]);
        expect([...merged.nTp]).toEqual([...cache.nTp]);
        expect([...merged.qrefOff]).toEqual([...cache.qrefOff]);
        expect([...merged.qref]).toEqual([...cache.qref]);
      }),
      { numRuns: 100 },
    );
  });
});

describe('normalizeCandidate', () => {
  it('equals normalizeKeywordSet(list).keywords, memo or not, short and long lists', () => {
    const word = fc.oneof(
      fc.constantFrom('Red Shoe', 'red  shoe', '(red shoe)', 'ÉCOLE', 'école', '', '  ', 'a b c d e f g h i'),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(word, { maxLength: 80 }), (list) => {
        expect(normalizeCandidate(list)).toEqual(normalizeKeywordSet(list).keywords);
        expect(normalizeCandidate(list)).toEqual(normalizeKeywordSet(list).keywords);
      }),
    );
  });
});

describe('item reward: hand-computed cases', () => {
  // q0 {"red shoe"}; q1 {"blue shoe"}; items: i0 {"red shoe"}, i1 {"red shoe"}, i2 {"boot"}.
  // rel(q0) = {i0, i2}, rel(q1) = {i2}.
  const items = [
    { id: 'i0', self: 'Item zero', keywords: ['red shoe'] },
    { id: 'i1', self: 'Item one', keywords: ['red shoe'] },
    { id: 'i2', self: 'Item two', keywords: ['boot'] },
  ];
  const queries = [
    { id: 'q0', self: 'q zero', keywords: ['red shoe'] },
    { id: 'q1', self: 'q one', keywords: ['blue shoe'] },
  ];
  const relevant = new Map([
    ['q0', new Set(['i0', 'i2'])],
    ['q1', new Set(['i2'])],
  ]);
  const itemView = KeywordView.build('item', 0, items);
  const queryView = KeywordView.build('query', 0, queries);
  const ctx: ItemRewardContext = { itemView, queryView, relevance: buildRelevance(queryView, itemView, relevant) };
  const cache = buildItemRewardCache(ctx);

  it('reference state: q0 retrieves i0, i1 (tp 1, F1 = 2/4); q1 retrieves nothing', () => {
    expect([...cache.nRet]).toEqual([2, 0]);
    expect([...cache.nTp]).toEqual([1, 0]);
    expect(sumF(ctx, fullQueryCounts(ctx))).toBeCloseTo(0.5, 15);
  });

  it('giving i2 both shoes adds a relevant item to q0 and q1', () => {
    // q0: nRet 3, tp 2, F1 = 4/5; q1: nRet 1, tp 1, F1 = 1. Δ = (0.8 − 0.5) + 1.
    const r = itemRewardIncremental(ctx, cache, 2, ['Red Shoe', 'blue shoe', 'blue shoe']);
    expect(r).toBeCloseTo(1.3, 12);
  });

  it('taking "red shoe" away from the irrelevant i1 raises q0 precision', () => {
    // q0: nRet 1, tp 1, F1 = 2/3. Δ = 2/3 − 1/2.
    expect(itemRewardIncremental(ctx, cache, 1, [])).toBeCloseTo(2 / 3 - 1 / 2, 12);
  });

  it('keeping the reference keywords gives 0; over budget gives −1', () => {
    expect(itemRewardIncremental(ctx, cache, 0, ['red shoe'])).toBe(0);
    const over = Array.from({ length: 31 }, (_, k) => `kw${k}`);
    expect(itemRewardIncremental(ctx, cache, 0, over)).toBe(-1);
    expect(itemRewardFull(ctx, 0, over)).toBe(-1);
    // 31 raw keywords that normalise to 30 distinct ones are within budget.
    expect(itemRewardIncremental(ctx, cache, 0, [...over.slice(0, 30), 'KW0'])).not.toBe(-1);
  });

  it('an invalid item ordinal is an INVALID_ARGUMENT error', () => {
    try {
      itemRewardIncremental(ctx, cache, 7, []);
      expect.unreachable();
    } catch (e) {
      expect(isCogrError(e, 'INVALID_ARGUMENT')).toBe(true);
      expect((e as Error).message).toMatch(/item ordinal 7/);
    }
  });
});
