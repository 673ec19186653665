/**
 * Worked examples for an LLM's query prompts from a run: `count` of its core training
 * queries (never dev or held-out ones), picked by a seed, each with its SFT target — the
 * query planner's plan for it as held out (its own {q} and judgements left out), keeping
 * the keywords of the shape the prompts ask for (at most four words, at most the schema's
 * length; the plan's label of up to eight words is left out).
 */
import { DEFAULTS } from '../../index/core/defaults.ts';
import { createRng, deriveSeed, shuffle } from '../../index/core/random.ts';
import type { Query } from '../../index/core/types.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import type { PromptExample } from '../../generators/prompts.ts';
import { queryInput } from '../../generators/sft.ts';

/** Worked examples in an LLM's query prompts. */
export const EXAMPLE_COUNT = 2;
/** The longest keyword an example shows, in words (the prompts ask for one to four). */
const EXAMPLE_MAX_WORDS = 4;

export async function trainingQueryExamples(
  planner: KeywordPlanner,
  trainQueries: readonly Query[],
  seed: number,
  count = EXAMPLE_COUNT,
): Promise<PromptExample[]> {
  const inputs = shuffle(trainQueries, createRng(deriveSeed(seed, 'prompt-examples')))
    .slice(0, count)
    .map((q) => queryInput(q));
  const before = planner.leaveOneOut;
  planner.leaveOneOut = true;
  try {
    const plans = await planner.generate('query', inputs, { samples: 1, temperature: 0, seed });
    // Only keywords of the shape the prompt asks for: a plan may start with the query's label (up to 8 words), which a small model copies into whole-query keywords.
    const fits = (k: string) => k.split(' ').length <= EXAMPLE_MAX_WORDS && k.length <= DEFAULTS.llm.maxKeywordLength;
    return inputs.map((x, i) => ({ text: x.text, keywords: plans[i][0].keywords.filter(fits) })).filter((e) => e.keywords.length > 0);
  } finally {
    planner.leaveOneOut = before;
  }
}
