import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/errors.ts';
import { KeywordView } from '../../index/view.ts';
import { buildItemRewardCache, itemRewardIncremental, type ItemRewardContext } from '../../rewards/itemReward.ts';
import { queryReward } from '../../rewards/queryReward.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { MAX_CONTEXTS, RewardPool } from '../../workers/pool.ts';
import { candidateArb, smallCorpusArb } from '../rewards/_model.ts';

// A small deterministic corpus: 60 items, 25 queries over a 30-keyword vocabulary.
function corpus() {
  const kw = (n: number) => `kw ${n % 30}`;
  const items = Array.from({ length: 60 }, (_, i) => ({ id: `item-${String(i).padStart(3, '0')}`, self: `title ${i}`, keywords: [kw(i), kw(i * 7 + 3), kw(i * 11 + 5)] }));
  const queries = Array.from({ length: 25 }, (_, q) => ({ id: `q-${String(q).padStart(2, '0')}`, self: `query ${q}`, keywords: [kw(q * 3), kw(q * 5 + 1)] }));
  const relevant = new Map<string, Set<string>>();
  for (let q = 0; q < 25; q++) relevant.set(`q-${String(q).padStart(2, '0')}`, new Set(Array.from({ length: 8 }, (_, j) => `item-${String((q * 13 + j * 7) % 60).padStart(3, '0')}`)));
  const itemView = KeywordView.build('item', 0, items, { shared: true });
  const queryView = KeywordView.build('query', 0, queries, { shared: true });
  const ctx: ItemRewardContext = { itemView, queryView, relevance: buildRelevance(queryView, itemView, relevant, undefined, { shared: true }) };
  return { ctx, relevant };
}

