import { describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/core/errors.ts';
import { batchGroups, groupInputs, grpoGroups } from '../../rewards/grouping.ts';
import { tokenF1 } from './_oracles.ts';
import { pooledAdvantages } from '../../rewards/grpo.ts';

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

describe('semantic GRPO groups', () => {
  const inputs = ['red running shoes', 'Red running shoes!', 'red running shoes', 'wool hat'];
  const rewards = [
    [1, 0],
    [1, 1],
    [0, 0],
    [0.5, 0],
  ];
  it('exact: every input is its own group; semantic: near-identical inputs (≥ k_min) form one', () => {
    expect(grpoGroups(inputs, 'exact')).toEqual([[0], [1], [2], [3]]);
    expect(grpoGroups(inputs, 'semantic')).toEqual([[0, 1, 2], [3]]);
    expect(grpoGroups(inputs, 'semantic', { kMin: 4 })).toEqual([[0], [1], [2], [3]]);
  });
  it('pooled groups normalise the rewards of all their samples together', () => {
    const exact = pooledAdvantages(rewards, grpoGroups(inputs, 'exact'), { eps: 0 });
    // Per input: [1, 0] → ±1; [1, 1] and [0, 0] carry no signal; [0.5, 0] → ±1.
    expect(exact.advantages).toEqual([
      [1, -1],
      [0, 0],
      [0, 0],
      [1, -1],
    ]);
    expect(exact.degenerate).toBe(2);
    const semantic = pooledAdvantages(rewards, grpoGroups(inputs, 'semantic'), { eps: 0 });
    // The three shoe queries pool [1, 0, 1, 1, 0, 0]: mean 0.5, std 0.5.
    expect(semantic.advantages).toEqual([
      [1, -1],
      [1, 1],
      [-1, -1],
      [1, -1],
    ]);
    expect(semantic.degenerate).toBe(0);
    // A degenerate pooled group is dropped as a whole when asked.
    const flat = pooledAdvantages(
      [
        [1, 1],
        [1, 1],
        [1, 1],
        [0, 1],
      ],
      grpoGroups(inputs, 'semantic'),
      { dropDegenerate: true },
    );
    expect(flat.advantages.slice(0, 3)).toEqual([null, null, null]);
    expect(flat.degenerate).toBe(1);
  });
  it('batches never split a group', () => {
    expect(batchGroups([[0, 1, 2], [3], [4, 5]], 2)).toEqual([[[0, 1, 2]], [[3]], [[4, 5]]]);
    expect(batchGroups([[0], [1], [2], [3], [4]], 2)).toEqual([[[0], [1]], [[2], [3]], [[4]]]);
  });
});
