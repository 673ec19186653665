import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { evaluateRun, type Judgements } from '../../src/metrics.ts';
import { formatQrels, formatRun, parseRun, readRunFile, trecOrder, writeRunFile } from '../../src/trec.ts';
import { parseStoredConfig, parseRunConfig } from '../../src/run/config.ts';
import { dropPossessive, luceneEnglishTokens, porterStem, standardTokens } from '../../index/text/english.ts';
import { getAnalyzer, textTokens } from '../../index/text/analyzer.ts';
import { Bm25Index } from '../../src/baseline/bm25.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';

const dir = mkdtempSync(join(tmpdir(), 'cogr-trec-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('run files (src/trec.ts)', () => {
  it('writes 6 columns in trec_eval order: score first, tied scores by docid, the larger first', async () => {
    const text = formatRun(
      [
        {
          queryId: 'q1',
          hits: [
            { id: 'd1', score: 1 },
            { id: 'd3', score: 2 },
            { id: 'd10', score: 1 },
            { id: 'd2', score: 1 },
          ],
        },
        { queryId: 'q2', hits: [{ id: 'x', score: 0.1 + 0.2 }] },
      ],
      'tag1',
    );
    expect(text).toBe(
      ['q1 Q0 d3 1 2 tag1', 'q1 Q0 d2 2 1 tag1', 'q1 Q0 d10 3 1 tag1', 'q1 Q0 d1 4 1 tag1', 'q2 Q0 x 1 0.30000000000000004 tag1', ''].join(
        '\n',
      ),
    );
    // The score reads back as the same double, so ties survive the file.
    const back = parseRun(text, 'mem');
    expect(back[1].hits[0].score).toBe(0.1 + 0.2);
    expect(back[0].hits.map((h) => h.id)).toEqual(['d3', 'd2', 'd10', 'd1']);
    const path = join(dir, 'a.run');
    expect(
      await writeRunFile(
        path,
        [
          {
            queryId: 'q',
            hits: [
              { id: 'a', score: 3 },
              { id: 'b', score: 2 },
              { id: 'c', score: 1 },
            ],
          },
        ],
        't',
        2,
      ),
    ).toBe(2);
    expect(readFileSync(path, 'utf8')).toBe('q Q0 a 1 3 t\nq Q0 b 2 2 t\n');
  });

  it('ties scores equal in single precision, as trec_eval keeps them', () => {
    // 1 + 1e-8 is 1 as a 32-bit float: a tie, broken by id; 1 + 1e-6 is not.
    expect(
      trecOrder([
        { id: 'a', score: 1 + 1e-8 },
        { id: 'b', score: 1 },
      ]).map((h) => h.id),
    ).toEqual(['b', 'a']);
    expect(
      trecOrder([
        { id: 'a', score: 1 + 1e-6 },
        { id: 'b', score: 1 },
      ]).map((h) => h.id),
    ).toEqual(['a', 'b']);
  });
  it('orders non-ASCII ids by UTF-8 bytes as trec_eval (strcmp)', () => {
    // 'é' (0xC3 0xA9) is above 'z' (0x7A) in bytes.
    expect(
      trecOrder([
        { id: 'z', score: 1 },
        { id: 'é', score: 1 },
        { id: 'a', score: 1 },
      ]).map((h) => h.id),
    ).toEqual(['é', 'z', 'a']);
  });

  it('refuses white space in ids or tags and a document twice for a query', () => {
    expect(() => formatRun([{ queryId: 'q 1', hits: [] }], 't')).toThrow(/query id "q 1"/);
    expect(() => formatRun([{ queryId: 'q', hits: [{ id: 'a b', score: 1 }] }], 't')).toThrow(/document id "a b"/);
    expect(() => formatRun([], 'two words')).toThrow(/run tag/);
    expect(() =>
      formatRun(
        [
          {
            queryId: 'q',
            hits: [
              { id: 'a', score: 1 },
              { id: 'a', score: 2 },
            ],
          },
        ],
        't',
      ),
    ).toThrow(/appears twice/);
  });

  it('refuses bad run files with their line number', () => {
    const path = join(dir, 'bad.run');
    const cases: [string, RegExp][] = [
      ['q1 Q0 d1 1 2.5 t\nq1 Q0 d2 1 2.0 t\n', /bad\.run:2: query q1 has rank 1 twice \(first on line 1\)/],
      ['q1 Q0 d1 1 2.5 t\nq1 Q0 d1 2 2.0 t\n', /bad\.run:2: query q1 lists document d1 twice/],
      ['q1 Q0 d1 1 2.5 t\nq1 Q0 nope 2 2.0 t\n', /bad\.run:2: unknown document id "nope"/],
      ['q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 2.0 t\nq9 Q0 d1 1 1 t\n', /bad\.run:3: unknown query id "q9"/],
      ['q1 Q0 d1 1 2.5\n', /bad\.run:1: expected 6 fields/],
      ['q1 Q0 d1 one 2.5 t\n', /bad\.run:1: rank must be a positive integer/],
      ['q1 Q0 d1 1 NaN t\n', /bad\.run:1: score must be a finite number/],
      ['q1 Q0 d1 1 1 t\n\nq1 Q0 d2 2 1 t\n', /bad\.run:2: empty line/],
    ];
    for (const [text, re] of cases) {
      writeFileSync(path, text);
      expect(() => readRunFile(path, { queries: new Set(['q1', 'q2']), items: new Set(['d1', 'd2']) })).toThrow(re);
    }
    expect(() => readRunFile(join(dir, 'missing.run'))).toThrow(/run file .*missing\.run/);
  });

  it('exports qrels with integer grades in byte order and refuses fractional grades', () => {
    const q = new Map([
      [
        'q2',
        new Map([
          ['b', 2],
          ['a', 1],
        ]),
      ],
      ['q10', new Map([['z', 1]])],
    ]);
    expect(formatQrels(q)).toBe('q10 0 z 1\nq2 0 a 1\nq2 0 b 2\n');
    expect(() => formatQrels(new Map([['q', new Map([['a', 1.5]])]]))).toThrow(/grade 1.5/);
  });
});

