/**
 * The run store: persistent state of a co-evolution run, in the project database's
 * `run` sublevel, read and written only through `RunState`:
 *   version         → RUN_STATE_VERSION (written with the config, checked on every read)
 *   config          → RunConfig (validated; identity fields must match on resume)
 *   split           → {train, eval} query ids (fixed at the first step)
 *   steps           → StepRecord[] (one per committed step, in order)
 *   imports         → ImportRecord[] (generations imported from external models)
 * Policies live in the `policies` sublevel (policies.ts), generations in the keyword
 * index (index/store.ts). Every change also rewrites `published/run.json`, the copy
 * readers use without the database (published.ts). A step is committed when its record is written, which happens
 * last; on resume, anything a killed step left behind (generations newer than the last
 * record) is deleted and the step runs again from the saved policies, so a resumed run
 * ends with the same results as an uninterrupted one.
 *
 * This folder sits below both the loop (src/evolve/) and the servers (src/server/):
 * whatever reads a stored run goes through here.
 */
import type { CogrDb, JsonSublevel } from '../../index/db.ts';
import { cogrError } from '../../index/errors.ts';
import type { Side } from '../../index/types.ts';
import { RunConfigSchema, type RunConfig } from './config.ts';
import { publishRunState, readPublishedRun } from './published.ts';

export const RUN_SUBLEVEL = 'run';
export const RUN_STATE_VERSION = 1;

export interface HeldOutMetrics {
  queries: number;
  f1: number;
  precision: number;
  recall: number;
  ndcg10: number;
  mrr10: number;
  hit3: number;
  /** Mean size of the whole matched set per held-out query. */
  meanMatched: number;
  /** Mean number of generated keywords per held-out query. */
  meanKeywords: number;
  /** Every ranked metric (mrr, ndcg, ndcgBinary, p, r, f1, hit at 1, 3, 10, 100, 1000) of the BM25-ranked matched set. */
  ranked: Record<string, number>;
}

/** What the SFT step trained (deterministic, so a resumed run records the same). */
export interface SftStats {
  epochs: number;
  /** Training examples: items, training queries with a target. */
  itemExamples: number;
  queryExamples: number;
  /** Mean negative log-likelihood per example, per epoch. */
  itemLoss: number[];
  queryLoss: number[];
  /** Share of target keywords found among the policies' candidates. */
  itemCoverage: number;
  queryCoverage: number;
}

/** What a GRPO half-round trained. */
export interface TrainStats {
  epochs: number;
  samples: number;
  meanReward: number;
  /** Mean reward of the last epoch. */
  lastEpochReward: number;
  degenerateGroups: number;
  reasons: { ok: number; over_budget: number; invalid_format: number };
  seconds: number;
}

/** A generation imported from an external model (`cogr import-generation`), evaluated like a step. */
export interface ImportRecord {
  side: Side;
  generation: number;
  source: string;
  entities: number;
  /** Held-out queries whose keywords came from the file (query side). */
  heldOutFromFile: number;
  metrics: HeldOutMetrics;
  importedAt: string;
}

export interface StepRecord {
  step: string;
  round: number;
  /** 'sft' for the initialisation, else the side trained in this half-round. */
  phase: 'sft' | Side;
  itemGeneration: number;
  queryGeneration: number;
  metrics: HeldOutMetrics;
  vocabulary: { item: number; query: number };
  /** The GRPO half-round's statistics; null for the SFT step. */
  train: TrainStats | null;
  /** The SFT step's statistics (SFT step only). */
  sft?: SftStats;
  finishedAt: string;
}

export interface RunSplit {
  train: string[];
  eval: string[];
}

/** The step names of a run with R rounds, in order. */
export function stepNames(rounds: number): string[] {
  const out = ['sft'];
  for (let r = 1; r <= rounds; r++) out.push(`r${r}-query`, `r${r}-item`);
  return out;
}

/** The values of the `run` sublevel, by key. */
interface RunValues {
  version: number;
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
  imports: ImportRecord[];
}

