import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/core/errors.ts';
import { KeywordView } from '../../index/view/view.ts';
import { buildItemRewardCache, itemRewardIncremental, type ItemRewardCache, type ItemRewardContext } from '../../rewards/itemReward.ts';
import { queryReward } from '../rewards/_oracles.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { ItemScorer, queryScorerData, QueryScorer, type RewardSample } from '../../rewards/scorer.ts';
import { MAX_CONTEXTS, RewardPool } from '../../workers/pool.ts';
import { candidateArb, smallCorpusArb } from '../rewards/_model.ts';

// A small deterministic corpus: 60 items, 25 queries over a 30-keyword vocabulary.
function corpus() {
  const kw = (n: number) => `kw ${n % 30}`;
  const items = Array.from({ length: 60 }, (_, i) => ({
    id: `item-${String(i).padStart(3, '0')}`,
    self: `title ${i}`,
    keywords: [kw(i), kw(i * 7 + 3), kw(i * 11 + 5)],
  }));
  const queries = Array.from({ length: 25 }, (_, q) => ({
    id: `q-${String(q).padStart(2, '0')}`,
    self: `query ${q}`,
    keywords: [kw(q * 3), kw(q * 5 + 1)],
  }));
  const relevant = new Map<string, Set<string>>();
  for (let q = 0; q < 25; q++)
    relevant.set(
      `q-${String(q).padStart(2, '0')}`,
      new Set(Array.from({ length: 8 }, (_, j) => `item-${String((q * 13 + j * 7) % 60).padStart(3, '0')}`)),
    );
  const itemView = KeywordView.build('item', 0, items, { shared: true });
  const queryView = KeywordView.build('query', 0, queries, { shared: true });
  const ctx: ItemRewardContext = {
    itemView,
    queryView,
    relevance: buildRelevance(queryView, itemView, relevant, undefined, { shared: true }),
  };
  return { ctx, relevant };
}

/** The item scorer's data of a context and its cache. */
function itemData(ctx: ItemRewardContext, cache: ItemRewardCache) {
  return {
    side: 'item' as const,
    itemView: ctx.itemView,
    queryView: ctx.queryView,
    relevance: ctx.relevance,
    cache,
    options: { kMax: ctx.kMax ?? 30, beta: ctx.beta ?? 1 },
  };
}

/** Samples of item ordinals × candidates, in that order. */
function itemSamples(ctx: ItemRewardContext, rows: { item: number; candidates: string[][] }[]): RewardSample[] {
  return rows.flatMap((t) => t.candidates.map((c) => ({ id: ctx.itemView.id(t.item), keywords: c })));
}

