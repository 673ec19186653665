/**
 * The keyword preview (src/catalog/preview.ts) on a served run: for random items and
 * candidate keyword sets, the queries it says gain or lose the item, and each one's F1
 * before and after, equal a full recompute of every query's counts (rewards/itemReward.ts
 * `fullQueryCounts`, no cache, no incremental merge), its reward equals the counterfactual
 * item reward the loop computes for the same change (the item scorer the loop builds over the
 * run's core training queries, run/context.ts), and the HTTP route answers the same.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { createRng } from '../../index/core/random.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { candidateQueries, fullQueryCounts, normalizeCandidate } from '../../rewards/itemReward.ts';
import { fBetaFromCounts } from '../../rewards/setMetrics.ts';
import { createItemScorer } from '../../rewards/scorer.ts';
import { openRun } from '../../src/run/context.ts';
import { scorerOptions } from '../../src/run/config.ts';
import { previewKeywords } from '../../src/catalog/preview.ts';
import { buildSearchServer } from '../../src/server/app.ts';
import { LiveSnapshot, type Snapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';
import { listen, tempDir } from './_serverFixture.ts';
import { inProcessRun } from './_catalogFixture.ts';

const corpus = synthCorpus();
let tmp: ReturnType<typeof tempDir>;
let dbPath: string;
let snap: Snapshot;
let live: LiveSnapshot;

beforeAll(async () => {
  tmp = tempDir('cogr-preview-');
  dbPath = await inProcessRun(join(tmp.dir, 'db'), corpus, 1);
  live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round: 'best', corpus }));
  await live.reload();
  snap = live.get();
}, 120_000);
afterAll(() => tmp.cleanup());

/** Random candidates: keywords of the query and item vocabularies, some unknown, of several sizes. */
function candidates(item: KeywordView, query: KeywordView, n: number, seed: number): string[][] {
  const rng = createRng(seed);
  const qv = query.vocabulary();
  const iv = item.vocabulary();
  const out: string[][] = [[]];
  for (let c = 0; c < n; c++) {
    const size = 1 + Math.floor(rng() * 12);
    const set: string[] = [];
    for (let i = 0; i < size; i++) {
      const r = rng();
      set.push(r < 0.6 ? qv[Math.floor(rng() * qv.length)] : r < 0.9 ? iv[Math.floor(rng() * iv.length)] : `unknown ${c} ${i}`);
    }
    out.push(set);
  }
  out.push(qv.slice(0, 31)); // over the budget
  return out;
}

describe('keyword preview', () => {
  it("per-query F1 changes equal a full recompute; the reward equals the loop's counterfactual item reward", async () => {
    const item = snap.item;
    const query = snap.query!;
    expect(query).not.toBeNull();
    const db = await openDb(dbPath);
    let loopScorer;
    let run;
    try {
      run = await openRun(db, corpus);
      // The item scorer the loop builds for an item half-round against this query generation.
      loopScorer = createItemScorer(
        item,
        query,
        { relevant: run.coreRelevant, counted: new Set(run.coreQueries.map((q) => q.id)) },
        scorerOptions(run.config),
      );
    } finally {
      await db.close();
    }
    const beta = run.config.beta;
    const relevance = buildRelevance(query, item, run.coreRelevant, new Set(run.coreQueries.map((q) => q.id)));
    const ctx = { itemView: item, queryView: query, relevance, kMax: run.config.kMax, beta };
    const ref = fullQueryCounts(ctx);
    const rng = createRng(11);
    let checked = 0;
    let changedSeen = 0;
    for (let t = 0; t < 12; t++) {
      const ordinal = Math.floor(rng() * item.size);
      const id = item.id(ordinal);
      for (const cand of candidates(item, query, 6, 100 + t)) {
        const p = previewKeywords(item, query, snap.judgements, id, cand);
        const loop = loopScorer.score([{ id, keywords: cand }]).rewards[0]!;
        expect(p.reward).toBe(loop);
        // The full recompute: every query's counts with the item's keywords replaced.
        const next = fullQueryCounts(ctx, {
          item: ordinal,
          queries: candidateQueries(ctx, ordinal, normalizeCandidate(cand, query.analyzer.name)),
        });
        const expected = new Map<string, { dir: number; counted: boolean; before: number; after: number }>();
        let sum = 0;
        for (let q = 0; q < query.size; q++) {
          if (next.nRet[q] === ref.nRet[q]) continue;
          const counted = relevance.counted[q] === 1;
          const before = counted ? fBetaFromCounts(ref.nRet[q], relevance.nRel[q], ref.nTp[q], beta) : 0;
          const after = counted ? fBetaFromCounts(next.nRet[q], relevance.nRel[q], next.nTp[q], beta) : 0;
          sum += after - before;
          expected.set(query.id(q), { dir: next.nRet[q] - ref.nRet[q], counted, before, after });
        }
        const got = new Map<string, { dir: number; counted: boolean; before: number; after: number }>();
        for (const q of p.judged.gained) got.set(q.id, { dir: 1, counted: true, before: q.f1Before, after: q.f1After });
        for (const q of p.judged.lost) got.set(q.id, { dir: -1, counted: true, before: q.f1Before, after: q.f1After });
        for (const q of p.unjudged.gained) got.set(q.id, { dir: 1, counted: false, before: 0, after: 0 });
        for (const q of p.unjudged.lost) got.set(q.id, { dir: -1, counted: false, before: 0, after: 0 });
        expect(got).toEqual(expected);
        if (p.reason === null) expect(p.reward).toBeCloseTo(sum, 12);
        else expect(['over_budget', 'invalid_format']).toContain(p.reason);
        expect(p.matched.after).toBe(candidateQueries(ctx, ordinal, normalizeCandidate(cand, query.analyzer.name)).length);
        changedSeen += expected.size;
        checked++;
      }
    }
    expect(checked).toBe(12 * 8);
    expect(changedSeen).toBeGreaterThan(50);
  });

  it('POST /v1/items/{id}/keywords/preview answers the same, without committing (bearer token)', async () => {
    const app = buildSearchServer({ live, token: 'tok' });
    const base = await listen(app);
    try {
      const id = snap.item.id(3);
      const keywords = snap.query!.vocabulary().slice(0, 4);
      const url = `${base}/v1/items/${encodeURIComponent(id)}/keywords/preview`;
      const init = (token: string, body: unknown) => ({
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect((await fetch(url, init('wrong', { keywords }))).status).toBe(401);
      const r = await fetch(url, init('tok', { keywords }));
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual(JSON.parse(JSON.stringify(previewKeywords(snap.item, snap.query, snap.judgements, id, keywords))));
      expect(live.get()).toBe(snap);
      const missing = await fetch(`${base}/v1/items/nope/keywords/preview`, init('tok', { keywords }));
      expect(missing.status).toBe(404);
      const bad = await fetch(url, init('tok', { keywords: 'a' }));
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^keywords: /);
    } finally {
      await app.close();
    }
  });
});
