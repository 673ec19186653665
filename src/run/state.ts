/**
 * The run store: persistent state of a co-evolution run, in the project database's
 * `run` sublevel, read and written only through `RunState`:
 *   version         → RUN_STATE_VERSION (written with the config, checked on every read)
 *   config          → RunConfig (validated; identity fields must match on resume)
 *   split           → {train, dev, eval} query ids (fixed at the first step; dev ⊂ train)
 *   steps           → StepRecord[] (one per committed step, in order)
 *   imports         → ImportRecord[] (generations imported from external models)
 *   data            → DataFingerprint (fingerprint.ts: digests of the items, queries,
 *                     judgements and split the run was made on; a resume on other data is
 *                     refused; a run written before it has none and gets it at its next
 *                     resume)
 * Policies live in the `policies` sublevel (policies.ts), generations in the keyword
 * index (index/store/store.ts). Every change also rewrites `published/run.json`, the copy
 * readers use without the database (published.ts). A step is committed when its record is written, which happens
 * last; on resume, anything a killed step left behind (generations newer than the last
 * record) is deleted and the step runs again from the saved policies, so a resumed run
 * ends with the same results as an uninterrupted one.
 *
 * This folder sits below both the loop (src/evolve/) and the servers (src/server/):
 * whatever reads a stored run goes through here.
 */
import type { CogrDb, JsonSublevel } from '../../index/store/db.ts';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import type { Corpus, Side } from '../../index/core/types.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import { NO_FLOOR, type Floor } from '../../generators/planner/ranking.ts';
import type { F1Point } from '../drift/analyze.ts';
import { parseStoredConfig, type RunConfig } from './config.ts';
import { checkRunData, dataFingerprint, parseFingerprint, type DataFingerprint } from './fingerprint.ts';
import { publishRunState, readPublishedRun } from './published.ts';
import type { DevMetrics, ImportRecord, QuerySetF, RunSplit, StepRecord } from './records.ts';
import { failpoint } from '../../index/core/failpoint.ts';
export type {
  HeldOutMetrics,
  DevMetrics,
  RankChoice,
  SetFloor,
  QuerySetF,
  TrainStats,
  ImportRecord,
  StepRecord,
  RefitStats,
  RunSplit,
} from './records.ts';

export const RUN_SUBLEVEL = 'run';
/** 2: dev split, adoption per step, the query planner (run-state 1 runs are refused). */
export const RUN_STATE_VERSION = 2;

/**
 * The adoption test of a half-round against the best adopted step so far, on the dev
 * queries: with d_q = F_candidate(q) − F_best(q), the candidate is adopted when the mean
 * gain is not negative and not smaller than z standard errors of it,
 *   mean(d) ≥ 0  and  mean(d) ≥ z · sd(d)/√n,
 * so a dev F1 that falls is never adopted, and neither is a rise within the noise of a few
 * dev queries (z = 0: any rise or tie is adopted). Without dev queries every step is.
 */
export function adoptionTest(
  candidate: DevMetrics | null,
  best: DevMetrics | null,
  z: number,
  pooled?: { candidate: QuerySetF | null | undefined; best: QuerySetF | null | undefined },
  opts: { devAlone?: boolean } = {},
): { adopted: boolean; gain: number; se: number; queries?: number } {
  if (!candidate || !best || candidate.perQuery.length === 0 || candidate.perQuery.length !== best.perQuery.length)
    return { adopted: true, gain: 0, se: 0 };
  const d = candidate.perQuery.map((f, i) => f - best.perQuery[i]);
  const dev = meanSe(d);
  const pc = pooled?.candidate;
  const pb = pooled?.best;
  if (!pc || !pb || pc.perQuery.length === 0 || pc.perQuery.length !== pb.perQuery.length)
    return { adopted: dev.mean >= 0 && dev.mean >= z * dev.se, gain: dev.mean, se: dev.se };
  // Pooled: the dev queries and the core training queries scored as held out, paired per query;
  // the dev gain alone must still not be negative.
  const all = meanSe([...d, ...pc.perQuery.map((f, i) => f - pb.perQuery[i])]);
  return {
    adopted: (opts.devAlone === false || dev.mean >= 0) && all.mean >= 0 && all.mean >= z * all.se,
    gain: all.mean,
    se: all.se,
    queries: d.length + pc.perQuery.length,
  };
}

