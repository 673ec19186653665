/**
 * `cogr generate --side item|query [--generator embedded|openai] --from <file.jsonl>
 *   [--samples n] [--temperature t] [--top-p p] [--seed n] [--policy <round|latest>]
 *   [--policy-file <path>] [--opposite <generation|latest>] [--db <path>]
 *   [--base-url url] [--model name] [--api-key key] [--concurrency n] [--search-context n]
 *   [--no-cache] [--json]`
 *
 * Reads JSONL lines {"id", "text", "title"?} and prints, with --json, one JSON object
 * mapping each id to its list of samples: a keyword list (`{"format": "ok", "keywords",
 * "truncated": true}` when the model was cut off at max_tokens), or for output that is not one
 * `{"format": "invalid_format", "raw"?, "anomaly"?, "truncated"?}` (a readable line per sample
 * otherwise). An input that fails (the LLM endpoint, after its retries) does not discard
 * the others: the answered ones are printed, then one error line names the failed ones
 * and the exit code is non-zero. Embedded, item side: an untrained item policy unless
 * --policy (from the project database) or --policy-file (a PolicyJSON file) is given;
 * --opposite attaches a query generation (features of the item policy). Embedded, query side: the query planner
 * saved by `cogr sft`, `cogr demo` or `cogr evolve` (--policy round, default latest), over
 * the dataset it was fitted on (its items rebuild the relevance model), planning against
 * the item generation --opposite names (default: the latest).
 * The openai generator reads OPENAI_BASE_URL, OPENAI_API_KEY and COGR_MODEL unless the
 * flags are given, and caches generations in the project database (`llm-cache`). With
 * --search-context n (query side) each prompt also holds the titles of the stored query
 * planner's n most probable items and its plan's keywords (the paper's "+ search results").
 * Query prompts show two of the run's core training queries with the planner's plans when
 * the project database holds a run and the inputs include queries of its dataset (looked
 * for also with --no-cache; a database in use by a writer is left alone).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError, isCogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { OpenAIGenerator, llmOptionsFromEnv } from '../../generators/llm.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { generateSettled, type GenerateInput, type KeywordGenerator, type KeywordSample } from '../../generators/types.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import type { PromptExample, SearchContext } from '../../generators/prompts.ts';
import type { Corpus } from '../../index/core/types.ts';
import { idSchema, readJsonl } from '../datasets/common.ts';
import { llmCache, loadPlanner, loadPolicy, plannerSource, policyStore } from '../run/policies.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { openRun, runPlanner, type OpenRun } from '../run/context.ts';
import { trainingQueryExamples } from '../evolve/examples.ts';
import {
  dbPath,
  parseChoice,
  parseIntFlag,
  parseLatestOr,
  parseNumberFlag,
  parseSide,
  RUN_EMBEDDINGS_HELP,
  withDbOption,
  withEmbeddingsOptions,
  withLlmOptions,
  type EmbeddingsFlags,
  type LlmFlags,
} from './options.ts';
import { registerRunEmbeddings, type RunEncoder } from '../embeddings/dense.ts';
import { denseVectorsOf } from '../../generators/planner/relevance.ts';
import { readStoredRun } from '../run/state.ts';

const LineSchema = z.object({ id: idSchema, text: z.string(), title: z.string().optional() });

/** The inputs of a JSONL file (`{"id", "text", "title"?}` per line; ids unique). */
export function readInputs(path: string): GenerateInput[] {
  return readJsonl(path, LineSchema, { uniqueId: (v) => v.id }).map((r) => r.value);
}

interface GenerateFlags extends LlmFlags, EmbeddingsFlags {
  side: string;
  generator: string;
  from: string;
  samples?: string;
  temperature?: string;
  topP?: string;
  seed?: string;
  policy?: string;
  policyFile?: string;
  opposite?: string;
  db?: string;
  concurrency?: string;
  searchContext?: string;
  cache: boolean;
  json?: boolean;
}

/**
 * A run fitted with embeddings: its vectors from `--embeddings` (refused without it, naming the
 * model), registered once in this thread; an input's own vector is fetched when it is planned.
 */
async function withRunEmbeddings(db: CogrDb, flags: GenerateFlags, corpus: Corpus): Promise<void> {
  let encoder: RunEncoder | null = null;
  try {
    encoder = (await readStoredRun(db)).config;
  } catch (e) {
    // A planner saved by cogr sft, without a run: no embeddings.
    if (!isCogrError(e, 'NOT_FOUND')) throw e;
  }
  const model = encoder?.embeddingsModel ?? null;
  if (model !== null && denseVectorsOf(model) !== undefined) return;
  await registerRunEmbeddings(flags, encoder, corpus, stderrLogger, db);
}

