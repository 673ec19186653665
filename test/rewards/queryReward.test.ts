import { describe, expect, it } from 'vitest';
import { KeywordView } from '../../index/view/view.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { queryReward, relevantItems, relevantQueries } from './_oracles.ts';

const items = [
  { id: 'a', self: 'Apple Pie', keywords: ['dessert', 'baked apple'] },
  { id: 'b', self: 'Banana bread', keywords: ['dessert', 'baked'] },
  { id: 'c', self: 'Caesar salad', keywords: ['salad', 'lettuce'] },
  { id: 'd', self: 'Dessert', keywords: ['sweet'] },
];
const itemView = KeywordView.build('item', 0, items);
const ord = (id: string) => itemView.ordinalOf(id);

describe('queryReward', () => {
  it('F1 of the whole matched set, hand computed', () => {
    // "dessert" matches a, b and d (d through its title); rel = {a, c}: tp 1, nRet 3, nRel 2.
    const r = queryReward(itemView, { self: 'something sweet', keywords: ['Dessert'] }, [ord('a'), ord('c')]);
    expect(r.nRet).toBe(3);
    expect(r.tp).toBe(1);
    expect(r.precision).toBeCloseTo(1 / 3, 15);
    expect(r.recall).toBeCloseTo(1 / 2, 15);
    expect(r.reward).toBeCloseTo((2 * 1) / (3 + 2), 15);
    expect(r.overBudget).toBe(false);
  });

  it('the raw query text is a keyword too ({q}), matched against titles and keywords', () => {
    const r = queryReward(itemView, { self: 'Caesar  Salad!', keywords: [] }, [ord('c')]);
    expect(r).toMatchObject({ nRet: 1, tp: 1, reward: 1 });
  });

  it('F-beta weighs recall (beta 2) or precision (beta 0.5)', () => {
    const rel = [ord('a'), ord('c')];
    const b2 = queryReward(itemView, { keywords: ['dessert'] }, rel, { beta: 2 });
    expect(b2.reward).toBeCloseTo((5 * 1) / (4 * 2 + 3), 15);
    const b05 = queryReward(itemView, { keywords: ['dessert'] }, rel, { beta: 0.5 });
    expect(b05.reward).toBeCloseTo((1.25 * 1) / (0.25 * 2 + 3), 15);
  });

  it('nRel can exceed the ordinals given (relevant items missing from the index)', () => {
    const r = queryReward(itemView, { keywords: ['salad'] }, [ord('c')], { nRel: 4 });
    expect(r.recall).toBe(0.25);
    expect(r.reward).toBeCloseTo(2 / 5, 15);
  });

  it('0 over the budget, counted after normalisation and de-duplication', () => {
    const kws = Array.from({ length: 4 }, (_, i) => `k${i}`);
    expect(queryReward(itemView, { keywords: [...kws, 'salad'] }, [ord('c')], { kMax: 4 })).toMatchObject({ reward: 0, overBudget: true });
    const dup = queryReward(itemView, { keywords: ['salad', 'SALAD', ' salad '] }, [ord('c')], { kMax: 1 });
    expect(dup).toMatchObject({ reward: 1, overBudget: false });
  });

  it('0 when nothing relevant is retrieved; duplicate relevant ordinals count once', () => {
    expect(queryReward(itemView, { keywords: ['nothing here'] }, [ord('a')]).reward).toBe(0);
    expect(queryReward(itemView, { keywords: ['lettuce'] }, [ord('c'), ord('c')]).reward).toBe(1);
  });
});

describe('buildRelevance', () => {
  it('CSR both ways, counted queries, missing items and queries reported', () => {
    const queryView = KeywordView.build('query', 0, [
      { id: 'q1', self: 'one', keywords: [] },
      { id: 'q2', self: 'two', keywords: [] },
      { id: 'q3', self: 'three', keywords: [] },
    ]);
    const relevant = new Map([
      ['q1', new Set(['c', 'a', 'gone'])],
      ['q2', new Set(['a'])],
      ['q3', new Set<string>()],
      ['q9', new Set(['a'])],
    ]);
    const rel = buildRelevance(queryView, itemView, relevant);
    const q1 = queryView.ordinalOf('q1');
    expect([...relevantItems(rel, q1)]).toEqual([ord('a'), ord('c')]);
    expect(rel.nRel[q1]).toBe(3);
    expect([...relevantQueries(rel, ord('a'))]).toEqual([queryView.ordinalOf('q1'), queryView.ordinalOf('q2')]);
    expect([...rel.counted]).toEqual([1, 1, 0]);
    expect(rel.missingItems).toBe(1);
    expect(rel.missingQueries).toBe(1);
    const only = buildRelevance(queryView, itemView, relevant, new Set(['q2', 'q3']), { shared: true });
    expect([...only.counted]).toEqual([0, 1, 1]);
    expect(only.qRel.buffer).toBeInstanceOf(SharedArrayBuffer);
  });
});
