/**
 * The cross-fitted α (`--alpha-tuning crossfit`, src/evolve/crossfit.ts tuneAlpha): the α of
 * SFT, of the query half-rounds and of the refit is chosen on training queries each
 * planned by a relevance model fitted without its inner fold. Checked on the loop's tiny
 * corpus: the SFT step's α is the one an oracle built here from the stored planner and
 * item generation gives, and no held-out judgement plays a part.
 */
import { describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { Corpus } from '../../index/core/types.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';
import { ALPHA_GRID } from '../../generators/planner/training.ts';
import { queryInput, relevantOrdinals } from '../../generators/sft.ts';
import { POLICY_SUBLEVEL } from '../../src/run/policies.ts';
import { computeSplit, runCoevolution } from '../../src/evolve/run.ts';
import { alphaFolds } from '../../src/evolve/crossfit.ts';
import { parseRunConfig, parseStoredConfig, type RunConfigInput } from '../../src/run/config.ts';
import { coreIds } from '../../src/run/state.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { tempDbs } from '../fixtures/tempDb.ts';
import { scrambledHeldOut, synthCorpus } from '../fixtures/synthCorpus.ts';

// The open vocabulary of runs before the shared one: the fixture facts below (the two α differ) hold there.
const CONFIG: RunConfigInput = {
  ...LOOP_TEST_CONFIG,
  rounds: 1,
  refit: true,
  alphaTuning: 'crossfit',
  vocabulary: 'open',
  itemQuerySide: 'labels',
};

const tempDb = tempDbs('cogr-alpha-');

async function run(corpus: Corpus, config: RunConfigInput = CONFIG) {
  const path = tempDb();
  const db = await openDb(path);
  try {
    const res = await runCoevolution(db, corpus, config);
    const sub = db.sublevel(POLICY_SUBLEVEL);
    const planners: unknown[] = [];
    for (let r = 0; r <= 2; r++) planners.push(await sub.get(`planner:${String(r).padStart(6, '0')}`));
    const store = new KeywordIndexStore(db);
    const gens: Record<string, unknown> = {};
    for (const side of ['item', 'query'] as const)
      for (const g of await store.listGenerations(side)) gens[`${side}:${g.generation}`] = await store.entries(side, g.generation);
    // The SFT step's α, made again outside the run from what it stored.
    const sft = res.steps[0];
    const planner = KeywordPlanner.fromJSON(planners[0], corpus.items);
    const view = await store.openView('item', sft.itemGeneration);
    const split = computeSplit(corpus, parseRunConfig(config));
    const byId = new Map(corpus.queries.map((q) => [q.id, q]));
    const core = coreIds(split).map((id) => byId.get(id)!);
    const rel = relevantOrdinals(view, new Map(core.map((q) => [q.id, corpus.relevant.get(q.id) ?? new Set<string>()])));
    const none = new Set<number>();
    const sums = ALPHA_GRID.map(() => 0);
    const folds = alphaFolds(core, parseRunConfig(config).seed);
    for (const fold of folds) {
      const train = core.filter((q) => !fold.includes(q));
      const model = RelevanceModel.fit(
        corpus.items,
        train.map((q) => [queryInput(q), [...(corpus.relevant.get(q.id) ?? [])]] as const),
        (planner.relevance as RelevanceModel).options,
      );
      const inner = planner.withRelevance(model);
      inner.attachOpposite(view);
      inner.tuneAlpha(fold.map(queryInput), (id) => rel.get(id) ?? none).curve.forEach(([, f1], g) => (sums[g] += f1 * fold.length));
    }
    const oracle = ALPHA_GRID[sums.indexOf(Math.max(...sums))];
    // The in-sample α of the same planner: what `--alpha-tuning insample` would have chosen.
    planner.attachOpposite(view);
    const insample = planner.tuneAlpha(core.map(queryInput), (id) => rel.get(id) ?? none).alpha;
    return { res, planners, gens, oracle, insample, folds, core };
  } finally {
    await db.close();
  }
}

describe('cross-fitted α (--alpha-tuning crossfit)', () => {
  let ref: Awaited<ReturnType<typeof run>>;

  it("SFT's α is the grid's best mean F1 over the core queries, each planned by a model fitted without its inner fold", async () => {
    ref = await run(synthCorpus());
    expect(ref.res.complete).toBe(true);
    expect(ref.res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item', 'refit']);
    // Five folds dealing out every core query once.
    expect(ref.folds).toHaveLength(5);
    expect(
      ref.folds
        .flat()
        .map((q) => q.id)
        .sort(),
    ).toEqual(ref.core.map((q) => q.id).sort());
    expect(ref.res.steps[0].alpha).toBe(ref.oracle);
    expect(ALPHA_GRID).toContain(ref.insample);
  });

  it('is not the in-sample choice: on this corpus the two differ, and each run serves its own', async () => {
    // A fixture fact: on this corpus the in-sample tuning picks another α, so the check below can tell them apart.
    expect(ref.oracle).not.toBe(ref.insample);
    const insample = await run(synthCorpus(), { ...CONFIG, alphaTuning: 'insample' });
    expect(insample.res.steps[0].alpha).toBe(ref.insample);
    // The item generation SFT indexes comes before any α: identical under both.
    expect(insample.gens['item:0']).toEqual(ref.gens['item:0']);
    expect(insample.res.config.alphaTuning).toBe('insample');
    expect(ref.res.config.alphaTuning).toBe('crossfit');
  });

  it('reads no held-out judgement: scrambled, they change no generation, planner or α', async () => {
    const corpus = synthCorpus();
    const split = computeSplit(corpus, parseRunConfig(CONFIG));
    const altered = scrambledHeldOut(corpus, split.eval);
    const other = await run(altered);
    expect(other.gens).toEqual(ref.gens);
    expect(other.planners).toEqual(ref.planners);
    expect(other.res.steps.map((s) => s.alpha)).toEqual(ref.res.steps.map((s) => s.alpha));
  });

  it('a run stored before the option reads as in-sample tuning', () => {
    const stored = { ...parseRunConfig(LOOP_TEST_CONFIG) } as Record<string, unknown>;
    delete stored.alphaTuning;
    const parsed = parseStoredConfig(stored);
    expect(parsed.success && parsed.data.alphaTuning).toBe('insample');
  });
});
