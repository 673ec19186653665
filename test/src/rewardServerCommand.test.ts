import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { coreIds } from '../../src/run/state.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';
import { startRewardServer } from '../fixtures/rewardServerChild.ts';

let dir = '';
const children: ChildProcess[] = [];
let base = '';
let withDev = '';
let split: { train: string[]; dev: string[]; eval: string[] };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-rs-cmd-'));
  // The synthetic corpus written in our JSONL dataset format, so the CLI can load it by path.
  const ds = writeSynthDataset(join(dir, 'synth'));
  const { corpus } = await loadDataset(ds);
  const db = await openDb(join(dir, 'db'));
  const res = await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, dataset: ds, rounds: 1 });
  split = res.split;
  await db.close();
  base = await startServer([]);
  withDev = await startServer(['--include-dev']);
}, 120_000);

/** A reward server on the stored run, started as a child process; its base URL once it listens. */
const startServer = (extra: string[]): Promise<string> => startRewardServer(join(dir, 'db'), extra, children);

afterAll(() => {
  for (const c of children) c.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

async function reward(id: string, at = base): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${at}/v1/reward/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, keywords: ['t0w0'] }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('cogr reward-server on a stored run', () => {
  it('takes the dataset from the run and serves rewards for core training queries', async () => {
    const core = coreIds(split);
    expect(core.length).toBeGreaterThan(0);
    for (const id of [core[0], core[core.length - 1]]) {
      const r = await reward(id);
      expect(r.status).toBe(200);
      expect(r.body.id).toBe(id);
      expect(typeof r.body.reward).toBe('number');
    }
  });

  it('refuses dev queries (they decide adoption) unless --include-dev', async () => {
    expect(split.dev.length).toBeGreaterThan(0);
    for (const id of split.dev) {
      const r = await reward(id);
      expect(r.status).toBe(404);
      expect(JSON.stringify(r.body)).toContain(id);
      expect((r.body.error as { message: string }).message).toMatch(
        /is withheld from rewards: a dev query of the run .*--include-dev serves it/,
      );
      const served = await reward(id, withDev);
      expect(served.status).toBe(200);
      expect(typeof served.body.reward).toBe('number');
    }
    // --include-dev does not open the held-out queries.
    expect((await reward(split.eval[0], withDev)).status).toBe(404);
  });

  it('refuses held-out queries: their judgements never reach a trainer', async () => {
    const r = await reward(split.eval[0]);
    expect(r.status).toBe(404);
    expect(JSON.stringify(r.body)).toContain(split.eval[0]);
    expect((r.body.error as { message: string }).message).toMatch(/is withheld from rewards: a held-out query/);
  });
});