/**
 * A half-round adopted on a tie: its test paired queries none of whose F changed (gain and
 * standard error both 0), so it was adopted with no evidence either way (`mean(d) ≥ 0` holds
 * with equality). The rounds build on such a step as on any adopted one; reports name it
 * apart, since the dev data did not say it helps.
 */
export function adoptedOnTie(s: Pick<StepRecord, 'adopted' | 'devGain'>): boolean {
  return s.adopted && s.devGain !== undefined && s.devGain.gain === 0 && s.devGain.se === 0;
}

/** How reports say whether a step was adopted: 'yes', 'yes (tie)', 'no', or '' for a step that is not a half-round. */
export function adoptedLabel(s: Pick<StepRecord, 'phase' | 'adopted' | 'devGain'>): string {
  return isHalfRound(s.phase) ? (s.adopted ? (adoptedOnTie(s) ? 'yes (tie)' : 'yes') : 'no') : '';
}

/** The mean of paired per-query gains and its standard error (0 for fewer than 2). */
export function meanSe(d: readonly number[]): { mean: number; se: number } {
  const n = d.length;
  if (n === 0) return { mean: 0, se: 0 };
  const mean = d.reduce((a, b) => a + b, 0) / n;
  const sd = n > 1 ? Math.sqrt(d.reduce((a, b) => a + (b - mean) * (b - mean), 0) / (n - 1)) : 0;
  return { mean, se: sd / Math.sqrt(n) };
}

/** The training queries the generators learn from: the training queries outside the dev split, in split order. */
export function coreIds(split: RunSplit): string[] {
  const dev = new Set(split.dev);
  return split.train.filter((id) => !dev.has(id));
}

/** The step names of a run with R rounds, in order, and the final refit last when asked. */
export function stepNames(rounds: number, refit = false): string[] {
  const out = ['sft'];
  for (let r = 1; r <= rounds; r++) out.push(`r${r}-query`, `r${r}-item`);
  if (refit) out.push(REFIT_STEP);
  return out;
}

/** The name of the final refit step (refit.ts refitStep). */
export const REFIT_STEP = 'refit';

