/**
 * The generated tables and the chart (scripts/docs.ts BLOCKS): the stored runs of
 * docs/results/ in the README and in docs/results.md, the demo, the BM25 figures kept as data
 * and the main job at scale. Every table carries the command that re-measures it.
 */
import { join } from 'node:path';
import type { z } from 'zod';
import { readExpectedQuality } from '../../src/baseline/expected.ts';
import { adoptionSummary, keywordLines, pairedLines, servedSetSummary } from '../../src/commands/evolve.ts';
import { queryLengthLabels } from '../../src/drift/keywordAudit.ts';
import { CSS, lineChart } from '../../src/drift/report.ts';
import { adoptedLabel, bestStep, servedRanking } from '../../src/run/state.ts';
import type { StepRecord } from '../../src/run/state.ts';
import { display, f3, f4, header, med, pct, pm, row, Table } from './markdown.ts';
import {
  auditCommand,
  benchCommand,
  demoCommand,
  EMBEDDINGS_URL,
  evolveCommand,
  exampleCommands,
  oracleCommand,
  staticAuditCommand,
  staticJudgeAuditCommand,
} from './sources.ts';
import type { Audit, AuditJson, Bench, EvolveJson, LlmBench, Metrics, OracleJson, Paired, Sources, SplitBaseline } from './sources.ts';

function auditCells(a: z.output<typeof Audit> | null): string[] {
  if (!a) return ['', '', '', '', '', ''];
  return [
    a.query.keywordsPerQuery.toFixed(1),
    pct(a.query.shareOneItem),
    med(a.query.medianItemsPerKeyword),
    pct(a.query.shareFromQuery),
    a.item.keywordsPerItem.toFixed(1),
    pct(a.item.shareOneItem),
  ];
}

/** A table, its caption, and the commands that re-measure it, one list line each. */
function tableWithCommands(t: Table, caption: string, commands: readonly string[]): string {
  return [t.toString(), '', caption, '', ...commands].join('\n');
}

function foldList(values: readonly number[]): string {
  return `<sub>folds ${values.map(f3).join(' · ')}</sub>`;
}

/** README: one row per stored run. */
export function resultsBlock(s: Sources): string {
  if (s.runs.length === 0) return '_No stored run in docs/results/._';
  const lines = [
    header(
      [
        'collection (held-out queries)',
        'F1: cogr',
        'F1: BM25',
        'F1: BM25 + RM3',
        'cogr − BM25',
        'cogr − BM25 + RM3',
        'cogr − SFT',
        'nDCG@10: cogr / BM25',
        'query keywords',
      ],
      [1, 2, 3],
    ),
  ];
  for (const { name, json: j } of s.runs) {
    if (!j.final) continue;
    const pf = j.perFold;
    const paired = (p: z.output<typeof Paired> | undefined) => (p ? `F1 ${pm(p.f1)}<br>nDCG@10 ${pm(p.ndcg10)}` : '');
    const kw = j.final.keywords;
    lines.push(
      row([
        `${display(name)} (${pf.reduce((a, f) => a + f.evalQueries, 0)})`,
        `**${f3(j.final.f1)}**<br>${foldList(pf.map((f) => f.final.f1))}`,
        `${f3(j.baselines.bm25.f1)}<br>${foldList(pf.map((f) => f.baselines.bm25.f1))}`,
        `${f3(j.baselines.rm3.f1)}<br>${foldList(pf.map((f) => f.baselines.rm3.f1))}`,
        paired(j.final_vs_bm25),
        paired(j.final_vs_rm3),
        paired(j.final_vs_sft),
        `${f3(j.final.ndcg10)} / ${f3(j.baselines.bm25.ndcg10)}`,
        kw
          ? `${kw.query.keywordsPerQuery.toFixed(1)} a query; ${pct(kw.query.shareOneItem)} match ≤ 1 item; median ${med(kw.query.medianItemsPerKeyword)} items each; ${pct(kw.query.shareFromQuery)} from the query`
          : '',
      ]),
    );
  }
  lines.push('');
  lines.push(
    `Means over every held-out query of the ${s.runs.map((r) => r.json.folds).join(' / ')} folds (seed ${s.runs.map((r) => String(r.json.config.seed)).join(' / ')}), ` +
      `each fold beneath; F1 of the served set (the whole matched set, or cut where its expected F1 peaks in the folds whose training queries chose the cut, \`--cut auto\`: ${cutFolds(s.runs)}). The planned keywords are judged by all-MiniLM-L6-v2 (the default encoder, \`--embeddings auto\`; [without one](docs/embeddings.md#an-encoder-as-the-judge-of-the-keywords)). cogr − X: paired per held-out query, mean ± standard error. ` +
      'BM25 and BM25 + RM3 use Lucene’s English analysis with cut-offs tuned on each fold’s training queries. ' +
      'Query keywords: the result’s keyword audit (src/drift/keywordAudit.ts). Re-measure with:',
  );
  lines.push('');
  for (const r of s.runs) lines.push(`- ${display(r.name)}: \`${evolveCommand(r.json, r.file)}\``);
  return lines.join('\n');
}

/** Which folds of the runs cut their matched sets: "3 of CISI’s 5" for each run that cut any, joined; "none" when none did. */
function cutFolds(runs: Sources['runs']): string {
  const cut = runs
    .map((r) => ({ name: r.name, n: r.json.perFold.length, k: r.json.perFold.filter((f) => f.final?.served_set?.set === 'cut').length }))
    .filter((x) => x.k > 0)
    .map((x) => `${x.k} of ${display(x.name)}’s ${x.n}`);
  return cut.length > 0 ? cut.join(', ') : 'none';
}