/** The query planner stored in a project database (--policy round), over the run's items, planning against an item generation (--opposite). */
async function storedPlanner(db: CogrDb, flags: GenerateFlags): Promise<{ planner: KeywordPlanner; corpus: Corpus }> {
  const store = policyStore(db);
  const source = await plannerSource(store);
  if (!source) throw cogrError('NOT_FOUND', `no query planner in ${db.path} (run cogr sft, cogr demo or cogr evolve first)`);
  const { corpus } = await loadRunCorpus(source, stderrLogger);
  await withRunEmbeddings(db, flags, corpus);
  const planner = await loadPlanner(store, parseLatestOr('--policy', flags.policy ?? 'latest'), corpus.items);
  const items = new KeywordIndexStore(db);
  if ((await items.latest('item')) === null)
    throw cogrError('NOT_FOUND', `no item index in ${db.path} for the query planner to plan against (see cogr sft --commit-index)`);
  planner.attachOpposite(await items.openView('item', parseLatestOr('--opposite', flags.opposite ?? 'latest')));
  return { planner, corpus };
}

/**
 * Worked examples from the co-evolution run in the database, if it holds one and the inputs
 * include queries of its dataset: training queries (never dev or held-out ones) with the
 * latest stored planner's plans for them as held out; else none (the prompt file's example).
 */
async function runExamples(
  db: CogrDb,
  inputs: readonly GenerateInput[],
  flags: GenerateFlags,
): Promise<{ examples: PromptExample[]; ids: string[] } | null> {
  const source = await plannerSource(policyStore(db));
  const items = new KeywordIndexStore(db);
  if (!source || (await items.latest('item')) === null) return null;
  const { corpus } = await loadRunCorpus(source, stderrLogger);
  // Only for queries of the run's dataset (another collection's examples would mislead).
  const texts = new Set(corpus.queries.map((q) => q.text));
  if (!inputs.some((x) => texts.has(x.text))) return null;
  let run: OpenRun;
  try {
    run = await openRun(db, corpus);
  } catch (e) {
    if (isCogrError(e, 'NOT_FOUND')) return null;
    throw e;
  }
  await withRunEmbeddings(db, flags, corpus);
  const planner = await runPlanner(run, 'latest');
  planner.attachOpposite(await run.store.openView('item', 'latest'));
  const examples = await trainingQueryExamples(planner, run.coreQueries, run.config.seed);
  const textToId = new Map(run.coreQueries.map((q) => [q.text, q.id]));
  return examples.length > 0 ? { examples, ids: examples.map((e) => textToId.get(e.text) ?? '?') } : null;
}

/** A sample as printed: its keywords, or what it is when the output was not a keyword list (never a fake empty list). */
export type PrintedSample =
  | string[]
  | { format: 'ok'; keywords: string[]; truncated: true }
  | { format: 'invalid_format'; raw?: string; anomaly?: string; truncated?: true };

/** The longest raw output shown for an invalid_format sample. */
const RAW_SHOWN = 1000;

function printed(s: KeywordSample): PrintedSample {
  // A keyword list the model was cut off in (finish_reason "length") says so: its last keyword may be cut too.
  if (s.format === 'ok') return s.truncated === true ? { format: 'ok', keywords: s.keywords, truncated: true } : s.keywords;
  const raw = s.raw === undefined || s.raw === '' ? undefined : s.raw.length > RAW_SHOWN ? `${s.raw.slice(0, RAW_SHOWN)}…` : s.raw;
  return {
    format: 'invalid_format',
    ...(raw !== undefined ? { raw } : {}),
    ...(s.anomaly !== undefined ? { anomaly: s.anomaly } : {}),
    ...(s.truncated === true ? { truncated: true as const } : {}),
  };
}

export interface GenerateResult {
  /** Per answered input (input order), its samples. */
  samples: Record<string, PrintedSample[]>;
  /** The inputs that failed, in input order. */
  failed: { id: string; error: Error }[];
}

/** Every input's samples, or the first failure (all or nothing). */
export async function runGenerate(flags: GenerateFlags): Promise<Record<string, PrintedSample[]>> {
  const r = await runGenerateSettled(flags);
  if (r.failed.length > 0) throw r.failed[0].error;
  return r.samples;
}

