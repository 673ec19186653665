/**
 * Model-based property tests: random set / replace / remove / commit / delete sequences
 * against a naive in-memory model that recomputes the matched sets and BM25 from scratch
 * (its own implementation of the formula documented in index/view/view.ts), both for views
 * built in memory and for views opened from LevelDB across several generations, and for
 * the published generation files (index/store/published.ts), which must read back the same.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { normalizeKeyword, normalizeSelf } from '../../index/text/normalize.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import type { IndexEntry } from '../../index/core/types.ts';
import { KeywordView, type Bm25Params, type Probe } from '../../index/view/view.ts';
import { buildViewData } from '../../index/view/viewBuild.ts';

const root = mkdtempSync(join(tmpdir(), 'cogr-model-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let runNo = 0;

// ---- the naive model --------------------------------------------------------------

type Model = Map<string, { self: string; keywords: string[] }>;

function naiveKeywords(e: { self: string; keywords: readonly string[] }): Set<string> {
  const s = new Set<string>();
  for (const k of e.keywords) {
    const n = normalizeKeyword(k);
    if (n !== null) s.add(n);
  }
  const self = normalizeSelf(e.self);
  if (self !== '') s.add(self);
  return s;
}

function naiveSearch(model: Model, probe: Probe, params: Bm25Params): { id: string; score: number }[] {
  const docs = [...model].map(([id, e]) => {
    const kws = naiveKeywords(e);
    const words: string[] = [];
    for (const k of kws) words.push(...k.split(' '));
    return { id, kws, words };
  });
  const N = docs.length;
  const total = docs.reduce((a, d) => a + d.words.length, 0);
  const avgdl = N === 0 || total === 0 ? 1 : total / N;
  const probeKws = naiveKeywords({ self: probe.self ?? '', keywords: probe.keywords });
  const probeWords = new Set<string>();
  for (const k of probeKws) for (const w of k.split(' ')) probeWords.add(w);
  // Words of over-limit probe keywords are not part of the probe; only normalised ones are.
  const out: { id: string; score: number }[] = [];
  for (const d of docs) {
    if (![...d.kws].some((k) => probeKws.has(k))) continue;
    let score = 0;
    for (const w of probeWords) {
      const tf = d.words.filter((x) => x === w).length;
      if (tf === 0) continue;
      const df = docs.filter((x) => x.words.includes(w)).length;
      const idf = Math.log(1 + (N - df + 0.5) / (df + 0.5));
      score += (idf * tf * (params.k1 + 1)) / (tf + params.k1 * (1 - params.b + (params.b * d.words.length) / avgdl));
    }
    out.push({ id: d.id, score });
  }
  return out.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}

function checkView(view: KeywordView, model: Model, probes: Probe[], params: Bm25Params, k: number): void {
  expect(view.ids()).toEqual([...model.keys()].sort());
  for (const probe of probes) {
    const want = naiveSearch(model, probe, params);
    const all = view.search(probe, { all: true, params });
    expect(all.matched).toBe(want.length);
    expect(all.items.map((x) => x.id).sort()).toEqual(want.map((x) => x.id).sort());
    const byId = new Map(want.map((x) => [x.id, x.score]));
    for (const it of all.items) expect(Math.abs(it.score - byId.get(it.id)!)).toBeLessThanOrEqual(1e-9);
    const top = view.search(probe, { k, params });
    expect(top.items.length).toBe(Math.min(k, want.length));
    for (let i = 0; i < top.items.length; i++) {
      expect(Math.abs(top.items[i].score - want[i].score)).toBeLessThanOrEqual(1e-9);
      if (top.items[i].id !== want[i].id) {
        // Only a tie (within 1e-9) may reorder.
        expect(Math.abs(byId.get(top.items[i].id)! - want[i].score)).toBeLessThanOrEqual(1e-9);
      }
    }
    // explain agrees with the score and lists the shared keywords.
    if (want.length > 0) {
      const ex = view.explain(probe, want[0].id, params)!;
      expect(ex.matched).toBe(true);
      expect(Math.abs(ex.score - want[0].score)).toBeLessThanOrEqual(1e-9);
      expect(Math.abs(ex.terms.reduce((a, t) => a + t.contribution, 0) - want[0].score)).toBeLessThanOrEqual(1e-9);
      const pk = naiveKeywords({ self: probe.self ?? '', keywords: probe.keywords });
      const own = naiveKeywords(model.get(want[0].id)!);
      expect(ex.matchedKeywords).toEqual([...pk].filter((x) => own.has(x)).sort());
    }
  }
}

// ---- generators -------------------------------------------------------------------

const WORDS = ['red', 'shoe', 'Shoe', 'wool', 'hat', 'blue', 'x', '(run)', 'co-op'];
const phrase = (min: number, max: number) =>
  fc.array(fc.constantFrom(...WORDS), { minLength: min, maxLength: max }).map((w) => w.join(' '));
const kwSet = fc.array(fc.oneof(phrase(1, 3), fc.constant('   '), fc.constant('a b c d e f g h i')), { maxLength: 5 });
const ids = fc.constantFrom('i0', 'i1', 'i2', 'i3', 'i4', 'i5', 'i!', 'i\u0000z');
const probeArb: fc.Arbitrary<Probe> = fc.record({ self: fc.option(phrase(0, 3), { nil: undefined }), keywords: kwSet });
const paramsArb: fc.Arbitrary<Bm25Params> = fc.record({
  k1: fc.double({ min: 0, max: 3, noNaN: true }),
  b: fc.double({ min: 0, max: 1, noNaN: true }),
});

type Op =
  | { t: 'set'; id: string; self: string; keywords: string[] }
  | { t: 'remove'; id: string }
  | { t: 'commit'; base: 'latest' | 'older' | 'empty'; replace: boolean }
  | { t: 'delete'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('set' as const), id: ids, self: phrase(0, 3), keywords: kwSet }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('remove' as const), id: ids }) },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('commit' as const),
      base: fc.constantFrom('latest' as const, 'latest' as const, 'latest' as const, 'older' as const, 'empty' as const),
      replace: fc.constantFrom(false, false, false, true),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('delete' as const), pick: fc.nat() }) },
);

// ---- properties -------------------------------------------------------------------

describe('KeywordView against the naive model', () => {
  it('in memory: matched sets, top-k and scores', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: ids, self: phrase(0, 3), keywords: kwSet }), { maxLength: 10 }),
        fc.array(probeArb, { minLength: 1, maxLength: 4 }),
        paramsArb,
        fc.integer({ min: 1, max: 5 }),
        fc.boolean(),
        (list, probes, params, k, shared) => {
          const model: Model = new Map();
          for (const e of list) model.set(e.id, { self: e.self, keywords: e.keywords });
          const entries: IndexEntry[] = [...model].map(([id, e]) => ({ id, ...e }));
          checkView(KeywordView.build('item', 0, entries, { shared }), model, probes, params, k);
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('KeywordIndexStore against the naive model', () => {
  // Staged commits (maxBatchOps small: many LevelDB batches per generation) and view files
  // read in small chunks must read exactly as one-batch commits and whole reads.
  const ioArb = fc.record({
    maxBatchOps: fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
    readChunk: fc.integer({ min: 1, max: 4096 }),
  });
  it('random add / replace / remove / commit / delete sequences, every kept generation unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 1, maxLength: 40 }),
        fc.array(probeArb, { minLength: 1, maxLength: 3 }),
        paramsArb,
        ioArb,
        async (ops, probes, params, io) => {
          const db = await openDb(join(root, `run${runNo++}`));
          const store = new KeywordIndexStore(db, io.maxBatchOps === undefined ? {} : { maxBatchOps: io.maxBatchOps });
          try {
            const committed = new Map<number, Model>();
            let latest: number | null = null;
            let pending: { id: string; rec: { self: string; keywords: string[] } | null }[] = [];
            for (const op of ops) {
              if (op.t === 'set') pending.push({ id: op.id, rec: { self: op.self, keywords: op.keywords } });
              else if (op.t === 'remove') pending.push({ id: op.id, rec: null });
              else if (op.t === 'delete') {
                const gens = [...committed.keys()];
                if (gens.length < 2) continue;
                const g = gens[op.pick % gens.length];
                await store.deleteGeneration('item', g);
                committed.delete(g);
              } else {
                const existing = [...committed.keys()];
                let base: number | null;
                if (op.base === 'empty' || existing.length === 0) base = null;
                else if (op.base === 'older') base = existing[0];
                else base = Math.max(...existing);
                const model: Model = op.replace || base === null ? new Map() : new Map(committed.get(base)!);
                const w = store.writer('item', { base, mode: op.replace ? 'replace' : 'patch' });
                for (const p of pending) {
                  if (p.rec) {
                    w.set(p.id, p.rec.self, p.rec.keywords);
                    model.set(p.id, p.rec);
                  } else {
                    w.remove(p.id);
                    model.delete(p.id);
                  }
                }
                pending = [];
                const g = await w.commit({ n: existing.length });
                expect(latest === null || g > latest).toBe(true);
                latest = g;
                committed.set(g, model);
              }
              // Every kept generation still reads as its model, through LevelDB.
              for (const [g, model] of committed) {
                const view = await store.openView('item', g);
                const entries: IndexEntry[] = [...model].map(([id, e]) => ({ id, ...e }));
                expect(view.data).toEqual(buildViewData('item', g, entries));
                checkView(view, model, probes, params, 3);
              }
            }
            // Stored postings and BM25 statistics agree with the views.
            for (const g of committed.keys()) {
              const view = await store.openView('item', g);
              const stats = await store.statistics('item', g, ['red', 'shoe', 'wool', 'x']);
              expect(stats.numEntities).toBe(view.size);
              expect(stats.totalLength).toBe(view.data.totalLength);
              for (const [w, df] of stats.df) {
                const o = view.wordOrdinal(w);
                expect(df).toBe(o < 0 ? 0 : view.data.wordDf[o]);
              }
              for (const kw of view.vocabulary()) {
                const want = Array.from(view.postings(view.keywordOrdinal(kw)), (e) => view.id(e));
                expect(await store.postings('item', g, kw)).toEqual(want);
              }
              const info = await store.generationInfo('item', g);
              expect(info.size).toBe(view.size);
              // The published files read back as the database does, without it.
              const files = new PublishedIndex(db.path, { readChunk: io.readChunk });
              expect(await files.entries('item', g)).toEqual(await store.entries('item', g));
              expect((await files.openView('item', g)).data).toEqual(view.data);
              expect(await files.generationInfo('item', g)).toEqual(info);
            }
            expect(await new PublishedIndex(db.path).numbers('item').catch(() => [])).toEqual([...committed.keys()].sort((a, b) => a - b));
          } finally {
            await db.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
