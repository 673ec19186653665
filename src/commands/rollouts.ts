/**
 * `cogr rollouts --side query|item --round r --out rollouts.jsonl [--db] [--samples G]
 *   [--temperature t] [--limit n] [--generator embedded|openai] [--base-url --model
 *   --api-key --llm-timeout --concurrency]`: GRPO rollouts of one round against the run's
 *   frozen generations, with prompts in chat format, completions, rewards, reasons,
 *   advantages and group ids (JSONL, ready for TRL or verl). When the LLM fails on some
 *   inputs, the groups answered are written, the summary lists the inputs without lines,
 *   and the command ends with an error line naming them.
 * `cogr import-generation --side item|query --from keywords.jsonl [--db]`: keywords from
 *   an external model (`{"id", "keywords": [...], "title"?}` per line) become a new
 *   generation of the run, evaluated on the held-out queries like any other.
 */
import type { Command } from 'commander';
import { openDb } from '../../index/store/db.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { OpenAIGenerator, llmOptionsFromEnv } from '../../generators/llm.ts';
import { importGeneration } from '../evolve/importGeneration.ts';
import { writeRollouts } from '../evolve/rollouts.ts';
import { createProgress } from '../progress.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { llmCache } from '../run/policies.ts';
import { readStoredRun } from '../run/state.ts';
import {
  dbPath,
  parseChoice,
  parseIntFlag,
  parseNumberFlag,
  parseSide,
  withDbOption,
  RUN_EMBEDDINGS_HELP,
  withEmbeddingsOptions,
  withLlmOptions,
  type EmbeddingsFlags,
  type LlmFlags,
} from './options.ts';
import { registerRunEmbeddings } from '../embeddings/dense.ts';

interface RolloutFlags extends LlmFlags, EmbeddingsFlags {
  side: string;
  round: string;
  out: string;
  db?: string;
  samples?: string;
  temperature?: string;
  limit?: string;
  generator: string;
  grouping?: string;
  groupingDelta?: string;
  concurrency?: string;
  quiet?: boolean;
}

