/**
 * What `npm run docs` reads (scripts/docs.ts): the stored JSON, validated by the zod schemas
 * below (the fields the generator reads; the type check ties each to the code that writes it),
 * and the commands that re-measure a stored run, derived from its config.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { z } from 'zod';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { parseRunConfig, parseStoredConfig, RUN_OPTIONS } from '../../src/run/config.ts';
import type { RunConfigInput } from '../../src/run/config.ts';
import type { summarizeFolds } from '../../src/commands/evolve.ts';
import type { EvolveBenchResult } from '../../bench/evolveChart.ts';
import { ORDER } from './markdown.ts';
import { STATIC_MODEL } from '../../src/embeddings/static.ts';
import { EMBEDDINGS_MODEL } from '../../src/embeddings/venv.ts';

// ---------------------------------------------------------------------------
// The stored shapes (the fields this script reads).

const Num = z.number();
export const Metrics = z.object({
  f1: Num,
  precision: Num,
  recall: Num,
  ndcg10: Num,
  map: Num,
  ndcg10_keywords: Num,
  meanMatched: Num,
  meanKeywords: Num,
});
const RelatedPart = z.object({ keywords: Num, share: Num });
const QueryAudit = z.object({
  queries: Num,
  keywords: Num,
  keywordsPerQuery: Num,
  shareOneItem: Num,
  medianItemsPerKeyword: Num.nullable(),
  shareBareNumbers: Num,
  shareFromQuery: Num,
  withoutKeywords: z.object({ queries: Num, ownText: Num.optional(), nothing: Num.optional() }).optional(),
  related: z
    .object({
      share: Num,
      medianCosine: Num,
      threshold: Num,
      fromQuery: RelatedPart.optional(),
      added: RelatedPart.optional(),
      byQueryLength: z.array(RelatedPart.extend({ maxWords: Num.nullable(), queries: Num })).optional(),
    })
    .optional(),
});
const ItemAudit = z.object({ items: Num, keywords: Num, keywordsPerItem: Num, shareOneItem: Num, medianItemsPerKeyword: Num.nullable() });
export const Audit = z.object({ query: QueryAudit, item: ItemAudit });
const Gain = z.object({ gain: Num, se: Num });
export const Paired = z.object({
  queries: Num,
  f1: Gain,
  ndcg10: Gain,
  f1_queries: z.object({ above: Num, level: Num, below: Num }),
});
export const SplitBaseline = z.object({ cutoff: Num, f1: Num, precision: Num, recall: Num, ndcg10: Num, map: Num });
const Config = z.record(z.string(), z.unknown());

/** `npx cogr evolve --dataset <d> --folds <k> --json`: the fields read here. */
export const EvolveJsonSchema = z.object({
  dataset: z.string(),
  folds: Num,
  config: Config,
  baselines: z.object({ bm25: Metrics, rm3: Metrics, model: Metrics.optional() }),
  rounds: z.array(
    Metrics.extend({
      round: Num,
      side: z.string(),
      step: z.string(),
      dev_f1: Num.nullable(),
      adopted: Num,
      adoptedOnTie: Num,
      keywords: Audit.nullable(),
    }),
  ),
  final: Metrics.extend({
    rank: z.array(z.string()),
    keywords: Audit.nullable(),
    dev_f1: Num,
    steps: z.array(z.string()),
    refit_of: z.array(z.string()).optional(),
    before_refit: Metrics.optional(),
    refit_from_sft: z.object({ f1: Num, precision: Num, recall: Num }).optional(),
    served_set: z.object({ model_folds: Num }).optional(),
  }).nullable(),
  foldsAboveBaseline: Num,
  final_vs_bm25: Paired.optional(),
  final_vs_rm3: Paired.optional(),
  final_vs_sft: Paired.optional(),
  perFold: z.array(
    z.object({
      fold: Num,
      evalQueries: Num,
      devQueries: Num,
      baselines: z.object({ bm25: SplitBaseline, rm3: SplitBaseline, model: SplitBaseline.nullable() }),
      final: z.object({
        step: z.string(),
        refit_of: z.string().nullable().optional(),
        f1: Num,
        precision: Num,
        recall: Num,
        rank: z.string(),
        ndcg10: Num,
        map: Num,
        served_set: z.object({ set: z.string() }).optional(),
      }),
      aboveBaseline: z.boolean(),
    }),
  ),
});
export type EvolveJson = z.output<typeof EvolveJsonSchema>;