const FAULTY = new URL('../fixtures/faultyRewardWorker.ts', import.meta.url).href;

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
    pool.setContext(itemData(ctx, cache));
    const rows = Array.from({ length: 60 }, (_, i) => ({
      item: i,
      candidates: [[`kw ${(i * 3) % 30}`], [`kw ${i % 30}`, 'kw 1', 'kw 2'], [], Array.from({ length: 31 }, (_, k) => `x${k}`)],
    }));
    const batch = itemSamples(ctx, rows);
    const got = await pool.rewards(batch);
    expect(got).toEqual(new ItemScorer(itemData(ctx, cache)).score(batch));
    // The scorer's result layer is the incremental reward; the empty candidate is invalid_format, 31 keywords over budget.
    const want = rows.flatMap((t) => t.candidates.map((c) => (c.length === 0 ? -1 : itemRewardIncremental(ctx, cache, t.item, c))));
    expect(got.rewards).toEqual(want);
    expect(got.reasons.filter((r) => r === 'invalid_format')).toHaveLength(60);
    expect(got.reasons.filter((r) => r === 'over_budget')).toHaveLength(60);
    expect(got.rewards.some((r) => r! > 0)).toBe(true);
    expect(got.rewards.some((r) => r! < 0 && r !== -1)).toBe(true);
  });

  it('query rewards in workers equal those computed in-process', async () => {
    const queryText = new Map([...relevant.keys()].map((qid, k) => [qid, `query ${k}`]));
    const data = queryScorerData(ctx.itemView, { relevant, queryText });
    pool.setContext(data);
    const batch: RewardSample[] = [...relevant.keys()].flatMap((qid, k) =>
      [[`kw ${k}`], [`kw ${k}`, `kw ${k + 1}`], []].map((c) => ({ id: qid, keywords: c })),
    );
    const got = await pool.rewards(batch);
    expect(got).toEqual(new QueryScorer(data).score(batch));
    const want = batch.map((s) =>
      s.keywords!.length === 0
        ? -1
        : queryReward(
            ctx.itemView,
            { self: queryText.get(s.id), keywords: s.keywords! },
            [...relevant.get(s.id)!].map((id) => ctx.itemView.ordinalOf(id)),
          ).reward,
    );
    expect(got.rewards).toEqual(want);
  });

  it('property: random corpora give the same item rewards in a worker and in-process', async () => {
    await fc.assert(
      fc.asyncProperty(smallCorpusArb, fc.array(candidateArb, { minLength: 1, maxLength: 3 }), async (c, cands) => {
        const itemView = KeywordView.build('item', 0, c.items);
        const queryView = KeywordView.build('query', 0, c.queries);
        const cx: ItemRewardContext = {
          itemView,
          queryView,
          relevance: buildRelevance(queryView, itemView, c.relevant, c.counted),
          kMax: 4,
        };
        const cache = buildItemRewardCache(cx);
        const id = pool.setContext(itemData(cx, cache));
        const batch = itemSamples(
          cx,
          Array.from({ length: itemView.size }, (_, i) => ({ item: i, candidates: cands })),
        );
        const got = await pool.rewards(batch, { contextId: id });
        pool.dropContext(id);
        expect(got).toEqual(new ItemScorer(itemData(cx, cache)).score(batch));
      }),
      { numRuns: 25 },
    );
  });

  it('a worker that throws surfaces WORKER_ERROR naming the batch', async () => {
    const faulty = RewardPool.create({ size: 2, workerEntry: FAULTY });
    try {
      const cache = await faulty.buildItemCache(ctx);
      faulty.setContext(itemData(ctx, cache));
      const batch = itemSamples(ctx, [
        { item: 0, candidates: [['kw 1']] },
        { item: 1, candidates: [['__throw__']] },
      ]);
      const err = await faulty.rewards(batch).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isCogrError(err, 'WORKER_ERROR')).toBe(true);
      expect((err as Error).message).toMatch(/items 1\.\.1 \(size 1/);
      expect((err as Error).message).toMatch(/INVALID_ARGUMENT: injected fault on item-001/);
      // The pool keeps working.
      expect((await faulty.rewards(itemSamples(ctx, [{ item: 1, candidates: [[]] }]))).rewards).toHaveLength(1);
    } finally {
      await faulty.destroy();
    }
  });

  it('an abort signal cancels outstanding work with ABORTED', async () => {
    const cache = await pool.buildItemCache(ctx);
    pool.setContext(itemData(ctx, cache));
    const before = new AbortController();
    before.abort();
    await expect(pool.rewards(itemSamples(ctx, [{ item: 0, candidates: [[]] }]), { signal: before.signal })).rejects.toMatchObject({
      code: 'ABORTED',
    });
    const ac = new AbortController();
    const big = itemSamples(
      ctx,
      Array.from({ length: 20_000 }, (_, k) => ({ item: k % 60, candidates: [['kw 1', 'kw 2', 'kw 3']] })),
    );
    const p = pool.rewards(big, { signal: ac.signal });
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    expect((await pool.rewards(itemSamples(ctx, [{ item: 2, candidates: [['kw 2']] }]))).rewards).toEqual([
      itemRewardIncremental(ctx, cache, 2, ['kw 2']),
    ]);
  });

  it('rejects invalid options with the field named, and calls without a context', async () => {
    expect(() => RewardPool.create({ size: 0 })).toThrow(/size/);
    const fresh = RewardPool.create({ size: 1 });
    await expect(fresh.rewards([{ id: 'item-000', keywords: [] }])).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // Only the last MAX_CONTEXTS contexts are kept.
    const data = queryScorerData(ctx.itemView, { relevant });
    const ids = Array.from({ length: MAX_CONTEXTS + 1 }, () => fresh.setContext(data));
    await expect(fresh.rewards([], { contextId: ids[0] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await fresh.rewards([], { contextId: ids[1] })).toEqual({ rewards: [], reasons: [] });
    await fresh.destroy();
    await expect(fresh.rewards([])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('RewardPool with a crashing worker', () => {
  it('a worker that exits mid-batch fails the call with WORKER_ERROR and the pool recovers', async () => {
    const { ctx } = corpus();
    const pool = RewardPool.create({ size: 2, workerEntry: FAULTY });
    try {
      const cache = await pool.buildItemCache(ctx);
      pool.setContext(itemData(ctx, cache));
      const rows = Array.from({ length: 60 }, (_, i) => ({ item: i, candidates: [i === 13 ? ['kw 4', '__exit__'] : ['kw 4']] }));
      const err = await pool.rewards(itemSamples(ctx, rows)).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isCogrError(err, 'WORKER_ERROR')).toBe(true);
      expect((err as Error).message).toMatch(/items \d+\.\.\d+ \(size \d+/);
      const rest = rows.filter((t) => t.item !== 13);
      const got = await pool.rewards(itemSamples(ctx, rest));
      expect(got.rewards).toEqual(rest.map((t) => itemRewardIncremental(ctx, cache, t.item, t.candidates[0])));
    } finally {
      await pool.destroy();
    }
  });
});
