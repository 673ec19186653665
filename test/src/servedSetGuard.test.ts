/**
 * The set guard (`--served-set`, src/evolve/refit.ts setGuard): at the final refit the run
 * serves either the keyword plans' matched sets (the CoGR rule, `keywords`) or the
 * relevance model's own expected-F1 sets — always with 'model', with 'auto' when the model's
 * sets beat the keyword plans by one standard error over every training
 * query scored by inner models that never saw it. Checked on the loop's tiny corpus: what is
 * served and recorded, that the served figures are the model's sets' (recomputed here by
 * hand), that the decision follows its rule and reads no held-out judgement, and that
 * `cogr serve` serves the same sets.
 */
import { describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { Corpus } from '../../index/core/types.ts';
import { ALPHA_GRID, setF1 } from '../../generators/planner/training.ts';
import { expectedF1Cut, sortByP } from '../../generators/planner/expectedCut.ts';
import { queryInput, relevantOrdinals } from '../../generators/sft.ts';
import { computeSplit, runCoevolution } from '../../src/evolve/run.ts';
import { configDifferences, parseRunConfig, parseStoredConfig, type RunConfigInput } from '../../src/run/config.ts';
import { loadPlanner, policyStore } from '../../src/run/policies.ts';
import type { StepRecord } from '../../src/run/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { embeddedSearchServer } from '../fixtures/embeddedServer.ts';
import { tempDbs } from '../fixtures/tempDb.ts';
import { scrambledHeldOut } from '../fixtures/synthCorpus.ts';
import { oneRelevantCorpus } from '../../bench/oneRelevantCorpus.ts';
import { judgedCollection } from '../../bench/judgedCollection.ts';

const CONFIG: RunConfigInput = { ...LOOP_TEST_CONFIG, rounds: 1, refit: true };
// One relevant item per query: the keyword plans and the model's own sets differ here (on the loop's topic corpus both are perfect).
const corpus = (): Corpus => oneRelevantCorpus({ items: 120, queries: 90 });
const tempDb = tempDbs('cogr-setguard-');

/** A run, and (with `check`) the held-out F1 of the refit's model sets at α recomputed from its stored planner and item generation. */
async function run(config: RunConfigInput, data: Corpus = corpus(), check?: number) {
  const path = tempDb();
  const db = await openDb(path);
  try {
    const res = await runCoevolution(db, data, config);
    const refit = res.steps.at(-1)!;
    let byHand: number | null = null;
    if (check !== undefined) {
      const planner = await loadPlanner(policyStore(db), refit.round, data.items);
      const view = await new KeywordIndexStore(db).openView('item', refit.itemGeneration);
      planner.attachOpposite(view);
      const rel = relevantOrdinals(view, data.relevant);
      const byId = new Map(data.queries.map((q) => [q.id, q]));
      const f1 = res.split.eval.map((id) => {
        const sorted = sortByP(planner.probabilities(queryInput(byId.get(id)!)));
        return setF1(sorted.order.subarray(0, expectedF1Cut(sorted, check)), rel.get(id) ?? new Set());
      });
      byHand = f1.reduce((a, b) => a + b, 0) / f1.length;
    }
    return { path, res, refit, byHand };
  } finally {
    await db.close();
  }
}

let keywords: Awaited<ReturnType<typeof run>>;
let auto: Awaited<ReturnType<typeof run>>;

describe('the set guard (--served-set)', () => {
  it('keywords (the CoGR rule, the default since the shared vocabulary): the run records no served set and serves the keyword plans', async () => {
    expect(parseRunConfig(CONFIG).servedSet).toBe('keywords');
    keywords = await run({ ...CONFIG, servedSet: 'keywords' });
    expect(keywords.refit.phase).toBe('refit');
    expect(keywords.refit.refit!.served).toBeUndefined();
  });

  it("model: the refit serves the relevance model's expected-F1 sets (their F1 recomputed by hand from the stored planner), the keyword plans' figures beside them", async () => {
    const first = await run({ ...CONFIG, servedSet: 'model' });
    const served = first.refit.refit!.served!;
    expect(served.set).toBe('model');
    expect(ALPHA_GRID).toContain(served.alpha);
    expect(served.guard).toBeUndefined();
    // The keyword plans are the keywords run's, to the last digit.
    expect(served.keywords).toEqual({
      f1: keywords.refit.metrics.f1,
      precision: keywords.refit.metrics.precision,
      recall: keywords.refit.metrics.recall,
    });
    const model = await run({ ...CONFIG, servedSet: 'model' }, corpus(), served.alpha);
    expect(model.refit.metrics.f1).toBeCloseTo(model.byHand!, 12);
    expect(model.refit.metrics.f1).not.toBe(served.keywords.f1);
    // Nothing before the refit changes.
    const early = (s: StepRecord) => [s.step, s.metrics.f1, s.adopted, s.itemGeneration];
    expect(model.res.steps.slice(0, -1).map(early)).toEqual(keywords.res.steps.slice(0, -1).map(early));
  });

  it('auto: the cross-fitted figures over the training queries decide, by the adoption rule (gain > 0 and ≥ z SE)', async () => {
    auto = await run({ ...CONFIG, servedSet: 'auto' });
    const served = auto.refit.refit!.served!;
    const g = served.guard!;
    const split = auto.res.split;
    expect(g.queries).toBe(split.train.length);
    expect(g.queries).toBe(auto.refit.refit!.queries);
    expect(g.z).toBe(parseRunConfig(CONFIG).adoptZ);
    expect(Number.isFinite(g.gain) && g.se >= 0).toBe(true);
    expect(served.set === 'model').toBe(g.gain > 1e-12 && g.gain >= g.z * g.se - 1e-12);
    expect(served.alpha === undefined).toBe(served.set === 'keywords');
    // Whichever it chose, the held-out figures are what it serves.
    if (served.set === 'keywords') expect(auto.refit.metrics.f1).toBe(served.keywords.f1);
    else expect(auto.refit.metrics.f1).not.toBe(served.keywords.f1);
  });

  it('a tie keeps the keyword plans: where the two give the same F1 on every training query, neither z switches', async () => {
    for (const adoptZ of [0, 10]) {
      const r = await run({ ...CONFIG, servedSet: 'auto', adoptZ });
      const served = r.refit.refit!.served!;
      if (served.guard!.gain === 0 && served.guard!.se === 0) expect(served.set).toBe('keywords');
      else
        expect(served.set).toBe(
          served.guard!.gain > 1e-12 && served.guard!.gain >= adoptZ * served.guard!.se - 1e-12 ? 'model' : 'keywords',
        );
    }
  });

  it("on topics whose relevance is graded by shared query words the keyword plans lose, and auto serves the model's sets (its F1 recomputed by hand)", async () => {
    const topics = judgedCollection({ items: 240, queries: 40, relevant: 6, seed: 3 });
    // The open vocabulary (runs before the shared one), where the keyword plans lose on this collection.
    const open: RunConfigInput = { ...CONFIG, vocabulary: 'open', itemQuerySide: 'labels' };
    const first = await run({ ...open, servedSet: 'auto' }, topics);
    const served = first.refit.refit!.served!;
    expect(served.guard!.gain).toBeGreaterThan(served.guard!.se);
    expect(served.set).toBe('model');
    const again = await run({ ...open, servedSet: 'auto' }, topics, served.alpha);
    expect(again.refit.metrics.f1).toBeCloseTo(again.byHand!, 12);
    expect(again.refit.metrics.f1).toBeGreaterThan(served.keywords.f1);
  });

  it('never reads held-out judgements: scrambling them leaves the guard figures and choice as they were', async () => {
    const data = corpus();
    const split = computeSplit(data, parseRunConfig({ ...CONFIG, servedSet: 'auto' }));
    const other = await run({ ...CONFIG, servedSet: 'auto' }, scrambledHeldOut(data, split.eval));
    const a = auto.refit.refit!.served!;
    const b = other.refit.refit!.served!;
    expect(b.guard).toEqual(a.guard);
    expect([b.set, b.alpha]).toEqual([a.set, a.alpha]);
    expect(other.refit.metrics.f1).not.toBe(auto.refit.metrics.f1);
  });

  it("serving the run: the snapshot's floor carries the model's α where the refit chose its sets, and nothing otherwise", async () => {
    const model = await run({ ...CONFIG, servedSet: 'model' });
    const load = (path: string) => storeSnapshotLoader({ dbPath: path, round: 'best', corpus: corpus(), keywordSource: () => null }).load();
    expect((await load(model.path)).ranking.floor.modelAlpha).toBe(model.refit.refit!.served!.alpha);
    expect((await load(keywords.path)).ranking.floor.modelAlpha).toBeUndefined();
  });

  it("cogr serve over HTTP answers every held-out query with the model's set: their F1 is the run's final F1", async () => {
    const model = await run({ ...CONFIG, servedSet: 'model' });
    const data = corpus();
    const { base, close } = await embeddedSearchServer(model.path, data);
    try {
      const byId = new Map(data.queries.map((q) => [q.id, q]));
      const f1 = [];
      for (const id of model.res.split.eval) {
        const r = (await (await fetch(`${base}/v1/search?q=${encodeURIComponent(byId.get(id)!.text)}&k=1000`)).json()) as {
          matched: number;
          items: { id: string }[];
          ranking: { modelAlpha?: number };
        };
        expect(r.ranking.modelAlpha).toBe(model.refit.refit!.served!.alpha);
        const set = new Set(r.items.slice(0, r.matched).map((h) => h.id));
        const rel = data.relevant.get(id) ?? new Set<string>();
        const hits = [...set].filter((x) => rel.has(x)).length;
        f1.push(hits === 0 ? 0 : (2 * hits) / (set.size + rel.size));
      }
      expect(f1.reduce((a, b) => a + b, 0) / f1.length).toBeCloseTo(model.refit.metrics.f1, 12);
      // The keyword plans' figures differ, so this could not pass with their sets.
      expect(model.refit.refit!.served!.keywords.f1).not.toBeCloseTo(model.refit.metrics.f1, 6);
    } finally {
      await close();
    }
  });

  it('a run without the final refit never used the option: a resume asking another one is not refused', () => {
    const noRefit = parseRunConfig({ ...CONFIG, refit: false, servedSet: 'keywords' });
    expect(configDifferences(noRefit, parseRunConfig({ ...CONFIG, refit: false }))).toEqual([]);
    // With the refit, a run stored with keywords is another experiment than one asking auto.
    expect(
      configDifferences(parseRunConfig({ ...CONFIG, servedSet: 'keywords' }), parseRunConfig({ ...CONFIG, servedSet: 'auto' })),
    ).toEqual(['servedSet: stored "keywords", asked "auto"']);
  });

  it('a run stored before the option reads as keywords', () => {
    const stored = { ...parseRunConfig(CONFIG) } as Record<string, unknown>;
    delete stored.servedSet;
    const r = parseStoredConfig(stored);
    expect(r.success && r.data.servedSet).toBe('keywords');
  });
});