export class RunState {
  private readonly sub: JsonSublevel<RunValues[keyof RunValues]>;
  private checked = false;
  constructor(private readonly db: CogrDb) {
    this.sub = db.sublevel(RUN_SUBLEVEL);
  }

  private async get<K extends keyof RunValues>(key: K): Promise<RunValues[K] | undefined> {
    if (key !== 'version') await this.checkVersion();
    return (await this.sub.get(key)) as RunValues[K] | undefined;
  }
  private async put<K extends keyof RunValues>(key: K, value: RunValues[K]): Promise<void> {
    await this.guard();
    await this.sub.put(key, value);
    await this.publish();
  }

  private guarded = false;
  /**
   * Before the first write: a published run.json that holds more committed steps than the
   * database means the database lost committed data (e.g. its write-ahead log); the
   * writer refuses instead of writing over what readers still hold.
   */
  private async guard(): Promise<void> {
    if (this.guarded) return;
    let doc: Awaited<ReturnType<typeof readPublishedRun>> = null;
    try {
      doc = await readPublishedRun(this.db.path);
    } catch {
      // A damaged run.json is written again from the database.
    }
    if (doc?.config) {
      const hasConfig = (await this.sub.get('config')) !== undefined;
      const steps = ((await this.sub.get('steps')) as StepRecord[] | undefined)?.length ?? 0;
      if (!hasConfig || steps < doc.steps.length) {
        throw cogrError(
          'DB_CORRUPT',
          `the published run state (run.json) holds ${doc.steps.length} committed step(s), the database ${this.db.path} ${hasConfig ? `only ${steps}` : 'no run'}: the database lost committed data (a damaged or deleted write-ahead log?); \`cogr verify\` says what is intact, \`cogr verify --repair\` makes the files agree with the database`,
          { path: this.db.path },
        );
      }
    }
    this.guarded = true;
  }

  /** Rewrite run.json, the readers' copy of the run state (published.ts). */
  async publish(): Promise<void> {
    const get = async <K extends keyof RunValues>(key: K) => (await this.sub.get(key)) as RunValues[K] | undefined;
    await publishRunState(this.db, {
      runStateVersion: (await get('version')) ?? null,
      config: (await get('config')) ?? null,
      split: (await get('split')) ?? null,
      steps: (await get('steps')) ?? [],
      imports: (await get('imports')) ?? [],
    });
  }

  /** A run written by another version of the run state is refused (DB_VERSION), never misread. */
  private async checkVersion(): Promise<void> {
    if (this.checked) return;
    const version = (await this.sub.get('version')) as number | undefined;
    const hasRun = version !== undefined || (await this.sub.get('config')) !== undefined;
    if (hasRun && version !== RUN_STATE_VERSION) {
      throw cogrError(
        'DB_VERSION',
        `the co-evolution run in ${this.db.path} has run-state version ${JSON.stringify(version ?? null)}, expected ${RUN_STATE_VERSION}; refusing to read it`,
        { path: this.db.path, found: version ?? null, expected: RUN_STATE_VERSION },
      );
    }
    this.checked = true;
  }

