/**
 * `npm run bench -- llm --dataset med|nfcorpus [--work DIR] [--collect-only] [--round-flags "..."]`:
 * the LLM half against the embedded planner and the text baselines on one split.
 *
 * Runs trainers/trl/round.sh (resumable: stages already done are skipped; `--collect-only`
 * runs nothing) in `--work` (default `$COGR_HOME/trl/<dataset>`, `.cogr/trl/<dataset>`),
 * then reads what it left and scores every held-out query of the run's split the same way:
 *   llm.sft / llm.query / llm.item  the LLM's query keywords after SFT, after the query
 *       half-round (both against the SFT item generation) and after the item half-round
 *       (against the item generation with the LLM's item keywords): F1 of the matched set
 *       and nDCG@10 of its keyword-BM25 ranking (the paper's rule, no floor), precision,
 *       recall, and the keyword audit (share of keywords matching at most one item, median
 *       items per keyword, share taken from the query: src/drift/keywordAudit.ts)
 *   planner  the run's embedded planner at SFT (its own held-out figures as the run reports them)
 *   bm25, rm3  BM25 and BM25 + RM3 over the items' text, cut-off tuned on the training queries
 *   paired   {gain, se} over the held-out queries: query_vs_sft, item_vs_query, sft_vs_bm25,
 *       query_vs_bm25 (per-query F1 differences, standard error of their mean)
 *   reward_curve  the mean training reward of the first and the last fifth of the query
 *       half-round's GRPO steps (mean and standard error over those steps), and the item's
 *   seconds, max_rss_mb  per stage, from round.sh's stages.jsonl
 *   query_vocabulary  the phrases the query side's keywords were kept to (round.sh's
 *       sft-data/vocabulary.json: half-round, item generation, minCarriers, how many, and the
 *       mode: filter or force), or
 *       null when the round ran without the constraint (--open-vocabulary, --free, or a round
 *       from before it)
 * and writes bench/results/llm-<dataset>.json (kept in git) with the machine's load average.
 * Relatedness of the keywords to their query needs an embeddings endpoint (`cogr audit
 * --embeddings`) and is not measured here.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { openDb } from '../index/store/db.ts';
import { loadRunCorpus } from '../src/run/corpus.ts';
import { frozenHalfRound, openRun } from '../src/run/context.ts';
import { meanSe, readStoredRun, type ImportRecord } from '../src/run/state.ts';
import { evaluateQueries } from '../src/evolve/evaluate.ts';
import { splitBaselines } from '../src/evolve/baseline.ts';
import { auditItems } from '../src/drift/keywordAudit.ts';
import { parseBenchArgs } from './args.ts';
import { writeResultJson } from './writeJson.ts';

const ROOT = resolve(import.meta.dirname, '../..');

function jsonl(path: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Mean and standard error (src/run/state.ts meanSe), rounded as the result file keeps them, with the count. */
function meanSeRounded(xs: readonly number[]): { mean: number; se: number; n: number } {
  const { mean, se } = meanSe(xs);
  return { mean: round(mean), se: round(se), n: xs.length };
}

function paired(a: readonly number[] | null, b: readonly number[] | null): { gain: number; se: number; queries: number } | null {
  if (!a || !b || a.length !== b.length) return null;
  const d = meanSeRounded(a.map((x, i) => x - b[i]));
  return { gain: d.mean, se: d.se, queries: d.n };
}

const round = (x: number) => Math.round(x * 1e4) / 1e4;

/** The first and last fifth of a GRPO stage's steps: mean training reward and its standard error over the steps. */
function rewardCurve(
  log: string,
): { steps: number; first_fifth: { mean: number; se: number }; last_fifth: { mean: number; se: number } } | null {
  const r = jsonl(log)
    .filter((x) => typeof x.reward === 'number')
    .map((x) => x.reward as number);
  if (r.length < 5) return null;
  const k = Math.floor(r.length / 5);
  const f = meanSeRounded(r.slice(0, k));
  const l = meanSeRounded(r.slice(r.length - k));
  return { steps: r.length, first_fifth: { mean: f.mean, se: f.se }, last_fifth: { mean: l.mean, se: l.se } };
}

function stageSum(
  stages: readonly Record<string, unknown>[],
  key: string,
  f: (a: number, b: number) => number,
): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const s of stages) {
    const name = s.stage as string;
    const v = typeof s[key] === 'number' ? (s[key] as number) : null;
    const had = out[name];
    out[name] = had === undefined || had === null ? v : v === null ? had : round(f(had, v));
  }
  return out;
}

/**
 * The query half-round's reward, first pass over the training queries against the last
 * (the GRPO data cycles through the queries in one order, so each pass holds every query
 * once): each query's mean reward in its first pass and in its last, and the mean of the
 * per-query differences with its standard error. What the fifths of the steps compare
 * when a fifth is one pass, with the queries' differences paired.
 */
