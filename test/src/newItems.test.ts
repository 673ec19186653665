import { describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import type { Corpus } from '../../index/core/types.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { newItemIds, newItemsFold, newItemsSummary, withoutItems } from '../../src/evolve/newItems.ts';
import { parseRunConfig, type RunConfigInput } from '../../src/run/config.ts';
import { runContext } from '../../src/run/context.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { tempDbs } from '../fixtures/tempDb.ts';
import { stepsAndGenerations } from '../fixtures/runSnapshot.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';

const tempDb = tempDbs('cogr-new-items-');
const CONFIG: RunConfigInput = { ...LOOP_TEST_CONFIG, rounds: 1, newItems: 0.2 };

/** What training produced: the steps (timings out) and every generation's entries. */
async function trained(corpus: Corpus) {
  const config = parseRunConfig(CONFIG);
  const newIds = newItemIds(corpus, config.newItems, config.seed);
  const path = tempDb();
  const db = await openDb(path);
  try {
    const res = await runCoevolution(db, withoutItems(corpus, newIds), config, { splitCorpus: corpus });
    const { steps, gens } = await stepsAndGenerations(db);
    const fold = await newItemsFold(
      runContext(db, withoutItems(corpus, newIds), res.config, res.split),
      runContext(db, corpus, res.config, res.split),
      res.steps,
      newIds,
    );
    return { newIds, split: res.split, steps, gens, fold };
  } finally {
    await db.close();
  }
}

/** The corpus with the new items' texts replaced by other words and their judgements moved among them (each query keeps as many). */
function scrambledNew(corpus: Corpus, newIds: ReadonlySet<string>, words: string): Corpus {
  const ids = [...newIds];
  const shifted = new Map(ids.map((id, i) => [id, ids[(i + 1) % ids.length]]));
  const items = corpus.items.map((it) => (newIds.has(it.id) ? { ...it, title: `${words} title`, text: `${words} ${words} text` } : it));
  const relevant = new Map([...corpus.relevant].map(([q, s]) => [q, new Set([...s].map((id) => shifted.get(id) ?? id))]));
  const qrels = new Map([...corpus.qrels].map(([q, m]) => [q, new Map([...m].map(([id, g]) => [shifted.get(id) ?? id, g]))]));
  return { ...corpus, items, relevant, qrels };
}

describe('new items (--new-items)', () => {
  it('are a seeded share of the items, the same for a seed, none at 0', () => {
    const corpus = synthCorpus();
    const a = newItemIds(corpus, 0.2, 3);
    expect(a.size).toBe(Math.round(0.2 * corpus.items.length));
    expect([...newItemIds(corpus, 0.2, 3)]).toEqual([...a]);
    expect([...newItemIds(corpus, 0.2, 4)]).not.toEqual([...a]);
    expect(newItemIds(corpus, 0, 3).size).toBe(0);
    const train = withoutItems(corpus, a);
    expect(train.items.length).toBe(corpus.items.length - a.size);
    for (const s of train.relevant.values()) for (const id of s) expect(a.has(id)).toBe(false);
    for (const m of train.qrels.values()) for (const id of m.keys()) expect(a.has(id)).toBe(false);
  });

  it('never reach training: scrambling their texts and judgements changes no step and no generation, scrambling another item does', async () => {
    const corpus = synthCorpus();
    const base = await trained(corpus);
    const scrambled = await trained(scrambledNew(corpus, base.newIds, 'zebra quartz'));
    expect(scrambled.split).toEqual(base.split);
    expect(scrambled.steps).toEqual(base.steps);
    expect(scrambled.gens).toEqual(base.gens);
    // the control: an item that is not new, scrambled the same way, changes what training made
    const old = corpus.items.find((it) => !base.newIds.has(it.id))!;
    const touched = {
      ...corpus,
      items: corpus.items.map((it) =>
        it.id === old.id ? { ...it, title: 'zebra quartz title', text: 'zebra quartz zebra quartz text' } : it,
      ),
    };
    const control = await trained(touched);
    expect(control.gens).not.toEqual(base.gens);
  });

  it('are keyworded at the end and counted: relevant new items of the held-out queries, and what the served sets and BM25 find of them', async () => {
    const corpus = synthCorpus();
    const { fold, newIds, split } = await trained(corpus);
    const rel = (ids: readonly string[], fresh: boolean) =>
      ids.reduce((a, q) => a + [...(corpus.relevant.get(q) ?? [])].filter((id) => newIds.has(id) === fresh).length, 0);
    expect(fold.queries).toBe(split.eval.length);
    expect(fold.relevantNew).toBe(rel(split.eval, true));
    expect(fold.relevantOld).toBe(rel(split.eval, false));
    expect(fold.relevantNew).toBeGreaterThan(0);
    expect(fold.foundNew).toBeLessThanOrEqual(fold.relevantNew);
    expect(fold.bm25.foundNew).toBeGreaterThan(0);
    const s = newItemsSummary(0.2, [fold, fold]);
    expect(s.relevant_new).toBe(2 * fold.relevantNew);
    expect(s.recall_new).toBeCloseTo(fold.foundNew / fold.relevantNew, 12);
    expect(s.recall_old).toBeCloseTo(fold.foundOld / fold.relevantOld, 12);
  });
});