/** docs/results.md: per stored run, its steps, folds, paired comparisons and keyword audits. */
export function resultsDetailBlock(s: Sources): string {
  if (s.runs.length === 0) return '_No stored run in docs/results/._';
  const out: string[] = [];
  for (const { name, file, json: j } of s.runs) {
    out.push(`### ${display(name)} (\`${file}\`)`, '');
    out.push(`Re-measure: \`${evolveCommand(j, file)}\`. Options: ${configLine(j.config)}.`, '');
    const n = j.perFold.length;
    const paired = new Table(
      ['cogr − …, paired per held-out query', 'queries', 'F1 (mean ± SE)', 'nDCG@10 (mean ± SE)', 'F1 above / level / below'],
      [1],
    );
    for (const [label, p] of [
      ['BM25', j.final_vs_bm25],
      ['BM25 + RM3', j.final_vs_rm3],
      ['SFT', j.final_vs_sft],
    ] as const) {
      if (p)
        paired.add([label, p.queries, pm(p.f1), pm(p.ndcg10), `${p.f1_queries.above} / ${p.f1_queries.level} / ${p.f1_queries.below}`]);
    }
    if (paired.size > 0) out.push(paired.toString(), '');
    out.push(
      'Per step, means over every held-out query (dev F1 over the dev queries carved from each fold’s training queries; adopted: folds, ties: no query the adoption test scored changed). ' +
        'Keyword audit of the held-out queries’ keywords and of the step’s item generation: keywords per query, share matching at most one item, median items a keyword matches, share taken from the query; keywords per item, share carried by one item.',
      '',
    );
    const steps = new Table(
      [
        'step',
        'adopted',
        'dev F1',
        'P',
        'R',
        'F1',
        'served nDCG@10',
        'keyword-bag nDCG@10',
        'matched / q',
        'kw / q',
        '≤ 1 item',
        'median items',
        'from query',
        'kw / item',
        'one item',
      ],
      [2, 3, 4, 5, 6, 7, 8, 9, 11],
    );
    const tie = (k: number) => (k ? ` (${k} tie${k > 1 ? 's' : ''})` : '');
    // The refit step is each fold's result, the cogr row below.
    for (const r of j.rounds.filter((x) => !(x.side === 'refit' && j.final?.refit_of))) {
      steps.add([
        r.step,
        r.side === 'refit' || r.side === 'sft' ? '' : `${r.adopted}/${n}${tie(r.adoptedOnTie)}`,
        r.dev_f1 === null ? '' : f4(r.dev_f1),
        f4(r.precision),
        f4(r.recall),
        f4(r.f1),
        f4(r.ndcg10),
        f4(r.ndcg10_keywords),
        r.meanMatched.toFixed(1),
        ...auditCells(r.keywords),
      ]);
    }
    if (j.final) {
      const f = j.final;
      steps.add([
        `**cogr** (${f.refit_of ? 'refit of each fold’s best dev step' : 'best dev step per fold'})`,
        '',
        f4(f.dev_f1),
        f4(f.precision),
        f4(f.recall),
        `**${f4(f.f1)}**`,
        f4(f.ndcg10),
        f4(f.ndcg10_keywords),
        f.meanMatched.toFixed(1),
        ...auditCells(f.keywords),
      ]);
      const b = f.before_refit;
      if (b)
        steps.add([
          'best dev step, before the refit',
          '',
          '',
          f4(b.precision),
          f4(b.recall),
          f4(b.f1),
          f4(b.ndcg10),
          f4(b.ndcg10_keywords),
          b.meanMatched.toFixed(1),
        ]);
      const r = f.refit_from_sft;
      if (r) steps.add(['the same refit made from SFT', '', '', f4(r.precision), f4(r.recall), f4(r.f1)]);
    }
    const base = (label: string, b: z.output<typeof Metrics>) =>
      steps.add([label, '', '', f4(b.precision), f4(b.recall), f4(b.f1), f4(b.ndcg10), '', b.meanMatched.toFixed(1)]);
    base('BM25, cut-off tuned on training queries', j.baselines.bm25);
    base('BM25 + RM3, cut-off tuned on training queries', j.baselines.rm3);
    if (j.baselines.model) base('relevance model, expected-F1 cut, no keywords', j.baselines.model);
    out.push(steps.toString(), '', 'Per fold (the final step; cut-offs in brackets):', '');
    const folds = new Table(
      [
        'fold',
        'held-out / dev',
        'final step',
        'served set',
        'ranker',
        'F1',
        'BM25 F1',
        'RM3 F1',
        'model F1',
        'nDCG@10',
        'BM25 nDCG@10',
        'MAP',
        'BM25 MAP',
      ],
      [0, 5, 6, 7, 8, 9, 10, 11, 12],
    );
    for (const f of j.perFold) {
      const b = f.baselines;
      folds.add([
        f.fold,
        `${f.evalQueries} / ${f.devQueries}`,
        f.final.refit_of ? `refit of ${f.final.refit_of}` : f.final.step,
        f.final.refit_of ? (f.final.served_set?.set ?? 'keywords') : '',
        f.final.rank,
        f4(f.final.f1),
        `${f4(b.bm25.f1)} (${b.bm25.cutoff})`,
        `${f4(b.rm3.f1)} (${b.rm3.cutoff})`,
        b.model ? f4(b.model.f1) : '',
        f4(f.final.ndcg10),
        f4(b.bm25.ndcg10),
        f4(f.final.map),
        f4(b.bm25.map),
      ]);
    }
    out.push(folds.toString(), '', `Final F1 above BM25’s on ${j.foldsAboveBaseline} of ${n} folds.`, '');
  }
  return out.join('\n').trimEnd();
}

/** The run options a stored config names, in words (the ones the results depend on most). */
function configLine(c: Record<string, unknown>): string {
  const keys = [
    'seed',
    'rounds',
    'groupSize',
    'kMax',
    'vocabulary',
    'minCarriers',
    'relatedness',
    'embeddingsModel',
    'embeddingsFeatures',
    'keywordCosine',
    'servedSet',
    'cut',
    'refit',
    'rank',
  ];
  return keys
    .filter((k) => c[k] !== undefined)
    .map((k) => `${k} ${JSON.stringify(c[k])}`)
    .join(', ');
}

