/**
 * `npm run bench -- crosscheck [--datasets med,cisi,nfcorpus] [--runs DIR] [--json]`
 *
 * cogr's figures against the reference tools, on the shipped collections:
 * 1. Metrics: every metric cogr reports (set P, R, F1 of a query's whole list; nDCG, P,
 *    R, MAP cut at 1, 3, 10, 100, 1000; MAP; MRR; hit = success) of cogr's run files
 *    (BM25 and RM3 over both analyses, the model baseline, and any `<dataset>.*.run` in
 *    `--runs DIR`, e.g. `cogr evolve --run-file`) equal pytrec_eval's on the same file,
 *    query by query, to 1e-9 (every judged query counted; one a run lacks is 0 on both).
 * 2. BM25: cogr's (Lucene analysis) against Lucene's BM25 through Anserini's
 *    SimpleSearcher (k1 1.2, b 0.75) over an index built with Lucene's IndexWriter and
 *    Anserini's DefaultEnglishAnalyzer (Pyserini's default): nDCG@10 of both by
 *    pytrec_eval (within 0.01), mean top-10 overlap, queries whose top 10 are identical;
 *    the differences explained by re-scoring cogr's BM25 with the document lengths Lucene
 *    keeps (SmallFloat, one byte per document) and by counting the tokens cogr's analysis
 *    and Lucene's differ on, document by document.
 * 3. RM3: cogr's against Anserini's (10 feedback terms, 10 feedback documents, original
 *    query weight 0.5) the same way, and cogr's with Anserini's feedback item vectors
 *    (`docVectors: 'anserini'`: each item's words cut to its 10 most frequent, tf over
 *    their sum, where cogr's RM3 keeps every word at tf / |d|).
 * The Python side (bench/crosscheck/crosscheck.py) runs in its own venv
 * (bench/crosscheck/setup.sh, pinned requirements.txt, ~/.cache/cogr/venvs/crosscheck)
 * with a JDK ≥ 21 ($COGR_JAVA_HOME, else the newest under /usr/lib/jvm or /opt), inside a
 * network namespace without interfaces (`unshare -n` as root, else `unshare -rn`): any
 * attempt to reach the network fails. Exits non-zero when a check fails.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { luceneEnglishTokens } from '../index/text/english.ts';
import { packageRoot } from '../index/core/paths.ts';
import { itemText, runBm25Baseline } from '../src/baseline/bm25.ts';
import { runModelBaseline } from '../src/baseline/model.ts';
import { RM3_DEFAULTS, runRm3Baseline } from '../src/baseline/rm3.ts';
import { loadDataset } from '../src/datasets/index.ts';
import { evaluateRun, type RankedScores } from '../src/metrics.ts';
import { judgedQueryIds } from '../src/splits.ts';
import { renderTable } from '../src/table.ts';
import { formatQrels, readRunFile, trecOrder, writeRunFile, type RunQuery, type ScoredId } from '../src/trec.ts';
import type { Corpus } from '../index/core/types.ts';
import { parseBenchArgs } from './args.ts';

const K1 = 1.2;
const B = 0.75;
const DEPTH = 1000;
const TOLERANCE = 1e-9;
const CUTS = [1, 3, 10, 100, 1000];
const PYTHON_DEADLINE_MS = 60 * 60 * 1000;

type TrecMeasures = Record<string, Record<string, number>>;
interface PyDataset {
  cogr: Record<string, TrecMeasures>;
  lucene: { bm25: TrecMeasures; rm3: TrecMeasures };
  lucene_runs: { bm25: Record<string, Record<string, number>>; rm3: Record<string, Record<string, number>> };
  analysis: {
    docs: number;
    docs_identical: number;
    tokens_cogr: number;
    tokens_lucene: number;
    differing_tokens: number;
    top_differences: [string, number][];
    queries: number;
    queries_identical: number;
  };
  norm_lengths: Record<string, number>;
  seconds: number;
}
interface PyOut {
  jar: string;
  lucene: string;
  java: string;
  datasets: Record<string, PyDataset>;
}

function log(msg: string): void {
  process.stderr.write(`crosscheck: ${msg}\n`);
}

/** cogr's metric → trec_eval's measure name. */
function measurePairs(): [string, (r: RankedScores, set: { precision: number; recall: number; f1: number }) => number, string][] {
  const out: [string, (r: RankedScores, set: { precision: number; recall: number; f1: number }) => number, string][] = [
    ['P (set)', (_r, s) => s.precision, 'set_P'],
    ['R (set)', (_r, s) => s.recall, 'set_recall'],
    ['F1 (set)', (_r, s) => s.f1, 'set_F'],
    ['MAP', (r) => r['ap@1000'], 'map'],
    ['MRR', (r) => r['mrr@1000'], 'recip_rank'],
  ];
  for (const k of CUTS) {
    out.push([`nDCG@${k}`, (r) => r[`ndcg@${k}`], `ndcg_cut_${k}`]);
    out.push([`P@${k}`, (r) => r[`p@${k}`], `P_${k}`]);
    out.push([`R@${k}`, (r) => r[`r@${k}`], `recall_${k}`]);
    out.push([`AP@${k}`, (r) => r[`ap@${k}`], `map_cut_${k}`]);
    out.push([`hit@${k}`, (r) => r[`hit@${k}`], `success_${k}`]);
  }
  return out;
}

