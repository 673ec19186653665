/**
 * Crash safety: a child process committing a big generation is killed with SIGKILL at
 * random points of its work (while its LevelDB batch is written, after one of the
 * batches of a staged commit, between the commit and its files); on
 * reopening, each generation is either absent or complete and equal to what that child
 * was committing, in the database and in the published files readers use.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { createRng } from '../../index/core/random.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { KWI_SUBLEVEL } from '../../index/store/layout.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import { buildViewData } from '../../index/view/viewBuild.ts';
import { bigEntries } from '../fixtures/bigEntries.ts';

const dir = mkdtempSync(join(tmpdir(), 'cogr-kill-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const N = 2_500;

/**
 * Run the child; kill it with SIGKILL as soon as it reports `killAt` ("writing", "batch <k>",
 * "committed"; never when null). The kill moment is a point of the child's work, not a
 * time: on a busy machine the child is slower and the kill lands at the same point.
 * Staged: many small batches.
 */
function runChild(path: string, seed: number, killAt: string | null, staged = false): Promise<{ killed: boolean; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/commit-big.ts', path, String(N), String(seed), ...(staged ? ['1500'] : [])],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    let killed = false;
    child.stdout.on('data', (d) => {
      out += String(d);
      if (killAt !== null && !killed && out.split('\n').includes(killAt)) killed = child.kill('SIGKILL');
    });
    child.stderr.on('data', (d) => (err += String(d)));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL' || code === 0) resolve({ killed: signal === 'SIGKILL', out });
      else reject(new Error(`child failed (${code}): ${err}`));
    });
  });
}

describe('a commit killed midway', () => {
  it('leaves every generation absent or complete', async () => {
    const path = join(dir, 'db');
    const rng = createRng(7);
    // A first complete generation, so later commits build on a base.
    const first = await runChild(path, 1000, null);
    expect(first.out).toContain('done 0');
    let killedMid = 0;
    const seeds: number[] = [];
    for (let run = 0; run < 6; run++) {
      const seed = 2000 + run;
      seeds.push(seed);
      // Odd runs stage their commit over ~20 batches (what commits of millions do), and are
      // killed after one of their ~36 batches; the others while their one batch is
      // written or between its commit and its files.
      const staged = run % 2 === 1;
      const killAt = staged ? (rng() < 0.2 ? 'writing' : `batch ${1 + Math.floor(rng() * 30)}`) : rng() < 0.6 ? 'writing' : 'committed';
      const r = await runChild(path, seed, killAt, staged);
      if (r.killed && !r.out.includes('done')) killedMid++;
    }
    // Readers (the published files) see only complete generations, each one of ours.
    const files = new PublishedIndex(path);
    const publishedBefore = await files.listGenerations('item');
    for (const g of publishedBefore) {
      expect((await files.openView('item', g.generation)).data).toEqual(
        buildViewData('item', g.generation, bigEntries(g.meta.n as number, g.meta.seed as number)),
      );
    }
    const db = await openDb(path);
    try {
      const store = new KeywordIndexStore(db);
      const gens = await store.listGenerations('item');
      // A generation is published only after its commit: never one the database lacks.
      for (const g of publishedBefore) expect(gens.map((x) => x.generation)).toContain(g.generation);
      expect(gens[0].generation).toBe(0);
      const bySeed = new Set(gens.map((g) => g.meta.seed));
      expect(bySeed.has(1000)).toBe(true);
      for (const g of gens) {
        const want = bigEntries(g.meta.n as number, g.meta.seed as number);
        const view = await store.openView('item', g.generation);
        expect(view.data).toEqual(buildViewData('item', g.generation, want));
        expect(g.size).toBe(want.length);
      }
      // Every surviving generation is one of ours; killed ones left nothing behind.
      for (const g of gens) expect([1000, ...seeds]).toContain(g.meta.seed);
      // A commit after the crashes still works and numbers keep increasing.
      const w = store.writer('item', { mode: 'replace' });
      for (const e of bigEntries(50, 1)) w.set(e.id, e.self, e.keywords);
      const g = await w.commit({ seed: 1, n: 50 });
      expect(g).toBeGreaterThan(gens[gens.length - 1].generation);
      expect((await store.openView('item', g)).size).toBe(bigEntries(50, 1).length);
      // That first write published whatever a killed child committed but did not publish.
      expect((await files.listGenerations('item')).map((x) => x.generation)).toEqual([...gens.map((x) => x.generation), g]);
      // ... and deleted the cells of a staged commit killed midway: every cell belongs
      // to a committed generation, and no staging marker is left.
      const kept = new Set([...gens.map((x) => x.generation), g]);
      for await (const key of db.sublevel<unknown>(KWI_SUBLEVEL).keys()) {
        if ('rpw'.includes(key[0])) expect(kept.has(parseInt(key.slice(-8), 16))).toBe(true);
        expect(key.startsWith('s\0')).toBe(false);
      }
    } finally {
      await db.close();
    }
    // At least some runs must really have died in the middle for the test to mean anything.
    expect(killedMid).toBeGreaterThan(0);
  }, 900_000); // bounded by its work (seven commits, six kills), not by time: the limit only stops a hang
});
