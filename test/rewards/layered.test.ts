import { describe, expect, it } from 'vitest';
import { countReasons, layeredReward } from './_oracles.ts';

describe('layeredReward', () => {
  const result = (kws: string[]) => kws.length / 10;
  it('invalid format: null output, non-strings, or nothing survives normalisation → −1 on both sides', () => {
    expect(layeredReward(null, result, { side: 'query' })).toMatchObject({ reward: -1, reason: 'invalid_format' });
    expect(layeredReward(['ok', 3 as unknown as string], result, { side: 'item' })).toMatchObject({ reward: -1, reason: 'invalid_format' });
    expect(layeredReward(['  ', '!!'], result, { side: 'item' })).toMatchObject({ reward: -1, reason: 'invalid_format' });
  });
  it('over budget: 0 for queries, −1 for items (the paper), after de-duplication', () => {
    const kws = ['a', 'b', 'c', 'd'];
    expect(layeredReward(kws, result, { side: 'query', kMax: 3 })).toMatchObject({ reward: 0, reason: 'over_budget' });
    expect(layeredReward(kws, result, { side: 'item', kMax: 3 })).toMatchObject({ reward: -1, reason: 'over_budget' });
    expect(layeredReward(['a', 'A', 'b', 'c'], result, { side: 'item', kMax: 3 })).toMatchObject({ reward: 0.3, reason: 'ok' });
  });
  it('ok: the result reward of the normalised keywords; overrides are honoured', () => {
    const r = layeredReward(['Red  Shoe', 'red shoe'], result, { side: 'query' });
    expect(r).toEqual({ reward: 0.1, reason: 'ok', keywords: ['red shoe'] });
    expect(layeredReward(null, result, { side: 'query', invalidFormatReward: -0.5 }).reward).toBe(-0.5);
  });
  it('countReasons counts each layer', () => {
    const rs = [
      layeredReward(null, result, { side: 'query' }),
      layeredReward(['a'], result, { side: 'query' }),
      layeredReward(['a', 'b'], result, { side: 'query', kMax: 1 }),
    ];
    expect(countReasons(rs)).toEqual({ invalid_format: 1, over_budget: 1, ok: 1 });
  });
});