// What `cogr evolve --json` prints must fit the schema: this line stops the type check when
// summarizeFolds and the schema part.
export const evolveOutputFits = (x: ReturnType<typeof summarizeFolds>): z.input<typeof EvolveJsonSchema> => x;

const DemoStep = z.looseObject({
  step: z.string(),
  round: Num,
  phase: z.string(),
  adopted: z.boolean(),
  dev: z.object({ f1: Num, queries: Num }).nullable(),
  metrics: z.looseObject({ f1: Num, precision: Num, recall: Num, ndcg10: Num, meanMatched: Num, meanKeywords: Num }),
  vocabulary: z.object({ item: Num, query: Num }),
});

/** `npx cogr demo --json`: the fields read here (the steps are the run's StepRecords). */
export const DemoJsonSchema = z.object({
  dataset: z.string(),
  config: Config,
  split: z.object({ train: Num, eval: Num }),
  baselines: z.object({ bm25: SplitBaseline, rm3: SplitBaseline, model: SplitBaseline.nullable() }),
  final_vs_bm25: Paired.optional(),
  final_vs_rm3: Paired.optional(),
  final_vs_sft: Paired.optional(),
  steps: z.array(DemoStep),
});
export type DemoJson = z.output<typeof DemoJsonSchema>;

const BenchResult = z.object({
  items: Num,
  queries: Num,
  relevant: Num,
  rounds: Num,
  seed: Num,
  servedSet: z.string().optional(),
  phases: z.array(z.object({ phase: z.string(), seconds: Num, cpuSeconds: Num, cores: Num })),
  steps: z.array(z.object({ step: z.string(), seconds: Num, heldOutF1: Num.nullable(), adopted: z.boolean() })),
  wallSeconds: Num,
  cpuSeconds: Num,
  peakRssMiB: Num,
  loadBefore: z.array(Num),
  loadAfter: z.array(Num),
  finishedAt: z.string(),
});
export type Bench = z.output<typeof BenchResult>;
export const benchResultFits = (x: EvolveBenchResult): z.input<typeof BenchResult> => x;

function readJson<S extends z.ZodType>(path: string, schema: S, root: string): z.output<S> {
  const rel = path.startsWith(root) ? path.slice(root.length + 1) : path;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(`${rel}: not JSON (${(e as Error).message})`);
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new Error(`${rel}: ${i.path.join('.') || '(top)'}: ${i.message}`);
  }
  return r.data;
}

// ---------------------------------------------------------------------------
// The commands that re-measure a stored figure.

/**
 * The flags that give `config` from the defaults `base`: for every run option whose value
 * differs, its flag (RUN_OPTIONS); a differing field without a flag is refused, since no
 * command would re-measure it.
 */
export function runFlags(stored: Record<string, unknown>, base: RunConfigInput, skip: readonly string[] = []): string[] {
  // The commands' own default encoder (cogr evolve and demo: --embeddings auto, all-MiniLM-L6-v2).
  const defaults: Record<string, unknown> = { ...(parseRunConfig(base) as Record<string, unknown>), embeddingsModel: EMBEDDINGS_MODEL };
  // A field the run predates reads as the run read it (run/config.ts parseStoredConfig).
  const parsed = parseStoredConfig(stored);
  const config = parsed.success ? (parsed.data as Record<string, unknown>) : stored;
  const out: string[] = [];
  for (const [key, row] of Object.entries(RUN_OPTIONS)) {
    if (skip.includes(key)) continue;
    const a = JSON.stringify(config[key] ?? null);
    const b = JSON.stringify(defaults[key] ?? null);
    if (a === b) continue;
    const v = config[key];
    // Without an encoder its features flag does nothing.
    if (key === 'embeddingsFeatures' && (config.embeddingsModel ?? null) === null) continue;
    if (key === 'embeddingsModel') {
      const flag = embeddingsFlag(v as string | null);
      if (flag !== null) out.push(flag);
      continue;
    }
    const cli = 'cli' in row ? row.cli : undefined;
    if (!cli) throw new Error(`config.${key} is ${a} where the default is ${b}, and no flag sets it: no command re-measures this run`);
    const flag = cli.flag.split(' ')[0];
    out.push(`${flag} ${cli.kind === 'yesno' ? (v ? 'yes' : 'no') : String(v)}`);
  }
  return out;
}