/** The failure line of a partly answered run: how many failed, which, and the first one's reason. */
export function failedInputsError(failed: GenerateResult['failed'], total: number) {
  // The reason to show: the failure that stopped the others, not one of those it stopped.
  const first = failed.find((f) => !(isCogrError(f.error) && f.error.details?.failedOn !== undefined)) ?? failed[0];
  const ids = failed.map((f) => f.id);
  const shown =
    ids.length > 10
      ? `${ids
          .slice(0, 10)
          .map((id) => JSON.stringify(id))
          .join(', ')}, … (${ids.length - 10} more)`
      : ids.map((id) => JSON.stringify(id)).join(', ');
  const code = isCogrError(first.error) ? first.error.code : 'LLM_ERROR';
  const answered = total - failed.length;
  return cogrError(
    code,
    `${failed.length} of ${total} input(s) failed: ${shown}; ${answered === 0 ? 'none was answered' : `the ${answered} answered are printed`}; ${JSON.stringify(first.id)}: ${first.error.message}`,
    {
      failed: ids,
    },
  );
}

export async function runGenerateSettled(flags: GenerateFlags): Promise<GenerateResult> {
  const side = parseSide('--side', flags.side);
  const generator = parseChoice('--generator', flags.generator, ['embedded', 'openai'] as const);
  const inputs = readInputs(flags.from);
  const samples = parseIntFlag('--samples', flags.samples, 1, 1000) ?? 1;
  const temperature = parseNumberFlag('--temperature', flags.temperature, { min: 0, max: 5 }) ?? DEFAULTS.decoding.index.temperature;
  const topP = parseNumberFlag('--top-p', flags.topP, { min: 0, max: 1 });
  const seed = parseIntFlag('--seed', flags.seed, 0) ?? DEFAULTS.run.seed;
  if (flags.policy !== undefined && flags.policyFile !== undefined)
    throw cogrError('INVALID_ARGUMENT', '--policy and --policy-file: give one, not both');
  const searchContext = parseIntFlag('--search-context', flags.searchContext, 1, 100);
  const needDb =
    flags.policy !== undefined || flags.opposite !== undefined || (generator === 'openai' && flags.cache) || searchContext !== undefined;
  let db: CogrDb | null = null;
  try {
    if (needDb) db = await openDb(dbPath(flags.db), { logger: stderrLogger });
    let gen: KeywordGenerator;
    if (searchContext !== undefined && (generator !== 'openai' || side !== 'query'))
      throw cogrError('INVALID_ARGUMENT', '--search-context applies to --generator openai --side query');
    if (generator === 'embedded' && side === 'query') {
      if (flags.policyFile !== undefined)
        throw cogrError(
          'INVALID_ARGUMENT',
          '--policy-file: the embedded query generator is a saved query planner; use --policy <round|latest> with the database it is in',
        );
      if (!db) db = await openDb(dbPath(flags.db), { logger: stderrLogger, createIfMissing: false });
      gen = (await storedPlanner(db, flags)).planner;
    } else if (generator === 'embedded') {
      let policy: EmbeddedPolicy;
      if (flags.policy !== undefined) {
        policy = await loadPolicy(policyStore(db!), side, parseLatestOr('--policy', flags.policy));
      } else if (flags.policyFile !== undefined) {
        let json: unknown;
        try {
          json = JSON.parse(readFileSync(flags.policyFile, 'utf8'));
        } catch (e) {
          throw cogrError('DATA_FORMAT', `--policy-file: cannot read ${flags.policyFile}: ${(e as Error).message}`);
        }
        policy = EmbeddedPolicy.fromJSON(json);
        if (policy.side !== side) throw cogrError('INVALID_ARGUMENT', `--policy-file holds a ${policy.side} policy, but --side is ${side}`);
      } else {
        policy = new EmbeddedPolicy(side);
        policy.fitStats(inputs);
      }
      if (flags.opposite !== undefined)
        policy.attachOpposite(await new KeywordIndexStore(db!).openView('query', parseLatestOr('--opposite', flags.opposite)));
      gen = policy;
    } else {
      if (flags.policy !== undefined || flags.policyFile !== undefined)
        throw cogrError('INVALID_ARGUMENT', '--policy and --policy-file apply to --generator embedded only');
      const o = llmOptionsFromEnv({ baseUrl: flags.baseUrl, model: flags.model, apiKey: flags.apiKey, llmTimeout: flags.llmTimeout });
      const concurrency = parseIntFlag('--concurrency', flags.concurrency, 1, 256);
      let context: ((input: GenerateInput) => SearchContext) | undefined;
      if (searchContext !== undefined) {
        // The paper's "+ search results": the stored planner's top items and its plan's keywords.
        const { planner, corpus } = await storedPlanner(db!, flags);
        const titles = new Map(corpus.items.map((it) => [it.id, it.title || it.text.slice(0, 200)]));
        context = (input) => {
          const c = planner.searchContext(input, searchContext);
          return { items: c.itemIds.map((id) => titles.get(id) ?? id), keywords: c.keywords };
        };
      }
      const llm = new OpenAIGenerator(
        { ...o, ...(concurrency ? { concurrency } : {}) },
        { cache: db && flags.cache ? llmCache(db) : undefined, logger: stderrLogger, ...(context ? { searchContext: context } : {}) },
      );
      // A run's examples are looked for also with --no-cache, in a database that exists (never created for it).
      if (side === 'query' && !db && existsSync(dbPath(flags.db))) {
        try {
          db = await openDb(dbPath(flags.db), { logger: stderrLogger, createIfMissing: false });
        } catch (e) {
          // Held by a writer (a training run): the prompt file's example, as without a database.
          if (!isCogrError(e, 'DB_LOCKED')) throw e;
          stderrLogger.info("prompt examples: the database is in use; the prompt file's example is shown", { db: dbPath(flags.db) });
        }
      }
      if (side === 'query' && db) {
        const shots = await runExamples(db, inputs, flags);
        if (shots) {
          llm.setExamples('query', shots.examples);
          stderrLogger.info("prompt examples: the run's training queries with the planner's plans as held out", {
            queries: shots.ids.join(','),
          });
        }
      }
      gen = llm;
    }
    const res = await generateSettled(gen, side, inputs, { samples, temperature, topP: topP ?? DEFAULTS.decoding.index.topP, seed });
    if (gen instanceof OpenAIGenerator) stderrLogger.info('llm usage', { ...gen.usage });
    const result: GenerateResult = { samples: {}, failed: [] };
    inputs.forEach((x, i) => {
      const r = res[i];
      if (r.ok) result.samples[x.id] = r.samples.map(printed);
      else result.failed.push({ id: x.id, error: r.error });
    });
    return result;
  } finally {
    await db?.close();
  }
}

