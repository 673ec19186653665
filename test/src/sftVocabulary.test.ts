/**
 * `cogr sft --db <run> --export <dir>` writes `<dir>/vocabulary.json`, the phrases an LLM's
 * query keywords are constrained to in half-round r1-query (trainers/trl/keyword_grammar.py
 * Vocabulary): exactly the keywords of r1-query's frozen item generation that at least
 * minCarriers items carry, no item's title, with their carrier counts. Checked here against
 * the frozen item side counted afresh from its entries, and against the planner's own
 * candidates (every keyword it plans for a training query is a phrase of the file).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { queryInput } from '../../generators/sft.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import {
  exportQueryVocabulary,
  exportSftTargets,
  pseudoQueryId,
  pseudoQueryTargets,
  queryVocabulary,
  runSftTargets,
  VOCABULARY_FILE_VERSION,
} from '../../src/evolve/sftData.ts';
import { frozenHalfRound, openRun, type OpenRun } from '../../src/run/context.ts';
import { sharedKeyword, titleOnlyKeys } from '../../generators/planner/queryContext.ts';
import { Relatedness } from '../../generators/planner/related.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

const ROOT = resolve(import.meta.dirname, '../..');
let dir = '';
let db: CogrDb;
let run: OpenRun;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-vocab-'));
  const ds = writeSynthDataset(join(dir, 'synth'));
  const corpus = (await loadDataset(ds)).corpus;
  db = await openDb(join(dir, 'db'));
  await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, dataset: ds, rounds: 0 });
  run = await openRun(db, corpus);
}, 120_000);

afterAll(async () => {
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the query half-round's vocabulary", () => {
  it('is the frozen item side’s keywords carried by ≥ minCarriers items, titles excluded', async () => {
    expect(run.config.vocabulary).toBe('shared');
    const min = run.config.minCarriers;
    const out = join(dir, 'export');
    const summary = await exportQueryVocabulary(run, out);
    const file = JSON.parse(readFileSync(join(out, 'vocabulary.json'), 'utf8'));
    const half = await frozenHalfRound(run, 'query', 1);
    const view = half.itemView;
    expect(summary).toEqual({ half: 'r1-query', itemGeneration: view.generation, minCarriers: min, phrases: file.phrases.length });
    expect(file).toMatchObject({ format: VOCABULARY_FILE_VERSION, half: 'r1-query', itemGeneration: view.generation, minCarriers: min });

    // Counted afresh from the entries: the items each match key reaches (keywords and titles), and the keys some item has as a keyword.
    const carriers = new Map<string, number>();
    const asKeyword = new Set<string>();
    const surface = new Map<string, string>();
    for (const e of view.entries()) {
      const keys = new Set<string>();
      for (const k of e.keywords) {
        const key = view.keyOf(k)!;
        keys.add(key);
        asKeyword.add(key);
        surface.set(key, k);
      }
      if (e.self) keys.add(view.keyword(view.data.self[view.ordinalOf(e.id)]));
      for (const key of keys) carriers.set(key, (carriers.get(key) ?? 0) + 1);
    }
    const want = [...asKeyword]
      .filter((key) => carriers.get(key)! >= min)
      .map((key) => ({ phrase: surface.get(key)!, carriers: carriers.get(key)! }))
      .sort((a, b) => (a.phrase < b.phrase ? -1 : 1));
    expect(want.length).toBeGreaterThan(10);
    expect(file.phrases).toEqual(want);
    // Some keyword of the generation is carried by fewer, or is only a title: the rule leaves something out.
    expect(view.numKeywords).toBeGreaterThan(want.length);

    // Every keyword the planner plans for a core training query (its own candidates, the same rule) is a phrase of the file.
    const phrases = new Set(file.phrases.map((p: { phrase: string }) => view.keyOf(p.phrase)));
    let planned = 0;
    for (const q of run.coreQueries)
      for (const k of half.planner.plan(queryInput(q), { asHeldOut: true }).keywords) {
        planned++;
        expect(phrases.has(view.keyOf(k))).toBe(true);
      }
    expect(planned).toBeGreaterThan(0);
  });

  it('under the open vocabulary is every keyword of the generation, titles included', async () => {
    const view = (await frozenHalfRound(run, 'query', 1)).itemView;
    const open = queryVocabulary(view, 0);
    expect(open).toHaveLength(view.numKeywords);
    expect(queryVocabulary(view, 1).length).toBeLessThanOrEqual(open.length);
  });
});

describe('pseudo-queries (cogr sft --export --pseudo-queries)', () => {
  it("are item titles of the SFT item generation, with the planner's keywords kept to the vocabulary and never the item's own title", async () => {
    const t = await runSftTargets(run, { pseudoQueries: 12 });
    const view = await run.openView('item', t.itemGeneration);
    const vocabulary = new Set(queryVocabulary(view, run.config.minCarriers).map((p) => p.key));
    const titles = new Map(run.corpus.items.map((it) => [pseudoQueryId(it.id), it.title.trim()]));
    expect(t.pseudo.queries).toHaveLength(12);
    expect(new Set(t.pseudo.queries.map((q) => q.id)).size).toBe(12);
    expect(t.pseudo.targets.size).toBeGreaterThan(0);
    for (const q of t.pseudo.queries) {
      expect(q.text).toBe(titles.get(q.id));
      const own = view.data.self[view.ordinalOf(q.id.slice('pseudo:'.length))];
      for (const k of t.pseudo.targets.get(q.id) ?? []) {
        expect(vocabulary.has(view.keyOf(k)!)).toBe(true);
        expect(view.ordinalOfKeyword(k)).not.toBe(own);
      }
    }
    // Seeded: the same sample and targets again; none without the option.
    expect(await runSftTargets(run, { pseudoQueries: 12 })).toEqual(t);
    expect((await runSftTargets(run)).pseudo.queries).toHaveLength(0);
  });

  it('the filter: a planned title, a keyword fewer than minCarriers items carry and an unknown one are dropped', async () => {
    const t = await runSftTargets(run);
    const view = await run.openView('item', t.itemGeneration);
    const shared = queryVocabulary(view, run.config.minCarriers)[0].phrase;
    const rare = [...Array(view.numKeywords).keys()].find((k) => view.keywordDf(k) < run.config.minCarriers);
    expect(rare).toBeDefined();
    const got = pseudoQueryTargets(run, view, 3, (q) => [q.text, view.surface(rare!), 'no such keyword anywhere', shared]);
    expect(got.queries).toHaveLength(3);
    for (const q of got.queries) expect(got.targets.get(q.id)).toEqual([shared]);
  });

  it('are written to pseudo.jsonl, and an export without them leaves none behind', async () => {
    const out = join(dir, 'export-pseudo');
    const t = await runSftTargets(run, { pseudoQueries: 8 });
    const n = exportSftTargets(run, t, out, 12);
    const lines = readFileSync(join(out, 'pseudo.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(n.pseudo).toBe(t.pseudo.targets.size);
    expect(lines).toHaveLength(t.pseudo.targets.size);
    for (const l of lines) {
      expect(l.completion).toEqual([{ role: 'assistant', content: JSON.stringify({ keywords: t.pseudo.targets.get(l.id) }) }]);
      expect(l.prompt.at(-1).content).toContain(t.pseudo.queries.find((q) => q.id === l.id)!.text);
    }
    exportSftTargets(run, await runSftTargets(run), out, 12);
    expect(existsSync(join(out, 'pseudo.jsonl'))).toBe(false);
  });
});

describe('oracle query targets (cogr sft --db --query-targets oracle)', () => {
  /** F1 of the union of the keywords' postings against the relevant items (ordinals). */
  const f1Of = (view: Awaited<ReturnType<typeof run.openView>>, keywords: readonly string[], relevant: ReadonlySet<number>): number => {
    const u = new Set<number>();
    for (const k of keywords) for (const e of view.postings(view.ordinalOfKeyword(k))) u.add(e);
    let tp = 0;
    for (const e of u) if (relevant.has(e)) tp++;
    return tp === 0 ? 0 : (2 * tp) / (u.size + relevant.size);
  };

  it("are keywords of the query's relevant items that the planner may plan for it, none worse than the best single one, and the planner's where none reaches", async () => {
    const limit = 4;
    const t = await runSftTargets(run, { queryTargets: 'oracle', keywordLimit: limit });
    const p = await runSftTargets(run);
    expect(p.queryTargets).toEqual({ kind: 'planner', oracle: 0, planner: run.coreQueries.length + run.devQueries.length });
    expect(t.queryTargets.kind).toBe('oracle');
    expect(t.queryTargets.oracle + t.queryTargets.planner).toBe(run.coreQueries.length + run.devQueries.length);
    expect(t.queryTargets.oracle).toBeGreaterThan(0);
    // Items, dev items and pseudo-queries do not depend on the query targets.
    expect(t.items).toEqual(p.items);
    expect(t.devItems).toEqual(p.devItems);

    const view = await run.openView('item', t.itemGeneration);
    const half = await frozenHalfRound(run, 'query', 1);
    expect(half.itemView.generation).toBe(view.generation);
    const src = half.planner.relevance;
    const related = new Relatedness(src as typeof src & { wordItems(word: string): Int32Array }, src.size ?? 0);
    const titles = titleOnlyKeys(view);
    const min = run.config.minCarriers;
    const tau = run.config.relatedness;
    let oracleSum = 0;
    let plannerSum = 0;
    let oracleQueries = 0;
    const check = (
      queries: readonly { id: string; text: string }[],
      judged: (id: string) => ReadonlySet<string>,
      got: Map<string, string[]>,
    ) => {
      for (const q of queries) {
        const relevant = new Set([...judged(q.id)].map((id) => view.ordinalOf(id)).filter((e) => e >= 0));
        const rel = related.forQuery(q.text);
        // What the oracle may choose from, counted here: the relevant items' keywords that min+ items carry, no title, related.
        const allowed = new Set<string>();
        for (const e of relevant)
          for (const k of view.keywordsOf(e)) {
            const o = view.ordinalOfKeyword(k);
            if (sharedKeyword(view, titles, o, min) && rel(k) >= tau) allowed.add(k);
          }
        const bestSingle = Math.max(0, ...[...allowed].map((k) => f1Of(view, [k], relevant)));
        const kws = got.get(q.id) ?? [];
        if (bestSingle === 0) {
          // No allowed keyword reaches a relevant item: the planner's target.
          expect(kws).toEqual((q.id.startsWith('pseudo:') ? [] : (p.queries.get(q.id) ?? p.devQueries.get(q.id))) ?? []);
          continue;
        }
        oracleQueries++;
        expect(kws.length).toBeGreaterThan(0);
        expect(kws.length).toBeLessThanOrEqual(limit);
        for (const k of kws) expect(allowed.has(k)).toBe(true);
        const f = f1Of(view, kws, relevant);
        expect(f).toBeGreaterThanOrEqual(bestSingle - 1e-12);
        oracleSum += f;
        plannerSum += f1Of(
          view,
          (p.queries.get(q.id) ?? p.devQueries.get(q.id) ?? []).filter((k) => view.ordinalOfKeyword(k) >= 0),
          relevant,
        );
      }
    };
    check(run.coreQueries, (id) => run.coreRelevant.get(id) ?? new Set(), t.queries);
    check(run.devQueries, (id) => run.corpus.relevant.get(id) ?? new Set(), t.devQueries);
    expect(oracleQueries).toBe(t.queryTargets.oracle);
    // Knowing the judgements, the oracle's targets match the relevant items at least as well as the planner's (on this fixture both find them all).
    expect(oracleSum).toBeGreaterThanOrEqual(plannerSum);
  });
});

