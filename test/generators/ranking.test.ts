import { describe, expect, it } from 'vitest';
import { getAnalyzer } from '../../index/text/analyzer.ts';
import { KeywordView } from '../../index/view/view.ts';
import type { RelevanceSource } from '../../generators/planner/config.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { TEXT_SCORE_COLUMN } from '../../generators/planner/relevance.ts';
import { backfill, NO_FLOOR, rankMatched, servedSet } from '../../generators/planner/ranking.ts';
import { chooseRanker, pooledRankings } from '../../src/evolve/evaluate.ts';

/** Fixed features: bias, the text score in the sNorm column, logit(p); weights (0, 0, 1) so p(item) = p. */
class Fixed implements RelevanceSource {
  readonly analyzer = getAnalyzer('english');
  readonly dim = 3;
  weightsVersion = 0;
  constructor(
    private readonly ids: string[],
    private readonly p: number[],
    private readonly text: number[],
  ) {}
  itemOrdinal(id: string): number {
    return this.ids.indexOf(id);
  }
  features(): Float64Array {
    const x = new Float64Array(this.ids.length * 3);
    this.ids.forEach((_, i) => {
      x[3 * i] = 1;
      x[3 * i + TEXT_SCORE_COLUMN] = this.text[i];
      x[3 * i + 2] = Math.log(this.p[i] / (1 - this.p[i]));
    });
    return x;
  }
  probabilities(_q: unknown, x: Float64Array): Float64Array {
    const out = new Float64Array(x.length / 3);
    for (let i = 0; i < out.length; i++) out[i] = 1 / (1 + Math.exp(-x[3 * i + 2]));
    return out;
  }
  getWeights(): Float64Array {
    return Float64Array.from([0, 0, 1]);
  }
  setWeights(): void {}
  wordIdf(): number {
    return 1;
  }
  toJSON(): unknown {
    return null;
  }
}

// Items a..e. The probe "red shoe" matches a, b, c, d by keyword; e matches nothing.
const entries = [
  { id: 'a', self: '', keywords: ['red shoe', 'red'] },
  { id: 'b', self: '', keywords: ['shoe'] },
  { id: 'c', self: '', keywords: ['red'] },
  { id: 'd', self: '', keywords: ['red shoe', 'shoe laces'] },
  { id: 'e', self: '', keywords: ['blue'] },
];
const view = KeywordView.build('item', 0, entries, { analyzer: 'english' });
const ids = ['a', 'b', 'c', 'd', 'e'];
const p = [0.2, 0.9, 0.5, 0.7, 0.99];
const text = [0.5, 0.5, 1, 0, 0.8];
const planner = new KeywordPlanner(new Fixed(ids, p, text));
planner.attachOpposite(view);
const input = { id: 'q', text: 'red shoe' };
const matched = view.search({ keywords: ['red shoe', 'red', 'shoe'] }, { all: true }).items;

describe('rankMatched: the served ranking of a matched set, by hand', () => {
  it('keywords is exactly the keyword-bag BM25 order of KeywordView.search', () => {
    const r = rankMatched(matched, 'keywords', planner, input);
    expect(r.map((x) => x.id)).toEqual(matched.map((x) => x.id));
    expect(r.map((x) => x.score)).toEqual(matched.map((x) => x.score));
    expect(matched.map((x) => x.id).sort()).toEqual(['a', 'b', 'c', 'd']);
  });
  it('model orders by p(item | query): b 0.9, d 0.7, c 0.5, a 0.2; e (unmatched) never enters', () => {
    const r = rankMatched(matched, 'model', planner, input);
    expect(r.map((x) => x.id)).toEqual(['b', 'd', 'c', 'a']);
    r.forEach((x) => expect(x.score).toBeCloseTo(p[ids.indexOf(x.id)], 12));
    expect(r.map((x) => x.keywordScore)).toEqual(r.map((x) => matched.find((m) => m.id === x.id)!.score));
  });
  it('mix orders by (p / p_max + text) / 2, p_max over all items (e, 0.99): c 0.7525, b 0.7045, d 0.3535, a 0.3510', () => {
    const r = rankMatched(matched, 'mix', planner, input);
    expect(r.map((x) => x.id)).toEqual(['c', 'b', 'd', 'a']);
    const want: Record<string, number> = {
      a: (0.2 / 0.99 + 0.5) / 2,
      b: (0.9 / 0.99 + 0.5) / 2,
      c: (0.5 / 0.99 + 1) / 2,
      d: 0.7 / 0.99 / 2,
    };
    r.forEach((x) => expect(x.score).toBeCloseTo(want[x.id], 12));
    expect(r[0].score).toBeCloseTo(0.752525, 6);
    // Neither of its parts alone gives this order.
    expect(rankMatched(matched, 'model', planner, input).map((x) => x.id)).not.toEqual(r.map((x) => x.id));
    expect(rankMatched(matched, 'text', planner, input).map((x) => x.id)).not.toEqual(r.map((x) => x.id));
    // Its backfill is e, by the same score (1 + 0.8) / 2, less 2.
    const full = backfill(r, 'mix', planner, input, view, 5);
    expect(full.map((x) => x.id)).toEqual(['c', 'b', 'd', 'a', 'e']);
    expect(full[4].score).toBeCloseTo(0.9 - 2, 12);
  });
  it('text orders by the text BM25 column; ties (a, b at 0.5) keep the keyword order', () => {
    const r = rankMatched(matched, 'text', planner, input);
    const kwOrder = matched.map((x) => x.id);
    const tied = ['a', 'b'].sort((x, y) => kwOrder.indexOf(x) - kwOrder.indexOf(y));
    expect(r.map((x) => x.id)).toEqual(['c', ...tied, 'd']);
  });
});

