import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { detectFormat } from '../../src/datasets/detect.ts';
import { parseRunConfig } from '../../src/run/config.ts';
import { loadRunCorpus } from '../../src/run/corpus.ts';
import { bestServing, readRunAt, readStoredRun, RUN_STATE_VERSION, RUN_SUBLEVEL, RunState, type StepRecord } from '../../src/run/state.ts';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-run-store-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the run store', () => {
  it('the best step to serve is the last adopted one, with the planner of the last adopted query step up to it', () => {
    const step = (
      step: string,
      round: number,
      phase: StepRecord['phase'],
      itemGeneration: number,
      queryGeneration: number,
      adopted: boolean,
    ) => ({ step, round, phase, itemGeneration, queryGeneration, adopted }) as StepRecord;
    const steps = [
      step('sft', 0, 'sft', 0, 0, true),
      step('r1-query', 1, 'query', 0, 1, true),
      step('r1-item', 1, 'item', 1, 1, true),
      step('r2-query', 2, 'query', 1, 2, false),
      step('r2-item', 2, 'item', 2, 1, true),
      step('r3-query', 3, 'query', 2, 3, false),
    ];
    // r2-item built on r1's planner (r2-query was not adopted), so that planner serves it
    expect(bestServing(steps)).toEqual({ step: 'r2-item', round: 2, itemGeneration: 2, queryGeneration: 1, plannerRound: 1 });
    expect(bestServing(steps.slice(0, 1))).toEqual({ step: 'sft', round: 0, itemGeneration: 0, queryGeneration: 0, plannerRound: 0 });
    expect(bestServing([])).toBeNull();
  });

  it('round-trips config, split, steps and imports; a database without a run is NOT_FOUND', async () => {
    const db = await openDb(join(dir, 'db1'));
    try {
      await expect(readStoredRun(db)).rejects.toMatchObject({ code: 'NOT_FOUND' });
      const state = new RunState(db);
      const config = parseRunConfig({ dataset: 'med', format: 'smart' });
      await state.setConfig(config);
      await state.setSplit({ train: ['1', '2'], dev: [], eval: ['3'] });
      expect(await state.version()).toBe(RUN_STATE_VERSION);
      expect(await readStoredRun(db)).toEqual({ config, split: { train: ['1', '2'], dev: [], eval: ['3'] }, steps: [], imports: [] });
      expect(await state.imports()).toEqual([]);
    } finally {
      await db.close();
    }
    // The stored format travels with the run (serve and reward-server load the dataset with it).
    expect((await readRunAt(join(dir, 'db1')))?.config.format).toBe('smart');
    expect(await readRunAt(join(dir, 'missing'))).toBeNull();
  });

  it('refuses a run written by another run-state version with the version message', async () => {
    const db = await openDb(join(dir, 'db2'));
    try {
      await new RunState(db).setConfig(parseRunConfig({ dataset: 'med' }));
      await db.sublevel(RUN_SUBLEVEL).put('version', RUN_STATE_VERSION + 1);
      const err = await new RunState(db).config().catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'DB_VERSION' });
      expect((err as Error).message).toBe(
        `the co-evolution run in ${db.path} has run-state version ${RUN_STATE_VERSION + 1}, expected ${RUN_STATE_VERSION}; refusing to read it`,
      );
    } finally {
      await db.close();
    }
  });

  it('loads a run corpus in the format the run recorded, not the detected one', async () => {
    // A folder that two loaders can read: detection picks jsonl (items.jsonl), the run said beir.
    const both = join(dir, 'both');
    for (const src of ['jsonl', 'beir']) cpSync(join(__dirname, '../fixtures/datasets', src), both, { recursive: true });
    expect(readdirSync(both)).toEqual(expect.arrayContaining(['items.jsonl', 'corpus.jsonl']));
    expect(detectFormat(both)).toBe('jsonl');
    const recorded = await loadRunCorpus({ dataset: both, format: 'beir' });
    expect(recorded.format).toBe('beir');
    expect(recorded.corpus.items.map((i) => i.id)).toContain('d1');
  });
});