/** docs/results.md: the demo's table, from `cogr demo --json`. */
export function demoBlock(s: Sources): string {
  if (!s.demo) return '_No stored demo run (docs/results/demo.json)._';
  const { file, json: j } = s.demo;
  const steps = j.steps as unknown as StepRecord[];
  const best = bestStep(steps);
  const lines = [
    `\`${demoCommand(j, file)}\` on ${display(j.dataset)}: ${j.split.train} training / ${j.split.eval} held-out queries, ` +
      `${String(j.config.rounds)} rounds, seed ${String(j.config.seed)}. Held-out P / R / F1 of the served set (${steps.find((x) => x.phase === 'sft')?.floor?.cut ? 'the matched set cut where its expected F1 peaks: the demo’s cut test chose the cut' : 'the whole matched set: the demo’s cut test kept it whole'}) after each step, ` +
      'nDCG@10 of the served ranking:',
    '',
    header(
      ['step', 'round', 'trained', 'dev F1', 'adopted', 'P', 'R', 'F1', 'nDCG@10', 'kw / q', 'matched / q'],
      [1, 3, 5, 6, 7, 8, 9, 10],
    ),
  ];
  for (const st of steps) {
    lines.push(
      row([
        st.step,
        st.round,
        st.phase,
        st.dev ? f4(st.dev.f1) : '',
        adoptedLabel(st),
        f4(st.metrics.precision),
        f4(st.metrics.recall),
        f4(st.metrics.f1),
        f4(servedRanking(steps, st).ndcg10),
        st.metrics.meanKeywords.toFixed(1),
        st.metrics.meanMatched.toFixed(1),
      ]),
    );
  }
  if (best)
    lines.push(
      row([
        `**cogr** (${best.phase === 'refit' ? 'the refit of the best dev step' : 'the best dev step'})`,
        '',
        'result',
        '',
        '',
        f4(best.metrics.precision),
        f4(best.metrics.recall),
        `**${f4(best.metrics.f1)}**`,
        f4(servedRanking(steps, best).ndcg10),
        best.metrics.meanKeywords.toFixed(1),
        best.metrics.meanMatched.toFixed(1),
      ]),
    );
  const b = j.baselines;
  const base = (label: string, x: z.output<typeof SplitBaseline>) =>
    lines.push(row([label, '', 'baseline', '', '', f4(x.precision), f4(x.recall), f4(x.f1), f4(x.ndcg10), '', String(x.cutoff)]));
  base(`BM25 (cut-off ${b.bm25.cutoff})`, b.bm25);
  base(`BM25 + RM3 (cut-off ${b.rm3.cutoff})`, b.rm3);
  if (b.model) base('relevance model, no keywords', b.model);
  const notes = [
    adoptionSummary(steps),
    servedSetSummary(steps),
    ...(j.final_vs_bm25 ? pairedLines({ bm25: j.final_vs_bm25, rm3: j.final_vs_rm3 ?? null, sft: j.final_vs_sft ?? null }) : []),
    ...keywordLines(
      steps.find((x) => x.phase === 'sft'),
      best,
    ),
  ].filter((x): x is string => x !== null);
  lines.push('', 'The lines the demo ends with:', '', '```text', ...notes, '```');
  return lines.join('\n');
}

/** docs/evaluation.md: the BM25 figures kept as data. */
export function expectedBlock(root: string): string {
  const e = readExpectedQuality(join(root, 'data', 'expected-quality.json'));
  const lines = [header(['dataset', 'analysis', 'F1', 'P', 'R', 'nDCG@10', 'checked by'], [2, 3, 4, 5])];
  for (const [analysis, table, flag] of [
    ['lucene (default)', e['bm25-lucene'] ?? {}, ''],
    ['wink', e.bm25, ' --analysis wink'],
  ] as const) {
    for (const [d, m] of Object.entries(table))
      lines.push(
        row([
          display(d),
          analysis,
          f4(m.f1),
          f4(m.precision),
          f4(m.recall),
          f4(m.ndcg10),
          `\`npx cogr baseline bm25 --dataset ${d} --folds 5${flag} --check\``,
        ]),
      );
  }
  lines.push('', `From \`data/expected-quality.json\`; \`--check\` fails when a measured figure is off by more than ${e.tolerance}.`);
  return lines.join('\n');
}

