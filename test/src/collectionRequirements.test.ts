/**
 * A collection too small to train on is refused before anything is written (issue 50, F8):
 * a one-item corpus used to be registered, trained and committed step by step, then to fail
 * at the BM25 baseline, on every re-run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { trainingShortfalls } from '../../src/datasets/requirements.ts';

const work = mkdtempSync(join(tmpdir(), 'cogr-req-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A BEIR folder with `items` items and `queries` queries, each judging item 0. */
function beir(name: string, items: number, queries: number): string {
  const dir = join(work, name);
  mkdirSync(join(dir, 'qrels'), { recursive: true });
  const words = ['heart blood pressure', 'kidney renal failure', 'insulin glucose level', 'lung asthma attack'];
  writeFileSync(
    join(dir, 'corpus.jsonl'),
    Array.from(
      { length: items },
      (_, i) => JSON.stringify({ _id: `d${i}`, title: words[i % 4], text: `${words[i % 4]} study ${i}` }) + '\n',
    ).join(''),
  );
  writeFileSync(
    join(dir, 'queries.jsonl'),
    Array.from({ length: queries }, (_, q) => JSON.stringify({ _id: `q${q}`, text: words[q % 4] }) + '\n').join(''),
  );
  writeFileSync(
    join(dir, 'qrels', 'test.tsv'),
    'query-id\tcorpus-id\tscore\n' + Array.from({ length: queries }, (_, q) => `q${q}\td0\t1\n`).join(''),
  );
  return dir;
}

function cogr(home: string, ...args: string[]) {
  return spawnSync(process.execPath, [join(__dirname, '../../bin/cogr.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, COGR_HOME: home },
  });
}

/** Every file under a folder (recursively). */
function files(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name));
}

describe('what a run needs of a collection', () => {
  it('names the number found and the number needed', () => {
    const corpus = (items: number, judged: number) => ({
      name: 'x',
      items: Array.from({ length: items }, (_, i) => ({ id: `d${i}`, title: '', text: '' })),
      queries: Array.from({ length: 3 }, (_, q) => ({ id: `q${q}`, text: 'a' })),
      relevant: new Map(Array.from({ length: judged }, (_, q) => [`q${q}`, new Set(['d0'])] as const)),
    });
    expect(trainingShortfalls(corpus(3, 2))).toEqual([]);
    expect(trainingShortfalls(corpus(1, 3))).toEqual([expect.stringMatching(/has 1 item; a run needs at least 3 \(BM25/)]);
    expect(trainingShortfalls(corpus(2, 1))).toEqual([
      expect.stringMatching(/has 2 items; a run needs at least 3/),
      expect.stringMatching(/has 1 judged queries; a run needs at least 2/),
    ]);
  });

  it('a one-item corpus: `datasets add` registers it with a warning, `demo` refuses it before anything is written', () => {
    const home = join(work, 'home-one');
    const dir = beir('one-item', 1, 6);
    const add = cogr(home, 'datasets', 'add', 'one', dir);
    expect(add.status, add.stderr).toBe(0);
    expect(add.stderr).toMatch(/has 1 item; a run needs at least 3 .*: demo and evolve will refuse it/);
    const before = files(home);
    for (const args of [
      ['demo', '--dataset', 'one', '--rounds', '1', '--quiet'],
      ['evolve', '--dataset', dir, '--folds', '2', '--rounds', '1', '--quiet'],
    ]) {
      const r = cogr(home, ...args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/INVALID_ARGUMENT.*has 1 item; a run needs at least 3/);
      expect(files(home)).toEqual(before); // nothing written: no database, no run, no report
    }
  });

  it('a corpus of 3 items is not refused for its size', () => {
    const home = join(work, 'home-three');
    const dir = beir('three-items', 3, 6);
    const add = cogr(home, 'datasets', 'add', 'three', dir);
    expect(add.status, add.stderr).toBe(0);
    expect(add.stderr).not.toMatch(/a run needs/);
  });
});
