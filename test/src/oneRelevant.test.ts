/**
 * The collection the issue names for the set floor: one relevant item per query and long
 * natural-language queries (test/fixtures/oneRelevantCorpus.ts), where keyword plans are
 * short and some match nothing. After SFT, every held-out query with a word the items know
 * is served a non-empty set; a plan that matched nothing gets the run's empty-plan floor
 * (the top c by p, c chosen on training queries) and is flagged `empty_plan`, and the
 * held-out evaluation counts exactly those queries as fallbacks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { loadPlanner, policyStore } from '../../src/run/policies.ts';
import { servedSet } from '../../generators/planner/ranking.ts';
import { queryInput } from '../../generators/sft.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { oneRelevantCorpus } from '../../bench/oneRelevantCorpus.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('one relevant item per query, long queries', () => {
  it('no held-out query is served an empty set without saying so: an empty plan gets the floor, flagged and counted', async () => {
    const corpus = oneRelevantCorpus({ items: 120, queries: 90 });
    const dir = mkdtempSync(join(tmpdir(), 'cogr-onerel-'));
    dirs.push(dir);
    const db = await openDb(join(dir, 'db'));
    try {
      // The open vocabulary (runs before the shared one): its plans are where an empty plan needs the floor.
      const res = await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, rounds: 0, vocabulary: 'open', itemQuerySide: 'labels' });
      const sft = res.steps[0];
      // The floor was chosen on training queries; this collection needs one.
      expect(sft.floor!.fallback).toBeGreaterThanOrEqual(1);
      const planner = await loadPlanner(policyStore(db), 0, corpus.items);
      const view = await new KeywordIndexStore(db).openView('item', sft.itemGeneration);
      planner.attachOpposite(view);
      const byId = new Map(corpus.queries.map((q) => [q.id, q]));
      // Beside the held-out queries, questions made of background words alone (no item's own word points anywhere).
      const background = [...new Set(corpus.items.flatMap((it) => it.text.split(' ')).filter((w) => w.startsWith('bg')))].sort();
      const probes = Array.from({ length: 30 }, (_, j) => ({
        id: `probe${j}`,
        text: Array.from({ length: 14 }, (_, k) => background[(j * 7 + k * 13) % background.length]).join(' '),
      }));
      // And questions of words no item has: nothing to rank by, so no floor and no flag (the answer says nothing matched).
      probes.push({ id: 'probe-unknown', text: 'zzqx wwvy qqjj xxkk' });
      let unknownServed = [-1, -1];
      let empty = 0;
      let flagged = 0;
      let heldOutFlagged = 0;
      for (const q of [...res.split.eval.map((id) => byId.get(id)!), ...probes]) {
        const id = q.id;
        const input = queryInput(q);
        const found = view.search({ self: q.text, keywords: planner.plan(input).keywords }, { all: true });
        const served = servedSet(view, found.items, planner, input, sft.floor!);
        const known = planner.textScores(input).some((s) => s > 0);
        if (found.items.length === 0 && known) empty++;
        if (served.fallback === 'empty_plan') {
          flagged++;
          if (!id.startsWith('probe')) heldOutFlagged++;
        }
        // Served non-empty whenever the items know a word of the query; flagged exactly when the plan matched nothing.
        if (known) expect(served.items.length, id).toBeGreaterThan(0);
        else unknownServed = [served.items.length, served.added];
        expect(served.fallback === 'empty_plan', id).toBe(found.items.length === 0 && known);
        // Had the plan matched nothing, the floor would serve the top c by p, flagged.
        if (known) {
          const alone = servedSet(view, [], planner, input, sft.floor!);
          const p = planner.probabilities(input);
          const top = [...p.keys()].sort((a, b) => p[b] - p[a] || a - b).slice(0, sft.floor!.fallback);
          expect(alone.fallback, id).toBe('empty_plan');
          expect(alone.items.map((x) => p[x.ordinal])).toEqual(top.map((o) => p[o]));
        }
        // The floor only adds: every matched item is served.
        expect(served.items.slice(0, found.items.length).map((x) => x.id)).toEqual(found.items.map((x) => x.id));
      }
      // Every query the items know a word of was served something (no plan here came back empty, so the
      // floor stepped in only where the test emptied the plan above), and the held-out evaluation's
      // fallback count is the flagged held-out queries.
      expect(unknownServed).toEqual([0, 0]);
      expect(sft.metrics.fallbacks).toBe(heldOutFlagged);
      expect(flagged).toBe(empty);
      // Single relevant items: the plans stay short and the sets small.
      expect(sft.metrics.meanMatched).toBeLessThan(5);
    } finally {
      await db.close();
    }
  });
});