/** A JDK ≥ 21: $COGR_JAVA_HOME, else the newest under /usr/lib/jvm and /opt. */
function javaHome(): string {
  const env = process.env.COGR_JAVA_HOME;
  if (env) return env;
  const found: { home: string; major: number }[] = [];
  for (const root of ['/usr/lib/jvm', '/opt']) {
    if (!existsSync(root)) continue;
    for (const name of readdirSync(root)) {
      const home = join(root, name);
      const release = join(home, 'release');
      if (!existsSync(join(home, 'bin', 'java')) || !existsSync(release)) continue;
      const m = /JAVA_VERSION="(\d+)/.exec(readFileSync(release, 'utf8'));
      if (m) found.push({ home, major: Number(m[1]) });
    }
  }
  const ok = found.filter((f) => f.major >= 21).sort((a, b) => b.major - a.major);
  if (ok.length === 0) throw new Error('crosscheck: no JDK >= 21 under /usr/lib/jvm or /opt (Anserini needs it); set COGR_JAVA_HOME');
  return ok[0].home;
}

/** Run the Python side inside a network namespace without interfaces, with a deadline. */
async function runPython(python: string, input: string, java: string): Promise<PyOut> {
  const script = join(packageRoot(), 'bench', 'crosscheck', 'crosscheck.py');
  const ns = process.getuid?.() === 0 ? ['-n'] : ['-r', '-n'];
  const env: NodeJS.ProcessEnv = {
    PATH: `${join(java, 'bin')}:${process.env.PATH ?? ''}`,
    HOME: process.env.HOME ?? '/tmp',
    JAVA_HOME: java,
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    LANG: 'C.UTF-8',
  };
  log(`python side: unshare ${ns.join(' ')} ${python} ${basename(script)} (JAVA_HOME ${java}; no network)`);
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', [...ns, python, script, input], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => chunks.push(b));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`crosscheck: the Python side did not finish within ${PYTHON_DEADLINE_MS / 60000} minutes`));
    }, PYTHON_DEADLINE_MS);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`crosscheck: the Python side exited with ${code}`));
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as PyOut);
      } catch (e) {
        reject(new Error(`crosscheck: the Python side's output is not JSON (${(e as Error).message})`));
      }
    });
  });
}

/** cogr's per-query figures of a run over every judged query (as `cogr eval`). */
function cogrPerQuery(
  corpus: Corpus,
  run: readonly RunQuery[],
): Map<string, { ranked: RankedScores; set: { precision: number; recall: number; f1: number } }> {
  const by = new Map(run.map((q) => [q.queryId, q.hits]));
  const ev = evaluateRun(
    judgedQueryIds(corpus).map((id) => {
      const hits = by.get(id) ?? [];
      return { queryId: id, ranked: hits.map((h) => h.id), scores: hits.map((h) => h.score), matched: hits.map((h) => h.id) };
    }),
    corpus,
    { cutoffs: CUTS },
  );
  return new Map(ev.perQuery.map((q) => [q.queryId, { ranked: q.ranked, set: q.set! }]));
}

