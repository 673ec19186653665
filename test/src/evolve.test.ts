import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { isCogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { Corpus } from '../../index/core/types.ts';
import { listPolicyRounds, loadPolicy, POLICY_SUBLEVEL } from '../../src/run/policies.ts';
import { runCoevolution, computeSplit } from '../../src/evolve/run.ts';
import { parseRunConfig, type RunConfigInput } from '../../src/run/config.ts';
import { RunState } from '../../src/run/state.ts';
import { loadQueryGenerator } from '../../src/server/queryGenerator.ts';
import { storeSnapshotLoader, type KeywordSourceContext } from '../../src/server/storeLoader.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { tempDbs } from '../fixtures/tempDb.ts';
import { scrambledHeldOut, synthCorpus } from '../fixtures/synthCorpus.ts';

const tempDb = tempDbs('cogr-loop-');

/** Everything a run produced: step records without timings, generations, policies. */
async function snapshot(db: CogrDb) {
  const steps = (await new RunState(db).steps()).map(({ finishedAt: _f, train, ...rest }) => ({
    ...rest,
    train: train ? { ...train, seconds: 0 } : null,
  }));
  const store = new KeywordIndexStore(db);
  const gens: Record<string, unknown> = {};
  for (const side of ['item', 'query'] as const) {
    for (const g of await store.listGenerations(side)) gens[`${side}:${g.generation}`] = await store.entries(side, g.generation);
  }
  const policies: Record<string, unknown> = {};
  const sub = db.sublevel(POLICY_SUBLEVEL);
  for (const r of await listPolicyRounds(sub, 'item')) policies[`item:${r}`] = (await loadPolicy(sub, 'item', r)).toJSON();
  for (const r of await listPolicyRounds(sub, 'planner')) policies[`planner:${r}`] = await sub.get(`planner:${String(r).padStart(6, '0')}`);
  return { steps, gens, policies };
}

async function runToEnd(
  path: string,
  corpus: Corpus = synthCorpus(),
  maxSteps?: number,
  config: RunConfigInput = LOOP_TEST_CONFIG,
  logger?: Logger,
) {
  const db = await openDb(path);
  try {
    const res = await runCoevolution(db, corpus, config, {
      ...(maxSteps === undefined ? {} : { maxSteps }),
      ...(logger ? { logger } : {}),
    });
    return { res, snap: await snapshot(db) };
  } finally {
    await db.close();
  }
}

let reference: Awaited<ReturnType<typeof runToEnd>>;
let referencePath: string;

describe('co-evolution loop', () => {
  it('runs SFT and the alternating rounds, storing generations, policies and held-out metrics', async () => {
    referencePath = tempDb();
    reference = await runToEnd(referencePath);
    const { res, snap } = reference;
    expect(res.complete).toBe(true);
    expect(res.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item', 'r2-query', 'r2-item']);
    expect(res.steps.map((s) => [s.itemGeneration, s.queryGeneration])).toEqual([
      [0, 0],
      [0, 1],
      [1, 1],
      [1, 2],
      [2, 2],
    ]);
    expect(Object.keys(snap.gens).sort()).toEqual(['item:0', 'item:1', 'item:2', 'query:0', 'query:1', 'query:2']);
    expect(Object.keys(snap.policies).sort()).toEqual(['item:0', 'item:1', 'item:2', 'planner:0', 'planner:1', 'planner:2']);
    const corpus = synthCorpus();
    // a dev split carved from the training queries; query generations hold the other training queries only
    expect(res.split.dev.length).toBe(Math.round(res.split.train.length * 0.2));
    const dev = new Set(res.split.dev);
    for (const id of dev) expect(res.split.train).toContain(id);
    const train = new Set(res.split.train.filter((id) => !dev.has(id)));
    for (const g of [0, 1, 2]) {
      const ids = (snap.gens[`query:${g}`] as { id: string }[]).map((e) => e.id);
      expect(ids.length).toBe(train.size);
      for (const id of ids) expect(train.has(id)).toBe(true);
    }
    // every step is evaluated on the dev queries; SFT is adopted, and no adopted step lowers the best dev F1 so far
    expect(res.steps[0].adopted).toBe(true);
    let bestDev = -1;
    for (const s of res.steps) {
      expect(s.dev!.queries).toBe(dev.size);
      expect(s.dev!.perQuery).toHaveLength(dev.size);
      if (s.phase !== 'sft') expect(s.devGain).toBeDefined();
      if (s.adopted) {
        expect(s.dev!.f1).toBeGreaterThanOrEqual(bestDev);
        bestDev = s.dev!.f1;
      }
    }
    expect(res.best).toEqual(res.steps.filter((s) => s.adopted).at(-1));
    expect((snap.gens['item:0'] as unknown[]).length).toBe(corpus.items.length);
    for (const s of res.steps) {
      expect(s.metrics.queries).toBe(res.split.eval.length);
      expect(s.metrics.ranked['ndcg@10']).toBe(s.metrics.ndcg10);
      expect(Object.keys(s.metrics.ranked)).toEqual(expect.arrayContaining(['mrr@10', 'hit@1', 'p@100', 'ndcgBinary@1000']));
      for (const v of [s.metrics.f1, s.metrics.precision, s.metrics.recall]) {
        expect(v).toBeGreaterThanOrEqual(0);
        expect(v).toBeLessThanOrEqual(1);
      }
    }
    // the RL steps sampled G candidates per input and scored them
    const q1 = res.steps[1].train!;
    expect(q1.samples).toBe(LOOP_TEST_CONFIG.queryEpochs! * train.size * LOOP_TEST_CONFIG.groupSize!);
    expect(q1.reasons.ok + q1.reasons.invalid_format + q1.reasons.over_budget).toBe(q1.samples);
    const i1 = res.steps[2].train!;
    expect(i1.samples).toBe(corpus.items.length * LOOP_TEST_CONFIG.groupSize!);
  });

  it("serving round 'best' serves the run's best dev step: its generations and the planner it used", async () => {
    const { res } = reference;
    const best = res.steps.filter((s) => s.adopted).at(-1)!;
    let plannerRound = -1;
    for (const s of res.steps.slice(0, res.steps.indexOf(best) + 1)) if (s.adopted && s.phase === 'query') plannerRound = s.round;
    if (plannerRound < 0) plannerRound = 0;
    const seen: KeywordSourceContext[] = [];
    const loader = storeSnapshotLoader({
      dbPath: referencePath,
      round: 'best',
      corpus: synthCorpus(),
      keywordSource: (ctx) => (seen.push(ctx), null),
    });
    const snap = await loader.load();
    expect(snap.item.generation).toBe(best.itemGeneration);
    expect(snap.query?.generation).toBe(best.queryGeneration);
    expect(snap.round).toBe(best.round);
    expect(seen.at(-1)!.plannerRound).toBe(plannerRound);
    // the served planner is the one that round saved, not the newest at or before the round
    const doc = await loadQueryGenerator(seen.at(-1)!.policies, best.round, plannerRound);
    expect(doc!.round).toBe(plannerRound);
    // 'latest' serves the newest generations whatever the dev queries said
    const latest = await storeSnapshotLoader({ dbPath: referencePath, round: 'latest' }).load();
    expect(latest.item.generation).toBe(res.steps.at(-1)!.itemGeneration);
  });

  it('resumes an interrupted run from its last committed step with identical results', async () => {
    const path = tempDb();
    const first = await runToEnd(path, synthCorpus(), 2);
    expect(first.res.steps.length).toBe(2);
    expect(first.res.complete).toBe(false);
    const second = await runToEnd(path);
    expect(second.res.complete).toBe(true);
    expect(second.snap).toEqual(reference.snap);
  });

  it('survives SIGKILL in the middle of a step: the rerun ends with the same results', async () => {
    const path = tempDb();
    // Kill the child right after it has committed its second step, i.e. during the third.
    await new Promise<void>((resolveP, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../fixtures/evolve-child.ts'), path], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('STEP r1-query')) child.kill('SIGKILL');
      });
      child.on('exit', (_code, signal) => (signal === 'SIGKILL' ? resolveP() : reject(new Error(`child was not killed: ${out}`))));
    });
    const db = await openDb(path);
    const committed = (await new RunState(db).steps()).map((s) => s.step);
    await db.close();
    expect(committed.slice(0, 2)).toEqual(['sft', 'r1-query']);
    expect(committed.length).toBeLessThan(5);
    const resumed = await runToEnd(path);
    expect(resumed.snap).toEqual(reference.snap);
  });

  it('refuses a second run on the same database while the first holds it', async () => {
    const path = tempDb();
    const db = await openDb(path);
    try {
      await expect(openDb(path)).rejects.toSatisfy((e: unknown) => isCogrError(e, 'DB_LOCKED') && (e as Error).message.includes(path));
    } finally {
      await db.close();
    }
  });

  it('refuses to resume a run with another configuration, naming the field', async () => {
    const path = tempDb();
    await runToEnd(path, synthCorpus(), 1);
    const db = await openDb(path);
    try {
      await expect(runCoevolution(db, synthCorpus(), { ...LOOP_TEST_CONFIG, groupSize: 6 }, { maxSteps: 0 })).rejects.toThrow(
        /groupSize: stored 4, asked 6/,
      );
    } finally {
      await db.close();
    }
  });

  it('lets no held-out judgement reach training: changing them changes no policy or generation', async () => {
    const corpus = synthCorpus();
    const split = computeSplit(corpus, parseRunConfig(LOOP_TEST_CONFIG));
    // Scramble the held-out queries' judgements (and texts of nothing else).
    const altered: Corpus = { ...corpus, relevant: new Map(corpus.relevant), qrels: new Map(corpus.qrels) };
    const allItems = corpus.items.map((i) => i.id);
    split.eval.forEach((qid, k) => {
      const rel = new Set(allItems.filter((_, j) => j % 7 === k % 7));
      altered.relevant.set(qid, rel);
      altered.qrels.set(qid, new Map([...rel].map((r) => [r, 1])));
    });
    expect(computeSplit(altered, parseRunConfig(LOOP_TEST_CONFIG))).toEqual(split);
    const other = await runToEnd(tempDb(), altered);
    expect(other.snap.gens).toEqual(reference.snap.gens);
    expect(other.snap.policies).toEqual(reference.snap.policies);
    // Model selection reads dev judgements only: the same dev metrics and adoption decisions,
    // and the same served ranker and set floor (chosen on dev and training queries at SFT).
    expect(other.res.steps.map((s) => [s.dev, s.adopted, s.devGain ?? null])).toEqual(
      reference.res.steps.map((s) => [s.dev, s.adopted, s.devGain ?? null]),
    );
    expect([other.res.steps[0].rank, other.res.steps[0].floor]).toEqual([reference.res.steps[0].rank, reference.res.steps[0].floor]);
    expect(reference.res.steps[0].rank?.on?.queries).toBe(split.train.length);
    expect(reference.res.steps[0].floor?.fallback).toBeGreaterThanOrEqual(1);
    // ... while the held-out evaluation does see them.
    expect(other.res.steps.map((s) => s.metrics.f1)).not.toEqual(reference.res.steps.map((s) => s.metrics.f1));
  });

  it('the pooled adoption test (dev + training queries scored as held out) reads no held-out judgement either', async () => {
    const corpus = synthCorpus();
    const config = { ...LOOP_TEST_CONFIG, adoptOn: 'pooled' as const };
    const split = computeSplit(corpus, parseRunConfig(config));
    const altered = scrambledHeldOut(corpus, split.eval);
    const a = await runToEnd(tempDb(), corpus, undefined, config);
    const b = await runToEnd(tempDb(), altered, undefined, config);
    const decision = (r: typeof a) => r.res.steps.map((s) => [s.trainEval, s.devGain ?? null, s.adopted]);
    expect(decision(b)).toEqual(decision(a));
    expect(a.res.steps.every((s) => s.trainEval?.perQuery.length === split.train.length - split.dev.length)).toBe(true);
    expect(a.res.steps.slice(1).every((s) => s.devGain?.queries === split.train.length)).toBe(true);
    expect(b.snap.gens).toEqual(a.snap.gens);
  });

  it('the cross-fitted adoption test (dev + every core query scored by a shadow that never saw it) reads no held-out judgement either', async () => {
    const corpus = synthCorpus();
    const config = { ...LOOP_TEST_CONFIG, adoptOn: 'crossfit' as const };
    const split = computeSplit(corpus, parseRunConfig(config));
    const altered = scrambledHeldOut(corpus, split.eval);
    const a = await runToEnd(tempDb(), corpus, undefined, config);
    const b = await runToEnd(tempDb(), altered, undefined, config);
    const decision = (r: typeof a) => r.res.steps.map((s) => [s.crossfit ?? null, s.devGain ?? null, s.adopted]);
    expect(decision(b)).toEqual(decision(a));
    // Every half-round paired the dev queries and every core training query (each once, in its inner fold).
    const core = split.train.length - split.dev.length;
    expect(a.res.steps.slice(1).every((s) => s.crossfit?.queries === core && s.crossfit.folds === 2)).toBe(true);
    expect(a.res.steps.slice(1).every((s) => s.devGain?.queries === split.train.length)).toBe(true);
    // The shadows store nothing: one generation per step, as a run without them, and the SFT step's are the same.
    expect(Object.keys(a.snap.gens).sort()).toEqual(Object.keys(reference.snap.gens).sort());
    expect(a.snap.gens['item:0']).toEqual(reference.snap.gens['item:0']);
    expect(b.snap.gens).toEqual(a.snap.gens);
  });

  it('the leave-out adoption test (dev + every core query against items decoded without its group’s offers) reads no held-out judgement either', async () => {
    const corpus = synthCorpus();
    const config = { ...LOOP_TEST_CONFIG, adoptOn: 'leaveout' as const };
    const split = computeSplit(corpus, parseRunConfig(config));
    const altered = scrambledHeldOut(corpus, split.eval);
    const logs: { level: string; msg: string }[] = [];
    const logger: Logger = {
      info: () => {},
      warn: (msg) => logs.push({ level: 'warn', msg }),
      debug: (msg) => logs.push({ level: 'debug', msg }),
    };
    const a = await runToEnd(tempDb(), corpus, undefined, config, logger);
    const b = await runToEnd(tempDb(), altered, undefined, config);
    // Every item half-round's items are decoded again as the step stored them (and, when the base
    // step's items came from an item half-round, that one's too, from its saved policy).
    const again = logs.filter((l) => l.msg.includes('decoded again for the leave-out test'));
    expect(again.filter((l) => l.level === 'warn')).toEqual([]);
    // r1-item is adopted here, so r2-item's test decodes r1-item's items again as its base.
    expect(a.res.steps.find((s) => s.step === 'r1-item')?.adopted).toBe(true);
    expect(again.map((l) => l.msg.split(':')[0])).toEqual(['r1-item', 'r2-item', 'r1-item']);
    const decision = (r: typeof a) => r.res.steps.map((s) => [s.leaveOut ?? null, s.devGain ?? null, s.adopted]);
    expect(decision(b)).toEqual(decision(a));
    // Item half-rounds pair the dev queries and every core training query; query half-rounds the dev queries alone.
    const core = split.train.length - split.dev.length;
    const items = a.res.steps.filter((s) => s.phase === 'item');
    expect(items.length).toBeGreaterThan(0);
    expect(
      items.every(
        (s) => s.leaveOut?.queries === core && s.leaveOut.groups === Math.min(core, 10) && s.devGain?.queries === split.train.length,
      ),
    ).toBe(true);
    const queries = a.res.steps.filter((s) => s.phase === 'query');
    expect(queries.every((s) => s.leaveOut === undefined && s.devGain?.queries === undefined)).toBe(true);
    // The left-out decodings store nothing: the run's generations are those of a run without them up to its first item half-round.
    expect(Object.keys(a.snap.gens).sort()).toEqual(Object.keys(reference.snap.gens).sort());
    expect(a.snap.gens['item:0']).toEqual(reference.snap.gens['item:0']);
    expect(a.snap.gens['item:1']).toEqual(reference.snap.gens['item:1']);
    expect(b.snap.gens).toEqual(a.snap.gens);
  });

  it('semantic grouping pools near-identical queries and items into GRPO groups: same SFT, different rounds', async () => {
    const semantic = await runToEnd(tempDb(), synthCorpus(), undefined, { ...LOOP_TEST_CONFIG, grouping: 'semantic', groupingDelta: 0.3 });
    expect(semantic.res.complete).toBe(true);
    expect(semantic.res.config.grouping).toBe('semantic');
    // SFT does not group; the GRPO half-rounds train on other advantages.
    expect(semantic.snap.policies['planner:0']).toEqual(reference.snap.policies['planner:0']);
    expect(semantic.snap.policies['planner:1']).not.toEqual(reference.snap.policies['planner:1']);
    expect(semantic.snap.policies['item:1']).not.toEqual(reference.snap.policies['item:1']);
  });
});