/** The `--embeddings` a stored run's model needs where it is not the default's (null: none needed). */
function embeddingsFlag(model: string | null): string | null {
  if (model === EMBEDDINGS_MODEL) return null;
  if (model === null) return '--embeddings none';
  if (model === STATIC_MODEL) return '--embeddings static';
  return `--embeddings <an endpoint serving ${model}>`;
}

export function evolveCommand(j: Pick<EvolveJson, 'dataset' | 'folds' | 'config'>, file: string): string {
  const flags = runFlags(j.config, { dataset: j.dataset, folds: j.folds }, ['dataset', 'format', 'folds', 'fold']);
  return ['npx cogr evolve', `--dataset ${j.dataset}`, `--folds ${j.folds}`, ...flags, `--json > ${file}`].join(' ');
}

export function demoCommand(j: Pick<DemoJson, 'dataset' | 'config'>, file: string): string {
  const flags = runFlags(j.config, { ...DEFAULTS.demo, dataset: j.dataset }, ['dataset', 'format', 'folds', 'fold']);
  const dataset = j.dataset === DEFAULTS.demo.dataset ? [] : [`--dataset ${j.dataset}`];
  return ['npx cogr demo', ...dataset, ...flags, `--json > ${file}`].join(' ');
}

export function benchCommand(b: Bench): string {
  return (
    `npm run bench -- evolve --items ${b.items} --queries ${b.queries} --relevant ${b.relevant} --rounds ${b.rounds}` +
    (b.seed !== 1 ? ` --seed ${b.seed}` : '') +
    (b.servedSet ? ` --served-set ${b.servedSet}` : '')
  );
}

// ---------------------------------------------------------------------------
// The stored runs.

export interface StoredRun {
  name: string;
  file: string;
  json: EvolveJson;
}

/** `npx cogr audit --json` (src/commands/audit.ts): the audit and its example queries. */
export const AuditJsonSchema = Audit.extend({
  examples: z.array(
    z.object({ query: z.string(), keywords: z.array(z.object({ keyword: z.string(), matches: Num, cosine: Num.optional() })) }),
  ),
});
export type AuditJson = z.output<typeof AuditJsonSchema>;

/** `npx cogr evolve … --new-items <f> --json`: a stored run and its new_items report (src/evolve/newItems.ts). */
const NewItems = z.object({
  fraction: Num,
  items: Num,
  queries: Num,
  relevant_new: Num,
  relevant_old: Num,
  recall_new: Num,
  recall_old: Num,
  f1: Num,
  bm25: z.object({ recall_new: Num, recall_old: Num, f1: Num }),
});
export const NewItemsJsonSchema = EvolveJsonSchema.extend({ new_items: NewItems });
export type NewItemsJson = z.output<typeof NewItemsJsonSchema>;

/** `npm run bench -- llm --dataset <d>` (bench/llm.ts): the LLM half against the planner and the text baselines on one split. */
const LlmGenerate = z.object({
  answers: Num,
  vocabularyMode: z.enum(['filter', 'force', 'fallback']).nullable(),
  filter: z.object({ keywords: Num, dropped: Num, emptied: Num }).nullable(),
  fallbacks: Num,
});
const LlmFigures = z.object({
  f1: Num,
  ndcg10: Num,
  audit: z.object({ shareOneItem: Num, medianItemsPerKeyword: Num.nullable() }),
  generate: LlmGenerate.nullable().optional(),
});
const GainSe = z.object({ gain: Num, se: Num, queries: Num });
const FifthMean = z.object({ mean: Num, se: Num });
export const LlmBenchSchema = z.object({
  dataset: z.string(),
  split: z.object({ core: Num, dev: Num, heldOut: Num }),
  llm: z.object({ sft: LlmFigures.nullable(), query: LlmFigures.nullable(), item: LlmFigures.nullable() }),
  planner: z.object({ f1: Num, ndcg10: Num }).nullable(),
  bm25: z.object({ f1: Num, ndcg10: Num, cutoff: Num }),
  rm3: z.object({ f1: Num, ndcg10: Num, cutoff: Num }),
  paired: z.object({
    query_vs_sft: GainSe.nullable(),
    item_vs_query: GainSe.nullable(),
    sft_vs_bm25: GainSe.nullable(),
    query_vs_bm25: GainSe.nullable(),
  }),
  reward_curve: z.object({ steps: Num, first_fifth: FifthMean, last_fifth: FifthMean }).nullable(),
  reward_curve_paired: z.object({ queries: Num, passes: Num, first: Num, last: Num, gain: Num, se: Num }).nullable().optional(),
  seconds: z.record(z.string(), Num),
  max_rss_mb: z.record(z.string(), Num.nullable()),
  round_flags: z.string().optional(),
  query_vocabulary: z
    .object({
      half: z.string(),
      itemGeneration: Num,
      minCarriers: Num,
      phrases: Num,
      mode: z.enum(['filter', 'force', 'fallback']).optional(),
    })
    .nullable()
    .optional(),
});
export type LlmBench = z.output<typeof LlmBenchSchema>;