describe('metric ties (src/metrics.ts with scores)', () => {
  // Four items tie on score; only 'a' is relevant. Without scores the list order counts;
  // with them trec_eval's order does ('d' > 'c' > 'b' > 'a'), which puts 'a' last.
  const judgements: Judgements = { qrels: new Map([['q', new Map([['a', 1]])]]), relevant: new Map([['q', new Set(['a'])]]) };
  it('ranks tied scores by document id, the larger first, as trec_eval does', () => {
    const ranked = ['a', 'b', 'c', 'd'];
    const plain = evaluateRun([{ queryId: 'q', ranked }], judgements, { cutoffs: [1, 10] });
    const tied = evaluateRun([{ queryId: 'q', ranked, scores: [1, 1, 1, 1] }], judgements, { cutoffs: [1, 10] });
    expect(plain.ranked['mrr@10']).toBe(1);
    expect(tied.ranked['mrr@10']).toBe(1 / 4);
    expect(tied.ranked['p@1']).toBe(0);
    // A strictly higher score still wins over the id order.
    const scored = evaluateRun([{ queryId: 'q', ranked, scores: [2, 1, 1, 1] }], judgements, { cutoffs: [1] });
    expect(scored.ranked['p@1']).toBe(1);
  });
});

describe("Lucene's EnglishAnalyzer chain (index/text/english.ts)", () => {
  it('tokenizes by UAX #29: apostrophes and decimals inside tokens, one token per ideograph', () => {
    expect(standardTokens("The patient's 3.5 mg/kg dose, don't U.S.A. 漢字")).toEqual([
      'The',
      "patient's",
      '3.5',
      'mg',
      'kg',
      'dose',
      "don't",
      'U.S.A',
      '漢',
      '字',
    ]);
  });
  it('keeps pictographs as tokens, as Lucene does (NFCorpus query PLAIN-3261)', () => {
    expect(luceneEnglishTokens('update on herbalife ®')).toEqual(['updat', 'herbalif', '®']);
  });
  it("drops possessive 's (also ’S) before lower-casing", () => {
    expect(dropPossessive("patient's")).toBe('patient');
    expect(dropPossessive('JOHN’S')).toBe('JOHN');
    expect(dropPossessive('its')).toBe('its');
  });
  it('stems with Porter v1, where Porter2 differs', () => {
    // Porter (1980) vs Snowball English (Porter2), checked by hand against the published outputs.
    expect(porterStem('generalization')).toBe('gener');
    expect(getAnalyzer('english').word('generalization')).toBe('general');
    expect(porterStem('skies')).toBe('ski');
    expect(getAnalyzer('english').word('skies')).toBe('sky');
    expect(porterStem('dying')).toBe('dy');
    expect(porterStem('caresses')).toBe('caress');
    expect(porterStem('relational')).toBe('relat');
    expect(porterStem('hopeful')).toBe('hope');
  });
  it("removes Lucene's 33 stop words, not wink's list", () => {
    expect(luceneEnglishTokens("The children's proteins were not binding to it, which is such a surprise")).toEqual([
      'children',
      'protein',
      'were',
      'bind',
      'which',
      'surpris',
    ]);
    // wink's tokens split at the apostrophe, its list removes "were" but keeps "not", and the BM25 baseline does not stem them.
    expect(textTokens("The children's proteins were not binding")).toEqual(['children', 's', 'proteins', 'not', 'binding']);
  });
  it('the BM25 baseline searches with the analysis it was built with', () => {
    const items = [
      { id: 'a', title: '', text: 'generalizations of proteins' },
      { id: 'b', title: '', text: 'a protein binding study' },
      { id: 'c', title: '', text: 'unrelated words here' },
    ];
    expect(
      new Bm25Index(items, { analysis: 'lucene' })
        .search('protein', 10)
        .map((h) => h.id)
        .sort(),
    ).toEqual(['a', 'b']);
    expect(new Bm25Index(items, { analysis: 'wink' }).search('protein', 10).map((h) => h.id)).toEqual(['b']);
  });
});