describe('cogr sft --db --query-targets (the command)', () => {
  const cli = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((res) => {
      execFile(process.execPath, [join(ROOT, 'bin/cogr.mjs'), ...args], { cwd: dir }, (err, stdout, stderr) =>
        res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('exports the oracle targets it computes in process, and says how many queries got them', async () => {
    const out = join(dir, 'export-oracle');
    const r = await cli(['sft', '--db', join(dir, 'db'), '--export', out, '--query-targets', 'oracle', '--json']);
    expect(r.stderr).not.toMatch(/error/);
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.stdout);
    const t = await runSftTargets(run, { queryTargets: 'oracle', keywordLimit: summary.keywordLimit });
    expect(summary.queryTargets).toEqual(t.queryTargets);
    const lines = readFileSync(join(out, 'query.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.length).toBe(t.queries.size);
    for (const l of lines)
      expect(JSON.parse(l.completion[0].content).keywords).toEqual(t.queries.get(l.id)!.slice(0, summary.keywordLimit));
  });

  it('refuses pooled targets on a run, and oracle targets without one, naming the flag', async () => {
    const pooled = await cli(['sft', '--db', join(dir, 'db'), '--query-targets', 'pooled']);
    expect(pooled.code).toBe(2);
    expect(pooled.stderr).toMatch(/--query-targets: on a run, expected planner or oracle, got "pooled"/);
    const oracle = await cli(['sft', '--dataset', join(dir, 'synth'), '--db', join(dir, 'db-new'), '--query-targets', 'oracle']);
    expect(oracle.code).toBe(2);
    expect(oracle.stderr).toMatch(/--query-targets: expected planner or pooled, got "oracle" \(oracle targets are read from a run: --db\)/);
  });
});