/** `npx cogr oracle --dataset <d> --folds <k> --json` (src/commands/oracle.ts): the ceilings on a stored k-fold run. */
const OracleRow = z.object({
  queries: Num,
  oracle_query_f1: Num,
  oracle_shared_query_f1: Num,
  /** Stored before it: absent. */
  oracle_planned_query_f1: Num.optional(),
  sft_f1: Num,
  final_f1: Num,
  bm25_f1: Num,
  perfect_order_ndcg10: Num,
  final_ndcg10: Num,
  bm25_ndcg10: Num,
});
export const OracleJsonSchema = z.object({
  dataset: z.string(),
  folds: Num,
  config: Config,
  mean: OracleRow.omit({ queries: true }),
  perFold: z.array(OracleRow),
});
export type OracleJson = z.output<typeof OracleJsonSchema>;

/** The commands that make docs/results/oracle/<d>.json: the stored run (its configuration's flags), then its ceilings. */
export function oracleCommand(j: Pick<OracleJson, 'dataset' | 'folds' | 'config'>, file: string): string {
  const flags = runFlags(j.config, { dataset: j.dataset, folds: j.folds }, ['dataset', 'format', 'folds', 'fold']);
  return [
    'npx cogr evolve',
    `--dataset ${j.dataset}`,
    `--folds ${j.folds}`,
    ...flags,
    `--fresh > /dev/null && npx cogr oracle --dataset ${j.dataset} --folds ${j.folds} --json > ${file}`,
  ].join(' ');
}

export interface Sources {
  runs: StoredRun[];
  demo: { file: string; json: DemoJson } | null;
  bench: Bench[];
  /** docs/results/audit/<dataset>.json: the served keywords of `cogr demo --dataset <d>`, audited. */
  audits: { name: string; file: string; json: AuditJson }[];
  /** docs/results/examples/<dataset>-{before,after}.json: a few queries' keywords, open vocabulary and shared. */
  examples: { name: string; before: AuditJson; after: AuditJson; queries: string }[];
  /** docs/results/new-items/<dataset>.json. */
  newItems: { name: string; file: string; json: NewItemsJson }[];
  /** docs/results/adopt-dev/<dataset>.json: the k-fold runs with the dev adoption test (`--adopt-on dev`), beside docs/results/<dataset>.json. */
  adoptDev: { name: string; file: string; json: EvolveJson }[];
  /** bench/results/llm-<dataset>.json. */
  llm: { name: string; file: string; json: LlmBench }[];
  /** docs/results/seeds/<dataset>-seed<n>.json: the stored k-fold runs again with other seeds (other folds). */
  seeds: StoredRun[];
  /** docs/results/dense/<dataset>.json: the stored k-fold runs again with an embeddings model's cosines as relevance features (`--embeddings`). */
  dense: StoredRun[];
  /** docs/results/dense/audit/<dataset>.json: the served keywords of `cogr demo --dataset <d> --embeddings`, audited. */
  denseAudits: { name: string; file: string; json: AuditJson }[];
  /** docs/results/oracle/<dataset>.json. */
  oracle: { name: string; file: string; json: OracleJson }[];
  /** docs/results/static/<dataset>.json: the stored k-fold runs again with the built-in encoder (`--embeddings static`). */
  staticRuns: StoredRun[];
  /** docs/results/static/audit/<dataset>.json: the served keywords of `cogr demo --dataset <d> --embeddings static`, judged by MiniLM. */
  staticAudits: { name: string; file: string; json: AuditJson }[];
  /** docs/results/no-encoder/<dataset>.json: the stored k-fold runs again without an encoder (`--embeddings none`). */
  noEncoderRuns: StoredRun[];
  /** docs/results/static-judge/: the built-in encoder as a judge only (`--embeddings static --embeddings-features no`). */
  staticJudgeRuns: StoredRun[];
  staticJudgeAudits: { name: string; file: string; json: AuditJson }[];
  /** docs/results/no-encoder/audit/<dataset>.json: the served keywords of `cogr demo --dataset <d> --embeddings none`, judged by MiniLM. */
  noEncoderAudits: { name: string; file: string; json: AuditJson }[];
  /** docs/results/cut/<dataset>.json: the stored k-fold runs again with every matched set cut where its expected F1 peaks (`--cut yes`). */
  cutRuns: StoredRun[];
}

