import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Bm25Index, itemText, runBm25Baseline, tokenize, tuneCutoff } from '../../src/baseline/bm25.ts';
import { loadDataset } from '../../src/datasets/index.ts';

const ROOT = resolve(__dirname, '../..');
const FIX = resolve(__dirname, '../fixtures/datasets');

describe('tokenisation and item text', () => {
  it('lower-case letter/digit tokens, English stop words removed, no stemming', () => {
    expect(tokenize('The Heart-attack risk of 2 adults, in Zürich!')).toEqual(['heart', 'attack', 'risk', '2', 'adults', 'zürich']);
  });
  it('title + text, without repeating a title the text begins with', () => {
    expect(itemText({ id: '1', title: 'Red sofa', text: 'Soft.' })).toBe('Red sofa Soft.');
    expect(itemText({ id: '1', title: 'heart risk', text: 'heart risk . more' })).toBe('heart risk . more');
    expect(itemText({ id: '1', title: '', text: 'only text' })).toBe('only text');
  });
});

describe('Bm25Index', () => {
  it('ranks by BM25 and returns every matching item up to the limit', async () => {
    const { corpus } = await loadDataset(join(FIX, 'jsonl'));
    const idx = new Bm25Index(corpus.items);
    const hits = idx.search('repair engine');
    // i3 has both words, i4 only "repair"
    expect(hits.map((h) => h.id)).toEqual(['i3', 'i4']);
    expect(hits[0].score).toBeGreaterThan(hits[1].score);
    expect(idx.search('repair engine', 1).map((h) => h.id)).toEqual(['i3']);
    expect(idx.search('the of and')).toEqual([]);
    // the title is indexed: "Ocean fish" item found by a title word
    expect(idx.search('ocean').map((h) => h.id)).toEqual(['i5']);
  });
  it('needs at least 3 items', () => {
    expect(() => new Bm25Index([{ id: 'a', title: '', text: 'x' }])).toThrow(/at least 3/);
  });
});

describe('tuneCutoff', () => {
  it('picks the k with the highest mean training F1, smallest on ties', () => {
    const c1 = Float64Array.from([0, 0.5, 0.8, 0.6]);
    const c2 = Float64Array.from([0, 0.7, 0.2, 0.6]);
    // means: k1 0.6, k2 0.5, k3 0.6 -> k = 1
    expect(tuneCutoff([c1, c2], 3)).toEqual({ cutoff: 1, f1: 0.6 });
    expect(tuneCutoff([c1], 3).cutoff).toBe(2);
  });
});

describe('runBm25Baseline', () => {
  it('on the tiny fixture every judged query is answered exactly at cut-off 1', async () => {
    const { corpus } = await loadDataset(join(FIX, 'jsonl'));
    const r = runBm25Baseline(corpus, { folds: 2, seed: 1 });
    expect(r.judgedQueries).toBe(4);
    expect(r.cutoffs).toEqual([1, 1]);
    expect(r.perFold.map((f) => f.evalQueries)).toEqual([2, 2]);
    expect([r.f1, r.precision, r.recall, r.ndcg10]).toEqual([1, 1, 1, 1]);
    expect(r.ranked['mrr@10']).toBe(1);
    expect(r.ranked['p@3']).toBeCloseTo(1 / 3, 12);
  });
  it('rejects options naming the field', async () => {
    const { corpus } = await loadDataset(join(FIX, 'jsonl'));
    expect(() => runBm25Baseline(corpus, { folds: 1 })).toThrow(/^folds/);
    expect(() => runBm25Baseline(corpus, { folds: 5 })).toThrow(/folds: 5 folds need at least 5 judged queries/);
    expect(() => runBm25Baseline(corpus, { b: 2 })).toThrow(/^b:/);
  });
  it('on the shipped MED lands near the reference F1 0.46', async () => {
    const { corpus } = await loadDataset('med');
    const r = runBm25Baseline(corpus, { folds: 5, seed: 1 });
    expect(r.f1).toBeGreaterThan(0.42);
    expect(r.f1).toBeLessThan(0.5);
    expect(r.cutoffs).toHaveLength(5);
    expect(runBm25Baseline(corpus, { folds: 5, seed: 1 }).f1).toBe(r.f1);
  });
});

describe('cogr baseline bm25 (CLI)', () => {
  it('--json prints one JSON object with the required keys on stdout', () => {
    const p = spawnSync(process.execPath, [join(ROOT, 'bin/cogr.mjs'), 'baseline', 'bm25', '--dataset', 'med', '--folds', '5', '--json'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(p.status).toBe(0);
    const lines = p.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const r = JSON.parse(lines[0]) as Record<string, unknown>;
    for (const k of ['f1', 'precision', 'recall', 'ndcg10', 'folds', 'cutoffs', 'dataset', 'ranked']) expect(r).toHaveProperty(k);
    expect(r.dataset).toBe('med');
    expect(r.folds).toBe(5);
    expect(r.f1 as number).toBeGreaterThan(0.42);
    expect(r.f1 as number).toBeLessThan(0.5);
    expect((r.ranked as Record<string, number>)['hit@1000']).toBe(1);
    expect(p.stderr).toContain('fold 5/5');
  });
  it('baseline rm3 and baseline model print one JSON object each on the built CLI; RM3 expands differently from BM25', () => {
    const run = (...args: string[]) => {
      const p = spawnSync(
        process.execPath,
        [join(ROOT, 'bin/cogr.mjs'), 'baseline', ...args, '--dataset', 'med', '--folds', '5', '--json'],
        { cwd: ROOT, encoding: 'utf8' },
      );
      expect(p.status, p.stderr).toBe(0);
      return JSON.parse(p.stdout.trim()) as Record<string, any>;
    };
    const bm25 = run('bm25');
    const rm3 = run('rm3');
    expect(rm3.rm3).toEqual({
      fbDocs: 10,
      fbTerms: 10,
      originalQueryWeight: 0.5,
      k1: 1.2,
      b: 0.75,
      analysis: 'lucene',
      docVectors: 'length',
    });
    expect(rm3.perFold).toHaveLength(5);
    expect(rm3.ndcg10).not.toBe(bm25.ndcg10);
    expect(rm3.map).toBeGreaterThan(0);
    const one = run('rm3', '--fb-docs', '1', '--fb-terms', '1');
    expect(one.rm3.fbDocs).toBe(1);
    const model = run('model');
    expect(model.method).toBe('model');
    expect(model.alphas).toHaveLength(5);
    expect(model.perFold.every((f: { cutoff: number }) => f.cutoff >= 1)).toBe(true);
  });
  it('rejects a bad --folds with error[INVALID_ARGUMENT]', () => {
    const p = spawnSync(process.execPath, [join(ROOT, 'bin/cogr.mjs'), 'baseline', 'bm25', '--dataset', 'med', '--folds', '1'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(p.status).toBe(2);
    expect(p.stderr).toContain('error[INVALID_ARGUMENT]: --folds');
  });
});