/** docs/benchmarks.md: the main job at scale, the newest stored run of each size. */
export function benchBlock(s: Sources): string {
  const latest = new Map<string, Bench>();
  for (const b of s.bench) {
    const key = `${b.items}x${b.queries}x${b.relevant}/${b.rounds}/${b.servedSet ?? ''}`;
    const had = latest.get(key);
    if (!had || had.finishedAt < b.finishedAt) latest.set(key, b);
  }
  const runs = [...latest.values()].sort((a, b) => a.items * a.queries - b.items * b.queries || a.finishedAt.localeCompare(b.finishedAt));
  const lines = [
    header(
      [
        'items × queries × relevant',
        'rounds',
        'served set',
        'wall',
        'CPU',
        'peak RSS',
        'load before → after',
        'held-out F1 per step',
        'finished',
        'command',
      ],
      [3, 4, 5],
    ),
  ];
  for (const b of runs) {
    lines.push(
      row([
        `${b.items.toLocaleString('en')} × ${b.queries.toLocaleString('en')} × ${b.relevant.toLocaleString('en')}`,
        b.rounds,
        b.servedSet ?? '(default then)',
        `${(b.wallSeconds / 60).toFixed(1)} min`,
        `${(b.cpuSeconds / 60).toFixed(1)} min`,
        `${(b.peakRssMiB / 1024).toFixed(1)} GiB`,
        `${b.loadBefore[0]} → ${b.loadAfter[0]}`,
        b.steps.map((x) => `${x.step} ${x.heldOutF1 === null ? '—' : f3(x.heldOutF1)}`).join(' → '),
        b.finishedAt.slice(0, 10),
        `\`${benchCommand(b)}\``,
      ]),
    );
  }
  lines.push(
    '',
    'The newest stored run of each size in `bench/results/` (older ones stay there as data). Load: the 1-minute load average of the 2-core machine; a figure measured beside other work is slower than an idle one.',
  );
  const paper = runs.filter((b) => b.items === 40000 && b.queries === 13500).at(-1);
  if (paper) {
    lines.push('', `Phases of the newest paper-size run (finished ${paper.finishedAt.slice(0, 10)}, \`${benchCommand(paper)}\`):`, '');
    lines.push(header(['phase', 'wall (min)', 'CPU (min)', 'cores'], [1, 2, 3]));
    for (const p of paper.phases)
      lines.push(row([p.phase, (p.seconds / 60).toFixed(1), (p.cpuSeconds / 60).toFixed(1), p.cores.toFixed(2)]));
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------
// The chart: held-out F1 per step of every stored run, BM25 beside it.

const PALETTE = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#0891b2'];

export function chartSvg(s: Sources): string {
  const series = s.runs.flatMap((r, i) => {
    const colour = PALETTE[i % PALETTE.length];
    const steps = r.json.rounds;
    return [
      { name: `${display(r.name)}: cogr`, colour, points: steps.map((x, k) => ({ x: k, y: x.f1 })) },
      {
        name: `${display(r.name)}: BM25 (dashed)`,
        colour,
        dash: '6 4',
        points: [
          { x: 0, y: r.json.baselines.bm25.f1 },
          { x: steps.length - 1, y: r.json.baselines.bm25.f1 },
        ],
      },
    ];
  });
  const svg = lineChart({
    name: 'f1-per-step',
    title: `Held-out F1 after each step (${[...new Set(s.runs.map((r) => r.json.folds))].join(' / ') || 'k'}-fold means), beside BM25`,
    xLabel: 'step: 0 = SFT, then r1-query, r1-item, …, last = final refit',
    yLabel: 'held-out F1',
    yScale: 'linear',
    yFormat: (v) => v.toFixed(2),
    series,
    width: 720,
    height: 380,
  });
  // The chart's styles (the drift report's), inside the file so it renders on its own.
  const style = CSS.split('\n')
    .filter((l) => l.startsWith('svg'))
    .join('');
  return svg.replace(/^(<svg[^>]*>)/, `$1<style>${style}</style>`) + '\n';
}

/**
 * README and docs/results.md: the served keywords of each shipped collection's demo run,
 * audited (src/drift/keywordAudit.ts): language or addresses.
 */
export function auditBlock(s: Sources): string {
  if (s.audits.length === 0) return '_No stored audit in docs/results/audit/._';
  const t = new Table(
    [
      'served keywords (every query)',
      'per query',
      'match ≤ 1 item',
      'median items each',
      'bare numbers',
      'taken from the query',
      'related to the query (MiniLM cosine ≥ 0.3)',
      'queries without a keyword: matched by their own text / by nothing',
      'item keywords on one item',
      'median items per item keyword',
    ],
    [1, 2, 3, 4, 5, 6, 7, 8, 9],
  );
  for (const { name, json: a } of s.audits)
    t.add([
      `${display(name)} (${a.query.queries} queries)`,
      a.query.keywordsPerQuery.toFixed(2),
      pct(a.query.shareOneItem),
      med(a.query.medianItemsPerKeyword),
      pct(a.query.shareBareNumbers),
      pct(a.query.shareFromQuery),
      a.query.related ? pct(a.query.related.share) : '—',
      without(a.query.withoutKeywords),
      pct(a.item.shareOneItem),
      med(a.item.medianItemsPerKeyword),
    ]);
  return [
    tableWithCommands(
      t,
      'After `cogr demo --dataset <d>`, as `cogr serve` serves it; item keywords over every item. A query the planner gives no keyword is matched by its own text alone (the rule’s {q}: the query “milk” finds the items that carry `milk`), or, when no item carries its text, by nothing: the run’s floor serves it (`ranking.fallback: "empty_plan"` in the response). Re-measure (with `npx cogr embeddings serve` on port 8001):',
      s.audits.map((a) => `- ${display(a.name)}: \`${auditCommand(a.name, a.file)}\``),
    ),
    relatedApart(s),
  ]
    .filter((x) => x !== '')
    .join('\n\n');
}

/** A stored audit's queries without a keyword: "82: 33 / 49" (— for audits stored before the count). */
function without(w: AuditJson['query']['withoutKeywords']): string {
  if (!w) return '—';
  return w.ownText !== undefined && w.nothing !== undefined ? `${w.queries}: ${w.ownText} / ${w.nothing}` : String(w.queries);
}

/** The related share apart: keywords taken from the query against added ones, and by the query's length (audits that hold the parts). */
function relatedApart(s: Sources): string {
  const rows = s.audits.filter(({ json: a }) => a.query.related?.fromQuery && a.query.related.added && a.query.related.byQueryLength);
  if (rows.length === 0) return '';
  const heads = queryLengthLabels(rows[0].json.query.related!.byQueryLength!).map((l) => `queries of ${l}`);
  const cell = (p: { keywords: number; share: number }) => (p.keywords > 0 ? `${pct(p.share)} of ${p.keywords}` : '—');
  const t = new Table(['related to the query, apart', 'taken from the query', 'added', ...heads], [1, 2, ...heads.map((_, j) => 3 + j)]);
  for (const { name, json: a } of rows) {
    const r = a.query.related!;
    t.add([display(name), cell(r.fromQuery!), cell(r.added!), ...r.byQueryLength!.map(cell)]);
  }
  return [
    t.toString(),
    '',
    'The same audits: the share at MiniLM cosine ≥ 0.3 of the keywords whose every word is in the query’s text and of the added ones, and by the query’s length in words (“of n”: keywords counted).',
  ].join('\n');
}

/** README: a few real queries' keywords, before (the open vocabulary of earlier runs) and after (the shared one). */
export function examplesBlock(s: Sources): string {
  if (s.examples.length === 0) return '_No stored examples in docs/results/examples/._';
  const kw = (a: AuditJson['examples'][number] | undefined) =>
    a && a.keywords.length > 0
      ? a.keywords.map((k) => `\`${k.keyword}\` (${k.matches}${k.cosine !== undefined ? `, ${k.cosine.toFixed(2)}` : ''})`).join(', ')
      : '(none)';
  const t = new Table(['query', 'before: open vocabulary (items matched, cosine)', 'after: shared vocabulary (items matched, cosine)']);
  for (const e of s.examples)
    for (const [i, b] of e.before.examples.entries()) t.add([`${display(e.name)}: “${b.query}”`, kw(b), kw(e.after.examples[i])]);
  return [
    t.toString(),
    '',
    'Each keyword with the number of items it alone matches and its MiniLM cosine to the query. Re-measure:',
    '',
    ...s.examples.flatMap((e) => {
      const c = exampleCommands(e.name);
      return [`- ${display(e.name)}, before: \`${c.before}\``, `- ${display(e.name)}, after: \`${c.after}\``];
    }),
  ].join('\n');
}

/** A k-fold run's held-out F1 with each fold's beneath. */
function foldsF1(j: EvolveJson): string {
  return `${f3(j.final?.f1 ?? 0)}<br><sub>${j.perFold.map((f) => f3(f.final.f1)).join(' · ')}</sub>`;
}

/** The rounds' own share of a stored run: its result's F1 over that of the same refit made from SFT, − 1 ('—' without one). */
function roundsShare(j: EvolveJson): string {
  const sft = j.final?.refit_from_sft?.f1;
  return sft && j.final ? `${j.final.f1 >= sft ? '+' : '−'}${Math.abs(100 * (j.final.f1 / sft - 1)).toFixed(1)} %` : '—';
}

/** docs/method.md: the stored k-fold runs beside the same runs with the dev adoption test (docs/results/adopt-dev/), what the rounds add to the same refit made from SFT. */
export function adoptionBlock(s: Sources): string {
  const pairs = s.adoptDev
    .map((d) => ({ dev: d, run: s.noEncoderRuns.find((r) => r.name === d.name) }))
    .filter((p): p is { dev: (typeof s.adoptDev)[number]; run: (typeof s.noEncoderRuns)[number] } => p.run !== undefined);
  if (pairs.length === 0) return '_No stored run with the dev adoption test in docs/results/adopt-dev/._';
  const t = new Table(
    ['collection', 'adoption test', 'F1 (folds)', 'result − SFT', 'rounds’ share', 'item half-rounds adopted', 'query half-rounds adopted'],
    [2, 4],
  );
  for (const { dev, run } of pairs) {
    for (const r of [run, dev]) {
      const j = r.json;
      const adopted = (side: string) => {
        const steps = j.rounds.filter((x) => x.side === side);
        const ties = steps.reduce((a, x) => a + x.adoptedOnTie, 0);
        return `${steps.reduce((a, x) => a + x.adopted, 0)} of ${steps.length * j.folds}${ties > 0 ? ` (${ties} on a tie)` : ''}`;
      };
      t.add([
        display(j.dataset),
        `\`${String(j.config.adoptOn)}\``,
        foldsF1(j),
        j.final_vs_sft ? pm(j.final_vs_sft.f1) : '—',
        roundsShare(j),
        adopted('item'),
        adopted('query'),
      ]);
    }
  }
  return tableWithCommands(
    t,
    'Runs without an encoder (`--embeddings none`). Held-out F1 of the result (the final refit), means over every held-out query of the folds; result − SFT: paired per held-out query against the SFT step as served, mean ± standard error (as the README’s cogr − SFT); rounds’ share: the result’s F1 over that of the same refit made from SFT, − 1; adopted: half-rounds adopted, summed over rounds and folds (on a tie: no scored query’s F1 changed). Re-measure:',
    pairs.flatMap(({ dev, run }) => [
      `- ${display(run.name)}: \`${evolveCommand(run.json, run.file)}\``,
      `- ${display(dev.name)}, dev test: \`${evolveCommand(dev.json, dev.file)}\``,
    ]),
  );
}

/** docs/results.md: items kept out of training (`--new-items`), found beside the others. */
export function newItemsBlock(s: Sources): string {
  if (s.newItems.length === 0) return '_No stored run with new items in docs/results/new-items/._';
  const t = new Table(
    [
      'collection',
      'encoder',
      'new items',
      'relevant new / other',
      'recall of new items: cogr / BM25',
      'recall of the others: cogr / BM25',
      'ratio new / other: cogr',
      'F1 over every item: cogr / BM25',
    ],
    [2, 6],
  );
  for (const { json: j } of s.newItems) {
    const n = j.new_items;
    t.add([
      display(j.dataset),
      j.config.embeddingsModel === null || j.config.embeddingsModel === undefined ? 'none' : String(j.config.embeddingsModel),
      `${n.items} (${pct(n.fraction)})`,
      `${n.relevant_new} / ${n.relevant_old}`,
      `${f3(n.recall_new)} / ${f3(n.bm25.recall_new)}`,
      `${f3(n.recall_old)} / ${f3(n.bm25.recall_old)}`,
      n.recall_old > 0 ? (n.recall_new / n.recall_old).toFixed(2) : '—',
      `${f3(n.f1)} / ${f3(n.bm25.f1)}`,
    ]);
  }
  return tableWithCommands(
    t,
    'Over the held-out queries of every fold, pooled (recall: relevant items in the served sets over relevant items). Re-measure:',
    s.newItems.map(
      (r) =>
        `- ${display(r.json.dataset)}, encoder ${String(r.json.config.embeddingsModel ?? 'none')}: \`${evolveCommand(r.json, r.file)}\``,
    ),
  );
}

const VOCABULARY_MODE = {
  filter: 'filtered: sampled under the list grammar, the other keywords left out of each answer',
  force: 'forced: sampled under its trie',
  fallback: 'filtered, and an answer the filter left with no phrase sampled again under its trie',
} as const;

/** How many held-out and training answers the filter left empty, and how many the fallback wrote again (rounds that recorded it). */
function fallbackLine(j: LlmBench): string {
  const parts = (
    [
      ['after SFT', j.llm.sft?.generate],
      ['after the query half-round', j.llm.query?.generate],
    ] as const
  ).flatMap(([label, g]) =>
    g?.filter ? [`${label} ${g.filter.emptied} of ${g.answers} (${g.fallbacks} written again under the trie)`] : [],
  );
  return parts.length > 0 ? ` Answers the filter left with no phrase: ${parts.join('; ')}.` : '';
}

/** docs/llm.md: the LLM half (bench/results/llm-<d>.json), beside the planner and the text baselines on the same split. */
export function llmBlock(s: Sources): string {
  if (s.llm.length === 0) return '_No stored LLM bench in bench/results/llm-*.json._';
  const out: string[] = [];
  for (const { name, file, json: j } of s.llm) {
    const t = new Table(['held-out queries of the split', 'F1', 'nDCG@10', 'query keywords on ≤ 1 item'], [1, 2, 3]);
    const llmRow = (label: string, f: LlmBench['llm']['sft']) =>
      f ? t.add([label, f3(f.f1), f3(f.ndcg10), pct(f.audit.shareOneItem)]) : t.add([label, '—', '—', '—']);
    llmRow('LLM after SFT', j.llm.sft);
    llmRow('LLM after the query half-round', j.llm.query);
    llmRow('LLM after the item half-round', j.llm.item);
    if (j.planner) t.add(['embedded planner (SFT step)', f3(j.planner.f1), f3(j.planner.ndcg10), '']);
    t.add([`BM25 (cut-off ${j.bm25.cutoff})`, f3(j.bm25.f1), f3(j.bm25.ndcg10), '']);
    t.add([`BM25 + RM3 (cut-off ${j.rm3.cutoff})`, f3(j.rm3.f1), f3(j.rm3.ndcg10), '']);
    const p = new Table(['paired F1 over the held-out queries', 'gain ± SE', 'queries'], [1, 2]);
    const pairs: [string, LlmBench['paired']['sft_vs_bm25']][] = [
      ['query half-round − SFT', j.paired.query_vs_sft],
      ['item half-round − query half-round', j.paired.item_vs_query],
      ['SFT − BM25', j.paired.sft_vs_bm25],
      ['query half-round − BM25', j.paired.query_vs_bm25],
    ];
    for (const [label, g] of pairs) if (g) p.add([label, pm(g), g.queries]);
    const curve = j.reward_curve;
    const cp = j.reward_curve_paired;
    const stages = Object.keys(j.seconds);
    out.push(
      `**${display(name)}** (split: ${j.split.core} core training, ${j.split.dev} dev, ${j.split.heldOut} held-out queries)`,
      '',
      j.query_vocabulary
        ? `The query side's keywords kept to the vocabulary (${VOCABULARY_MODE[j.query_vocabulary.mode ?? 'filter']}): each one of the ${j.query_vocabulary.phrases} phrases of ${j.query_vocabulary.half}'s frozen item generation (${j.query_vocabulary.itemGeneration}) that ${j.query_vocabulary.minCarriers}+ items carry.` +
            fallbackLine(j)
        : "The query side's keywords decoded under the keyword-list grammar alone (no vocabulary).",
      '',
      t.toString(),
      '',
      p.toString(),
      '',
      curve
        ? `Query half-round's training reward over ${curve.steps} GRPO steps: first fifth ${f3(curve.first_fifth.mean).replace('-', '−')} ± ${f3(curve.first_fifth.se)}, last fifth ${f3(curve.last_fifth.mean).replace('-', '−')} ± ${f3(curve.last_fifth.se)}` +
            (cp ? `; paired by query (first pass against last, ${cp.queries} queries): ${pm(cp)}.` : '.')
        : 'No GRPO reward log.',
      '',
      'Seconds (peak MiB) per stage: ' +
        stages.map((k) => `${k} ${Math.round(j.seconds[k])}${j.max_rss_mb[k] ? ` (${j.max_rss_mb[k]})` : ''}`).join(', ') +
        '.',
      '',
      `From \`${file}\`${j.round_flags ? ` (round flags \`${j.round_flags}\`)` : ''}.`,
      '',
    );
  }
  return out.join('\n').trimEnd();
}

/** docs/results.md: the stored k-fold runs beside the same runs with other seeds (other folds, other sampling). */
export function seedsBlock(s: Sources): string {
  const groups = s.noEncoderRuns
    .map((run) => ({ run, others: s.seeds.filter((r) => r.json.dataset === run.json.dataset) }))
    .filter((g) => g.others.length > 0);
  if (groups.length === 0) return '_No stored run with another seed in docs/results/seeds/._';
  const t = new Table(
    [
      'collection',
      'seed',
      'F1: cogr (folds)',
      'F1: BM25',
      'cogr − BM25',
      'cogr − BM25 + RM3',
      'rounds’ share',
      'nDCG@10: cogr / BM25 + RM3',
    ],
    [3],
  );
  for (const { run, others } of groups) {
    const rows = [run, ...others].sort((a, b) => Number(a.json.config.seed) - Number(b.json.config.seed));
    for (const r of rows) {
      const j = r.json;
      t.add([
        display(j.dataset),
        String(Number(j.config.seed)),
        foldsF1(j),
        f3(j.baselines.bm25.f1),
        j.final_vs_bm25 ? pm(j.final_vs_bm25.f1) : '—',
        j.final_vs_rm3 ? pm(j.final_vs_rm3.f1) : '—',
        roundsShare(j),
        `${f3(j.final?.ndcg10 ?? 0)} / ${f3(j.baselines.rm3.ndcg10)}`,
      ]);
    }
  }
  return tableWithCommands(
    t,
    'Runs without an encoder (`--embeddings none`; seed 1: docs/results/no-encoder/). Held-out F1 of the result and of BM25 (its cut-off tuned on each fold’s training queries), means over every held-out query of the folds; differences paired per held-out query, mean ± standard error; rounds’ share: the result’s F1 over that of the same refit made from SFT, − 1. The seed draws the folds, the dev split and every sampling. Re-measure:',
    groups.flatMap(({ run, others }) =>
      [run, ...others].map((r) => `- ${display(r.json.dataset)}, seed ${Number(r.json.config.seed)}: \`${evolveCommand(r.json, r.file)}\``),
    ),
  );
}

/** docs/results.md: the k-fold runs with a dense encoder's cosines in the relevance model (`--embeddings`), and the served keywords of such a demo, beside the stored runs without. */
export function denseBlock(s: Sources): string {
  const groups = s.dense.map((d) => ({ d, run: s.noEncoderRuns.find((r) => r.json.dataset === d.json.dataset) }));
  if (groups.length === 0) return '_No stored run with embeddings in docs/results/dense/._';
  const t = new Table(
    [
      'collection',
      'encoder',
      'F1: with the encoder (folds)',
      'F1: without an encoder',
      'F1: BM25',
      'with − BM25',
      'with − BM25 + RM3',
      'rounds’ share',
      'nDCG@10: with / without / BM25 + RM3',
    ],
    [4],
  );
  for (const { d, run } of groups) {
    const j = d.json;
    t.add([
      display(j.dataset),
      String(j.config.embeddingsModel),
      foldsF1(j),
      run ? f3(run.json.final?.f1 ?? 0) : '—',
      f3(j.baselines.bm25.f1),
      j.final_vs_bm25 ? pm(j.final_vs_bm25.f1) : '—',
      j.final_vs_rm3 ? pm(j.final_vs_rm3.f1) : '—',
      roundsShare(j),
      `${f3(j.final?.ndcg10 ?? 0)} / ${run ? f3(run.json.final?.ndcg10 ?? 0) : '—'} / ${f3(j.baselines.rm3.ndcg10)}`,
    ]);
  }
  const out = [
    tableWithCommands(
      t,
      'Held-out F1 of the result and of BM25 (its cut-off tuned on each fold’s training queries), means over every held-out query of the folds, the same folds and seed as the run without; differences paired per held-out query, mean ± standard error; rounds’ share: the result’s F1 over that of the same refit made from SFT, − 1. Re-measure, with `npx cogr embeddings serve` on port 8001:',
      groups.map(
        ({ d }) =>
          `- ${display(d.json.dataset)}: \`${evolveCommand(d.json, d.file).replace(/<an endpoint serving [^>]*>/, EMBEDDINGS_URL)}\``,
      ),
    ),
  ];
  if (s.denseAudits.length > 0) {
    const a = new Table(
      [
        'collection',
        'query keywords: with / without',
        'related to the query (MiniLM ≥ 0.3): with / without',
        'taken from the query: with / without',
        'match ≤ 1 item: with / without',
      ],
      [],
    );
    for (const x of s.denseAudits) {
      const q = x.json.query;
      const b = s.noEncoderAudits.find((y) => y.name === x.name)?.json.query;
      const pair = (v: number | undefined, w: number | undefined, f: (n: number) => string) =>
        `${v === undefined ? '—' : f(v)} / ${w === undefined ? '—' : f(w)}`;
      const k = (n: number) => n.toFixed(1);
      a.add([
        display(x.name),
        `${q.keywords} (${k(q.keywordsPerQuery)} a query) / ${b ? `${b.keywords} (${k(b.keywordsPerQuery)} a query)` : '—'}`,
        pair(q.related?.share, b?.related?.share, pct),
        pair(q.shareFromQuery, b?.shareFromQuery, pct),
        pair(q.shareOneItem, b?.shareOneItem, pct),
      ]);
    }
    out.push(
      '',
      tableWithCommands(
        a,
        'The served keywords of `cogr demo --dataset <d> --embeddings-features yes` over every query of the collection, audited as in the README, beside the run without. With the encoder the planner plans only keywords at cosine ≥ 0.3 to the query under it (`--keyword-cosine`), which is the audit’s own test of relatedness: that column says the rule holds where the audit reads the query as the planner did (the audit reads a query’s first 500 characters, the planner all of it), not that an independent judge agrees; the share taken from the query’s own words is a test the rule does not use. Re-measure:',
        s.denseAudits.map((x) => `- ${display(x.name)}: \`${auditCommand(x.name, x.file, 'dense')}\``),
      ),
    );
  }
  return out.join('\n');
}

/** docs/embeddings.md: the stored runs with the built-in encoder (`--embeddings static`), beside the runs without an encoder and with MiniLM, and their served keywords' audits. */
export function staticBlock(s: Sources): string {
  if (s.staticRuns.length === 0) return '_No stored run with the built-in encoder in docs/results/static/._';
  const t = new Table(
    [
      'collection',
      'F1 with it (folds)',
      'without an encoder',
      'with MiniLM',
      'with it − BM25',
      'query keywords a query: with it / without',
      'served keywords related (MiniLM ≥ 0.3): with it / without / with MiniLM',
    ],
    [2, 3],
  );
  const share = (a: { json: AuditJson } | undefined) => (a?.json.query.related ? pct(a.json.query.related.share) : '—');
  for (const r of s.staticRuns) {
    const j = r.json;
    const without = s.noEncoderRuns.find((x) => x.json.dataset === j.dataset);
    const minilm = s.dense.find((x) => x.json.dataset === j.dataset);
    const audit = s.staticAudits.find((a) => a.name === r.name);
    const plain = s.noEncoderAudits.find((a) => a.name === r.name);
    const dense = s.denseAudits.find((a) => a.name === r.name);
    const perQuery = (a: { json: AuditJson } | undefined) => (a ? a.json.query.keywordsPerQuery.toFixed(1) : '—');
    t.add([
      display(j.dataset),
      withFolds(j),
      without ? f3(without.json.final?.f1 ?? 0) : '—',
      minilm ? f3(minilm.json.final?.f1 ?? 0) : '—',
      j.final_vs_bm25 ? pm(j.final_vs_bm25.f1) : '—',
      `${perQuery(audit)} / ${perQuery(plain)}`,
      `${share(audit)} / ${share(plain)} / ${share(dense)}`,
    ]);
  }
  return tableWithCommands(
    t,
    'Held-out F1 of the whole matched set, means over every held-out query of the 5 folds (seed 1, the folds of the runs without an encoder and with MiniLM); − BM25 paired per held-out query, mean ± standard error. The keywords: the served keywords of `cogr demo --dataset <d>` with the built-in encoder, without an encoder and with MiniLM, over every query of the collection, judged by MiniLM (`cogr audit --embeddings`, `cogr embeddings serve` on port 8001). Re-measure:',
    [
      ...s.staticRuns.map(
        (r) => `- ${display(r.json.dataset)}: \`${evolveCommand(r.json, r.file).replace(/<an endpoint serving [^>]*>/, 'static')}\``,
      ),
      ...s.staticAudits.map((a) => `- ${display(a.name)}'s keywords: \`${staticAuditCommand(a.name, a.file)}\``),
    ],
  );
}

/** A stored run's final F1 with its folds' beneath it on one line: "0.563 (0.490 · 0.688 · …)". */
const withFolds = (j: EvolveJson) => `${f3(j.final?.f1 ?? 0)} (${j.perFold.map((f) => f3(f.final?.f1 ?? 0)).join(' · ')})`;

/**
 * docs/embeddings.md: the stored runs with an encoder judging the planned keywords only: MiniLM
 * (the default, the README's runs) and the built-in encoder (no Python), beside the runs
 * without an encoder and with MiniLM's features too, and their served keywords' audits.
 */
export function judgeBlock(s: Sources): string {
  if (s.runs.length === 0) return '_No stored run in docs/results/._';
  const t = new Table(
    [
      'collection',
      'F1, MiniLM judge: the default (folds)',
      'F1, built-in judge (folds)',
      'without an encoder',
      'MiniLM features and judge',
      'judge − BM25: MiniLM / built-in',
      'nDCG@10 − BM25 + RM3: MiniLM / built-in',
      "rounds' share (final / refit from SFT): MiniLM / built-in / without",
      'served keywords related (MiniLM ≥ 0.3): MiniLM judge / built-in judge / without',
    ],
    [3, 4],
  );
  const share = (a: { json: AuditJson } | undefined) => (a?.json.query.related ? pct(a.json.query.related.share) : '—');
  for (const r of s.runs) {
    const j = r.json;
    const without = s.noEncoderRuns.find((x) => x.json.dataset === j.dataset);
    const minilm = s.dense.find((x) => x.json.dataset === j.dataset);
    const builtIn = s.staticJudgeRuns.find((x) => x.json.dataset === j.dataset)?.json;
    const both = <T>(f: (x: EvolveJson) => T | undefined, show: (v: T) => string) =>
      [j, builtIn].map((x) => (x && f(x) !== undefined ? show(f(x)!) : '—')).join(' / ');
    t.add([
      display(j.dataset),
      withFolds(j),
      builtIn ? withFolds(builtIn) : '—',
      without ? f3(without.json.final?.f1 ?? 0) : '—',
      minilm ? f3(minilm.json.final?.f1 ?? 0) : '—',
      both((x) => x.final_vs_bm25?.f1, pm),
      both((x) => x.final_vs_rm3?.ndcg10, pm),
      `${both((x) => x, roundsShare)} / ${without ? roundsShare(without.json) : '—'}`,
      [s.audits, s.staticJudgeAudits, s.noEncoderAudits].map((as) => share(as.find((a) => a.name === r.name))).join(' / '),
    ]);
  }
  return tableWithCommands(
    t,
    'Held-out figures, means over every held-out query of the 5 folds (seed 1, the same folds for every run); differences paired per held-out query, mean ± standard error. The keywords: the served keywords of `cogr demo --dataset <d>` with MiniLM (the default) or the built-in encoder as the judge, and without an encoder, over every query of the collection, judged by MiniLM (`cogr audit --embeddings`). Re-measure (MiniLM as the judge: the README’s commands; the audits with `npx cogr embeddings serve` on port 8001):',
    [
      ...s.staticJudgeRuns.map((r) => `- ${display(r.json.dataset)}, built-in: \`${evolveCommand(r.json, r.file)}\``),
      ...s.noEncoderRuns.map((r) => `- ${display(r.json.dataset)}, without an encoder: \`${evolveCommand(r.json, r.file)}\``),
      ...s.staticJudgeAudits.map((a) => `- ${display(a.name)}'s keywords, built-in: \`${staticJudgeAuditCommand(a.name, a.file)}\``),
      ...s.noEncoderAudits.map((a) => `- ${display(a.name)}'s keywords, without an encoder: \`${auditCommand(a.name, a.file, 'none')}\``),
    ],
  );
}

/** docs/method.md: the stored runs with every matched set cut where its expected F1 peaks (`--cut yes`), beside the stored runs of the default (`--cut auto`). */
export function cutBlock(s: Sources): string {
  if (s.cutRuns.length === 0) return '_No stored run with the matched sets cut in docs/results/cut/._';
  const t = new Table(
    [
      'collection',
      'F1, `--cut yes` (folds)',
      'F1, `--cut auto` (folds)',
      'folds auto cut',
      'yes − BM25',
      'auto − BM25',
      'nDCG@10 − BM25 + RM3: yes / auto',
      "rounds' share: yes / auto",
      'items served a query: yes / auto',
    ],
    [1, 2],
  );
  for (const r of s.cutRuns) {
    const j = r.json;
    const w = s.noEncoderRuns.find((x) => x.json.dataset === j.dataset)?.json;
    t.add([
      display(j.dataset),
      withFolds(j),
      w ? withFolds(w) : '—',
      w ? `${w.perFold.filter((f) => f.final?.served_set?.set === 'cut').length} of ${w.perFold.length}` : '—',
      j.final_vs_bm25 ? pm(j.final_vs_bm25.f1) : '—',
      w?.final_vs_bm25 ? pm(w.final_vs_bm25.f1) : '—',
      `${j.final_vs_rm3 ? pm(j.final_vs_rm3.ndcg10) : '—'} / ${w?.final_vs_rm3 ? pm(w.final_vs_rm3.ndcg10) : '—'}`,
      `${roundsShare(j)} / ${w ? roundsShare(w) : '—'}`,
      `${(j.final?.meanMatched ?? 0).toFixed(1)} / ${w ? (w.final?.meanMatched ?? 0).toFixed(1) : '—'}`,
    ]);
  }
  return tableWithCommands(
    t,
    'Runs without an encoder (`--embeddings none`). Held-out figures, means over every held-out query of the 5 folds (seed 1, the folds of the stored runs); differences paired per held-out query, mean ± standard error. `auto` cuts a fold’s sets when its core training queries, planned as held out at SFT, gain from the cut by the adoption test; the other folds serve the whole matched sets. Re-measure:',
    s.cutRuns.flatMap((r) => {
      const w = s.noEncoderRuns.find((x) => x.json.dataset === r.json.dataset);
      return [
        `- ${display(r.json.dataset)}, yes: \`${evolveCommand(r.json, r.file)}\``,
        ...(w ? [`- ${display(r.json.dataset)}, auto: \`${evolveCommand(w.json, w.file)}\``] : []),
      ];
    }),
  );
}

/** docs/results.md: how far each collection's stored run is from the ceilings the rule allows (`cogr oracle`). */
export function oracleBlock(s: Sources): string {
  if (s.oracle.length === 0) return '_No stored ceiling analysis in docs/results/oracle/._';
  const t = new Table(
    [
      'collection',
      'oracle query side: any keyword',
      'oracle query side: shared keywords',
      'oracle query side: what the planner may plan',
      'cogr: SFT / result',
      'BM25',
      'nDCG@10: perfect order of the served set / cogr / BM25',
    ],
    [],
  );
  const folds = (j: OracleJson, key: Exclude<keyof OracleJson['perFold'][number], 'oracle_planned_query_f1'>) =>
    foldList(j.perFold.map((r) => r[key]));
  for (const { name, json: j } of s.oracle) {
    const m = j.mean;
    t.add([
      display(name),
      `${f3(m.oracle_query_f1)}<br>${folds(j, 'oracle_query_f1')}`,
      `${f3(m.oracle_shared_query_f1)}<br>${folds(j, 'oracle_shared_query_f1')}`,
      m.oracle_planned_query_f1 === undefined
        ? '—'
        : `**${f3(m.oracle_planned_query_f1)}**<br>${foldList(j.perFold.map((r) => r.oracle_planned_query_f1 ?? NaN))}`,
      `${f3(m.sft_f1)} / ${f3(m.final_f1)}<br>${folds(j, 'final_f1')}`,
      `${f3(m.bm25_f1)}<br>${folds(j, 'bm25_f1')}`,
      `${f3(m.perfect_order_ndcg10)} / ${f3(m.final_ndcg10)} / ${f3(m.bm25_ndcg10)}`,
    ]);
  }
  return tableWithCommands(
    t,
    "Held-out F1 of the matched set, means over every held-out query of the folds (each fold beneath). The oracle query side knows the judgements: per query it adds, greedily, the keyword of its relevant items' SFT keywords that most raises the F1 of the matched set (K_max at most); with shared keywords only, among those the run's `--min-carriers` items carry (no titles); with what the planner may plan, among those shared keywords the ones related to the query by the planner's rule (a word of the query, or NPMI ≥ the run's `--relatedness` with one): the ceiling of the run's own planner. Re-measure:",
    s.oracle.map((r) => `- ${display(r.name)}: \`${oracleCommand(r.json, r.file)}\``),
  );
}
