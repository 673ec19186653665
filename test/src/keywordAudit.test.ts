import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KeywordView } from '../../index/view/view.ts';
import {
  auditItems,
  auditLine,
  auditQueries,
  keywordMatches,
  ownTextMatches,
  poolAudits,
  relatedLine,
} from '../../src/drift/keywordAudit.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';
import { startFakeEmbeddings } from '../fixtures/fakeEmbeddings.ts';
import { runCogr, smallDemo } from '../fixtures/cogrChild.ts';

// A hand-made item index: "heart disease" on 3 items, "statins" on 2, "1752" on 1, "finland" on 1;
// item d's title "finland trial" is a keyword of its own under the rule (it matches d), not "finland".
const view = KeywordView.build(
  'item',
  0,
  [
    { id: 'a', self: 'statin trial', keywords: ['heart disease', 'statins', '1752'] },
    { id: 'b', self: '', keywords: ['heart disease', 'statins'] },
    { id: 'c', self: '', keywords: ['heart disease', 'finland'] },
    { id: 'd', self: 'finland trial', keywords: [] },
  ],
  { analyzer: 'english' },
);

describe('the keyword audit', () => {
  it('counts what each keyword alone matches, titles included', () => {
    expect(keywordMatches(view, 'heart disease')).toBe(3);
    expect(keywordMatches(view, 'statin')).toBe(2); // the match key: statin = statins
    expect(keywordMatches(view, '1752')).toBe(1);
    expect(keywordMatches(view, 'finland')).toBe(1);
    expect(keywordMatches(view, 'finland trial')).toBe(1);
    expect(keywordMatches(view, 'nothing here')).toBe(0);
  });

  it('gives the query side by hand: per query, at most one item, median, bare numbers, taken from the query, related', () => {
    const q = auditQueries([
      { text: 'Statins and heart disease?', keywords: ['heart disease', 'statins', '1752'], matches: [3, 2, 1], cosines: [0.7, 0.6, 0.05] },
      { text: 'finland', keywords: ['finland', 'cholesterol'], matches: [1, 0], cosines: [0.9, 0.2] },
      { text: 'empty', keywords: [], matches: [], cosines: [] },
    ]);
    expect(q).toEqual({
      queries: 3,
      keywords: 5,
      keywordsPerQuery: 5 / 3,
      shareOneItem: 3 / 5, // 1752 (1), finland (1), cholesterol (0)
      medianItemsPerKeyword: 1, // 0 1 1 2 3
      shareBareNumbers: 1 / 5,
      shareFromQuery: 3 / 5, // heart disease, statins, finland
      withoutKeywords: { queries: 1 }, // "empty"; what its own text matches was not given
      related: {
        share: 3 / 5,
        medianCosine: 0.6,
        threshold: 0.3,
        fromQuery: { keywords: 3, share: 1 }, // heart disease 0.7, statins 0.6, finland 0.9
        added: { keywords: 2, share: 0 }, // 1752 0.05, cholesterol 0.2
        byQueryLength: [
          { maxWords: 10, queries: 3, keywords: 5, share: 3 / 5 },
          { maxWords: 30, queries: 0, keywords: 0, share: 0 },
          { maxWords: null, queries: 0, keywords: 0, share: 0 },
        ],
      },
    });
    // without cosines there is no relatedness
    expect(auditQueries([{ text: 'x', keywords: ['x'], matches: [2] }]).related).toBeUndefined();
  });

  it('counts the queries given no keyword apart: those their own text matches ({q}, a title too) and those it matches nothing', () => {
    expect(ownTextMatches(view, 'Heart disease')).toBe(3);
    expect(ownTextMatches(view, 'finland trial')).toBe(1); // item d's title
    expect(ownTextMatches(view, 'deafness')).toBe(0);
    const texts = ['Heart disease', 'finland trial', 'deafness', 'statins and 1752'];
    const q = auditQueries(
      texts.map((text, i) =>
        i < 3
          ? { text, keywords: [], matches: [], ownMatches: ownTextMatches(view, text) }
          : { text, keywords: ['statins'], matches: [2], ownMatches: ownTextMatches(view, text) },
      ),
    );
    expect(q.withoutKeywords).toEqual({ queries: 3, ownText: 2, nothing: 1 });
    expect(q.keywordsPerQuery).toBe(1 / 4);
    expect(auditLine({ query: q, item: auditItems(view) })).toContain(
      '3 of 4 queries without a keyword (2 matched by their own text, 1 by nothing); ',
    );
    // pooled by sums; a fold without the counts (stored before them) leaves them out
    const other = auditQueries([{ text: 'deafness', keywords: [], matches: [], ownMatches: 0 }]);
    const item = auditItems(view);
    expect(
      poolAudits([
        { query: q, item },
        { query: other, item },
      ])!.query.withoutKeywords,
    ).toEqual({ queries: 4, ownText: 2, nothing: 2 });
    const { withoutKeywords: _w, ...old } = other;
    expect(
      poolAudits([
        { query: q, item },
        { query: old, item },
      ])!.query.withoutKeywords,
    ).toBeUndefined();
  });

  it('gives the item side by hand: per item, carried by one item, median items per distinct keyword', () => {
    expect(auditItems(view)).toEqual({
      items: 4,
      keywords: 7, // a: 3, b: 2, c: 2, d: 0
      keywordsPerItem: 7 / 4,
      shareOneItem: 2 / 7, // 1752 on a, finland on c (d carries it only as its title's word, not as a keyword)
      medianItemsPerKeyword: 1.5, // distinct keywords: 1752 1, finland 1, statins 2, heart disease 3
    });
  });

  it('pools folds: shares weighted by keyword counts, medians averaged', () => {
    const a = { query: auditQueries([{ text: 'a b', keywords: ['a', 'c'], matches: [1, 5] }]), item: auditItems(view) };
    const b = { query: auditQueries([{ text: 'a', keywords: ['a', 'b', 'd', 'e'], matches: [4, 4, 4, 4] }]), item: auditItems(view) };
    const p = poolAudits([a, b, null])!;
    expect(p.query.keywords).toBe(6);
    expect(p.query.shareOneItem).toBeCloseTo(1 / 6, 12);
    expect(p.query.shareFromQuery).toBeCloseTo(2 / 6, 12);
    expect(p.query.medianItemsPerKeyword).toBeCloseTo((3 + 4) / 2, 12);
    expect(poolAudits([null, undefined])).toBeNull();
  });

  it('breaks the related share down by query length (words of the text) and pools it by keyword counts', () => {
    const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ');
    const a = auditQueries([
      { text: words(10), keywords: ['w1', 'x'], matches: [3, 3], cosines: [0.5, 0.1] }, // 10 words: the first group
      { text: words(11), keywords: ['w2'], matches: [3], cosines: [0.2] }, // 11: the second
      { text: words(31), keywords: ['w3', 'w4', 'y'], matches: [3, 3, 3], cosines: [0.1, 0.4, 0.35] }, // 31: the longer ones
    ]);
    expect(a.related!.byQueryLength).toEqual([
      { maxWords: 10, queries: 1, keywords: 2, share: 1 / 2 },
      { maxWords: 30, queries: 1, keywords: 1, share: 0 },
      { maxWords: null, queries: 1, keywords: 3, share: 2 / 3 },
    ]);
    expect(a.related!.fromQuery).toEqual({ keywords: 4, share: 2 / 4 }); // w1 0.5, w2 0.2, w3 0.1, w4 0.4
    expect(a.related!.added).toEqual({ keywords: 2, share: 1 / 2 }); // x 0.1, y 0.35
    const b = auditQueries([{ text: 'one two', keywords: ['one', 'z', 'zz'], matches: [3, 3, 3], cosines: [0.9, 0.9, 0.1] }]);
    const p = poolAudits([
      { query: a, item: auditItems(view) },
      { query: b, item: auditItems(view) },
    ])!;
    expect(p.query.related!.share).toBeCloseTo(5 / 9, 12);
    expect(p.query.related!.fromQuery!.keywords).toBe(5);
    expect(p.query.related!.fromQuery!.share).toBeCloseTo(3 / 5, 12);
    expect(p.query.related!.added!.keywords).toBe(4);
    expect(p.query.related!.added!.share).toBeCloseTo(2 / 4, 12);
    expect(p.query.related!.byQueryLength![0].queries).toBe(2);
    expect(p.query.related!.byQueryLength![0].keywords).toBe(5);
    expect(p.query.related!.byQueryLength![0].share).toBeCloseTo(3 / 5, 12);
    expect(relatedLine(p.query.related)).toBe(
      'related (cosine ≥ 0.3): taken from the query 60.0 % of 5, added 50.0 % of 4; by query length: 1–10 words (2 queries) 60.0 % of 5, 11–30 words (1 queries) 0.0 % of 1, 31+ words (1 queries) 66.7 % of 3',
    );
    // an audit stored before the parts pools without them
    const { fromQuery: _f, added: _a, byQueryLength: _b, ...old } = b.related!;
    const q = poolAudits([
      { query: a, item: auditItems(view) },
      { query: { ...b, related: old }, item: auditItems(view) },
    ])!.query.related!;
    expect(q.share).toBeCloseTo(5 / 9, 12);
    expect(q.fromQuery).toBeUndefined();
    expect(relatedLine(q)).toBeNull();
  });
});

