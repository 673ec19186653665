import { describe, expect, it } from 'vitest';
import { judgedQueryIds, kFolds, trainEvalSplit } from '../../src/splits.ts';

const ids = Array.from({ length: 23 }, (_, i) => `q${i}`);

describe('judgedQueryIds', () => {
  it('keeps queries with at least one relevant item, in corpus order', () => {
    const corpus = {
      queries: [
        { id: 'a', text: '' },
        { id: 'b', text: '' },
        { id: 'c', text: '' },
      ],
      relevant: new Map([
        ['c', new Set(['x'])],
        ['b', new Set<string>()],
        ['a', new Set(['y'])],
      ]),
    };
    expect(judgedQueryIds(corpus)).toEqual(['a', 'c']);
  });
});

describe('trainEvalSplit', () => {
  it('is a deterministic partition with round(n·fraction) eval ids, in input order', () => {
    const s = trainEvalSplit(ids, { seed: 7 });
    expect(s.eval).toHaveLength(5); // round(23 · 0.2)
    expect(s.train).toHaveLength(18);
    expect([...s.train, ...s.eval].sort()).toEqual([...ids].sort());
    expect(s.eval).toEqual(ids.filter((id) => s.eval.includes(id)));
    expect(trainEvalSplit(ids, { seed: 7 })).toEqual(s);
    expect(trainEvalSplit(ids, { seed: 8 }).eval).not.toEqual(s.eval);
    expect(trainEvalSplit(ids, { seed: 1, evalFraction: 0.5 }).eval).toHaveLength(12);
  });
  it('keeps at least one id on each side', () => {
    expect(trainEvalSplit(['a', 'b'], { seed: 1, evalFraction: 0.01 }).eval).toHaveLength(1);
    expect(trainEvalSplit(['a', 'b'], { seed: 1, evalFraction: 0.99 }).train).toHaveLength(1);
  });
  it('rejects bad arguments naming the field', () => {
    expect(() => trainEvalSplit(ids, { seed: 1, evalFraction: 1 })).toThrow(/^evalFraction/);
    expect(() => trainEvalSplit(['a'], { seed: 1 })).toThrow(/^ids/);
    expect(() => trainEvalSplit(['a', 'a'], { seed: 1 })).toThrow(/twice/);
  });
});

describe('kFolds', () => {
  it('holds every id out exactly once, folds differ in size by at most one', () => {
    const folds = kFolds(ids, 5, 1);
    expect(folds).toHaveLength(5);
    const held = folds.flatMap((f) => f.eval);
    expect(held.sort()).toEqual([...ids].sort());
    const sizes = folds.map((f) => f.eval.length);
    expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    for (const f of folds) {
      expect(f.train.length + f.eval.length).toBe(ids.length);
      expect(f.train.some((id) => f.eval.includes(id))).toBe(false);
    }
  });
  it('is deterministic in the seed', () => {
    expect(kFolds(ids, 4, 3)).toEqual(kFolds(ids, 4, 3));
    expect(kFolds(ids, 4, 3)[0].eval).not.toEqual(kFolds(ids, 4, 4)[0].eval);
  });
  it('rejects k < 2 and fewer ids than folds', () => {
    expect(() => kFolds(ids, 1, 1)).toThrow(/^folds/);
    expect(() => kFolds(['a', 'b'], 3, 1)).toThrow(/^folds/);
  });
});