describe('the relevance model analysis as a run option', () => {
  it('a stored config without it reads as wink (the analysis it ran with); a new one gets the default', () => {
    const stored = parseStoredConfig({ dataset: 'med' });
    expect(stored.success && stored.data.relevanceAnalysis).toBe('wink');
    expect(parseRunConfig({ dataset: 'med', relevanceAnalysis: 'lucene' }).relevanceAnalysis).toBe('lucene');
    expect(() => parseRunConfig({ dataset: 'med', relevanceAnalysis: 'porter' })).toThrow(/relevanceAnalysis/);
  });
  it('a relevance model saved without textAnalysis rebuilds with wink tokens', () => {
    const items = [
      { id: 'a', title: 'Generalizations', text: 'generalizations of proteins' },
      { id: 'b', title: '', text: 'a general protein study' },
      { id: 'c', title: '', text: 'unrelated words here' },
    ];
    const m = RelevanceModel.fit(items, [[{ id: 'q', text: 'protein generalization' }, ['a']]], { textAnalysis: 'lucene' });
    expect(m.textWords('generalizations')).toEqual(['gener']);
    const json = m.toJSON() as unknown as { options: Record<string, unknown> };
    expect(json.options.textAnalysis).toBe('lucene');
    const { textAnalysis: _t, ...old } = json.options;
    const back = RelevanceModel.fromJSON({ ...json, options: old }, items);
    expect(back.options.textAnalysis).toBe('wink');
    expect(back.textWords('generalizations')).toEqual(['general']);
  });
});

describe('run files and qrels on the built CLI (MED)', () => {
  const cli = join(__dirname, '../../bin/cogr.mjs');
  const run = (args: string[]) => {
    const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, COGR_HOME: join(dir, 'home') } });
    expect(r.status, r.stderr).toBe(0);
    return r.stdout;
  };
  it("cogr eval on the run file cogr baseline bm25 wrote gives the baseline's own figures; export-qrels lists every judgement", () => {
    const runFile = join(dir, 'med.run');
    const base = JSON.parse(run(['baseline', 'bm25', '--dataset', 'med', '--run-file', runFile, '--json']));
    const lines = readFileSync(runFile, 'utf8').trimEnd().split('\n');
    expect(lines[0]).toMatch(/^\S+ Q0 \S+ 1 \S+ cogr-bm25$/);
    const ev = JSON.parse(run(['eval', '--run', runFile, '--dataset', 'med', '--json']));
    expect(ev.judgedQueries).toBe(base.judgedQueries);
    expect(ev.missingQueries).toBe(0);
    // The same per-query figures, summed in another query order (fold order there).
    expect(ev.ndcg10).toBeCloseTo(base.ndcg10, 12);
    expect(ev.map).toBeCloseTo(base.map, 12);
    expect(ev.ranked['r@100']).toBeCloseTo(base.ranked['r@100'], 12);
    const qrels = join(dir, 'med.qrels');
    run(['datasets', 'export-qrels', '--dataset', 'med', '--out', qrels]);
    const q = readFileSync(qrels, 'utf8').trimEnd().split('\n');
    expect(q.every((l) => /^\S+ 0 \S+ [1-9][0-9]*$/.test(l))).toBe(true);
    expect(new Set(q.map((l) => l.split(' ')[0])).size).toBe(base.judgedQueries);
  });
});

