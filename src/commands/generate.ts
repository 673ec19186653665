/**
 * `cogr generate --side item|query [--generator embedded|openai] --from <file.jsonl>
 *   [--samples n] [--temperature t] [--top-p p] [--seed n] [--policy <round|latest>]
 *   [--policy-file <path>] [--opposite <generation|latest>] [--db <path>]
 *   [--base-url url] [--model name] [--api-key key] [--concurrency n] [--no-cache] [--json]`
 *
 * Reads JSONL lines {"id", "text", "title"?} and prints, with --json, one JSON object
 * mapping each id to its list of sampled keyword sets (a readable line per sample
 * otherwise). The embedded generator uses an untrained policy unless --policy (from the
 * project database) or --policy-file (a PolicyJSON file) is given; --opposite attaches the
 * opposite side's index generation from the database (query-side expansion candidates);
 * with --policy on the query side, the latest item generation is attached by default.
 * The openai generator reads OPENAI_BASE_URL, OPENAI_API_KEY and COGR_MODEL unless the
 * flags are given, and caches generations in the project database (`llm-cache`).
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { openDb, type CogrDb } from '../../index/db.ts';
import { DEFAULTS } from '../../index/defaults.ts';
import { cogrError } from '../../index/errors.ts';
import { stderrLogger } from '../../index/log.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import type { Side } from '../../index/types.ts';
import { OpenAIGenerator, llmOptionsFromEnv } from '../../generators/llm.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import type { GenerateInput, KeywordGenerator } from '../../generators/types.ts';
import { idSchema, readJsonl } from '../datasets/common.ts';
import { llmCache, loadPolicy, policyStore } from '../run/policies.ts';
import { dbPath, parseChoice, parseIntFlag, parseLatestOr, parseNumberFlag, parseSide, withDbOption, withLlmOptions, type LlmFlags } from './options.ts';

const LineSchema = z.object({ id: idSchema, text: z.string(), title: z.string().optional() });

/** The inputs of a JSONL file (`{"id", "text", "title"?}` per line; ids unique). */
export function readInputs(path: string): GenerateInput[] {
  return readJsonl(path, LineSchema, { uniqueId: (v) => v.id }).map((r) => r.value);
}

interface GenerateFlags extends LlmFlags {
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
  cache: boolean;
  json?: boolean;
}

export async function runGenerate(flags: GenerateFlags): Promise<Record<string, string[][]>> {
  const side = parseSide('--side', flags.side);
  const generator = parseChoice('--generator', flags.generator, ['embedded', 'openai'] as const);
  const inputs = readInputs(flags.from);
  const samples = parseIntFlag('--samples', flags.samples, 1, 1000) ?? 1;
  const temperature = parseNumberFlag('--temperature', flags.temperature, { min: 0, max: 5 }) ?? DEFAULTS.decoding.index.temperature;
  const topP = parseNumberFlag('--top-p', flags.topP, { min: 0, max: 1 });
  const seed = parseIntFlag('--seed', flags.seed, 0) ?? DEFAULTS.run.seed;
  if (flags.policy !== undefined && flags.policyFile !== undefined) throw cogrError('INVALID_ARGUMENT', '--policy and --policy-file: give one, not both');
  const needDb = flags.policy !== undefined || flags.opposite !== undefined || (generator === 'openai' && flags.cache);
  let db: CogrDb | null = null;
  try {
    if (needDb) db = await openDb(dbPath(flags.db), { logger: stderrLogger });
    let gen: KeywordGenerator;
    if (generator === 'embedded') {
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
      const other: Side = side === 'query' ? 'item' : 'query';
      if (flags.opposite !== undefined) {
        policy.attachOpposite(await new KeywordIndexStore(db!).openView(other, parseLatestOr('--opposite', flags.opposite)));
      } else if (db && side === 'query') {
        const store = new KeywordIndexStore(db);
        if ((await store.latest(other)) !== null) policy.attachOpposite(await store.openView(other, 'latest'));
        else stderrLogger.warn('no item index in the database: the query policy has no expansion candidates (see cogr sft --commit-index)');
      } else if (side === 'query') {
        stderrLogger.warn('no item index attached: the query policy has no expansion candidates (use --policy or --opposite with a database)');
      }
      gen = policy;
    } else {
      if (flags.policy !== undefined || flags.policyFile !== undefined) throw cogrError('INVALID_ARGUMENT', '--policy and --policy-file apply to --generator embedded only');
      const o = llmOptionsFromEnv({ baseUrl: flags.baseUrl, model: flags.model, apiKey: flags.apiKey, llmTimeout: flags.llmTimeout });
      const concurrency = parseIntFlag('--concurrency', flags.concurrency, 1, 256);
      gen = new OpenAIGenerator(
        { ...o, ...(concurrency ? { concurrency } : {}) },
        { cache: db && flags.cache ? llmCache(db) : undefined, logger: stderrLogger },
      );
    }
    const res = await gen.generate(side, inputs, { samples, temperature, topP: topP ?? DEFAULTS.decoding.index.topP, seed });
    if (gen instanceof OpenAIGenerator) stderrLogger.info('llm usage', { ...gen.usage });
    const out: Record<string, string[][]> = {};
    inputs.forEach((x, i) => (out[x.id] = res[i].map((s) => s.keywords)));
    return out;
  } finally {
    await db?.close();
  }
}

export function register(program: Command): void {
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
        .option('--policy <round>', 'embedded: load the saved policy of this round (or "latest") from the project database')
        .option('--policy-file <path>', 'embedded: load a policy JSON file')
        .option('--opposite <generation>', 'embedded: attach the opposite side index generation (or "latest") from the database'),
    ),
  )
    .option('--concurrency <n>', `openai: parallel requests (default ${DEFAULTS.llm.concurrency})`)
    .option('--no-cache', 'openai: do not use the generation cache in the project database')
    .option('--json', 'print one JSON object {id: [[keyword, ...], ...]}')
    .action(async (flags: GenerateFlags) => {
      const out = await runGenerate(flags);
      if (flags.json) process.stdout.write(JSON.stringify(out) + '\n');
      else for (const [id, sets] of Object.entries(out)) for (const s of sets) process.stdout.write(`${id}\t${s.join('; ')}\n`);
    });
}
