import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/db.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';

const root = join(__dirname, '../..');
let dir = '';
let child: ChildProcess | null = null;
let base = '';
let split: { train: string[]; eval: string[] };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-rs-cmd-'));
  // The synthetic corpus written in our JSONL dataset format, so the CLI can load it by path.
  const c = synthCorpus();
  const ds = join(dir, 'synth');
  mkdirSync(ds);
  writeFileSync(join(ds, 'items.jsonl'), c.items.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(join(ds, 'queries.jsonl'), c.queries.map((q) => JSON.stringify(q)).join('\n') + '\n');
  writeFileSync(join(ds, 'qrels.jsonl'), [...c.relevant].flatMap(([q, rel]) => [...rel].map((i) => JSON.stringify({ query_id: q, item_id: i, grade: 1 }))).join('\n') + '\n');
  const { corpus } = await loadDataset(ds);
  const db = await openDb(join(dir, 'db'));
  const res = await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, dataset: ds, rounds: 1 });
  split = res.split;
  await db.close();
  child = spawn(process.execPath, [join(root, 'bin/cogr.mjs'), 'reward-server', '--db', join(dir, 'db'), '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  base = await new Promise<string>((resolveP, reject) => {
    let err = '';
    child!.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /address=(http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m) resolveP(m[1]);
    });
    child!.on('exit', (code) => reject(new Error(`reward-server exited ${code}: ${err}`)));
  });
}, 120_000);

afterAll(() => {
  child?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

async function reward(id: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/v1/reward/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, keywords: ['t0w0'] }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('cogr reward-server on a stored run', () => {
  it('takes the dataset from the run and serves rewards for training queries', async () => {
    const r = await reward(split.train[0]);
    expect(r.status).toBe(200);
    expect(r.body.id).toBe(split.train[0]);
    expect(typeof r.body.reward).toBe('number');
  });

  it('refuses held-out queries: their judgements never reach a trainer', async () => {
    const r = await reward(split.eval[0]);
    expect(r.status).toBe(404);
    expect(JSON.stringify(r.body)).toContain(split.eval[0]);
  });
});
