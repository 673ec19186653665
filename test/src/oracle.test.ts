import { describe, expect, it } from 'vitest';
import { KeywordView } from '../../index/view/view.ts';
import { oracleQuery } from '../../src/evolve/oracle.ts';

// a: red shoe, red · b: shoe · c: red · d: red shoe, shoe laces · e: blue
const view = KeywordView.build(
  'item',
  0,
  [
    { id: 'a', self: '', keywords: ['red shoe', 'red'] },
    { id: 'b', self: '', keywords: ['shoe'] },
    { id: 'c', self: '', keywords: ['red'] },
    { id: 'd', self: '', keywords: ['red shoe', 'shoe laces'] },
    { id: 'e', self: '', keywords: ['blue'] },
  ],
  { analyzer: 'english' },
);
const ord = (...ids: string[]) => new Set(ids.map((id) => view.ordinalOf(id)));
const names = (ks: number[]) => ks.map((k) => view.surface(k));

describe('the oracle query side: greedy over the relevant items’ keywords, by hand', () => {
  it('relevant {a, d}: "red shoe" matches exactly them (F1 1) and nothing is added after it', () => {
    const r = oracleQuery(view, ord('a', 'd'), 30);
    expect(names(r.keywords)).toEqual(['red shoe']);
    expect(r.f1).toBe(1);
  });
  it('relevant {a, c, d}: "red" and "red shoe" tie at 0.8 (the smaller key, "red", first), then "red shoe" completes the set', () => {
    const r = oracleQuery(view, ord('a', 'c', 'd'), 30);
    expect(names(r.keywords)).toEqual(['red', 'red shoe']);
    expect(r.f1).toBe(1);
  });
  it('K_max bounds the keywords; keywords of irrelevant items are never candidates', () => {
    const r = oracleQuery(view, ord('a', 'c', 'd'), 1);
    expect(names(r.keywords)).toEqual(['red']);
    expect(r.f1).toBeCloseTo(0.8, 12); // 2·2 / (2 + 3)
    expect(oracleQuery(view, new Set(), 30)).toEqual({ keywords: [], f1: 0 });
  });
  it('shared keywords only (2+ carriers): "shoe laces" (one item) and titles are never candidates', () => {
    // relevant {d}: any keyword gives "shoe laces" alone (F1 1); shared only, "red shoe" ({a, d}: F1 2·1/(2+1)).
    expect(names(oracleQuery(view, ord('d'), 30).keywords)).toEqual(['shoe laces']);
    const r = oracleQuery(view, ord('d'), 30, 2);
    expect(names(r.keywords)).toEqual(['red shoe']);
    expect(r.f1).toBeCloseTo(2 / 3, 12);
    // relevant {b}: its only keyword "shoe" is on one item: nothing is left to plan.
    expect(oracleQuery(view, ord('b'), 30, 2)).toEqual({ keywords: [], f1: 0 });
  });
  it("a keep rule (the planner's relatedness, for SFT targets) removes candidates before the greedy choice", () => {
    // relevant {a, c, d} without "red": "red shoe" ({a, d}: 2·2/(2+3) = 0.8) is all that is left.
    const r = oracleQuery(view, ord('a', 'c', 'd'), 30, 0, (k) => view.surface(k) !== 'red');
    expect(names(r.keywords)).toEqual(['red shoe']);
    expect(r.f1).toBeCloseTo(0.8, 12);
    expect(oracleQuery(view, ord('a', 'c', 'd'), 30, 0, () => false)).toEqual({ keywords: [], f1: 0 });
  });
});