describe('chooseRanker: the best pooled nDCG@10, weighted by queries', () => {
  const m = (k: number, t: number, mo: number, mi = 0) => ({
    keywords: { ndcg10: k, map: 0, mrr10: 0 },
    text: { ndcg10: t, map: 0, mrr10: 0 },
    model: { ndcg10: mo, map: 0, mrr10: 0 },
    mix: { ndcg10: mi, map: 0, mrr10: 0 },
  });
  it('pools by query counts and picks the best; a named ranker is kept', () => {
    // 30 queries text 0.5 / model 0.4, 10 queries text 0.1 / model 0.9: text 0.4, model 0.525
    const pooled = pooledRankings([
      { queries: 30, rankings: m(0.3, 0.5, 0.4) },
      { queries: 10, rankings: m(0.3, 0.1, 0.9) },
    ]);
    expect(pooled.queries).toBe(40);
    expect(pooled.rankings.text.ndcg10).toBeCloseTo(0.4, 12);
    expect(pooled.rankings.model.ndcg10).toBeCloseTo(0.525, 12);
    expect(chooseRanker('auto', pooled)).toBe('model');
    expect(chooseRanker('keywords', pooled)).toBe('keywords');
  });
  it('ties go to the earlier ranker (keywords first); nothing measured is keywords', () => {
    expect(chooseRanker('auto', pooledRankings([{ queries: 5, rankings: m(0.5, 0.5, 0.5, 0.5) }]))).toBe('keywords');
    expect(chooseRanker('auto', pooledRankings([{ queries: 5, rankings: m(0.5, 0.6, 0.6, 0.6) }]))).toBe('text');
    expect(chooseRanker('auto', pooledRankings([{ queries: 5, rankings: m(0.5, 0.6, 0.6, 0.61) }]))).toBe('mix');
    expect(chooseRanker('auto', pooledRankings([]))).toBe('keywords');
  });
});

describe('servedSet: the floor and the empty-plan fallback, by hand', () => {
  it('no floor: the matched set as it is', () => {
    const r = servedSet(view, matched, planner, input, NO_FLOOR);
    expect(r.items).toEqual(matched);
    expect(r.fallback).toBeNull();
  });
  it('floor m adds the top m by p that did not match (e: p 0.99) after the matched ones, keyword score 0', () => {
    const r = servedSet(view, matched, planner, input, { floor: 2, fallback: 3 });
    // top 2 by p: e (0.99), b (0.9); b already matched
    expect(r.items.map((x) => x.id)).toEqual([...matched.map((x) => x.id), 'e']);
    expect(r.items.at(-1)!.score).toBe(0);
    expect(r.added).toBe(1);
    expect(r.fallback).toBeNull();
  });
  it('nothing matched: the top c by p, flagged empty_plan', () => {
    const none = view.search({ keywords: ['nothing here'] }, { all: true }).items;
    expect(none).toEqual([]);
    const r = servedSet(view, none, planner, input, { floor: 0, fallback: 3 });
    expect(r.items.map((x) => x.id)).toEqual(['e', 'b', 'd']);
    expect(r.fallback).toBe('empty_plan');
    expect(servedSet(view, none, planner, input, NO_FLOOR).items).toEqual([]);
  });
  it('a query none of whose words any item has gets no floor and no fallback (its top items by p would be arbitrary)', () => {
    const blind = new KeywordPlanner(new Fixed(ids, p, [0, 0, 0, 0, 0]));
    blind.attachOpposite(view);
    const r = servedSet(view, [], blind, { id: 'q2', text: 'zzqx' }, { floor: 2, fallback: 3 });
    expect(r).toEqual({ items: [], fallback: null, added: 0 });
  });
});

