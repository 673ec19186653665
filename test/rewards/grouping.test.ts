import { describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/errors.ts';
import { groupInputs, tokenF1 } from '../../rewards/grouping.ts';

describe('tokenF1', () => {
  it('hand computed: 4 of 5 words shared → P = 4/5, R = 4/4, F1 = 8/9', () => {
    expect(tokenF1('red running shoes for men', 'Red running shoes, men')).toBeCloseTo(8 / 9, 15);
  });
  it('multiset counts, symmetric, identical = 1, disjoint = 0', () => {
    expect(tokenF1('a a b', 'a b b')).toBeCloseTo(2 / 3, 15);
    expect(tokenF1('x y', 'y x')).toBe(1);
    expect(tokenF1('x', 'y')).toBe(0);
    expect(tokenF1('', '')).toBe(1);
    expect(tokenF1('', 'y')).toBe(0);
  });
});

describe('groupInputs', () => {
  const inputs = [
    'red running shoes for men', // 0
    'blue denim jacket', // 1
    'red running shoes men', // 2 (F1 8/9 with 0)
    'Red Running Shoes for Men!', // 3
    'blue denim jackets', // 4 (F1 2/3 with 1: separate)
    'red running shoes for men', // 5
    'garden hose', // 6
  ];
  it('greedy clustering at δ = 0.8 with k_min = 3 drops small groups', () => {
    const g = groupInputs(inputs);
    expect(g.groups).toEqual([[0, 2, 3, 5]]);
    expect(g.dropped).toEqual([1, 4, 6]);
  });
  it('δ and k_min are options', () => {
    const g = groupInputs(inputs, { delta: 0.6, kMin: 2 });
    expect(g.groups).toEqual([
      [0, 2, 3, 5],
      [1, 4],
    ]);
    expect(g.dropped).toEqual([6]);
  });
  it('invalid options name the field', () => {
    try {
      groupInputs(inputs, { delta: 2 });
      expect.unreachable();
    } catch (e) {
      expect(isCogrError(e, 'INVALID_ARGUMENT')).toBe(true);
      expect((e as Error).message).toMatch(/delta/);
    }
  });
});
