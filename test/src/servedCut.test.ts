/**
 * `--cut yes|auto` (generators/planner/ranking.ts matchedCut): every matched set is cut where
 * its own expected F1 peaks, so only items the keywords matched are served, the likeliest by
 * p. Checked by hand on a made-up p; then a run on a one-relevant-item corpus (where the whole
 * matched sets are far too big) records the cut on its SFT floor, and `cogr serve` answers every
 * held-out query with a subset of its keywords' matches whose F1 is the run's final F1, while the
 * same run's uncut figures (recorded beside) are lower.
 */
import { describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { ScoredEntity } from '../../index/view/view.ts';
import { matchedCut } from '../../generators/planner/ranking.ts';
import { computeSplit, runCoevolution } from '../../src/evolve/run.ts';
import { configDifferences, parseRunConfig, parseStoredConfig, type RunConfigInput } from '../../src/run/config.ts';
import { coreIds, servedFloor } from '../../src/run/state.ts';
import type { Corpus } from '../../index/core/types.ts';
import { scrambledHeldOut } from '../fixtures/synthCorpus.ts';

import { cutSummary, servedSetSummary } from '../../src/commands/evolve.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { embeddedSearchServer } from '../fixtures/embeddedServer.ts';
import { tempDbs } from '../fixtures/tempDb.ts';
import { oneRelevantCorpus } from '../../bench/oneRelevantCorpus.ts';

const entity = (ordinal: number): ScoredEntity => ({ id: `d${ordinal}`, ordinal, score: 10 - ordinal });

describe('a matched set cut where its expected F1 peaks (matchedCut)', () => {
  it('keeps the best prefix by p of the matched items, in their matched order', () => {
    // Six items; E = Σp = 2. Matched: 0, 2, 3, 5 (p 0.1, 0.9, 0.05, 0.7).
    const p = Float64Array.from([0.1, 0.2, 0.9, 0.05, 0.05, 0.7]);
    const matched = [0, 2, 3, 5].map(entity);
    // α = 1: G(k) = 2·S_k / (k + 2) over p-order 0.9, 0.7, 0.1, 0.05 → 0.6, 0.8, 0.68, 0.583: k* = 2.
    expect(matchedCut(matched, p, 1).map((x) => x.ordinal)).toEqual([2, 5]);
    // α = 0: G(k) = 2·S_k / k is the mean: the single likeliest item.
    expect(matchedCut(matched, p, 0).map((x) => x.ordinal)).toEqual([2]);
    // α = 10: 2·S_k / (k + 20) → 0.086, 0.145, 0.148, 0.146: k* = 3 (the 0.05 item goes).
    expect(matchedCut(matched, p, 10).map((x) => x.ordinal)).toEqual([0, 2, 5]);
    // α = 100: G grows with every item, so nothing is cut.
    expect(matchedCut(matched, p, 100).map((x) => x.ordinal)).toEqual([0, 2, 3, 5]);
    // Ties in p by ordinal: the smaller one first.
    expect(matchedCut([3, 4].map(entity), p, 0).map((x) => x.ordinal)).toEqual([3]);
  });
});

const CONFIG: RunConfigInput = { ...LOOP_TEST_CONFIG, rounds: 1, refit: true };
const corpus = () => oneRelevantCorpus({ items: 120, queries: 90 });
const tempDb = tempDbs('cogr-cut-');

describe('--cut', () => {
  it('a run cuts its matched sets at every step; cogr serve answers each held-out query with a subset of its matches, at the final F1', async () => {
    const path = tempDb();
    const db = await openDb(path);
    let res: Awaited<ReturnType<typeof runCoevolution>>;
    try {
      res = await runCoevolution(db, corpus(), { ...CONFIG, cut: 'yes' });
    } finally {
      await db.close();
    }
    const sft = res.steps.find((s) => s.phase === 'sft')!;
    expect(sft.floor!.cut).toBe(true);
    const refit = res.steps.at(-1)!;
    const served = refit.refit!.served!;
    expect(served.set).toBe('cut');
    expect(served.guard).toBeUndefined();
    expect(servedFloor(res.steps)).toMatchObject({ cut: true });
    expect(servedSetSummary(res.steps)).toMatch(/cut where their expected F1 peaks .* uncut, the held-out F1 would be/);
    // One relevant item a query: the cut sets are smaller and better than the whole matched sets.
    expect(refit.metrics.f1).toBeGreaterThan(served.keywords.f1);

    const data = corpus();
    let served0: { id: string; generated: string[]; set: string[] }[] = [];
    const { base, close } = await embeddedSearchServer(path, data, { rank: 'keywords' });
    try {
      const byId = new Map(data.queries.map((q) => [q.id, q]));
      const f1: number[] = [];
      const answers: { id: string; generated: string[]; set: string[] }[] = [];
      for (const id of res.split.eval) {
        const r = (await (await fetch(`${base}/v1/search?q=${encodeURIComponent(byId.get(id)!.text)}&k=1000`)).json()) as {
          matched: number;
          keywords: { generated: string[] };
          items: { id: string }[];
          ranking: { cut?: boolean; fallback: string | null };
        };
        const set = r.items.slice(0, r.matched).map((h) => h.id);
        if (r.ranking.fallback === null) {
          expect(r.ranking.cut).toBe(true);
          answers.push({ id, generated: r.keywords.generated, set });
        }
        const rel = data.relevant.get(id) ?? new Set<string>();
        const hits = set.filter((x) => rel.has(x)).length;
        f1.push(hits === 0 ? 0 : (2 * hits) / (set.length + rel.size));
      }
      expect(f1.reduce((a, b) => a + b, 0) / f1.length).toBeCloseTo(refit.metrics.f1, 12);
      served0 = answers;
    } finally {
      await close();
    }
    // Every served item is one the query's keywords (or its own text) match in the served generation, and some sets were cut.
    expect(served0.length).toBeGreaterThan(0);
    const db2 = await openDb(path);
    try {
      const view = await new KeywordIndexStore(db2).openView('item', refit.itemGeneration);
      const byId = new Map(data.queries.map((q) => [q.id, q]));
      let smaller = 0;
      for (const a of served0) {
        const whole = new Set(view.search({ self: byId.get(a.id)!.text, keywords: a.generated }, { all: true }).items.map((x) => x.id));
        for (const x of a.set) expect(whole.has(x), `${a.id}: ${x}`).toBe(true);
        if (a.set.length < whole.size) smaller++;
      }
      expect(smaller).toBeGreaterThan(0);
    } finally {
      await db2.close();
    }
  }, 120_000);

  it('auto: decided at SFT on the core training queries planned as held out, by the adoption test (a tie keeps the sets whole), reading no held-out judgement', async () => {
    const once = async (data: Corpus, adoptZ = 1) => {
      const db = await openDb(tempDb());
      try {
        return await runCoevolution(db, data, { ...CONFIG, rounds: 0, cut: 'auto', adoptZ });
      } finally {
        await db.close();
      }
    };
    const a = await once(corpus());
    const floor = a.steps.find((s) => s.phase === 'sft')!.floor!;
    const t = floor.cutTest!;
    expect(t.queries).toBe(coreIds(a.split).length);
    expect(t.z).toBe(parseRunConfig(CONFIG).adoptZ);
    expect(t.gain).toBeCloseTo(t.f1.cut - t.f1.whole, 12);
    expect(floor.cut === true).toBe(t.gain > 1e-12 && t.gain >= t.z * t.se);
    expect(cutSummary(a.steps)).toMatch(
      new RegExp(`on ${t.queries} core training queries planned as held out: ${floor.cut ? 'cut' : 'kept whole'}$`),
    );
    // One relevant item a query: the cut sets do better on the training queries; at z = 0 that is enough to cut.
    expect(t.gain).toBeGreaterThan(0);
    const z0 = await once(corpus(), 0);
    expect(z0.steps.find((s) => s.phase === 'sft')!.floor!.cut).toBe(true);
    const data = corpus();
    const b = await once(scrambledHeldOut(data, computeSplit(data, parseRunConfig({ ...CONFIG, rounds: 0, cut: 'auto' })).eval));
    expect(b.steps.find((s) => s.phase === 'sft')!.floor!.cutTest).toEqual(t);
    expect(b.steps.at(-1)!.metrics.f1).not.toBe(a.steps.at(-1)!.metrics.f1);
  }, 120_000);

  it('auto is the default; a resume asking another cut is refused; a run stored before the option reads as no cut', () => {
    expect(parseRunConfig(CONFIG).cut).toBe('auto');
    const cut = parseRunConfig({ ...CONFIG, cut: 'yes' });
    expect(configDifferences(cut, parseRunConfig({ ...CONFIG, cut: 'no' }))).toEqual(['cut: stored "yes", asked "no"']);
    const stored = { ...parseRunConfig(CONFIG) } as Record<string, unknown>;
    delete stored.cut;
    const r = parseStoredConfig(stored);
    expect(r.success && r.data.cut).toBe('no');
  });
});