/** `cogr eval --per-query` of a run file on MED: the queries in `only`, each with its ranked metrics and set figures. */
function evalPerQuery(cli: string, env: NodeJS.ProcessEnv, runFile: string, only: ReadonlySet<string>) {
  const ev = spawnSync(process.execPath, [cli, 'eval', '--run', runFile, '--dataset', 'med', '--json', '--per-query'], {
    encoding: 'utf8',
    env,
  });
  expect(ev.status, ev.stderr).toBe(0);
  return (JSON.parse(ev.stdout).perQuery as { queryId: string; ranked: Record<string, number>; set: { f1: number } }[]).filter((q) =>
    only.has(q.queryId),
  );
}

/** The served sets of a run file's lists (the lines above the backfill, whose scores are below −1), written to `out`. */
function servedSetsFile(lines: readonly string[], out: string): string {
  writeFileSync(out, lines.filter((l) => Number(l.split(' ')[4]) >= -1).join('\n') + '\n');
  return out;
}

describe('cogr evolve --run-file (MED, one small fold)', () => {
  it("the run file's figures are the final step's: set F1 of the whole served lists, served nDCG@10", () => {
    const cli = join(__dirname, '../../bin/cogr.mjs');
    const env = { ...process.env, COGR_HOME: join(dir, 'home-evolve') };
    const runFile = join(dir, 'evolve.run');
    const args = [
      'evolve',
      '--dataset',
      'med',
      '--folds',
      '5',
      '--fold',
      '0',
      '--rounds',
      '1',
      '--group-size',
      '4',
      '--query-epochs',
      '1',
      '--item-epochs',
      '1',
      '--workers',
      '1',
      '--quiet',
      '--json',
      '--run-file',
      runFile,
    ];
    const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env });
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(readFileSync(runFile, 'utf8').split('\n')[0]).toMatch(/^\S+ Q0 \S+ 1 \S+ cogr-evolve$/);
    // The paired comparison with BM25: every held-out query once; its mean differences are the differences of the means.
    const paired = summary.final_vs_bm25;
    expect(paired.queries).toBe(6);
    expect(paired.f1_queries.above + paired.f1_queries.level + paired.f1_queries.below).toBe(6);
    expect(paired.f1.gain).toBeCloseTo(summary.final.f1 - summary.baseline.f1, 12);
    expect(paired.ndcg10.gain).toBeCloseTo(summary.final.ndcg10 - summary.baseline.ndcg10, 12);
    expect(paired.f1.se).toBeGreaterThan(0);
    // The same against BM25 + RM3 and against the SFT step (served as it was evaluated).
    expect(summary.final_vs_rm3.f1.gain).toBeCloseTo(summary.final.f1 - summary.baselines.rm3.f1, 12);
    expect(summary.final_vs_rm3.ndcg10.gain).toBeCloseTo(summary.final.ndcg10 - summary.baselines.rm3.ndcg10, 12);
    const sft = summary.rounds.find((r: { step: string }) => r.step === 'sft');
    expect(summary.final_vs_sft.f1.gain).toBeCloseTo(summary.final.f1 - sft.f1, 12);
    expect(summary.final_vs_sft.ndcg10.gain).toBeCloseTo(summary.final.ndcg10 - sft.ndcg10, 12);
    const queries = new Set(
      readFileSync(runFile, 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => l.split(' ')[0]),
    );
    // Fold 0 holds out 6 of MED's 30 judged queries; one whose keywords match nothing has no lines (and 0 in the figures).
    const heldOut = 6;
    expect(queries.size).toBeGreaterThan(0);
    expect(queries.size).toBeLessThanOrEqual(heldOut);
    // Evaluate the file over the fold's held-out queries only.
    const per = evalPerQuery(cli, env, runFile, queries);
    expect(per.length).toBe(queries.size);
    const mean = (f: (q: (typeof per)[number]) => number) => per.reduce((s, q) => s + f(q), 0) / heldOut;
    expect(mean((q) => q.ranked['ndcg@10'])).toBeCloseTo(summary.final.ndcg10, 12);
    // The served list is the served set, then the backfill (scores below −1): the set alone, cut at that score, gives the run's F1.
    const lines = readFileSync(runFile, 'utf8').trimEnd().split('\n');
    expect(lines.some((l) => Number(l.split(' ')[4]) < -1)).toBe(true);
    const perSet = evalPerQuery(cli, env, servedSetsFile(lines, join(dir, 'evolve-set.run')), queries);
    expect(perSet.reduce((a, q) => a + q.set.f1, 0) / heldOut).toBeCloseTo(summary.final.f1, 12);

    // `index search --rank model --backfill n` over the run's store: the matched set ranked by p, then other items by p (scores below −1).
    const search = (extra: string[]) => {
      const probe = ['--query', 'the crystalline lens in vertebrates', '--keywords', 'crystalline lens|lens', '--rank', 'model', '--json'];
      const db = join(dir, 'home-evolve', 'evolve', 'med', 'fold-0', 'db');
      const s = spawnSync(process.execPath, [cli, 'index', 'search', '--db', db, ...probe, ...extra], { encoding: 'utf8', env });
      return {
        code: s.status,
        err: s.stderr,
        out: s.status === 0 ? (JSON.parse(s.stdout) as { matched: number; items: { id: string; score: number }[] }) : null,
      };
    };
    const whole = search(['--all']).out!;
    expect(whole.matched).toBeGreaterThan(0);
    expect(whole.matched).toBe(whole.items.length);
    const depth = whole.matched + 15;
    const filled = search(['--all', '--backfill', String(depth)]).out!;
    expect(filled.matched).toBe(whole.matched);
    expect(filled.items.slice(0, whole.matched)).toEqual(whole.items);
    expect(filled.items.length).toBe(depth);
    const more = filled.items.slice(whole.matched);
    expect(more.every((x) => x.score < -1 && !whole.items.some((w) => w.id === x.id))).toBe(true);
    expect(more.every((x, i) => i === 0 || more[i - 1].score >= x.score)).toBe(true);
    const refused = search(['--rank', 'keywords', '--backfill', '5']);
    expect(refused.code).toBe(2);
    expect(refused.err).toContain('--backfill needs --rank model|text');
  }, 600_000);

  it("with the relevance model's own sets served (--served-set model), the run file holds those sets: its figures are still the final step's", () => {
    const cli = join(__dirname, '../../bin/cogr.mjs');
    const env = { ...process.env, COGR_HOME: join(dir, 'home-evolve-model') };
    const runFile = join(dir, 'evolve-model.run');
    const args = ['evolve', '--dataset', 'med', '--folds', '5', '--fold', '0', '--rounds', '1', '--group-size', '4'];
    args.push('--query-epochs', '1', '--item-epochs', '1', '--workers', '1', '--served-set', 'model', '--quiet', '--json');
    const r = spawnSync(process.execPath, [cli, ...args, '--run-file', runFile], { encoding: 'utf8', env });
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary.perFold[0].final.served_set.set).toBe('model');
    // The model's sets differ from the keyword plans' here, so a file of the keyword plans' sets could not pass the check below.
    expect(summary.perFold[0].final.served_set.keywords.f1).not.toBeCloseTo(summary.final.f1, 6);
    const lines = readFileSync(runFile, 'utf8').trimEnd().split('\n');
    const inFile = new Set(lines.map((l) => l.split(' ')[0]));
    // Fold 0 holds out 6 of MED's 30 judged queries; the means are over all 6.
    const perAll = evalPerQuery(cli, env, runFile, inFile);
    expect(perAll.reduce((a, q) => a + q.ranked['ndcg@10'], 0) / 6).toBeCloseTo(summary.final.ndcg10, 12);
    const per = evalPerQuery(cli, env, servedSetsFile(lines, join(dir, 'evolve-model-set.run')), inFile);
    expect(per.reduce((a, q) => a + q.set.f1, 0) / 6).toBeCloseTo(summary.final.f1, 12);
  }, 600_000);
});