describe('cogr audit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cogr-audit-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cli = join(__dirname, '../../bin/cogr.mjs');
  const cogr = (...args: string[]) =>
    spawnSync(process.execPath, [cli, ...args], {
      encoding: 'utf8',
      env: { ...process.env, COGR_HOME: join(dir, 'home') },
      timeout: 300_000,
    });

  it('audits a stored run as cogr serve serves it: no query keyword on fewer than the minimum of items, the figures from its own index', () => {
    const dataset = writeSynthDataset(join(dir, 'ds'));
    const demo = cogr('demo', '--dataset', dataset, '--rounds', '0', '--sft-epochs', '1', '--workers', '1', '--quiet');
    expect(demo.status, demo.stderr).toBe(0);
    const queries = join(dir, 'q.jsonl');
    writeFileSync(queries, ['{"id": "x1", "text": "t0w0 study results"}', '{"id": "x2", "text": "t1w1 t1w2 effect"}'].join('\n') + '\n');
    const r = cogr('audit', '--queries', queries, '--json', '--examples', '2');
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      query: { queries: number; keywords: number; shareOneItem: number; shareBareNumbers: number };
      item: { shareOneItem: number; items: number };
      examples: { query: string; keywords: { keyword: string; matches: number }[] }[];
    };
    expect(out.query.queries).toBe(2);
    expect(out.examples.map((e) => e.query)).toEqual(['t0w0 study results', 't1w1 t1w2 effect']);
    expect(out.query.keywords).toBe(out.examples.reduce((a, e) => a + e.keywords.length, 0));
    expect(out.query.keywords).toBeGreaterThan(0);
    for (const e of out.examples) for (const k of e.keywords) expect(k.matches, k.keyword).toBeGreaterThanOrEqual(3);
    expect(out.query.shareOneItem).toBe(0);
    expect(out.query.shareBareNumbers).toBe(0);
    expect(out.item.shareOneItem).toBe(0);
    expect(out.item.items).toBeGreaterThan(0);
    // every query without a keyword is counted once, by its own text's match or by none
    const w = (out.query as { withoutKeywords?: { queries: number; ownText?: number; nothing?: number } }).withoutKeywords!;
    expect(w.queries).toBe(out.examples.filter((e) => e.keywords.length === 0).length);
    expect(w.ownText! + w.nothing!).toBe(w.queries);
  }, 300_000);

  it('audits a run fitted with embeddings with their vectors from --embeddings, and refuses it without, naming the model', async () => {
    const emb = await startFakeEmbeddings(() => 'fake-embed');
    const url = emb.url;
    // Not spawnSync: the endpoint answers from this process.
    const run = (...args: string[]) => runCogr(join(dir, 'home-dense'), ...args);
    try {
      const dataset = writeSynthDataset(join(dir, 'ds-dense'));
      const demo = await smallDemo(join(dir, 'home-dense'), dataset, '--embeddings', url);
      expect(demo.status, demo.stderr).toBe(0);
      const queries = join(dir, 'q-dense.jsonl');
      writeFileSync(queries, '{"id": "x1", "text": "t0w0 study results"}\n');
      const without = await run('audit', '--queries', queries, '--json');
      expect(without.status).not.toBe(0);
      expect(without.stderr).toMatch(/uses fake-embed embeddings: give --embeddings URL/);
      const r = await run('audit', '--queries', queries, '--json', '--embeddings', url);
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as {
        query: { queries: number; keywords: number; related?: { share: number } };
        examples: { keywords: { cosine?: number }[] }[];
      };
      expect(out.query.queries).toBe(1);
      expect(out.query.keywords).toBeGreaterThan(0);
      expect(out.query.related).toBeDefined();
      for (const k of out.examples[0].keywords) expect(k.cosine).toEqual(expect.any(Number));
    } finally {
      await emb.close();
    }
  }, 300_000);
});