const byOrder = (a: { name: string }, b: { name: string }) => {
  const ia = ORDER.indexOf(a.name);
  const ib = ORDER.indexOf(b.name);
  return (ia < 0 ? ORDER.length : ia) - (ib < 0 ? ORDER.length : ib) || a.name.localeCompare(b.name);
};

function jsonIn(root: string, sub: string): string[] {
  const dir = join(root, 'docs', 'results', sub);
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
}

/** Every docs/results/<sub>/<name>.json, read with its schema, in the collections' order. */
function storedIn<S extends z.ZodType>(root: string, sub: string, schema: S): { name: string; file: string; json: z.output<S> }[] {
  return jsonIn(root, sub)
    .map((f) => ({
      name: basename(f, '.json'),
      file: `docs/results/${sub}/${f}`,
      json: readJson(join(root, 'docs', 'results', sub, f), schema, root),
    }))
    .sort(byOrder);
}

/** The shipped embeddings server's URL in the printed commands (`npx cogr embeddings serve` on port 8001). */
export const EMBEDDINGS_URL = 'http://127.0.0.1:8001/v1';

/**
 * The commands that make an audit of a demo's served keywords, judged by MiniLM (an
 * embeddings server on port 8001: `npx cogr embeddings serve`): docs/results/audit/<d>.json
 * (the default demo, MiniLM judging its keywords), with `variant` 'dense'
 * docs/results/dense/audit/<d>.json (MiniLM's cosines features too) or 'none'
 * docs/results/no-encoder/audit/<d>.json (no encoder).
 */
export function auditCommand(dataset: string, file: string, variant: 'default' | 'dense' | 'none' = 'default'): string {
  const home = `COGR_HOME=.cogr-${variant === 'default' ? '' : `${variant}-`}${dataset}`;
  const flags = { default: '', dense: ' --embeddings-features yes', none: ' --embeddings none' }[variant];
  return `${home} npx cogr demo --dataset ${dataset}${flags} && ${home} npx cogr audit --embeddings ${EMBEDDINGS_URL} --json --examples 0 > ${file}`;
}

/** The commands that make docs/results/static-judge/audit/<d>.json: the demo with the built-in encoder judging the keywords only, served, its keywords judged by MiniLM (port 8001). */
export function staticJudgeAuditCommand(dataset: string, file: string): string {
  const home = `COGR_HOME=.cogr-static-judge-${dataset}`;
  return `${home} npx cogr demo --dataset ${dataset} --embeddings static && (${home} npx cogr serve --port 8106 --embeddings static &) && until curl -sf http://127.0.0.1:8106/health > /dev/null; do sleep 1; done && npx cogr audit --url http://127.0.0.1:8106 --dataset ${dataset} --embeddings ${EMBEDDINGS_URL} --json --examples 0 > ${file}`;
}

/** The commands that make docs/results/static/audit/<d>.json: the built-in encoder's run served, its keywords judged by MiniLM on port 8001. */
export function staticAuditCommand(dataset: string, file: string): string {
  const home = `COGR_HOME=.cogr-static-${dataset}`;
  return `${home} npx cogr demo --dataset ${dataset} --cut no --embeddings static --embeddings-features yes && (${home} npx cogr serve --port 8105 --embeddings static &) && until curl -sf http://127.0.0.1:8105/health > /dev/null; do sleep 1; done && npx cogr audit --url http://127.0.0.1:8105 --dataset ${dataset} --embeddings ${EMBEDDINGS_URL} --json --examples 0 > ${file}`;
}

/** The commands that make docs/results/examples/<d>-{before,after}.json. */
export function exampleCommands(dataset: string): { before: string; after: string } {
  const q = `docs/results/examples/${dataset}.jsonl`;
  const audit = (f: string) =>
    `npx cogr audit --queries ${q} --embeddings ${EMBEDDINGS_URL} --json > docs/results/examples/${dataset}-${f}.json`;
  return {
    before: `COGR_HOME=.cogr-open-${dataset} npx cogr demo --dataset ${dataset} --vocabulary open --item-query-side labels --served-set auto --cut no --embeddings none && COGR_HOME=.cogr-open-${dataset} ${audit('before')}`,
    after: `COGR_HOME=.cogr-${dataset} npx cogr demo --dataset ${dataset} && COGR_HOME=.cogr-${dataset} ${audit('after')}`,
  };
}