function pairedCurve(
  rewardsLog: string,
): { queries: number; passes: number; first: number; last: number; gain: number; se: number } | null {
  const calls = jsonl(rewardsLog);
  if (calls.length === 0) return null;
  // Each reward call is one step: one prompt's completions (the label names it).
  const byLabel = new Map<string, number[]>();
  const steps = new Map<number, { label: string; rewards: number[] }>();
  for (const c of calls) {
    const s = steps.get(c.call as number) ?? { label: c.label as string, rewards: [] };
    s.rewards.push(c.reward as number);
    steps.set(c.call as number, s);
  }
  for (const s of [...steps.keys()].sort((a, b) => a - b).map((k) => steps.get(k)!)) {
    const m = s.rewards.reduce((a, b) => a + b, 0) / s.rewards.length;
    byLabel.set(s.label, [...(byLabel.get(s.label) ?? []), m]);
  }
  const both = [...byLabel.values()].filter((v) => v.length >= 2);
  if (both.length === 0) return null;
  const d = meanSeRounded(both.map((v) => v[v.length - 1] - v[0]));
  return {
    queries: both.length,
    passes: Math.min(...both.map((v) => v.length)),
    first: meanSeRounded(both.map((v) => v[0])).mean,
    last: meanSeRounded(both.map((v) => v[v.length - 1])).mean,
    gain: d.mean,
    se: d.se,
  };
}