/** The values of the `run` sublevel, by key. */
interface RunValues {
  version: number;
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
  imports: ImportRecord[];
  data: DataFingerprint;
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
    failpoint('run-state:before-publish');
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
    const data = await get('data');
    await publishRunState(this.db, {
      runStateVersion: (await get('version')) ?? null,
      config: (await get('config')) ?? null,
      split: (await get('split')) ?? null,
      steps: (await get('steps')) ?? [],
      imports: (await get('imports')) ?? [],
      ...(data !== undefined ? { data } : {}),
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
    const r = parseStoredConfig(raw);
    if (!r.success) throw schemaError('DB_CORRUPT', r.error, { what: `the stored run config of ${this.db.path} does not validate` });
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
  /** The fingerprint of the data the run was made on (undefined for a run written before fingerprints). */
  async data(): Promise<DataFingerprint | undefined> {
    const raw = await this.get('data');
    return raw === undefined ? undefined : parseFingerprint(raw, this.db.path);
  }
  async setData(d: DataFingerprint): Promise<void> {
    await this.put('data', d);
  }
  async appendStep(rec: StepRecord): Promise<void> {
    const steps = await this.steps();
    steps.push(rec);
    await this.put('steps', steps);
  }
  /** Drop the last step record (the final refit, when a run is extended or asked without it; its generation is then rolled back). */
  async dropLastStep(): Promise<void> {
    const steps = await this.steps();
    steps.pop();
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
  /** Generations imported from an external model (`cogr import-generation`); a half-round's import stands in for a step the run did not make. */
  imports: ImportRecord[];
  /** The fingerprint of its data (absent in runs stored before fingerprints; readRunAt only). */
  data?: DataFingerprint;
}

/** The round of a side's generator as of the given steps: the last adopted step that trained it (SFT = 0). */
/** The ranker a run serves (its SFT step's choice; keywords for runs written before rankers). */
export function rankOf(steps: readonly StepRecord[]): Ranker {
  return steps.find((s) => s.phase === 'sft')?.rank?.served ?? 'keywords';
}

/** nDCG@10 and MAP of a step's held-out matched sets under the run's served ranker. */
export function servedRanking(steps: readonly StepRecord[], s: StepRecord): { ndcg10: number; map: number } {
  const r = s.metrics.rankings?.[rankOf(steps)];
  return r ? { ndcg10: r.ndcg10, map: r.map } : { ndcg10: s.metrics.ndcg10, map: s.metrics.ranked['ap@1000'] ?? 0 };
}

export function generatorRound(steps: readonly StepRecord[], side: Side): number {
  let round = 0;
  // The final refit saves a query planner (at its round) and no item policy.
  for (const s of steps) if (s.adopted && (s.phase === side || (side === 'query' && s.phase === 'refit'))) round = s.round;
  return round;
}

/** Whether a step is a GRPO half-round (the steps the dev split tests), not SFT or the final refit. */
export function isHalfRound(phase: StepRecord['phase']): phase is Side {
  return phase === 'query' || phase === 'item';
}

/** The adopted step with the best dev F1 (the last adopted one: adoption never lowers it); null before SFT. */
export function bestStep(steps: readonly StepRecord[]): StepRecord | null {
  let best: StepRecord | null = null;
  for (const s of steps) if (s.adopted) best = s;
  return best;
}

/**
 * What serving a run's best step means: the last adopted step (adoption never lets dev F1
 * fall, so it is the best dev step), its item and query generations, and the round of the
 * query planner it used (the last adopted query-side step up to it; SFT = 0). Null when
 * no step is adopted.
 */
export function bestServing(
  steps: readonly StepRecord[],
): { step: string; round: number; itemGeneration: number; queryGeneration: number; plannerRound: number } | null {
  const best = bestStep(steps);
  if (!best) return null;
  const plannerRound = generatorRound(steps.slice(0, steps.indexOf(best) + 1), 'query');
  return { step: best.step, round: best.round, itemGeneration: best.itemGeneration, queryGeneration: best.queryGeneration, plannerRound };
}

/**
 * The floor that a run's served sets get (ranking.ts servedSet), for its serving step
 * (bestServing), or for `step`: the SFT step's floor and backfill depth (none for runs written before
 * floors); when that step is a refit whose set guard chose the relevance model's own sets,
 * their α as well, so the sets are the model's, as the step was measured.
 */
export function servedFloor(steps: readonly StepRecord[], step: StepRecord | null = bestStep(steps)): Floor {
  const f = steps.find((s) => s.phase === 'sft')?.floor;
  const floor: Floor = f ? { floor: f.floor, fallback: f.fallback, backfill: f.backfill ?? 0, ...(f.cut ? { cut: true } : {}) } : NO_FLOOR;
  const served = step?.phase === 'refit' ? step.refit?.served : undefined;
  return served?.set === 'model' && served.alpha !== undefined ? { ...floor, modelAlpha: served.alpha } : floor;
}

/** The run stored in a database; NOT_FOUND when it holds none. */
export async function readStoredRun(db: CogrDb): Promise<StoredRun> {
  const state = new RunState(db);
  const config = await state.config();
  const split = await state.split();
  if (!config || !split)
    throw cogrError('NOT_FOUND', `the database ${db.path} holds no co-evolution run (run cogr demo or cogr evolve first)`);
  return { config, split, steps: await state.steps(), imports: await state.imports() };
}

/**
 * Refuse to work on a stored run with data other than its own (fingerprint.ts; the split
 * is the stored one): INVALID_ARGUMENT naming what changed. A run without a fingerprint
 * (written before them) is accepted.
 */
export async function checkStoredRunData(db: CogrDb, run: StoredRun, corpus: Corpus): Promise<void> {
  const stored = await new RunState(db).data();
  if (stored) checkRunData(db.path, run.config.dataset, stored, dataFingerprint(corpus, run.split));
}

/**
 * What half-round `r<round>-<side>` builds on: the last adopted step before it, its frozen
 * item generation and (item side) query generation, and the rounds of the generators it
 * starts from (the last adopted step that trained each; SFT = 0).
 */
export function frozenFor(
  run: Pick<StoredRun, 'steps' | 'imports'>,
  side: Side,
  round: number,
): { base: string; itemGeneration: number; queryGeneration: number | null; plannerRound: number; itemPolicyRound: number } {
  if (!Number.isInteger(round) || round < 1) throw cogrError('INVALID_ARGUMENT', `--round: expected an integer ≥ 1, got ${round}`);
  const name = `r${round}-${side}`;
  const names = stepNames(round);
  // The steps before it, by name (a run's final refit sits after its last round, not in its place).
  const before: StepRecord[] = [];
  const made: Pick<StepRecord, 'step' | 'adopted' | 'itemGeneration' | 'queryGeneration'>[] = [];
  for (const n of names.slice(0, names.indexOf(name))) {
    const s = run.steps.find((x) => x.step === n);
    if (s) {
      before.push(s);
      made.push(s);
      continue;
    }
    // A half-round an external trainer made (`cogr import-generation --half`): its generations, adopted as they are.
    const imp = halfImport(run.imports, n);
    if (imp) {
      made.push({ step: n, adopted: true, itemGeneration: imp.itemGeneration!, queryGeneration: imp.queryGeneration! });
      continue;
    }
    throw cogrError(
      'NOT_FOUND',
      `${name} builds on step ${n}, which this run has neither committed nor imported (steps: ${run.steps.map((x) => x.step).join(', ') || 'none'}; cogr import-generation --half ${n} imports one)`,
    );
  }
  let base: (typeof made)[number] | null = null;
  for (const s of made) if (s.adopted) base = s;
  if (!base) throw cogrError('NOT_FOUND', `${name} needs an adopted step before it`);
  return {
    base: base.step,
    itemGeneration: base.itemGeneration,
    queryGeneration: side === 'item' ? base.queryGeneration : null,
    plannerRound: generatorRound(before, 'query'),
    itemPolicyRound: generatorRound(before, 'item'),
  };
}

/** The last import recorded as half-round `name` with both its generations (null: none). */
export function halfImport(imports: readonly ImportRecord[], name: string): ImportRecord | null {
  let out: ImportRecord | null = null;
  for (const r of imports) if (r.half === name && r.itemGeneration !== undefined && r.queryGeneration !== undefined) out = r;
  return out;
}

/** `r<round>-<side>`, the name of a half-round. */
export function parseHalfRound(name: string, flag = '--half'): { side: Side; round: number } {
  const m = /^r([1-9][0-9]{0,5})-(query|item)$/.exec(name);
  if (!m)
    throw cogrError(
      'INVALID_ARGUMENT',
      `${flag}: expected a half-round name r<round>-query or r<round>-item (r1-query, r2-item, ...), got ${JSON.stringify(name)}`,
    );
  return { side: m[2] as Side, round: Number(m[1]) };
}

/**
 * The first half-round a run has made neither as a step nor as an import: what a trainer
 * trains next (r1-query after `cogr demo --rounds 0`). Null before the SFT step.
 */
export function nextHalfRound(run: Pick<StoredRun, 'steps' | 'imports'>): string | null {
  if (!run.steps.some((s) => s.phase === 'sft')) return null;
  for (let r = 1; ; r++)
    for (const side of ['query', 'item'] as const) {
      const n = `r${r}-${side}`;
      if (!run.steps.some((s) => s.step === n) && halfImport(run.imports, n) === null) return n;
    }
}

/**
 * Held-out F1 per half-round in the drift report's shape: the SFT step counts as round 0
 * of both sides; `rR-query` as (R, query); `rR-item` as (R, item).
 */
export function f1Points(steps: readonly StepRecord[]): F1Point[] {
  const out: F1Point[] = [];
  for (const s of steps) {
    if (s.phase === 'sft') {
      out.push({ round: 0, side: 'query', f1: s.metrics.f1 }, { round: 0, side: 'item', f1: s.metrics.f1 });
    } else out.push({ round: s.round, side: s.phase, f1: s.metrics.f1 });
  }
  return out;
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
  const r = parseStoredConfig(doc.config);
  if (!r.success) throw schemaError('DB_CORRUPT', r.error, { what: `the published run config of ${dbPath} does not validate` });
  return {
    config: r.data,
    split: doc.split,
    steps: doc.steps,
    imports: doc.imports ?? [],
    ...(doc.data !== undefined ? { data: parseFingerprint(doc.data, dbPath) } : {}),
  };
}

/**
 * The run's dataset as loaded now, refused when it is not the data the run was made on
 * (readers that take the dataset from the run: `serve`, `reward-server`).
 */
export function checkPublishedRunData(dbPath: string, run: StoredRun, corpus: Corpus): void {
  if (run.data) {
    checkRunData(
      dbPath,
      run.config.dataset,
      run.data,
      dataFingerprint(corpus, run.split),
      "serving it would pair the run's generations with other data: restore the data, name a dataset with --dataset, or rerun the run with --fresh",
    );
  }
}
