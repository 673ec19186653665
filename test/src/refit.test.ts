/**
 * The final refit (src/evolve/refit.ts refitStep): after the rounds, the step the dev split
 * chose is made again with every training query (core and dev) — the relevance model
 * refitted on them, the items re-indexed by the step's item policy with all of them
 * offering, α tuned on them — and served. Checked on the loop's tiny corpus: what it
 * trains on (every training query, no held-out one), what it keeps (the chosen step's
 * planner parameters and item policy), what serving picks, and how it leaves and rejoins a
 * run that is extended or asked without it.
 */
import { describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import type { Corpus } from '../../index/core/types.ts';
import { listPolicyRounds, POLICY_SUBLEVEL } from '../../src/run/policies.ts';
import { runCoevolution, computeSplit } from '../../src/evolve/run.ts';
import { configDifferences, parseRunConfig, parseStoredConfig, type RunConfigInput } from '../../src/run/config.ts';
import { bestServing, f1Points, stepNames } from '../../src/run/state.ts';
import { storeSnapshotLoader, type KeywordSourceContext } from '../../src/server/storeLoader.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { tempDbs } from '../fixtures/tempDb.ts';
import { stepsAndGenerations } from '../fixtures/runSnapshot.ts';
import { scrambledHeldOut, synthCorpus } from '../fixtures/synthCorpus.ts';
import { oneRelevantCorpus } from '../../bench/oneRelevantCorpus.ts';

const CONFIG: RunConfigInput = { ...LOOP_TEST_CONFIG, rounds: 1, refit: true };

const tempDb = tempDbs('cogr-refit-');

interface PlannerDoc {
  params: { alpha: number; stopBias: number; terms: [string, number][] };
  relevance: { training: [string, string, string[]][]; weights: number[] };
}

async function snapshot(db: CogrDb) {
  const { steps, gens } = await stepsAndGenerations(db);
  const sub = db.sublevel(POLICY_SUBLEVEL);
  const planners: Record<number, PlannerDoc> = {};
  for (const r of await listPolicyRounds(sub, 'planner'))
    planners[r] = (await sub.get(`planner:${String(r).padStart(6, '0')}`)) as PlannerDoc;
  return { steps, gens, planners };
}

/** A snapshot by content: generation numbers are never reused, so a refit made again takes a new one. */
function content(snap: Awaited<ReturnType<typeof snapshot>>) {
  return {
    steps: snap.steps.map(({ itemGeneration: i, queryGeneration: q, ...rest }) => ({
      ...rest,
      items: snap.gens[`item:${i}`],
      queries: snap.gens[`query:${q}`],
    })),
    planners: snap.planners,
  };
}

async function run(path: string, config: RunConfigInput = CONFIG, corpus: Corpus = synthCorpus()) {
  const db = await openDb(path);
  try {
    const res = await runCoevolution(db, corpus, config);
    return { res, snap: await snapshot(db) };
  } finally {
    await db.close();
  }
}

let refPath: string;
let ref: Awaited<ReturnType<typeof run>>;

describe('the final refit', () => {
  it('ends the run: the chosen step made again on every training query, dev ones included, and nothing held out', async () => {
    refPath = tempDb();
    ref = await run(refPath);
    const { res, snap } = ref;
    expect(stepNames(1, true)).toEqual(['sft', 'r1-query', 'r1-item', 'refit']);
    expect(res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item', 'refit']);
    expect(res.complete).toBe(true);
    const refit = res.steps[3];
    const chosen = res.steps
      .slice(0, 3)
      .filter((s) => s.adopted)
      .at(-1)!;
    expect(refit).toMatchObject({ phase: 'refit', round: 2, adopted: true, dev: null, base: chosen.step, train: null });
    // It is what the run serves, with its own item generation and the chosen step's query generation.
    expect(res.best).toBe(refit);
    expect(refit.itemGeneration).toBe(Math.max(...res.steps.slice(0, 3).map((s) => s.itemGeneration)) + 1);
    expect(refit.queryGeneration).toBe(chosen.queryGeneration);
    // Its planner (saved one round past the last) is fitted on the split's training queries — every one, and no other.
    const split = res.split;
    const trained = (doc: PlannerDoc) => doc.relevance.training.map(([id]) => id).sort();
    expect(trained(snap.planners[2])).toEqual([...split.train].sort());
    expect(trained(snap.planners[0]).length).toBe(split.train.length - split.dev.length);
    for (const id of split.dev) expect(trained(snap.planners[0])).not.toContain(id);
    expect(refit.refit!.queries).toBe(split.train.length);
    // The chosen step's planner parameters are kept; α is tuned again.
    const from = snap.planners[refit.refit!.plannerRound];
    expect(snap.planners[2].params.stopBias).toBe(from.params.stopBias);
    expect(snap.planners[2].params.terms).toEqual(from.params.terms);
    expect(snap.planners[2].params.alpha).toBe(refit.alpha);
    // Every item is indexed again; the held-out evaluation covers every held-out query, beside the same refit from SFT.
    expect((snap.gens[`item:${refit.itemGeneration}`] as unknown[]).length).toBe(synthCorpus().items.length);
    expect(refit.metrics.queries).toBe(split.eval.length);
    // The drift report's F1 figures end with it, a point of its own after the rounds.
    expect(f1Points(res.steps).at(-1)).toEqual({ round: 2, side: 'refit', f1: refit.metrics.f1 });
    for (const v of [refit.refit!.fromSft.f1, refit.metrics.f1]) {
      expect(v).toBeGreaterThanOrEqual(0);
      expect(v).toBeLessThanOrEqual(1);
    }
  });

  it('reads no held-out judgement: scrambled, they change no generation, planner or α, only the held-out figures', async () => {
    const corpus = synthCorpus();
    const split = computeSplit(corpus, parseRunConfig(CONFIG));
    const altered = scrambledHeldOut(corpus, split.eval);
    const other = await run(tempDb(), CONFIG, altered);
    expect(other.snap.gens).toEqual(ref.snap.gens);
    expect(other.snap.planners).toEqual(ref.snap.planners);
    expect(other.res.steps.map((s) => [s.adopted, s.alpha ?? null, s.base])).toEqual(
      ref.res.steps.map((s) => [s.adopted, s.alpha ?? null, s.base]),
    );
    expect(other.res.steps[3].metrics.f1).not.toBe(ref.res.steps[3].metrics.f1);
  });

  it("is what serving round 'best' serves: the refit's item generation and planner", async () => {
    const seen: KeywordSourceContext[] = [];
    const snap = await storeSnapshotLoader({
      dbPath: refPath,
      round: 'best',
      corpus: synthCorpus(),
      keywordSource: (ctx) => (seen.push(ctx), null),
    }).load();
    const refit = ref.res.steps[3];
    expect(bestServing(ref.res.steps)).toMatchObject({ step: 'refit', plannerRound: 2, itemGeneration: refit.itemGeneration });
    expect(snap.item.generation).toBe(refit.itemGeneration);
    expect(seen.at(-1)!.plannerRound).toBe(2);
  });

  it('leaves a run that goes on, and comes back at its end: the same as a run made with more rounds at once', async () => {
    const path = tempDb();
    await run(path);
    const longer = { ...CONFIG, rounds: 2 };
    const extended = await run(path, longer);
    expect(extended.res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item', 'r2-query', 'r2-item', 'refit']);
    const straight = await run(tempDb(), longer);
    expect(content(extended.snap)).toEqual(content(straight.snap));
    // The first refit's generation is gone; the new one is the newest.
    expect(Object.keys(extended.snap.gens).filter((k) => k.startsWith('item:'))).toHaveLength(
      Object.keys(straight.snap.gens).filter((k) => k.startsWith('item:')).length,
    );
  });

  it('stays when a finished run is asked for fewer rounds than it has: nothing is run or dropped', async () => {
    const path = tempDb();
    const longer = { ...CONFIG, rounds: 2 };
    const made = await run(path, longer);
    const fewer = await run(path);
    expect(fewer.res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item', 'r2-query', 'r2-item', 'refit']);
    expect(fewer.res.complete).toBe(true);
    expect(fewer.snap).toEqual(made.snap);
    expect(bestServing(fewer.res.steps)).toMatchObject({ step: 'refit' });
  });

  it('is dropped when asked without it (--refit no), its generation with it, and made again when asked back', async () => {
    const path = tempDb();
    await run(path);
    const without = await run(path, { ...CONFIG, refit: false });
    expect(without.res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item']);
    expect(without.res.best).toBe(without.res.steps.filter((s) => s.adopted).at(-1));
    expect(Object.keys(without.snap.gens)).not.toContain(`item:${ref.res.steps[3].itemGeneration}`);
    const again = await run(path);
    expect(content(again.snap)).toEqual(content(ref.snap));
  });

  it("with --refit-alpha keep, serves the chosen step's α; the rest of the refit is the same", async () => {
    const kept = await run(tempDb(), { ...CONFIG, refitAlpha: 'keep' });
    const refit = kept.res.steps[3];
    const from = kept.snap.planners[refit.refit!.plannerRound];
    expect(kept.snap.planners[2].params.alpha).toBe(from.params.alpha);
    expect(refit.alpha).toBe(from.params.alpha);
    // The tuned refit moved α on this fixture, so the check above can tell the two apart.
    expect(ref.snap.planners[2].params.alpha).not.toBe(from.params.alpha);
    // Same rounds, same relevance fit and the same item generation: only α differs.
    expect(kept.snap.steps.slice(0, 3)).toEqual(ref.snap.steps.slice(0, 3));
    expect(kept.snap.planners[2].relevance).toEqual(ref.snap.planners[2].relevance);
    expect({ ...kept.snap.planners[2].params, alpha: 0 }).toEqual({ ...ref.snap.planners[2].params, alpha: 0 });
    expect(kept.snap.gens[`item:${refit.itemGeneration}`]).toEqual(ref.snap.gens[`item:${ref.res.steps[3].itemGeneration}`]);
  });

  it('is not made without dev queries (it would refit on the same judgements)', async () => {
    const res = (await run(tempDb(), { ...CONFIG, devFraction: 0 })).res;
    expect(res.split.dev).toEqual([]);
    expect(res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item']);
  });
});

describe('the refit test (--refit-test yes)', () => {
  const TESTED: RunConfigInput = { ...CONFIG, refitTest: true };

  it('pairs every training query once and applies the adoption rule to the learning curve', async () => {
    const { res } = await run(tempDb(), TESTED);
    const refit = res.steps[3];
    const test = refit.refit!.test!;
    expect(test.queries).toBe(res.split.train.length);
    expect(Number.isFinite(test.gain) && test.se >= 0).toBe(true);
    expect(test.z).toBe(res.config.refitZ);
    expect(test.passed).toBe(test.gain >= 0 && test.gain >= res.config.refitZ * test.se);
    // Without the test the refit carries no test record; the rounds before it are the same.
    expect(ref.res.steps[3].refit!.test).toBeUndefined();
    expect(res.steps.slice(0, 3).map((s) => [s.step, s.adopted, s.alpha ?? null])).toEqual(
      ref.res.steps.slice(0, 3).map((s) => [s.step, s.adopted, s.alpha ?? null]),
    );
  });

  it('declined, serves the chosen step as it is: its item generation, its planner, its held-out figures', async () => {
    // One relevant item per query (bench/oneRelevantCorpus.ts): here six more queries in the fit lose on the inner folds.
    // The open vocabulary (runs before the shared one), where this fixture's curve falls.
    const config: RunConfigInput = { ...TESTED, seed: 3, vocabulary: 'open', itemQuerySide: 'labels' };
    const { res, snap } = await run(tempDb(), config, oneRelevantCorpus({ seed: 9 }));
    const refit = res.steps[3];
    const test = refit.refit!.test!;
    expect(test.gain).toBeLessThan(0);
    expect(test.passed).toBe(false);
    const chosen = res.steps
      .slice(0, 3)
      .filter((s) => s.adopted)
      .at(-1)!;
    expect(refit).toMatchObject({
      phase: 'refit',
      base: chosen.step,
      itemGeneration: chosen.itemGeneration,
      queryGeneration: chosen.queryGeneration,
    });
    expect(res.best).toBe(refit);
    // No generation of its own, and the planner it saves is the chosen step's.
    expect(Object.keys(snap.gens).filter((k) => k.startsWith('item:'))).toHaveLength(
      new Set(res.steps.slice(0, 3).map((s) => s.itemGeneration)).size,
    );
    expect(snap.planners[2]).toEqual(snap.planners[refit.refit!.plannerRound]);
    expect(refit.metrics.f1).toBe(chosen.metrics.f1);
    expect(refit.refit!.fromSft.f1).toBe(res.steps[0].metrics.f1);

    // The same curve held to a z below its own gain/SE (--refit-z): the refit is made.
    const z = Math.floor(test.gain / test.se) - 0.5;
    const lenient = await run(tempDb(), { ...config, refitZ: z }, oneRelevantCorpus({ seed: 9 }));
    const made = lenient.res.steps[3];
    expect(made.refit!.test).toEqual({ ...test, z, passed: true });
    expect(made.itemGeneration).not.toBe(chosen.itemGeneration);
    expect(lenient.snap.steps.slice(0, 3)).toEqual(snap.steps.slice(0, 3));
  });

  it('a stored run made before --refit-z reads its adoption z as the refit z; without the test, z is no difference', () => {
    const stored = { ...parseRunConfig(TESTED) } as Record<string, unknown>;
    delete stored.refitZ;
    expect(parseStoredConfig({ ...stored, adoptZ: 2 }).data!.refitZ).toBe(2);
    expect(parseStoredConfig({ ...stored, adoptZ: 2, refitTest: false }).data!.refitZ).toBe(1);
    delete stored.adoptZ;
    expect(parseStoredConfig(stored).data!.refitZ).toBe(1);
    expect(parseStoredConfig({ ...stored, refitZ: -1 }).data!.refitZ).toBe(-1);
    // A resume compares the refit z only where the test runs.
    const off = parseRunConfig({ ...CONFIG, refitTest: false });
    expect(configDifferences(off, { ...off, refitZ: 0 })).toEqual([]);
    expect(configDifferences(parseRunConfig(TESTED), parseRunConfig({ ...TESTED, refitZ: 0 }))).toEqual(['refitZ: stored 1, asked 0']);
    expect(configDifferences(off, parseRunConfig({ ...TESTED, refitZ: 0 }))).toEqual([
      'refitTest: stored false, asked true',
      'refitZ: stored 1, asked 0',
    ]);
  });

  it('reads no held-out judgement', async () => {
    const corpus = synthCorpus();
    const split = computeSplit(corpus, parseRunConfig(TESTED));
    const altered = scrambledHeldOut(corpus, split.eval);
    const a = await run(tempDb(), TESTED);
    const b = await run(tempDb(), TESTED, altered);
    expect(b.res.steps[3].refit!.test).toEqual(a.res.steps[3].refit!.test);
    expect(b.snap.planners).toEqual(a.snap.planners);
  });
});