export function register(program: Command): void {
  withEmbeddingsOptions(
    withLlmOptions(
      withDbOption(
        program
          .command('generate')
          .requiredOption('--side <side>', 'item or query')
          .option('--generator <kind>', 'embedded (trainable policy, offline) or openai (any OpenAI-compatible endpoint)', 'embedded')
          .requiredOption('--from <file.jsonl>', 'input lines {"id", "text", "title"?}')
          .option('--samples <n>', 'keyword sets per input', '1')
          .option('--temperature <t>', 'sampling temperature (0 = greedy for embedded)', String(DEFAULTS.decoding.index.temperature))
          .option('--top-p <p>', `nucleus mass of sampling (default ${DEFAULTS.decoding.index.topP}; 1 = none)`)
          .option('--seed <n>', 'sampling seed', String(DEFAULTS.run.seed))
          .option(
            '--policy <round>',
            'embedded: the saved item policy or query planner of this round (or "latest") from the project database',
          )
          .option('--policy-file <path>', 'embedded, item side: load a policy JSON file')
          .option(
            '--opposite <generation>',
            'embedded: the opposite side index generation (or "latest") from the database: the query generation for the item policy, the item generation the planner plans against (default latest)',
          ),
      ),
    ),
    RUN_EMBEDDINGS_HELP,
  )
    .option(
      '--search-context <n>',
      "openai, query side: put the titles of the stored query planner's n top items and its plan's keywords in the prompt (the paper's \"+ search results\")",
    )
    .option(
      '--concurrency <n>',
      `openai: requests in flight at once (default ${DEFAULTS.llm.concurrency}; a server that answers one at a time needs concurrency × its answer time below --llm-timeout)`,
    )
    .option('--no-cache', 'openai: do not use the generation cache in the project database')
    .option('--json', 'print one JSON object {id: [[keyword, ...] or {"format": "invalid_format", ...}, ...]}')
    .action(async (flags: GenerateFlags) => {
      const { samples, failed } = await runGenerateSettled(flags);
      if (flags.json) process.stdout.write(JSON.stringify(samples) + '\n');
      else {
        for (const [id, sets] of Object.entries(samples)) {
          for (const s of sets)
            process.stdout.write(
              `${id}\t${Array.isArray(s) ? s.join('; ') : s.format === 'ok' ? `${s.keywords.join('; ')} (cut off at max_tokens)` : `(invalid_format${s.anomaly !== undefined ? `: ${s.anomaly}` : ''}${s.truncated ? ', cut off at max_tokens' : ''})`}\n`,
            );
        }
      }
      if (failed.length > 0) throw failedInputsError(failed, Object.keys(samples).length + failed.length);
    });
}
