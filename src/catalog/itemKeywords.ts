/**
 * The served round's item generator, as catalog writes use it: a new or changed item's
 * keywords from its title and text alone, decoded as `cogr generate --side item
 * --temperature 0` decodes them (one sample, temperature 0, the index top-p, the run's
 * default seed). Only the generators' public load and generate API is used, so this
 * keeps working whatever the generators do inside.
 *
 *   embedded  the round's saved item policy (run/policies.ts loadPolicy), attached to the
 *             served query generation as its opposite side (`--policy <round> --opposite <g>`)
 *   openai    an OpenAI-compatible endpoint (the round was trained with an LLM)
 */
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { GenerationInfo } from '../../index/store/published.ts';
import { generateSettled, type GenerateInput, type KeywordGenerator, type KeyValueStore } from '../../generators/types.ts';
import type { Logger } from '../../index/core/log.ts';
import { OpenAIGenerator, type LlmOptions } from '../../generators/llm.ts';
import { listPolicyRounds, loadPolicy } from '../run/policies.ts';
import { generatorRound, type StepRecord } from '../run/state.ts';

/** The decoding of catalog writes: `cogr generate --side item --temperature 0`'s. */
export const CATALOG_DECODING = { samples: 1, temperature: 0, topP: DEFAULTS.decoding.index.topP, seed: DEFAULTS.run.seed } as const;

export interface ItemKeywordSource {
  /** Named in logs and answers ("item policy of round 2", "openai:model"). */
  readonly name: string;
  /** One keyword list per input, in order; an input the generator fails on fails the whole call (nothing of a batch is committed). */
  keywords(inputs: readonly GenerateInput[], signal?: AbortSignal): Promise<string[][]>;
}

/** A keyword generator as a catalog source: temperature 0, every input answered or the call refused naming the first that was not. */
export function generatorItemKeywords(gen: KeywordGenerator, name: string): ItemKeywordSource {
  return {
    name,
    async keywords(inputs, signal) {
      if (inputs.length === 0) return [];
      const out = await generateSettled(gen, 'item', inputs, { ...CATALOG_DECODING, ...(signal ? { signal } : {}) });
      return out.map((r, i) => {
        const id = inputs[i].id;
        if (!r.ok) throw cogrError('LLM_ERROR', `item ${JSON.stringify(id)}: the item generator failed: ${r.error.message}`, { id });
        const s = r.samples[0];
        if (!s || s.format !== 'ok')
          throw cogrError('LLM_FORMAT', `item ${JSON.stringify(id)}: the item generator's output is not a keyword list`, { id });
        return s.keywords;
      });
    },
  };
}

/**
 * The item policy round that made the served item generation: the run's last adopted
 * item-side step up to the one that serves it (SFT: 0); without a run step for it, the
 * newest saved round at or before the generation's recorded round.
 */
export async function servedItemPolicyRound(
  policies: KeyValueStore,
  steps: readonly StepRecord[],
  root: Pick<GenerationInfo, 'generation' | 'meta'>,
): Promise<number> {
  const at = steps.findIndex((s) => s.itemGeneration === root.generation);
  if (at >= 0) return generatorRound(steps.slice(0, at + 1), 'item');
  const rounds = await listPolicyRounds(policies, 'item');
  const r = root.meta?.round;
  const usable = typeof r === 'number' ? rounds.filter((x) => x <= r) : rounds;
  if (usable.length === 0)
    throw cogrError(
      'NOT_FOUND',
      `item generation ${root.generation}: the database saved no item policy for its round; catalog writes need the item generator (give --item-generator openai for a round trained with an LLM)`,
      { generation: root.generation },
    );
  return usable[usable.length - 1];
}

/** The embedded item policy of a round over the served query generation. */
export async function embeddedItemKeywords(
  policies: KeyValueStore,
  round: number,
  opposite: KeywordView | null,
): Promise<ItemKeywordSource> {
  const policy = await loadPolicy(policies, 'item', round);
  policy.attachOpposite(opposite);
  return generatorItemKeywords(policy, `item policy of round ${round}`);
}

export const ITEM_GENERATORS = ['auto', 'embedded', 'openai'] as const;
export type ItemGeneratorKind = (typeof ITEM_GENERATORS)[number];

/**
 * The item generator of catalog writes (`--item-generator`): `embedded`, the round's item
 * policy; `openai`, an endpoint (`llm` reads its flags and environment, only then); `auto`,
 * an endpoint when the served item generation was imported from an external model (the
 * round was trained with an LLM), else the item policy.
 */
export function itemKeywordsFactory(
  kind: ItemGeneratorKind,
  llm: () => LlmOptions,
  deps: { cache?: KeyValueStore; logger?: Logger } = {},
): (ctx: {
  policies: KeyValueStore;
  run: { steps: readonly StepRecord[] } | null;
  root: Pick<GenerationInfo, 'generation' | 'meta'>;
  queryView: KeywordView | null;
}) => Promise<ItemKeywordSource> {
  return async (ctx) => {
    const imported = ctx.root.meta?.step === 'import';
    if (kind === 'openai' || (kind === 'auto' && imported)) {
      const o = llm();
      const gen = new OpenAIGenerator(o, { ...(deps.cache ? { cache: deps.cache } : {}), ...(deps.logger ? { logger: deps.logger } : {}) });
      return generatorItemKeywords(gen, `openai:${o.model}`);
    }
    const round = await servedItemPolicyRound(ctx.policies, ctx.run?.steps ?? [], ctx.root);
    return embeddedItemKeywords(ctx.policies, round, ctx.queryView);
  };
}
