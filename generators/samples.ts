/**
 * The KeywordGenerator `generate` loop of the embedded generators: `samples` draws per
 * input, each from its own seeded stream (deriveSeed(seed, input id, sample index)), so a
 * sample does not depend on the other inputs or on the batch order; cancellable between
 * inputs.
 */
import { cogrError } from '../index/core/errors.ts';
import { createRng, deriveSeed, type Rng } from '../index/core/random.ts';
import type { GenerateInput, GenerateOptions, KeywordSample } from './types.ts';

export function drawSamples(
  inputs: readonly GenerateInput[],
  opts: GenerateOptions,
  draw: (input: GenerateInput, rng: Rng) => { keywords: string[]; logProb: number | null },
): KeywordSample[][] {
  if (!Number.isInteger(opts.samples) || opts.samples < 1)
    throw cogrError('INVALID_ARGUMENT', `samples must be a positive integer, got ${opts.samples}`);
  const seed = opts.seed ?? 0;
  return inputs.map((input) => {
    if (opts.signal?.aborted) throw cogrError('ABORTED', 'generation cancelled');
    const out: KeywordSample[] = [];
    for (let s = 0; s < opts.samples; s++) {
      const r = draw(input, createRng(deriveSeed(seed, input.id, s)));
      out.push({ keywords: r.keywords, logProb: r.logProb, format: 'ok' });
    }
    return out;
  });
}
