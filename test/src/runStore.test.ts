import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/db.ts';
import { detectFormat } from '../../src/datasets/index.ts';
import { parseRunConfig } from '../../src/run/config.ts';
import { loadRunCorpus } from '../../src/run/corpus.ts';
import { readRunAt, readStoredRun, RUN_STATE_VERSION, RUN_SUBLEVEL, RunState } from '../../src/run/state.ts';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-run-store-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the run store', () => {
  it('round-trips config, split, steps and imports; a database without a run is NOT_FOUND', async () => {
    const db = await openDb(join(dir, 'db1'));
    try {
      await expect(readStoredRun(db)).rejects.toMatchObject({ code: 'NOT_FOUND' });
      const state = new RunState(db);
      const config = parseRunConfig({ dataset: 'med', format: 'smart' });
      await state.setConfig(config);
      await state.setSplit({ train: ['1', '2'], dev: [], eval: ['3'] });
      expect(await state.version()).toBe(RUN_STATE_VERSION);
      expect(await readStoredRun(db)).toEqual({ config, split: { train: ['1', '2'], dev: [], eval: ['3'] }, steps: [] });
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
      expect((err as Error).message).toBe(`the co-evolution run in ${db.path} has run-state version ${RUN_STATE_VERSION + 1}, expected ${RUN_STATE_VERSION}; refusing to read it`);
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