export function register(program: Command): void {
  withEmbeddingsOptions(
    withLlmOptions(
      withDbOption(
        program
          .command('rollouts')
          .requiredOption('--side <side>', 'query or item')
          .requiredOption('--round <r>', 'the round being trained (≥ 1): rewards come from the generations it trains against')
          .requiredOption('--out <file.jsonl>', 'output file'),
        'the run database',
      )
        .option('--samples <G>', 'completions per prompt (default: the run’s group size)')
        .option('--temperature <t>', 'sampling temperature (default: the run’s rollout temperature)')
        .option('--limit <n>', 'only the first n prompts')
        .option('--generator <kind>', 'embedded (the run’s policy of round r−1) or openai', 'embedded')
        .option('--grouping <mode>', 'GRPO groups: exact (each prompt) or semantic (near-identical prompts pooled; default: the run’s)')
        .option('--grouping-delta <x>', 'semantic grouping: token-F1 threshold δ (default: the run’s, 0.8)'),
    ),
    RUN_EMBEDDINGS_HELP,
  )
    .option(
      '--concurrency <n>',
      `openai: requests in flight at once (default ${DEFAULTS.llm.concurrency}; a server that answers one at a time needs concurrency × its answer time below --llm-timeout)`,
    )
    .option('--quiet', 'no progress display')
    .action(async (flags: RolloutFlags) => {
      const s = parseSide('--side', flags.side);
      const round = parseIntFlag('--round', flags.round, 1)!;
      const temperature = parseNumberFlag('--temperature', flags.temperature, { min: 0 });
      const generatorKind = parseChoice('--generator', flags.generator, ['embedded', 'openai'] as const);
      const concurrency = parseIntFlag('--concurrency', flags.concurrency, 1, 256);
      if (concurrency !== undefined && generatorKind !== 'openai')
        throw cogrError('INVALID_ARGUMENT', '--concurrency applies to --generator openai');
      const llm =
        generatorKind === 'openai'
          ? llmOptionsFromEnv({ baseUrl: flags.baseUrl, model: flags.model, apiKey: flags.apiKey, llmTimeout: flags.llmTimeout })
          : undefined;
      const db = await openDb(dbPath(flags.db), { logger: stderrLogger });
      try {
        const run = await readStoredRun(db);
        const { corpus } = await loadRunCorpus(run.config, stderrLogger);
        await registerRunEmbeddings(flags, run.config, corpus, stderrLogger, db);
        const generator = llm
          ? new OpenAIGenerator(
              { ...llm, ...(concurrency !== undefined ? { concurrency } : {}) },
              { cache: llmCache(db), logger: stderrLogger },
            )
          : undefined;
        const summary = await writeRollouts(db, corpus, {
          side: s,
          round,
          out: flags.out,
          samples: parseIntFlag('--samples', flags.samples, 1),
          temperature,
          limit: parseIntFlag('--limit', flags.limit, 0),
          generator,
          ...(flags.grouping !== undefined ? { grouping: parseChoice('--grouping', flags.grouping, ['exact', 'semantic'] as const) } : {}),
          ...(flags.groupingDelta !== undefined
            ? { groupingDelta: parseNumberFlag('--grouping-delta', flags.groupingDelta, { min: 0, max: 1 }) }
            : {}),
          logger: stderrLogger,
          progress: createProgress({ enabled: !flags.quiet }),
        });
        process.stdout.write(JSON.stringify({ out: flags.out, ...summary }) + '\n');
        if (summary.failed.length > 0) {
          const n = summary.failed.length;
          throw cogrError(
            'LLM_ERROR',
            `${n} input(s) have no rollouts (${summary.failed
              .slice(0, 10)
              .map((id) => JSON.stringify(id))
              .join(
                ', ',
              )}${n > 10 ? `, … (${n - 10} more)` : ''}); ${flags.out} holds the ${summary.groups} group(s) answered; first failure ${summary.failure ?? ''}`,
            {
              failed: summary.failed,
            },
          );
        }
      } finally {
        await db.close();
      }
    });

  withEmbeddingsOptions(
    withDbOption(
      program
        .command('import-generation')
        .requiredOption('--side <side>', 'item or query')
        .requiredOption('--from <keywords.jsonl>', 'lines {"id", "keywords": [...], "title"?}'),
      'the run database',
    )
      .option(
        '--half <name>',
        "the half-round (r<round>-<side>) the keywords are an external trainer's result of: built on its frozen generations, scored with its reward, and built on by the half-rounds after it",
      )
      .option(
        '--against <name>',
        "query keywords: the held-out queries matched against this query half-round's (r<round>-query) frozen item index instead of the latest item generation",
      )
      .option('--json', 'print one JSON object on stdout'),
    RUN_EMBEDDINGS_HELP,
  ).action(
    async (flags: { side: string; from: string; db?: string; json?: boolean; half?: string; against?: string } & EmbeddingsFlags) => {
      const s = parseSide('--side', flags.side);
      const db = await openDb(dbPath(flags.db), { logger: stderrLogger });
      try {
        const run = await readStoredRun(db);
        const { corpus } = await loadRunCorpus(run.config, stderrLogger);
        await registerRunEmbeddings(flags, run.config, corpus, stderrLogger, db);
        const rec = await importGeneration(db, corpus, s, flags.from, stderrLogger, {
          ...(flags.half !== undefined ? { half: flags.half } : {}),
          ...(flags.against !== undefined ? { against: flags.against } : {}),
        });
        if (flags.json) process.stdout.write(JSON.stringify(rec) + '\n');
        else {
          const m = rec.metrics;
          process.stdout.write(
            `${s} generation ${rec.generation} committed from ${rec.source} (${rec.entities} entities)\n` +
              `held-out: P=${m.precision.toFixed(4)} R=${m.recall.toFixed(4)} F1=${m.f1.toFixed(4)} nDCG@10=${m.ndcg10.toFixed(4)} over ${m.queries} queries\n` +
              (rec.trainReward
                ? `half-round ${rec.half}: mean training reward ${rec.trainReward.mean.toFixed(4)} over ${rec.trainReward.entities} entities\n`
                : ''),
          );
        }
      } finally {
        await db.close();
      }
    },
  );
}