describe("servedSet with the set guard's choice: the relevance model's own expected-F1 set, by hand", () => {
  // p: e .99, b .9, d .7, c .5, a .2 (E = 3.29); prefix sums .99, 1.89, 2.59, 3.09, 3.29.
  // α = 1: 2·prefix/(k + 3.29) = .4615, .7146, .8235, .8477, .7937, so k* = 4 (e b d c).
  // α = 0.25: 2·prefix/(k + .8225) = 1.0864, 1.3392, 1.3551, 1.2815, …, so k* = 3 (e b d).
  const keywordScore = new Map(matched.map((x) => [x.id, x.score]));
  it('α 1: e b d c, best first; the matched ones keep their keyword score, e (unmatched) 0 and counted as added', () => {
    const r = servedSet(view, matched, planner, input, { floor: 0, fallback: 0, modelAlpha: 1 });
    expect(r.items.map((x) => x.id)).toEqual(['e', 'b', 'd', 'c']);
    expect(r.items.map((x) => x.score)).toEqual([0, keywordScore.get('b'), keywordScore.get('d'), keywordScore.get('c')]);
    expect(r.added).toBe(1);
    expect(r.fallback).toBeNull();
  });
  it('α 0.25: e b d; the matched item a, low in p, is not served; the floor and fallback play no part', () => {
    expect(servedSet(view, matched, planner, input, { floor: 2, fallback: 3, modelAlpha: 0.25 }).items.map((x) => x.id)).toEqual([
      'e',
      'b',
      'd',
    ]);
  });
  it('the same set whatever the keywords matched, never flagged empty_plan; a query no item knows a word of keeps its (empty) matched set', () => {
    const r = servedSet(view, [], planner, input, { floor: 0, fallback: 0, modelAlpha: 1 });
    expect(r.items.map((x) => x.id)).toEqual(['e', 'b', 'd', 'c']);
    expect(r.fallback).toBeNull();
    const blind = new KeywordPlanner(new Fixed(ids, p, [0, 0, 0, 0, 0]));
    blind.attachOpposite(view);
    expect(servedSet(view, [], blind, { id: 'q2', text: 'zzqx' }, { floor: 0, fallback: 0, modelAlpha: 1 })).toEqual({
      items: [],
      fallback: null,
      added: 0,
    });
  });
});

describe('backfill: the served list after the served set, by hand', () => {
  // A served set of c and a (text ranker: c 1, a 0.5); the others by text: e 0.8, b 0.5, d 0.
  const served = rankMatched(view.search({ keywords: ['red'] }, { all: true }).items, 'text', planner, input);
  it("the served set first, unchanged, then the other items in the ranker order, scores the ranker's − 2", () => {
    expect(served.map((x) => x.id)).toEqual(['c', 'a']);
    const r = backfill(served, 'text', planner, input, view, 4);
    expect(r.slice(0, 2)).toEqual(served);
    expect(r.map((x) => x.id)).toEqual(['c', 'a', 'e', 'b']);
    expect(r[2].score).toBeCloseTo(0.8 - 2, 12);
    expect(r[3].score).toBeCloseTo(0.5 - 2, 12);
    expect(r.slice(2).map((x) => x.keywordScore)).toEqual([0, 0]);
    // every backfilled score is below every served one: an order by score keeps the set first
    expect(Math.max(...r.slice(2).map((x) => x.score))).toBeLessThan(Math.min(...served.map((x) => x.score)));
  });
  it('model backfills by p; the depth is capped by the items there are', () => {
    const byP = rankMatched(view.search({ keywords: ['red'] }, { all: true }).items, 'model', planner, input);
    expect(byP.map((x) => x.id)).toEqual(['c', 'a']);
    const r = backfill(byP, 'model', planner, input, view, 1000);
    expect(r.map((x) => x.id)).toEqual(['c', 'a', 'e', 'b', 'd']);
    expect(r[2].score).toBeCloseTo(0.99 - 2, 12);
  });
  it('none for depth 0 or a depth the set fills, for the keywords ranker, and for a text no item knows', () => {
    expect(backfill(served, 'text', planner, input, view, 0)).toEqual(served);
    expect(backfill(served, 'text', planner, input, view, 2)).toEqual(served);
    const kw = rankMatched(matched, 'keywords', planner, input);
    expect(backfill(kw, 'keywords', planner, input, view, 10)).toEqual(kw);
    const blind = new KeywordPlanner(new Fixed(ids, p, [0, 0, 0, 0, 0]));
    blind.attachOpposite(view);
    expect(backfill([], 'model', blind, { id: 'q2', text: 'zzqx' }, view, 10)).toEqual([]);
  });
});
