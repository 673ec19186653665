/**
 * Persistent state of a co-evolution run, in the project database's `run` sublevel:
 *   config          → RunConfig (validated; identity fields must match on resume)
 *   split           → {train, eval} query ids (fixed at the first step)
 *   steps           → StepRecord[] (one per committed step, in order)
 * Policies live in the `policies` sublevel (generators/policyStore.ts), generations in
 * the keyword index (index/store.ts). A step is committed when its record is written,
 * which happens last; on resume, anything a killed step left behind (generations newer
 * than the last record) is deleted and the step runs again from the saved policies, so
 * a resumed run ends with the same results as an uninterrupted one.
 */
import { existsSync } from 'node:fs';
import { openDb, type CogrDb, type JsonSublevel } from '../../index/db.ts';
import type { Side } from '../../index/types.ts';
import type { RunConfig } from './config.ts';

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

export interface StepRecord {
  step: string;
  round: number;
  /** 'sft' for the initialisation, else the side trained in this half-round. */
  phase: 'sft' | Side;
  itemGeneration: number;
  queryGeneration: number;
  metrics: HeldOutMetrics;
  vocabulary: { item: number; query: number };
  train: TrainStats | null;
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

export class RunState {
  private readonly sub: JsonSublevel<unknown>;
  constructor(db: CogrDb) {
    this.sub = db.sublevel(RUN_SUBLEVEL);
  }
  async config(): Promise<RunConfig | undefined> {
    return (await this.sub.get('config')) as RunConfig | undefined;
  }
  async setConfig(c: RunConfig): Promise<void> {
    await this.sub.put('config', c);
    await this.sub.put('version', RUN_STATE_VERSION);
  }
  async version(): Promise<number | undefined> {
    return (await this.sub.get('version')) as number | undefined;
  }
  async split(): Promise<RunSplit | undefined> {
    return (await this.sub.get('split')) as RunSplit | undefined;
  }
  async setSplit(s: RunSplit): Promise<void> {
    await this.sub.put('split', s);
  }
  async steps(): Promise<StepRecord[]> {
    return ((await this.sub.get('steps')) as StepRecord[] | undefined) ?? [];
  }
  async appendStep(rec: StepRecord): Promise<void> {
    const steps = await this.steps();
    steps.push(rec);
    await this.sub.put('steps', steps);
  }
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
 * The dataset and training split of the run stored at a database path, or null when there
 * is no database or it holds no run. Opens the database only for the read.
 */
export async function storedRunSplit(dbPath: string): Promise<{ dataset: string; format?: string; train: string[] } | null> {
  if (!existsSync(dbPath)) return null;
  const db = await openDb(dbPath, { createIfMissing: false });
  try {
    const state = new RunState(db);
    const config = await state.config();
    const split = await state.split();
    return config && split ? { dataset: config.dataset, ...(config.format ? { format: config.format } : {}), train: split.train } : null;
  } finally {
    await db.close();
  }
}