/** BM25 over cogr's Lucene-analysis tokens with the given document lengths (exact, or Lucene's one-byte ones). */
function bm25Run(
  docs: { id: string; tokens: string[] }[],
  queries: { id: string; tokens: string[] }[],
  lengthOf: (n: number) => number,
): RunQuery[] {
  const N = docs.length;
  const postings = new Map<string, { d: number; tf: number }[]>();
  let total = 0;
  docs.forEach((doc, d) => {
    total += doc.tokens.length;
    const tf = new Map<string, number>();
    for (const t of doc.tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
    for (const [t, n] of tf) {
      let p = postings.get(t);
      if (!p) postings.set(t, (p = []));
      p.push({ d, tf: n });
    }
  });
  const avgdl = total / N;
  const norm = docs.map((doc) => K1 * (1 - B + (B * lengthOf(doc.tokens.length)) / avgdl));
  return queries.map((q) => {
    const counts = new Map<string, number>();
    for (const t of q.tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
    const score = new Map<number, number>();
    for (const [t, c] of counts) {
      const p = postings.get(t);
      if (!p) continue;
      const idf = Math.log(1 + (N - p.length + 0.5) / (p.length + 0.5));
      for (const { d, tf } of p) score.set(d, (score.get(d) ?? 0) + (c * idf * tf * (K1 + 1)) / (tf + norm[d]));
    }
    return { queryId: q.id, hits: trecOrder([...score].map(([d, s]) => ({ id: docs[d].id, score: s }))).slice(0, DEPTH) };
  });
}

function asRun(r: Record<string, Record<string, number>>): Map<string, ScoredId[]> {
  return new Map(Object.entries(r).map(([q, docs]) => [q, trecOrder(Object.entries(docs).map(([id, score]) => ({ id, score })))]));
}

/** Mean top-k overlap |A ∩ B| / k, and how many queries have the same top k (as a set and in order). */
function overlap(
  ids: readonly string[],
  a: Map<string, readonly ScoredId[]>,
  b: Map<string, readonly ScoredId[]>,
  k = 10,
): { overlap: number; sameSet: number; sameOrder: number } {
  let sum = 0;
  let sameSet = 0;
  let sameOrder = 0;
  for (const id of ids) {
    const x = (a.get(id) ?? []).slice(0, k).map((h) => h.id);
    const y = (b.get(id) ?? []).slice(0, k).map((h) => h.id);
    const ys = new Set(y);
    const inter = x.filter((d) => ys.has(d)).length;
    sum += inter / k;
    if (inter === x.length && x.length === y.length) sameSet++;
    if (x.length === y.length && x.every((d, i) => d === y[i])) sameOrder++;
  }
  return { overlap: sum / Math.max(1, ids.length), sameSet, sameOrder };
}

/** Mean of a pytrec_eval measure over every judged query (absent = 0). */
function meanOf(m: TrecMeasures, ids: readonly string[], name: string): number {
  return ids.reduce((s, id) => s + (m[id]?.[name] ?? 0), 0) / Math.max(1, ids.length);
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const datasets = a.string('--datasets', 'med,cisi,nfcorpus').split(',').filter(Boolean);
  const runsDir = a.string('--runs', '');
  const keep = a.has('--keep');
  const setup = join(packageRoot(), 'bench', 'crosscheck', 'setup.sh');
  const s = spawnSync('sh', [setup], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 30 * 60 * 1000 });
  if (s.status !== 0) throw new Error(`crosscheck: ${setup} failed (exit ${s.status ?? s.signal})`);
  const python = s.stdout.trim().split('\n').pop()!;
  const java = javaHome();
  const root = mkdtempSync(join(tmpdir(), 'cogr-crosscheck-'));
  const local = new Map<
    string,
    { corpus: Corpus; runs: Map<string, RunQuery[]>; docs: { id: string; tokens: string[] }[]; queries: { id: string; tokens: string[] }[] }
  >();
  try {
    for (const name of datasets) {
      const t0 = Date.now();
      const { corpus } = await loadDataset(name);
      const dir = join(root, corpus.name);
      mkdirSync(join(dir, 'runs'), { recursive: true });
      const docs = corpus.items.map((it) => ({ id: it.id, contents: itemText(it) }));
      const docTokens = docs.map((d) => ({ id: d.id, tokens: luceneEnglishTokens(d.contents) }));
      writeFileSync(
        join(dir, 'docs.jsonl'),
        docs.map((d, i) => JSON.stringify({ id: d.id, contents: d.contents, cogr_tokens: docTokens[i].tokens })).join('\n') + '\n',
      );
      const text = new Map(corpus.queries.map((q) => [q.id, q.text]));
      const judged = judgedQueryIds(corpus);
      const queries = judged.map((id) => ({ id, tokens: luceneEnglishTokens(text.get(id) ?? '') }));
      writeFileSync(
        join(dir, 'queries.tsv'),
        judged
          .map((id, i) => `${id}\t${(text.get(id) ?? '').replace(/[\t\n\r]+/g, ' ')}\t${JSON.stringify(queries[i].tokens)}`)
          .join('\n') + '\n',
      );
      writeFileSync(join(dir, 'qrels.txt'), formatQrels(corpus.qrels));
      const runs = new Map<string, RunQuery[]>();
      const bm25: RunQuery[] = [];
      runBm25Baseline(corpus, { analysis: 'lucene', run: bm25 });
      runs.set('bm25-lucene', bm25);
      const bm25w: RunQuery[] = [];
      runBm25Baseline(corpus, { analysis: 'wink', run: bm25w });
      runs.set('bm25-wink', bm25w);
      const rm3: RunQuery[] = [];
      runRm3Baseline(corpus, { analysis: 'lucene', run: rm3 });
      runs.set('rm3-lucene', rm3);
      const rm3a: RunQuery[] = [];
      runRm3Baseline(corpus, { analysis: 'lucene', run: rm3a, rm3: { docVectors: 'anserini' } });
      runs.set('rm3-lucene-anserini-vectors', rm3a);
      const model: RunQuery[] = [];
      runModelBaseline(corpus, { run: model });
      runs.set('model', model);
      if (runsDir) {
        for (const f of readdirSync(runsDir)) {
          if (!f.startsWith(`${corpus.name}.`) || !f.endsWith('.run')) continue;
          const r = readRunFile(join(runsDir, f), {
            queries: new Set(corpus.queries.map((q) => q.id)),
            items: new Set(corpus.items.map((i) => i.id)),
          });
          runs.set(f.slice(corpus.name.length + 1, -4), r);
        }
      }
      for (const [n, r] of runs) await writeRunFile(join(dir, 'runs', `${n}.run`), r, `cogr-${n}`);
      writeFileSync(
        join(dir, 'config.json'),
        JSON.stringify({
          k1: K1,
          b: B,
          fb_terms: RM3_DEFAULTS.fbTerms,
          fb_docs: RM3_DEFAULTS.fbDocs,
          original_query_weight: RM3_DEFAULTS.originalQueryWeight,
          depth: DEPTH,
        }),
      );
      local.set(corpus.name, { corpus, runs, docs: docTokens, queries });
      log(
        `${corpus.name}: ${docs.length} documents, ${judged.length} judged queries, ${runs.size} cogr runs written (${((Date.now() - t0) / 1000).toFixed(1)}s)`,
      );
    }
    const py = await runPython(python, root, java);
    const report: Record<string, unknown> = { jar: py.jar, lucene: py.lucene, java: py.java, tolerance: TOLERANCE, datasets: {} };
    let failed = false;
    const metricRows: string[][] = [];
    const rankRows: string[][] = [];
    const f4 = (x: number) => x.toFixed(4);
    for (const [name, l] of local) {
      const p = py.datasets[name];
      if (!p) throw new Error(`crosscheck: the Python side has no figures for ${name}`);
      const judged = judgedQueryIds(l.corpus);
      // 1. Metrics, query by query.
      const metrics: Record<string, { comparisons: number; maxDiff: number; worst: string | null }> = {};
      for (const [runName, r] of l.runs) {
        const mine = cogrPerQuery(l.corpus, r);
        const theirs = p.cogr[runName];
        let comparisons = 0;
        let maxDiff = 0;
        let worst: string | null = null;
        for (const id of judged) {
          const m = mine.get(id)!;
          for (const [label, get, trec] of measurePairs()) {
            const a = get(m.ranked, m.set);
            const b = theirs[id]?.[trec] ?? 0;
            const d = Math.abs(a - b);
            comparisons++;
            if (d > maxDiff) {
              maxDiff = d;
              worst = `query ${id} ${label}: cogr ${a}, pytrec_eval ${b}`;
            }
          }
        }
        metrics[runName] = { comparisons, maxDiff, worst };
        const ok = maxDiff <= TOLERANCE;
        if (!ok) failed = true;
        metricRows.push([name, runName, String(comparisons), maxDiff.toExponential(1), ok ? 'ok' : `FAIL (${worst})`]);
      }
      // 2./3. Rankings against Lucene's.
      const luceneBm25 = asRun(p.lucene_runs.bm25);
      const luceneRm3 = asRun(p.lucene_runs.rm3);
      const mineBm25 = new Map(l.runs.get('bm25-lucene')!.map((q) => [q.queryId, q.hits]));
      const mineRm3 = new Map(l.runs.get('rm3-lucene')!.map((q) => [q.queryId, q.hits]));
      const mineRm3a = new Map(l.runs.get('rm3-lucene-anserini-vectors')!.map((q) => [q.queryId, q.hits]));
      const exact = new Map(bm25Run(l.docs, l.queries, (n) => n).map((q) => [q.queryId, q.hits]));
      const lossy = new Map(bm25Run(l.docs, l.queries, (n) => p.norm_lengths[String(n)] ?? n).map((q) => [q.queryId, q.hits]));
      const nd = (m: TrecMeasures) => meanOf(m, judged, 'ndcg_cut_10');
      const cogrBm25 = nd(p.cogr['bm25-lucene']);
      const lucBm25 = nd(p.lucene.bm25);
      const cogrRm3 = nd(p.cogr['rm3-lucene']);
      const lucRm3 = nd(p.lucene.rm3);
      const bm25Ok = Math.abs(cogrBm25 - lucBm25) <= 0.01;
      if (!bm25Ok) failed = true;
      const ovBm25 = overlap(judged, mineBm25, luceneBm25);
      const ovExact = overlap(judged, exact, mineBm25);
      const ovLossy = overlap(judged, lossy, luceneBm25);
      const ovRm3 = overlap(judged, mineRm3, luceneRm3);
      const ovRm3a = overlap(judged, mineRm3a, luceneRm3);
      const cogrRm3a = nd(p.cogr['rm3-lucene-anserini-vectors']);
      const ovLossyOrder = ovLossy.sameOrder;
      const distinctLengths = new Set(l.docs.map((d) => d.tokens.length)).size;
      const keptLengths = new Set(l.docs.map((d) => p.norm_lengths[String(d.tokens.length)])).size;
      const n = judged.length;
      rankRows.push([
        name,
        'BM25',
        f4(cogrBm25),
        f4(lucBm25),
        f4(cogrBm25 - lucBm25),
        f4(ovBm25.overlap),
        `${ovBm25.sameSet}/${n}`,
        `${ovBm25.sameOrder}/${n}`,
        `${ovLossy.sameSet}/${n}, ${ovLossyOrder}/${n}`,
        bm25Ok ? 'ok' : 'FAIL',
      ]);
      rankRows.push([
        name,
        'BM25 + RM3',
        f4(cogrRm3),
        f4(lucRm3),
        f4(cogrRm3 - lucRm3),
        f4(ovRm3.overlap),
        `${ovRm3.sameSet}/${n}`,
        `${ovRm3.sameOrder}/${n}`,
        '',
        '',
      ]);
      rankRows.push([
        name,
        "BM25 + RM3, Anserini's item vectors",
        f4(cogrRm3a),
        f4(lucRm3),
        f4(cogrRm3a - lucRm3),
        f4(ovRm3a.overlap),
        `${ovRm3a.sameSet}/${n}`,
        `${ovRm3a.sameOrder}/${n}`,
        '',
        '',
      ]);
      (report.datasets as Record<string, unknown>)[name] = {
        queries: n,
        metrics,
        bm25: {
          cogr: {
            ndcg10: cogrBm25,
            map: meanOf(p.cogr['bm25-lucene'], judged, 'map'),
            r100: meanOf(p.cogr['bm25-lucene'], judged, 'recall_100'),
          },
          lucene: { ndcg10: lucBm25, map: meanOf(p.lucene.bm25, judged, 'map'), r100: meanOf(p.lucene.bm25, judged, 'recall_100') },
          top10: ovBm25,
          cogrWithLuceneLengths: { top10VsLucene: ovLossy },
          referenceScorerVsCogr: ovExact,
          lengths: { distinct: distinctLengths, keptByLucene: keptLengths },
        },
        rm3: {
          cogr: { ndcg10: cogrRm3, map: meanOf(p.cogr['rm3-lucene'], judged, 'map') },
          cogrAnseriniVectors: {
            ndcg10: cogrRm3a,
            map: meanOf(p.cogr['rm3-lucene-anserini-vectors'], judged, 'map'),
            top10VsLucene: ovRm3a,
          },
          lucene: { ndcg10: lucRm3, map: meanOf(p.lucene.rm3, judged, 'map') },
          top10: ovRm3,
        },
        bm25Wink: { ndcg10: nd(p.cogr['bm25-wink']) },
        analysis: p.analysis,
        pythonSeconds: p.seconds,
      };
    }
    if (json) process.stdout.write(JSON.stringify({ ok: !failed, ...report }) + '\n');
    else {
      process.stdout.write(
        `crosscheck (${py.jar}, Lucene ${py.lucene}, Java ${py.java}; Python side without network)\n\nmetrics: cogr's per-query figures against pytrec_eval's on the same run file (tolerance ${TOLERANCE})\n`,
      );
      process.stdout.write(renderTable(['dataset', 'run', 'comparisons', 'max |diff|', 'check'], metricRows, { right: [2, 3] }));
      process.stdout.write(
        `\nrankings: cogr (Lucene analysis) against Anserini's SimpleSearcher (k1 ${K1}, b ${B}; RM3 ${RM3_DEFAULTS.fbTerms} terms, ${RM3_DEFAULTS.fbDocs} docs, weight ${RM3_DEFAULTS.originalQueryWeight}), nDCG@10 by pytrec_eval over every judged query\n`,
      );
      process.stdout.write(
        renderTable(
          [
            'dataset',
            'ranking',
            'cogr nDCG@10',
            'Lucene nDCG@10',
            'diff',
            'top-10 overlap',
            'same top-10 set',
            'same top-10 order',
            'same set, order with Lucene lengths',
            'check',
          ],
          rankRows,
          { right: [2, 3, 4, 5, 6, 7, 8] },
        ),
      );
      const an = [...local.keys()].map((name) => {
        const x = py.datasets[name].analysis;
        return [
          name,
          `${x.docs_identical}/${x.docs}`,
          `${x.queries_identical}/${x.queries}`,
          String(x.differing_tokens),
          `${x.tokens_cogr}/${x.tokens_lucene}`,
          x.top_differences
            .slice(0, 6)
            .map(([t, c]) => `${t}×${c}`)
            .join(' '),
        ];
      });
      process.stdout.write(
        "\nanalysis: cogr's Lucene-analysis tokens against Lucene's (AnalyzerUtils.analyze with DefaultEnglishAnalyzer)\n",
      );
      process.stdout.write(
        renderTable(
          ['dataset', 'docs identical', 'queries identical', 'tokens differing', 'tokens cogr/Lucene', 'most frequent differences'],
          an,
          { right: [1, 2, 3, 4] },
        ),
      );
    }
    if (failed) process.exitCode = 1;
  } finally {
    if (keep) log(`inputs kept in ${root}`);
    else rmSync(root, { recursive: true, force: true });
  }
}