export function readSources(root: string): Sources {
  const dir = join(root, 'docs', 'results');
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
  const runs = files
    .filter((f) => f !== 'demo.json')
    .map((f) => ({ name: basename(f, '.json'), file: `docs/results/${f}`, json: readJson(join(dir, f), EvolveJsonSchema, root) }))
    .sort((a, b) => {
      const ia = ORDER.indexOf(a.name);
      const ib = ORDER.indexOf(b.name);
      return (ia < 0 ? ORDER.length : ia) - (ib < 0 ? ORDER.length : ib) || a.name.localeCompare(b.name);
    });
  const demo = files.includes('demo.json')
    ? { file: 'docs/results/demo.json', json: readJson(join(dir, 'demo.json'), DemoJsonSchema, root) }
    : null;
  const benchDir = join(root, 'bench', 'results');
  const seen = new Set<string>();
  const bench: Bench[] = [];
  // The main job at scale (npm run bench -- evolve): evolve*.json; the other benches keep their own shapes.
  for (const f of readdirSync(benchDir)
    .filter((x) => x.startsWith('evolve') && x.endsWith('.json'))
    .sort()) {
    const raw = readJson(join(benchDir, f), z.union([BenchResult, z.array(BenchResult)]), root);
    for (const b of Array.isArray(raw) ? raw : [raw]) {
      const key = `${b.items}x${b.queries}x${b.relevant}/${b.rounds}/${b.servedSet ?? ''}/${b.finishedAt}`;
      if (seen.has(key)) continue;
      seen.add(key);
      bench.push(b);
    }
  }
  const audits = storedIn(root, 'audit', AuditJsonSchema);
  const exDir = join(dir, 'examples');
  const examples = jsonIn(root, 'examples')
    .filter((f) => f.endsWith('-after.json'))
    .map((f) => basename(f, '-after.json'))
    .filter((name) => existsSync(join(exDir, `${name}-before.json`)))
    .map((name) => ({
      name,
      before: readJson(join(exDir, `${name}-before.json`), AuditJsonSchema, root),
      after: readJson(join(exDir, `${name}-after.json`), AuditJsonSchema, root),
      queries: `docs/results/examples/${name}.jsonl`,
    }))
    .sort(byOrder);
  const newItems = storedIn(root, 'new-items', NewItemsJsonSchema);
  const llm = readdirSync(benchDir)
    .filter((f) => f.startsWith('llm-') && f.endsWith('.json'))
    .map((f) => ({
      name: basename(f, '.json').slice(4),
      file: `bench/results/${f}`,
      json: readJson(join(benchDir, f), LlmBenchSchema, root),
    }))
    .sort(byOrder);
  const oracle = storedIn(root, 'oracle', OracleJsonSchema);
  const adoptDev = storedIn(root, 'adopt-dev', EvolveJsonSchema);
  const seeds = storedIn(root, 'seeds', EvolveJsonSchema);
  const dense = storedIn(root, 'dense', EvolveJsonSchema);
  const denseAudits = storedIn(root, 'dense/audit', AuditJsonSchema);
  const staticRuns = storedIn(root, 'static', EvolveJsonSchema);
  const staticAudits = storedIn(root, 'static/audit', AuditJsonSchema);
  const noEncoderRuns = storedIn(root, 'no-encoder', EvolveJsonSchema);
  const noEncoderAudits = storedIn(root, 'no-encoder/audit', AuditJsonSchema);
  const cutRuns = storedIn(root, 'cut', EvolveJsonSchema);
  const staticJudgeRuns = storedIn(root, 'static-judge', EvolveJsonSchema);
  const staticJudgeAudits = storedIn(root, 'static-judge/audit', AuditJsonSchema);
  return {
    runs,
    demo,
    bench,
    audits,
    examples,
    newItems,
    llm,
    oracle,
    adoptDev,
    seeds,
    dense,
    denseAudits,
    staticRuns,
    staticAudits,
    noEncoderRuns,
    noEncoderAudits,
    staticJudgeRuns,
    staticJudgeAudits,
    cutRuns,
  };
}
