/**
 * `cogr rollouts --side query|item --round r --out rollouts.jsonl [--db] [--samples G]
 *   [--temperature t] [--limit n] [--generator embedded|openai] [--base-url --model
 *   --api-key]`: GRPO rollouts of one round against the run's frozen generations, with
 *   prompts in chat format, completions, rewards, reasons, advantages and group ids
 *   (JSONL, ready for TRL or verl).
 * `cogr import-generation --side item|query --from keywords.jsonl [--db]`: keywords from
 *   an external model (`{"id", "keywords": [...], "title"?}` per line) become a new
 *   generation of the run, evaluated on the held-out queries like any other.
 */
import type { Command } from 'commander';
import { openDb } from '../../index/db.ts';
import { cogrError } from '../../index/errors.ts';
import { stderrLogger } from '../../index/log.ts';
import type { Side } from '../../index/types.ts';
import { OpenAIGenerator, llmOptionsFromEnv } from '../../generators/llm.ts';
import { importGeneration } from '../evolve/importGeneration.ts';
import { writeRollouts } from '../evolve/rollouts.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { llmCache } from '../run/policies.ts';
import { readStoredRun } from '../run/state.ts';
import { homePath } from '../home.ts';
import { createProgress } from '../progress.ts';
import { parseNumberFlag } from './flags.ts';

function side(v: string): Side {
  if (v !== 'item' && v !== 'query') throw cogrError('INVALID_ARGUMENT', `--side: expected item or query, got ${JSON.stringify(v)}`);
  return v;
}
function int(flag: string, v: string | undefined, min: number): number | undefined {
  return parseNumberFlag(flag, v, { integer: true, min });
}

export function register(program: Command): void {
  program
    .command('rollouts')
    .description('write GRPO rollouts (prompts, completions, rewards, reasons, advantages, group ids) of one round as JSONL')
    .requiredOption('--side <side>', 'query or item')
    .requiredOption('--round <r>', 'the round being trained (≥ 1): rewards come from the generations it trains against')
    .requiredOption('--out <file.jsonl>', 'output file')
    .option('--db <dir>', 'the run database (default $COGR_HOME/db)')
    .option('--samples <G>', 'completions per prompt (default: the run’s group size)')
    .option('--temperature <t>', 'sampling temperature (default: the run’s rollout temperature, 1.0)')
    .option('--limit <n>', 'only the first n prompts')
    .option('--generator <kind>', 'embedded (the run’s policy of round r−1) or openai', 'embedded')
    .option('--base-url <url>', 'OpenAI-compatible endpoint (default $OPENAI_BASE_URL)')
    .option('--model <name>', 'model name (default $COGR_MODEL)')
    .option('--api-key <key>', 'API key (default $OPENAI_API_KEY)')
    .option('--quiet', 'no progress display')
    .action(async (flags: { side: string; round: string; out: string; db?: string; samples?: string; temperature?: string; limit?: string; generator: string; baseUrl?: string; model?: string; apiKey?: string; quiet?: boolean }) => {
      const s = side(flags.side);
      const round = int('--round', flags.round, 1)!;
      const temperature = flags.temperature === undefined ? undefined : Number(flags.temperature);
      if (temperature !== undefined && !(temperature >= 0)) throw cogrError('INVALID_ARGUMENT', `--temperature: expected a number ≥ 0, got ${JSON.stringify(flags.temperature)}`);
      if (flags.generator !== 'embedded' && flags.generator !== 'openai') throw cogrError('INVALID_ARGUMENT', `--generator: expected embedded or openai, got ${JSON.stringify(flags.generator)}`);
      const db = await openDb(flags.db ?? homePath('db'), { logger: stderrLogger });
      try {
        const run = await readStoredRun(db);
        const { corpus } = await loadRunCorpus(run.config, stderrLogger);
        const generator =
          flags.generator === 'openai'
            ? new OpenAIGenerator(llmOptionsFromEnv({ baseUrl: flags.baseUrl, model: flags.model, apiKey: flags.apiKey }), {
                cache: llmCache(db),
                logger: stderrLogger,
              })
            : undefined;
        const summary = await writeRollouts(db, corpus, {
          side: s,
          round,
          out: flags.out,
          samples: int('--samples', flags.samples, 1),
          temperature,
          limit: int('--limit', flags.limit, 0),
          generator,
          logger: stderrLogger,
          progress: createProgress({ enabled: !flags.quiet }),
        });
        process.stdout.write(JSON.stringify({ out: flags.out, ...summary }) + '\n');
      } finally {
        await db.close();
      }
    });

  program
    .command('import-generation')
    .description('commit keywords produced by an external model as a new generation of the run and evaluate it')
    .requiredOption('--side <side>', 'item or query')
    .requiredOption('--from <keywords.jsonl>', 'lines {"id", "keywords": [...], "title"?}')
    .option('--db <dir>', 'the run database (default $COGR_HOME/db)')
    .option('--json', 'print one JSON object on stdout')
    .action(async (flags: { side: string; from: string; db?: string; json?: boolean }) => {
      const s = side(flags.side);
      const db = await openDb(flags.db ?? homePath('db'), { logger: stderrLogger });
      try {
        const run = await readStoredRun(db);
        const { corpus } = await loadRunCorpus(run.config, stderrLogger);
        const rec = await importGeneration(db, corpus, s, flags.from, stderrLogger);
        if (flags.json) process.stdout.write(JSON.stringify(rec) + '\n');
        else {
          const m = rec.metrics;
          process.stdout.write(
            `${s} generation ${rec.generation} committed from ${rec.source} (${rec.entities} entities)\n` +
              `held-out: P=${m.precision.toFixed(4)} R=${m.recall.toFixed(4)} F1=${m.f1.toFixed(4)} nDCG@10=${m.ndcg10.toFixed(4)} over ${m.queries} queries\n`,
          );
        }
      } finally {
        await db.close();
      }
    });
}
