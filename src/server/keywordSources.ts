/**
 * The query keyword source of a served round (`cogr serve --generator`): its saved query
 * planner (run in the keyword workers, off the event loop), an LLM endpoint, or none.
 * The command parses the flags; this module builds the source (the serve benchmark uses
 * it as the command does).
 */
import { DEFAULTS } from '../../index/core/defaults.ts';
import type { Logger } from '../../index/core/log.ts';
import { OpenAIGenerator, type LlmOptions } from '../../generators/llm.ts';
import type { KeywordWorkerPool } from './keywordPool.ts';
import { loadQueryGenerator } from './queryGenerator.ts';
import type { QueryKeywordSource } from './state.ts';
import { generatorKeywordSource, type KeywordSourceContext } from './storeLoader.ts';

export const KEYWORD_SOURCES = ['embedded', 'openai', 'none'] as const;
export type KeywordSourceKind = (typeof KEYWORD_SOURCES)[number];

/** `llm` is called only for `openai` (it reads the endpoint's flags and environment). */
export function keywordSourceFactory(
  kind: KeywordSourceKind,
  llm: () => LlmOptions,
  log: Logger,
  pool: () => KeywordWorkerPool,
): (ctx: KeywordSourceContext) => Promise<QueryKeywordSource | null> {
  if (kind === 'none') return async () => null;
  if (kind === 'openai') {
    const gen = new OpenAIGenerator(llm(), { logger: log });
    const src = generatorKeywordSource(gen, DEFAULTS.decoding.index);
    return async () => src;
  }
  const loaded: string[] = [];
  let n = 0;
  return async ({ round, plannerRound, policies, item, items, itemsKey }) => {
    const doc = await loadQueryGenerator(policies, round, plannerRound);
    if (!doc) {
      log.warn('no query planner saved in the database: searches use the raw query only (fallback no_generator)');
      return null;
    }
    if (!items) {
      log.warn(
        "the query planner needs the run's items (no stored run and no --dataset): searches use the raw query only (fallback no_generator)",
      );
      return null;
    }
    const key = `${++n}:policy-${doc.round}:item-${item.generation}`;
    await pool().load(key, { doc, view: item.data }, { key: itemsKey, items });
    // Keep the previous generator too: requests in flight on the old snapshot finish on it.
    loaded.push(key);
    while (loaded.length > 2) pool().release(loaded.shift()!);
    log.info('query keywords from the query planner, in the keyword workers', {
      plannerRound: doc.round,
      servedRound: round,
      workers: pool().size,
    });
    return {
      name: 'embedded',
      keywords: (text, signal) => pool().plan(key, text, signal),
      rank: (req, signal) => pool().rank(key, req, signal),
    };
  };
}
