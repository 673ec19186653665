/**
 * Multi-step writes killed at each step boundary (issue 50, F6): `COGR_FAILPOINT=<name>`
 * makes the process SIGKILL itself at that boundary (index/core/failpoint.ts), so every
 * boundary is hit every time, not by timing. After each kill the next run of the same
 * command converges on the store an uninterrupted run leaves: the generation committed
 * once and published, the import recorded once in the database and in run.json, and
 * `cogr verify` passing. Before the fix, a kill between the commit and the files left the
 * generation unpublished for good (the re-run reused it without publishing it).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { readPublishedRun } from '../../src/run/published.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

const root = join(__dirname, '../..');
let dir = '';
let itemIds: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-failpoints-'));
  const ds = writeSynthDataset(join(dir, 'synth'));
  const { corpus } = await loadDataset(ds);
  itemIds = corpus.items.map((i) => i.id);
  const db = await openDb(join(dir, 'base', 'db'));
  await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, dataset: ds, rounds: 1 });
  await db.close();
  writeFileSync(
    join(dir, 'item-keywords.jsonl'),
    itemIds.map((id, k) => JSON.stringify({ id, keywords: [`imported ${k % 7}`, 'fresh keyword'] })).join('\n') + '\n',
  );
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function cogr(db: string, args: string[], failpoint?: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, COGR_HOME: join(db, '..') };
  delete env.COGR_FAILPOINT;
  if (failpoint) env.COGR_FAILPOINT = failpoint;
  return spawnSync(process.execPath, [join(root, 'bin/cogr.mjs'), ...args, '--db', db], { encoding: 'utf8', env });
}

/** A fresh copy of the stored run for one kill. */
function copyOfRun(name: string): string {
  const home = join(dir, name);
  cpSync(join(dir, 'base'), home, { recursive: true });
  return join(home, 'db');
}

/** What readers see: the published manifests per side, and the run's imports in run.json. */
function published(db: string): { item: number[]; query: number[] } {
  const files = readdirSync(join(db, 'published'));
  const numbers = (side: string) =>
    files
      .map((f) => new RegExp(`^${side}-(\\d+)\\.json$`).exec(f))
      .filter((m) => m !== null)
      .map((m) => Number(m![1]))
      .sort((a, b) => a - b);
  return { item: numbers('item'), query: numbers('query') };
}

function verify(db: string): { code: number | null; out: string } {
  const r = cogr(db, ['verify', '--json']);
  return { code: r.status, out: r.stdout + r.stderr };
}

interface Outcome {
  generations: { item: number[]; query: number[] };
  imports: { side: string; generation: number; digest: string }[];
  verify: number | null;
}

async function outcome(db: string): Promise<Outcome> {
  const run = await readPublishedRun(db);
  return {
    generations: published(db),
    imports: (run?.imports ?? []).map((i) => ({ side: i.side, generation: i.generation, digest: i.digest ?? '' })),
    verify: verify(db).code,
  };
}

const IMPORT = (from: string) => ['import-generation', '--side', 'item', '--from', from];

describe('import-generation killed at each step boundary', () => {
  let reference: Outcome;

  it('an uninterrupted import, run twice: one generation, one record, verify passes (the reference)', async () => {
    const db = copyOfRun('reference');
    const before = published(db);
    for (let k = 0; k < 2; k++) {
      const r = cogr(db, IMPORT(join(dir, 'item-keywords.jsonl')));
      expect(r.status, r.stderr).toBe(0);
    }
    reference = await outcome(db);
    expect(reference.verify).toBe(0);
    expect(reference.generations.item).toEqual([...before.item, Math.max(...before.item) + 1]);
    expect(reference.imports).toHaveLength(1);
  });

  for (const fp of [
    'store.commit:before-publish',
    'store.publish:before-manifest',
    'import-generation:before-record',
    'run-state:before-publish',
  ]) {
    it(`killed at ${fp}: the re-run publishes and records the generation once, and verify passes`, async () => {
      const db = copyOfRun(fp.replace(/[^a-z]+/g, '-'));
      const killed = cogr(db, IMPORT(join(dir, 'item-keywords.jsonl')), fp);
      expect(killed.signal, killed.stderr).toBe('SIGKILL');
      const again = cogr(db, IMPORT(join(dir, 'item-keywords.jsonl')));
      expect(again.status, again.stderr).toBe(0);
      expect(await outcome(db)).toEqual(reference);
      // And once more: nothing new.
      expect(cogr(db, IMPORT(join(dir, 'item-keywords.jsonl'))).status).toBe(0);
      expect(await outcome(db)).toEqual(reference);
    });
  }

  it('killed between the commit and the files: the next writer of the store publishes the generation', () => {
    const db = copyOfRun('next-writer');
    expect(cogr(db, IMPORT(join(dir, 'item-keywords.jsonl')), 'store.commit:before-publish').signal).toBe('SIGKILL');
    const unpublished = verify(db);
    expect(unpublished.code).toBe(1);
    expect(unpublished.out).toContain('unpublished');
    const q = join(dir, 'query-keywords.jsonl');
    writeFileSync(q, JSON.stringify({ id: 'x', keywords: ['a'] }) + '\n');
    const other = cogr(db, ['index', 'import', '--side', 'query', '--from', q, '--base', 'empty']);
    expect(other.status, other.stderr).toBe(0);
    expect(published(db).item).toEqual(reference.generations.item);
  });

  it('killed between the commit and the files: a resume of the finished run publishes the generation', async () => {
    const db = copyOfRun('resume');
    expect(cogr(db, IMPORT(join(dir, 'item-keywords.jsonl')), 'store.commit:before-publish').signal).toBe('SIGKILL');
    const { corpus } = await loadDataset(join(dir, 'synth'));
    const h = await openDb(db);
    try {
      const res = await runCoevolution(h, corpus, { ...LOOP_TEST_CONFIG, dataset: join(dir, 'synth'), rounds: 1 });
      expect(res.complete).toBe(true);
    } finally {
      await h.close();
    }
    expect(published(db).item).toEqual(reference.generations.item);
  });
});

describe('index import killed at each step boundary', () => {
  for (const fp of ['store.commit:before-publish', 'store.publish:before-manifest']) {
    it(`killed at ${fp}: the re-run publishes the generation and commits no other`, () => {
      const db = copyOfRun(`index-${fp.replace(/[^a-z]+/g, '-')}`);
      const before = published(db).item;
      const args = ['index', 'import', '--side', 'item', '--from', join(dir, 'item-keywords.jsonl'), '--json'];
      expect(cogr(db, args, fp).signal).toBe('SIGKILL');
      const again = cogr(db, args);
      expect(again.status, again.stderr).toBe(0);
      const next = Math.max(...before) + 1;
      expect(JSON.parse(again.stdout)).toMatchObject({ generation: next, reused: true });
      expect(published(db).item).toEqual([...before, next]);
      expect(verify(db).code).toBe(0);
    });
  }
});