export async function run(argv: string[]): Promise<void> {
  const args = parseBenchArgs(argv);
  const dataset = args.string('--dataset', 'med');
  const work = resolve(args.string('--work', join(process.env.COGR_HOME ?? '.cogr', 'trl', dataset)));
  if (!args.has('--collect-only')) {
    const extra = args.string('--round-flags', '').split(/\s+/).filter(Boolean);
    const r = spawnSync('bash', [join(ROOT, 'trainers/trl/round.sh'), '--dataset', dataset, '--work', work, ...extra], {
      stdio: 'inherit',
    });
    if (r.status !== 0) throw new Error(`trainers/trl/round.sh exited ${r.status}`);
  }
  const load = loadavg();
  const db = await openDb(join(work, 'home', 'db'));
  try {
    const stored = await readStoredRun(db);
    const { corpus } = await loadRunCorpus(stored.config);
    const run = await openRun(db, corpus, stored);
    const { baselines, figures } = await splitBaselines(run);
    const beta = run.config.beta;
    /** How cogr_trl.py generate made a keyword file's answers (its x.completions.meta.json; none for rounds made before it). */
    const generateMeta = (keywords: string) => {
      const f = join(work, keywords.replace(/\.keywords\.jsonl$/, '.completions.meta.json'));
      if (!existsSync(f)) return null;
      const m = JSON.parse(readFileSync(f, 'utf8')) as {
        vocabularyMode: 'filter' | 'force' | 'fallback' | null;
        filter: { keywords: number; dropped: number; emptied: number } | null;
        fallbacks: number;
        answers: number;
      };
      return { answers: m.answers, vocabularyMode: m.vocabularyMode, filter: m.filter, fallbacks: m.fallbacks };
    };
    // The SFT model's keywords and the query half-round's are measured on the item index r1-query trains against.
    const sftItems = (await frozenHalfRound(run, 'query', 1)).itemView.generation;
    /** An LLM stage: its keyword file against the item generation its import was evaluated on (`expect`: the one it must be). */
    const stage = async (importFile: string, keywords: string, expect?: number) => {
      const rec = existsSync(join(work, importFile)) ? (JSON.parse(readFileSync(join(work, importFile), 'utf8')) as ImportRecord) : null;
      if (!rec || rec.itemGeneration === undefined) return null;
      if (expect !== undefined && rec.itemGeneration !== expect)
        throw new Error(
          `${join(work, importFile)}: evaluated against item generation ${rec.itemGeneration}, not r1-query's frozen item index (generation ${expect}): ` +
            `the run held items imported before it; remove the file and run round.sh again (its stage imports with --against r1-query)`,
        );
      const kw = new Map(jsonl(join(work, keywords)).map((x) => [x.id as string, x.keywords as string[]]));
      const view = await run.store.openView('item', rec.itemGeneration);
      const ev = evaluateQueries(view, run.evalQueries, (q) => kw.get(q.id) ?? [], corpus, beta);
      const m = ev.metrics;
      return {
        figures: {
          f1: round(m.f1),
          precision: round(m.precision),
          recall: round(m.recall),
          ndcg10: round(m.ndcg10),
          meanKeywords: round(m.meanKeywords),
          meanMatched: round(m.meanMatched),
          itemGeneration: rec.itemGeneration,
          ...(rec.trainReward ? { trainReward: rec.trainReward } : {}),
          generate: generateMeta(keywords),
          audit: m.keywords ?? null,
        },
        perQuery: ev.perQuery,
        view,
      };
    };
    const sft = await stage('import-sft-query.json', 'sft-query.keywords.jsonl', sftItems);
    const query = await stage('import-query.json', 'query.keywords.jsonl', sftItems);
    const item = await stage('import-query-after-item.json', 'query.keywords.jsonl');
    const sftStep = stored.steps.find((s) => s.phase === 'sft');
    const stages = jsonl(join(work, 'stages.jsonl'));
    const invocations = existsSync(join(work, 'invocations.txt'))
      ? readFileSync(join(work, 'invocations.txt'), 'utf8').trim().split('\n')
      : null;
    const vocabularyFile = join(work, 'sft-data', 'vocabulary.json');
    const unconstrained = (invocations ?? [args.string('--round-flags', '')]).some((l) => /(^|\s)--(open-vocabulary|free)(\s|$)/.test(l));
    // How the query side kept to it: as its GRPO stage recorded (cogr-done.json), else as round.sh was told; a
    // round made before --vocabulary-mode (its checkpoint names the vocabulary but no mode) was forced.
    const queryDone = join(work, 'ckpt-query', 'cogr-done.json');
    const grammar = existsSync(queryDone)
      ? (
          JSON.parse(readFileSync(queryDone, 'utf8')) as {
            grammar?: { vocabulary?: number | null; vocabularyMode?: 'filter' | 'force' | 'fallback' | null } | null;
          }
        ).grammar
      : undefined;
    // The imported keywords' mode as generate recorded it; else the GRPO stage's (rounds made before the record).
    const mode: 'filter' | 'force' | 'fallback' =
      query?.figures.generate?.vocabularyMode ??
      grammar?.vocabularyMode ??
      (grammar?.vocabulary != null
        ? 'force'
        : (invocations ?? []).some((l) => /(^|\s)--vocabulary-mode force(\s|$)/.test(l))
          ? 'force'
          : 'filter');
    const vocabulary =
      !unconstrained && existsSync(vocabularyFile)
        ? (({ half, itemGeneration, minCarriers, phrases }) => ({ half, itemGeneration, minCarriers, phrases: phrases.length, mode }))(
            JSON.parse(readFileSync(vocabularyFile, 'utf8')) as {
              half: string;
              itemGeneration: number;
              minCarriers: number;
              phrases: unknown[];
            },
          )
        : null;
    const result = {
      dataset,
      command: `npm run bench -- llm --dataset ${dataset}`,
      // round.sh's options: as it recorded them (invocations.txt, one line per run of it), or as given here.
      round_flags: invocations ? invocations.join(' ; ') : args.string('--round-flags', ''),
      model: checkpointDone(join(work, 'ckpt-sft')),
      // round.sh --query-sft own: the query side's own SFT model (query targets alone); else the joint one above is both sides'.
      query_model: existsSync(join(work, 'ckpt-sft-query', 'cogr-done.json')) ? checkpointDone(join(work, 'ckpt-sft-query')) : null,
      split: { core: run.coreQueries.length, dev: run.devQueries.length, heldOut: run.evalQueries.length },
      config: { beta, kMax: run.config.kMax, vocabulary: run.config.vocabulary },
      query_vocabulary: vocabulary,
      llm: {
        sft: sft?.figures ?? null,
        query: query?.figures ?? null,
        item: item ? { ...item.figures, itemAudit: auditItems(item.view) } : null,
      },
      planner: sftStep
        ? {
            f1: round(sftStep.metrics.f1),
            precision: round(sftStep.metrics.precision),
            recall: round(sftStep.metrics.recall),
            ndcg10: round(sftStep.metrics.ndcg10),
          }
        : null,
      bm25: { f1: round(baselines.bm25.f1), ndcg10: round(baselines.bm25.ndcg10), cutoff: baselines.bm25.cutoff },
      rm3: { f1: round(baselines.rm3.f1), ndcg10: round(baselines.rm3.ndcg10), cutoff: baselines.rm3.cutoff },
      paired: {
        query_vs_sft: paired(query?.perQuery ?? null, sft?.perQuery ?? null),
        item_vs_query: paired(item?.perQuery ?? null, query?.perQuery ?? null),
        sft_vs_bm25: paired(sft?.perQuery ?? null, figures.bm25.f1),
        query_vs_bm25: paired(query?.perQuery ?? null, figures.bm25.f1),
      },
      reward_curve: rewardCurve(join(work, 'grpo-query.log.jsonl')),
      reward_curve_paired: pairedCurve(join(work, 'grpo-query.rewards.jsonl')),
      reward_curve_item: rewardCurve(join(work, 'grpo-item.log.jsonl')),
      // A stage run in parts (killed, then resumed) sums its parts' seconds; its memory is the largest part's.
      seconds: stageSum(stages, 'seconds', (a, b) => a + b),
      max_rss_mb: stageSum(stages, 'max_rss_mb', Math.max),
      load_average_at_collection: load.map(round),
      measured_at: new Date().toISOString(),
    };
    const out = join(ROOT, 'bench', 'results', `llm-${dataset}.json`);
    await writeResultJson(out, result);
    process.stdout.write(JSON.stringify(result, null, 2) + '\n');
    process.stderr.write(`wrote ${out}\n`);
  } finally {
    await db.close();
  }
}

/** A finished checkpoint's record (cogr_trl.py save_final's cogr-done.json). */
function checkpointDone(dir: string): unknown {
  return JSON.parse(readFileSync(join(dir, 'cogr-done.json'), 'utf8')) as unknown;
}
