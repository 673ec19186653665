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
import { cogrError } from '../../index/errors.ts';
import { stderrLogger } from '../../index/log.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import type { Side } from '../../index/types.ts';
import { OpenAIGenerator, llmOptionsFromEnv } from '../../generators/llm.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { llmCache, loadPolicy, policyStore } from '../run/policies.ts';
import { INDEX_DECODING, type GenerateInput, type KeyValueStore, type KeywordGenerator } from '../../generators/types.ts';
import { homePath } from '../home.ts';
import { parseNumberFlag } from './flags.ts';

const LineSchema = z.object({ id: z.union([z.string(), z.number()]).transform(String), text: z.string(), title: z.string().optional() });

export function readInputs(path: string): GenerateInput[] {
  let src: string;
  try {
    src = readFileSync(path, 'utf8');
  } catch (e) {
    throw cogrError('DATA_MISSING', `--from: cannot read ${path}: ${(e as Error).message}`);
  }
  const out: GenerateInput[] = [];
  const seen = new Set<string>();
  src.split(/\r?\n/).forEach((line, i) => {
    if (line.trim() === '') return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw cogrError('DATA_FORMAT', `${path}:${i + 1}: not valid JSON`);
    }
    const r = LineSchema.safeParse(v);
    if (!r.success) {
      const is = r.error.issues[0];
      throw cogrError('DATA_FORMAT', `${path}:${i + 1}: field ${is.path.join('.') || '(line)'}: ${is.message}`);
    }
    if (seen.has(r.data.id)) throw cogrError('DUPLICATE_ID', `${path}:${i + 1}: id ${JSON.stringify(r.data.id)} occurs twice`);
    seen.add(r.data.id);
    out.push(r.data);
  });
  return out;
}

function num(flag: string, v: string | undefined, opts: { int?: boolean; min?: number; max?: number } = {}): number | undefined {
  return parseNumberFlag(flag, v, { integer: opts.int, min: opts.min, max: opts.max });
}

export function parseRoundFlag(flag: string, v: string): number | 'latest' {
  return v === 'latest' ? 'latest' : num(flag, v, { int: true, min: 0 })!;
}

interface GenerateFlags {
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
  baseUrl?: string;
  model?: string;
  apiKey?: string;
  concurrency?: string;
  cache: boolean;
  json?: boolean;
}

export async function runGenerate(flags: GenerateFlags): Promise<Record<string, string[][]>> {
  if (flags.side !== 'item' && flags.side !== 'query') throw cogrError('INVALID_ARGUMENT', `--side: expected item or query, got ${JSON.stringify(flags.side)}`);
  if (flags.generator !== 'embedded' && flags.generator !== 'openai') throw cogrError('INVALID_ARGUMENT', `--generator: expected embedded or openai, got ${JSON.stringify(flags.generator)}`);
  const side = flags.side as Side;
  const inputs = readInputs(flags.from);
  const samples = num('--samples', flags.samples, { int: true, min: 1, max: 1000 }) ?? 1;
  const temperature = num('--temperature', flags.temperature, { min: 0, max: 5 }) ?? INDEX_DECODING.temperature;
  const topP = num('--top-p', flags.topP, { min: 0, max: 1 });
  const seed = num('--seed', flags.seed, { int: true, min: 0 }) ?? 1;
  if (flags.policy !== undefined && flags.policyFile !== undefined) throw cogrError('INVALID_ARGUMENT', '--policy and --policy-file: give one, not both');
  const needDb = flags.policy !== undefined || flags.opposite !== undefined || (flags.generator === 'openai' && flags.cache);
  let db: CogrDb | null = null;
  try {
    if (needDb) db = await openDb(flags.db ?? homePath('db'), { logger: stderrLogger });
    let gen: KeywordGenerator;
    if (flags.generator === 'embedded') {
      let policy: EmbeddedPolicy;
      if (flags.policy !== undefined) {
        policy = await loadPolicy(policyStore(db!), side, parseRoundFlag('--policy', flags.policy));
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
        policy.attachOpposite(await new KeywordIndexStore(db!).openView(other, parseRoundFlag('--opposite', flags.opposite)));
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
      const o = llmOptionsFromEnv({ baseUrl: flags.baseUrl, model: flags.model, apiKey: flags.apiKey });
      const concurrency = num('--concurrency', flags.concurrency, { int: true, min: 1, max: 256 });
      gen = new OpenAIGenerator(
        { ...o, ...(concurrency ? { concurrency } : {}) },
        { cache: db && flags.cache ? llmCache(db) : undefined, logger: stderrLogger },
      );
    }
    const res = await gen.generate(side, inputs, { samples, temperature, topP: topP ?? (flags.generator === 'openai' ? INDEX_DECODING.topP : undefined), seed });
    if (gen instanceof OpenAIGenerator) stderrLogger.info('llm usage', { ...gen.usage });
    const out: Record<string, string[][]> = {};
    inputs.forEach((x, i) => (out[x.id] = res[i].map((s) => s.keywords)));
    return out;
  } finally {
    await db?.close();
  }
}

export function register(program: Command): void {
  program
    .command('generate')
    .description('sample keyword sets for the inputs of a JSONL file ({"id", "text", "title"?} per line)')
    .requiredOption('--side <side>', 'item or query')
    .option('--generator <kind>', 'embedded (trainable policy, offline) or openai (any OpenAI-compatible endpoint)', 'embedded')
    .requiredOption('--from <file.jsonl>', 'input lines {"id", "text", "title"?}')
    .option('--samples <n>', 'keyword sets per input', '1')
    .option('--temperature <t>', 'sampling temperature (0 = greedy for embedded)', '0.7')
    .option('--top-p <p>', 'nucleus mass (openai; default 0.8)')
    .option('--seed <n>', 'sampling seed', '1')
    .option('--policy <round>', 'embedded: load the saved policy of this round (or "latest") from the project database')
    .option('--policy-file <path>', 'embedded: load a policy JSON file')
    .option('--opposite <generation>', 'embedded: attach the opposite side index generation (or "latest") from the database')
    .option('--db <path>', 'project database (default $COGR_HOME/db)')
    .option('--base-url <url>', 'openai: endpoint base URL (default OPENAI_BASE_URL)')
    .option('--model <name>', 'openai: model name (default COGR_MODEL)')
    .option('--api-key <key>', 'openai: API key (default OPENAI_API_KEY)')
    .option('--concurrency <n>', 'openai: parallel requests (default 4)')
    .option('--no-cache', 'openai: do not use the generation cache in the project database')
    .option('--json', 'print one JSON object {id: [[keyword, ...], ...]}')
    .action(async (flags: GenerateFlags) => {
      const out = await runGenerate(flags);
      if (flags.json) process.stdout.write(JSON.stringify(out) + '\n');
      else for (const [id, sets] of Object.entries(out)) for (const s of sets) process.stdout.write(`${id}\t${s.join('; ')}\n`);
    });
}