describe('RewardPool', () => {
  const { ctx, relevant } = corpus();
  let pool: RewardPool;
  beforeAll(() => {
    pool = RewardPool.create({ size: 2 });
  });
  afterAll(async () => {
    await pool.destroy();
  });

  it('builds the item cache in parallel, equal to the in-process cache, on shared memory', async () => {
    const local = buildItemRewardCache(ctx);
    const cache = await pool.buildItemCache(ctx);
    expect([...cache.nRet]).toEqual([...local.nRet]);
    expect([...cache.nTp]).toEqual([...local.nTp]);
    expect([...cache.qrefOff]).toEqual([...local.qrefOff]);
    expect([...cache.qref]).toEqual([...local.qref]);
    expect(cache.qref.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  it('item rewards in workers equal those computed in-process', async () => {
    const cache = await pool.buildItemCache(ctx);
    pool.setContext({ ...ctx, cache });
    const batch = Array.from({ length: 60 }, (_, i) => ({
      item: i,
      candidates: [[`kw ${(i * 3) % 30}`], [`kw ${i % 30}`, 'kw 1', 'kw 2'], [], Array.from({ length: 31 }, (_, k) => `x${k}`)],
    }));
    const got = await pool.itemRewards(batch);
    const want = batch.map((t) => t.candidates.map((c) => itemRewardIncremental(ctx, cache, t.item, c)));
    expect(got).toEqual(want);
    expect(got.flat().some((r) => r > 0)).toBe(true);
    expect(got.flat().some((r) => r < 0 && r !== -1)).toBe(true);
  });

  it('query rewards in workers equal those computed in-process', async () => {
    pool.setContext(ctx);
    const batch = [...relevant].map(([qid, rel], k) => ({
      self: `query ${k}`,
      relevant: [...rel].map((id) => ctx.itemView.ordinalOf(id)),
      candidates: [[`kw ${k}`], [`kw ${k}`, `kw ${k + 1}`], []],
      qid,
    }));
    const got = await pool.queryRewards(batch);
    const want = batch.map((t) =>
      t.candidates.map((c) => {
        const r = queryReward(ctx.itemView, { self: t.self, keywords: c }, t.relevant);
        return { reward: r.reward, nRet: r.nRet, tp: r.tp };
      }),
    );
    expect(got).toEqual(want);
  });

  it('property: random corpora give the same item rewards in a worker and in-process', async () => {
    await fc.assert(
      fc.asyncProperty(smallCorpusArb, fc.array(candidateArb, { minLength: 1, maxLength: 3 }), async (c, cands) => {
        const itemView = KeywordView.build('item', 0, c.items);
        const queryView = KeywordView.build('query', 0, c.queries);
        const cx: ItemRewardContext = { itemView, queryView, relevance: buildRelevance(queryView, itemView, c.relevant, c.counted), kMax: 4 };
        const cache = buildItemRewardCache(cx);
        const id = pool.setContext({ ...cx, cache });
        const batch = Array.from({ length: itemView.size }, (_, i) => ({ item: i, candidates: cands }));
        const got = await pool.itemRewards(batch, { contextId: id });
        pool.dropContext(id);
        expect(got).toEqual(batch.map((t) => t.candidates.map((k) => itemRewardIncremental(cx, cache, t.item, k))));
      }),
      { numRuns: 25 },
    );
  });

  it('a worker that throws surfaces WORKER_ERROR naming the batch', async () => {
    const cache = await pool.buildItemCache(ctx);
    pool.setContext({ ...ctx, cache });
    const batch = [
      { item: 0, candidates: [['kw 1']] },
      { item: 999, candidates: [['kw 1']] },
    ];
    const err = await pool.itemRewards(batch).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isCogrError(err, 'WORKER_ERROR')).toBe(true);
    expect((err as Error).message).toMatch(/items 999\.\.999 \(size 1\)/);
    expect((err as Error).message).toMatch(/INVALID_ARGUMENT: item ordinal 999 is out of range/);
    // The pool keeps working.
    expect(await pool.itemRewards([{ item: 1, candidates: [[]] }])).toHaveLength(1);
  });

  it('an abort signal cancels outstanding work with ABORTED', async () => {
    const cache = await pool.buildItemCache(ctx);
    pool.setContext({ ...ctx, cache });
    const before = new AbortController();
    before.abort();
    await expect(pool.itemRewards([{ item: 0, candidates: [[]] }], { signal: before.signal })).rejects.toMatchObject({ code: 'ABORTED' });
    const ac = new AbortController();
    const big = Array.from({ length: 20_000 }, (_, k) => ({ item: k % 60, candidates: [['kw 1', 'kw 2', 'kw 3']] }));
    const p = pool.itemRewards(big, { signal: ac.signal });
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    expect(await pool.itemRewards([{ item: 2, candidates: [['kw 2']] }])).toEqual([[itemRewardIncremental(ctx, cache, 2, ['kw 2'])]]);
  });

  it('rejects invalid options with the field named, and calls without a context', async () => {
    expect(() => RewardPool.create({ size: 0 })).toThrow(/size/);
    const fresh = RewardPool.create({ size: 1 });
    await expect(fresh.itemRewards([{ item: 0, candidates: [] }])).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // Only the last MAX_CONTEXTS contexts are kept.
    const ids = Array.from({ length: MAX_CONTEXTS + 1 }, () => fresh.setContext(ctx));
    await expect(fresh.queryRewards([], { contextId: ids[0] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await fresh.queryRewards([], { contextId: ids[1] })).toEqual([]);
    await fresh.destroy();
    await expect(fresh.queryRewards([])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('RewardPool with a crashing worker', () => {
  it('a worker that exits mid-batch fails the call with WORKER_ERROR and the pool recovers', async () => {
    const { ctx } = corpus();
    const pool = RewardPool.create({ size: 2, testHooks: { exitOnItem: 13 } });
    try {
      const cache = await pool.buildItemCache(ctx);
      pool.setContext({ ...ctx, cache });
      const batch = Array.from({ length: 60 }, (_, i) => ({ item: i, candidates: [['kw 4']] }));
      const err = await pool.itemRewards(batch).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isCogrError(err, 'WORKER_ERROR')).toBe(true);
      expect((err as Error).message).toMatch(/items \d+\.\.\d+ \(size \d+\)/);
      const rest = batch.filter((t) => t.item !== 13);
      const got = await pool.itemRewards(rest);
      expect(got).toEqual(rest.map((t) => [itemRewardIncremental(ctx, cache, t.item, t.candidates[0])]));
    } finally {
      await pool.destroy();
    }
  });
});