  async version(): Promise<number | undefined> {
    return this.get('version');
  }
  /** The stored config, validated (fields added since it was written get their defaults). */
  async config(): Promise<RunConfig | undefined> {
    const raw = await this.get('config');
    if (raw === undefined) return undefined;
    const r = RunConfigSchema.safeParse(raw);
    if (!r.success) throw cogrError('DB_CORRUPT', `the stored run config of ${this.db.path} does not validate: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    return r.data;
  }
  async setConfig(c: RunConfig): Promise<void> {
    await this.checkVersion();
    await this.put('config', c);
    await this.put('version', RUN_STATE_VERSION);
  }
  async split(): Promise<RunSplit | undefined> {
    return this.get('split');
  }
  async setSplit(s: RunSplit): Promise<void> {
    await this.put('split', s);
  }
  async steps(): Promise<StepRecord[]> {
    return (await this.get('steps')) ?? [];
  }
  async appendStep(rec: StepRecord): Promise<void> {
    const steps = await this.steps();
    steps.push(rec);
    await this.put('steps', steps);
  }
  async imports(): Promise<ImportRecord[]> {
    return (await this.get('imports')) ?? [];
  }
  async appendImport(rec: ImportRecord): Promise<void> {
    const imports = await this.imports();
    imports.push(rec);
    await this.put('imports', imports);
  }
}

/** A stored run as one value. */
export interface StoredRun {
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
}

/** The run stored in a database; NOT_FOUND when it holds none. */
export async function readStoredRun(db: CogrDb): Promise<StoredRun> {
  const state = new RunState(db);
  const config = await state.config();
  const split = await state.split();
  if (!config || !split) throw cogrError('NOT_FOUND', `the database ${db.path} holds no co-evolution run (run cogr demo or cogr evolve first)`);
  return { config, split, steps: await state.steps() };
}

/** The generations round r of a side trains against (query side: item generation r−1; item side: also query generation r). */
export function frozenFor(run: StoredRun, side: Side, round: number): { itemGeneration: number; queryGeneration: number | null } {
  if (!Number.isInteger(round) || round < 1) throw cogrError('INVALID_ARGUMENT', `--round: expected an integer ≥ 1, got ${round}`);
  const before = run.steps.find((s) => s.step === (round === 1 ? 'sft' : `r${round - 1}-item`));
  if (!before) throw cogrError('NOT_FOUND', `round ${round} needs step ${round === 1 ? 'sft' : `r${round - 1}-item`}, which this run has not committed (steps: ${run.steps.map((s) => s.step).join(', ') || 'none'})`);
  if (side === 'query') return { itemGeneration: before.itemGeneration, queryGeneration: null };
  const q = run.steps.find((s) => s.step === `r${round}-query`);
  if (!q) throw cogrError('NOT_FOUND', `item-side rollouts of round ${round} need step r${round}-query, which this run has not committed`);
  return { itemGeneration: before.itemGeneration, queryGeneration: q.queryGeneration };
}

/**
 * Held-out F1 per half-round in the drift report's shape: the SFT step counts as round 0
 * of both sides; `rR-query` as (R, query); `rR-item` as (R, item).
 */
export function f1Points(steps: readonly StepRecord[]): { round: number; side: Side; f1: number }[] {
  const out: { round: number; side: Side; f1: number }[] = [];
  for (const s of steps) {
    if (s.phase === 'sft') {
      out.push({ round: 0, side: 'query', f1: s.metrics.f1 }, { round: 0, side: 'item', f1: s.metrics.f1 });
    } else out.push({ round: s.round, side: s.phase, f1: s.metrics.f1 });
  }
  return out;
}

/** The F1 points of the run stored in a database (empty when it holds no run). */
export async function storedF1Points(db: CogrDb): Promise<{ round: number; side: Side; f1: number }[]> {
  return f1Points(await new RunState(db).steps());
}

/**
 * The run published at a database path (its config, split and steps, from
 * `published/run.json`), read without opening the database; null when there is no
 * database or it holds no run. Another run-state version is refused (DB_VERSION).
 */
export async function readRunAt(dbPath: string): Promise<StoredRun | null> {
  const doc = await readPublishedRun(dbPath);
  if (!doc || !doc.config || !doc.split) return null;
  if (doc.runStateVersion !== RUN_STATE_VERSION) {
    throw cogrError(
      'DB_VERSION',
      `the co-evolution run in ${dbPath} has run-state version ${JSON.stringify(doc.runStateVersion)}, expected ${RUN_STATE_VERSION}; refusing to read it`,
      { path: dbPath, found: doc.runStateVersion, expected: RUN_STATE_VERSION },
    );
  }
  const r = RunConfigSchema.safeParse(doc.config);
  if (!r.success) throw cogrError('DB_CORRUPT', `the published run config of ${dbPath} does not validate: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return { config: r.data, split: doc.split, steps: doc.steps };
}
