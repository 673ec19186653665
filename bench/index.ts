/**
 * `npm run bench -- index [--items N] [--queries Q] [--seed S] [--time MS]
 *                          [--peer-budget SEC] [--store-items N] [--skip-nfcorpus]
 *                          [--skip-synthetic] [--json]`
 *
 * The keyword index against two peers, same process, same keyword bags:
 * - `cogr`: KeywordView (index/view.ts) built from the entries: CSR postings in typed
 *   arrays. matched = the whole CoGR matched set (`view.match`, keyword-level OR incl.
 *   the self keyword); top-10 = `view.search(probe, {k: 10})` (BM25 over words).
 * - `flexsearch`: an `Index` whose documents are the entity's normalised keywords (self
 *   included), each keyword one token (custom `encode` splitting on "|"); a probe is its
 *   keywords joined by "|" searched with `suggest: true` (union of the tokens), which
 *   is the same matched set as ours; top-10 is flexsearch's own ranking.
 * - `wink`: wink-bm25-text-search over the words of the same bags (BM25, k1 = 1.2,
 *   b = 0.75); a probe is its words. Its result set is every entity sharing a WORD
 *   (a superset of the CoGR set); matched = `search(words, N)`, top-10 = `search(words, 10)`.
 * Build time and memory (heap + external/ArrayBuffer delta and RSS delta after a forced
 * GC, structures kept alive) per system; latency p50/p99 with tinybench over a rotating
 * list of probes. A peer that does not finish building within --peer-budget seconds
 * (default 180) is reported as such, with how many entities it had added.
 * `store` rows: committing the entries as one generation to LevelDB
 * (KeywordIndexStore, temp dir; at most --store-items entities, default 100,000) and
 * opening the view back.
 *
 * Synthetic corpus (seeded, `synthetic()`): a vocabulary of W = 20,000 + N/20 words
 * ("w<base36>") drawn Zipf(s = 1.07); K = max(2,000, N/4) keyword phrases of 1–3 words
 * (30/45/25 %) drawn from it; every item has 5–15 keywords drawn Zipf–Mandelbrot
 * (s = 1.0, q = 100, so no single phrase sits in most items) over the phrases and a
 * 4-word title; a query takes 3 keywords of a random item plus 2
 * Zipf-drawn phrases, and a 3-word self string.
 *
 * NFCorpus (data/nfcorpus/d-collection.docs, `id<TAB>text`): each document keyed by its
 * 10 best TF-IDF unigrams/bigrams (tokens of ≥ 3 letters, "num" and a short stop list
 * removed), self keyword = its id; probes are q-titles.queries: self = the query text,
 * keywords = its unigrams and bigrams (same filter).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Index } from 'flexsearch';
import { Bench } from 'tinybench';
import { openDb } from '../index/db.ts';
import { keywordWords, normalizeKeyword, normalizeSelf } from '../index/normalize.ts';
import { createRng, randInt, type Rng } from '../index/random.ts';
import { KeywordIndexStore } from '../index/store.ts';
import type { IndexEntry } from '../index/types.ts';
import { KeywordView, type Probe } from '../index/view.ts';
import { parseBenchArgs } from './args.ts';
import { nfcorpusDocs, nfcorpusTitleQueries } from './fixtures.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface WinkEngine {
  defineConfig(c: { fldWeights: Record<string, number>; bm25Params?: { k1: number; b: number; k: number } }): void;
  definePrepTasks(t: ((s: string) => string[])[]): void;
  addDoc(doc: Record<string, string>, id: string | number): void;
  consolidate(fp?: number): void;
  search(text: string, limit?: number): [string | number, number][];
}
const winkFactory = createRequire(import.meta.url)('wink-bm25-text-search') as () => WinkEngine;

// ---- corpora -----------------------------------------------------------------------

/** Zipf–Mandelbrot ranks: P(r) ∝ 1 / (r + 1 + q)^s, r = 0..n−1 (q = 0 is plain Zipf). */
function zipfSampler(n: number, s: number, rng: Rng, q = 0): () => number {
  const cdf = new Float64Array(n);
  let acc = 0;
  for (let r = 0; r < n; r++) {
    acc += 1 / Math.pow(r + 1 + q, s);
    cdf[r] = acc;
  }
  return () => {
    const x = rng() * acc;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

export function synthetic(n: number, queries: number, seed: number): { entries: IndexEntry[]; probes: Probe[] } {
  const rng = createRng(seed);
  const W = 20_000 + Math.floor(n / 20);
  const words = Array.from({ length: W }, (_, i) => `w${i.toString(36)}`);
  const word = zipfSampler(W, 1.07, rng);
  const K = Math.max(2_000, Math.floor(n / 4));
  const phrases = Array.from({ length: K }, () => {
    const u = rng();
    const len = u < 0.3 ? 1 : u < 0.75 ? 2 : 3;
    return Array.from({ length: len }, () => words[word()]).join(' ');
  });
  const phrase = zipfSampler(K, 1.0, rng, 100);
  const entries: IndexEntry[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const m = 5 + randInt(rng, 11);
    const kws: string[] = new Array(m);
    for (let j = 0; j < m; j++) kws[j] = phrases[phrase()];
    entries[i] = { id: `i${i}`, self: `${words[word()]} ${words[word()]} ${words[word()]} ${words[word()]}`, keywords: kws };
  }
  const probes: Probe[] = [];
  for (let q = 0; q < queries; q++) {
    const e = entries[randInt(rng, n)];
    const kws = [e.keywords[randInt(rng, e.keywords.length)], e.keywords[randInt(rng, e.keywords.length)], e.keywords[randInt(rng, e.keywords.length)]];
    kws.push(phrases[phrase()], phrases[phrase()]);
    probes.push({ self: `${words[word()]} ${words[word()]} ${words[word()]}`, keywords: kws });
  }
  return { entries, probes };
}

const STOP = new Set('the and for with from that this were was are has have had not but its into than then also been which their these those between during after before over under more most such other each both only can may our all any per via about'.split(' '));
function tokens(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^a-z0-9-]+/)
    .filter((t) => t.length >= 3 && t !== 'num' && !STOP.has(t));
}
function grams(toks: string[]): string[] {
  const out = [...toks];
  for (let i = 0; i + 1 < toks.length; i++) out.push(`${toks[i]} ${toks[i + 1]}`);
  return out;
}

export function nfcorpus(): { entries: IndexEntry[]; probes: Probe[] } {
  const docs = nfcorpusDocs().map((d) => ({ id: d.id, grams: grams(tokens(d.text)) }));
  const df = new Map<string, number>();
  for (const d of docs) for (const g of new Set(d.grams)) df.set(g, (df.get(g) ?? 0) + 1);
  const entries: IndexEntry[] = docs.map((d) => {
    const tf = new Map<string, number>();
    for (const g of d.grams) tf.set(g, (tf.get(g) ?? 0) + 1);
    const ranked = [...tf].map(([g, f]) => [g, f * Math.log(docs.length / df.get(g)!)] as const).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    return { id: d.id, self: d.id, keywords: ranked.slice(0, 10).map(([g]) => g) };
  });
  const probes = nfcorpusTitleQueries().map((q) => ({ self: q.text, keywords: grams(tokens(q.text)) }));
  return { entries, probes };
}

// ---- systems -----------------------------------------------------------------------

interface System {
  name: string;
  built: number;
  complete: boolean;
  buildMs: number;
  heapMB: number;
  rssMB: number;
  match?: (p: number) => number;
  topk?: (p: number) => number;
}

function mem(): { heap: number; rss: number } {
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed + m.external, rss: m.rss };
}

/** Normalised keyword bag of an entry (self included), computed once for the peers. */
function bags(entries: readonly IndexEntry[]): string[][] {
  const cache = new Map<string, string | null>();
  return entries.map((e) => {
    const s = new Set<string>();
    for (const raw of e.keywords) {
      let k = cache.get(raw);
      if (k === undefined) cache.set(raw, (k = normalizeKeyword(raw)));
      if (k !== null) s.add(k);
    }
    const self = normalizeSelf(e.self);
    if (self) s.add(self);
    return [...s];
  });
}
function probeBag(p: Probe): string[] {
  const s = new Set<string>();
  for (const raw of p.keywords) {
    const k = normalizeKeyword(raw);
    if (k !== null) s.add(k);
  }
  const self = normalizeSelf(p.self ?? '');
  if (self) s.add(self);
  return [...s];
}

function buildCogr(entries: IndexEntry[], probes: Probe[]): { sys: System; view: KeywordView } {
  const m0 = mem();
  const t0 = performance.now();
  const view = KeywordView.build('item', 0, entries);
  view.ids();
  view.vocabulary();
  view.word(0);
  const buildMs = performance.now() - t0;
  const m1 = mem();
  return {
    view,
    sys: {
      name: 'cogr',
      built: entries.length,
      complete: true,
      buildMs,
      heapMB: (m1.heap - m0.heap) / 2 ** 20,
      rssMB: (m1.rss - m0.rss) / 2 ** 20,
      match: (p) => view.match(probes[p]).length,
      topk: (p) => view.search(probes[p], { k: 10 }).items.length,
    },
  };
}

function buildFlex(entries: IndexEntry[], probes: Probe[], budgetMs: number): { sys: System; index: Index } {
  const b = bags(entries);
  const pq = probes.map((p) => probeBag(p).join('|'));
  const m0 = mem();
  const t0 = performance.now();
  const index = new Index({ tokenize: 'strict', encode: (t: string) => t.split('|'), fastupdate: false });
  let i = 0;
  for (; i < b.length; i++) {
    index.add(i, b[i].join('|'));
    if ((i & 4095) === 0 && performance.now() - t0 > budgetMs) break;
  }
  const buildMs = performance.now() - t0;
  const m1 = mem();
  const n = entries.length;
  const complete = i === b.length;
  return {
    index,
    sys: {
      name: 'flexsearch',
      built: i,
      complete,
      buildMs,
      heapMB: (m1.heap - m0.heap) / 2 ** 20,
      rssMB: (m1.rss - m0.rss) / 2 ** 20,
      ...(complete
        ? {
            match: (p: number) => (index.search(pq[p], { limit: n, suggest: true }) as unknown[]).length,
            topk: (p: number) => (index.search(pq[p], { limit: 10, suggest: true }) as unknown[]).length,
          }
        : {}),
    },
  };
}

function buildWink(entries: IndexEntry[], probes: Probe[], budgetMs: number): System {
  const b = bags(entries).map((kws) => kws.flatMap(keywordWords).join(' '));
  const pq = probes.map((p) => [...new Set(probeBag(p).flatMap(keywordWords))].join(' '));
  const m0 = mem();
  const t0 = performance.now();
  const engine = winkFactory();
  engine.defineConfig({ fldWeights: { t: 1 }, bm25Params: { k1: 1.2, b: 0.75, k: 1 } });
  engine.definePrepTasks([(s: string) => s.split(' ')]);
  let i = 0;
  for (; i < b.length; i++) {
    engine.addDoc({ t: b[i] }, i);
    if ((i & 4095) === 0 && performance.now() - t0 > budgetMs) break;
  }
  const complete = i === b.length;
  if (complete) engine.consolidate();
  const buildMs = performance.now() - t0;
  const m1 = mem();
  const n = entries.length;
  return {
    name: 'wink-bm25',
    built: i,
    complete,
    buildMs,
    heapMB: (m1.heap - m0.heap) / 2 ** 20,
    rssMB: (m1.rss - m0.rss) / 2 ** 20,
    ...(complete ? { match: (p: number) => engine.search(pq[p], n).length, topk: (p: number) => engine.search(pq[p], 10).length } : {}),
  };
}

interface Row {
  corpus: string;
  system: string;
  items: number;
  built: number;
  complete: boolean;
  buildS: number;
  memMB: number;
  rssMB: number;
  meanMatched?: number;
  matchP50us?: number;
  matchP99us?: number;
  topkP50us?: number;
  topkP99us?: number;
}

async function latency(systems: System[], nProbes: number, timeMs: number): Promise<Map<string, { p50: number; p99: number }>> {
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs / 5), iterations: 10 });
  let sink = 0;
  for (const s of systems) {
    if (s.match) {
      let p = 0;
      const f = s.match;
      bench.add(`${s.name}/match`, () => {
        sink += f(p);
        p = (p + 1) % nProbes;
      });
    }
    if (s.topk) {
      let p = 0;
      const f = s.topk;
      bench.add(`${s.name}/topk`, () => {
        sink += f(p);
        p = (p + 1) % nProbes;
      });
    }
  }
  await bench.run();
  const out = new Map<string, { p50: number; p99: number }>();
  for (const t of bench.tasks) {
    const r = t.result as { latency?: { p50: number; p99: number } };
    if (r.latency) out.set(t.name, { p50: r.latency.p50 * 1000, p99: r.latency.p99 * 1000 });
  }
  if (sink === -1) process.stderr.write('');
  return out;
}

async function storeRows(corpus: string, entries: IndexEntry[], log: (s: string) => void): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-index-'));
  try {
    const db = await openDb(join(dir, 'db'));
    const store = new KeywordIndexStore(db);
    const m0 = mem();
    const t0 = performance.now();
    const w = store.writer('item');
    for (const e of entries) w.set(e.id, e.self, e.keywords);
    await w.commit();
    const commitMs = performance.now() - t0;
    log(`  store commit ${(commitMs / 1000).toFixed(1)} s`);
    const t1 = performance.now();
    const view = await store.openView('item', 0);
    const openMs = performance.now() - t1;
    const m1 = mem();
    // Generation 1: 10 % of the entities get one keyword replaced (copy-on-write commit).
    const t2 = performance.now();
    const w2 = store.writer('item');
    for (let i = 0; i < entries.length; i += 10) w2.set(entries[i].id, entries[i].self, [...entries[i].keywords.slice(1), 'bench replacement']);
    await w2.commit();
    const commit2Ms = performance.now() - t2;
    await db.close();
    const base = { corpus, items: entries.length, built: view.size, complete: true, memMB: (m1.heap - m0.heap) / 2 ** 20, rssMB: (m1.rss - m0.rss) / 2 ** 20 };
    return [
      { ...base, system: 'store: commit gen 0', buildS: commitMs / 1000 },
      { ...base, system: 'store: openView', buildS: openMs / 1000 },
      { ...base, system: 'store: commit gen 1 (10% changed)', buildS: commit2Ms / 1000 },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchCorpus(
  corpus: string,
  entries: IndexEntry[],
  probes: Probe[],
  o: { timeMs: number; budgetMs: number; storeItems: number },
  log: (s: string) => void,
): Promise<Row[]> {
  log(`${corpus}: ${entries.length} items, ${probes.length} probes`);
  const { sys: cogr, view } = buildCogr(entries, probes);
  log(`  cogr built in ${(cogr.buildMs / 1000).toFixed(1)} s`);
  const flex = buildFlex(entries, probes, o.budgetMs);
  log(`  flexsearch ${flex.sys.complete ? 'built' : 'stopped'} in ${(flex.sys.buildMs / 1000).toFixed(1)} s (${flex.sys.built} items)`);
  // Sanity: flexsearch's union is the CoGR matched set.
  if (flex.sys.match) {
    let agree = 0;
    const check = Math.min(probes.length, 20);
    for (let p = 0; p < check; p++) if (flex.sys.match(p) === view.match(probes[p]).length) agree++;
    log(`  flexsearch matched-set size agrees with cogr on ${agree}/${check} probes`);
  }
  const wink = buildWink(entries, probes, o.budgetMs);
  log(`  wink ${wink.complete ? 'built' : 'stopped'} in ${(wink.buildMs / 1000).toFixed(1)} s (${wink.built} items)`);
  const systems = [cogr, flex.sys, wink];
  const lat = await latency(systems, probes.length, o.timeMs);
  const rows: Row[] = systems.map((s) => {
    let meanMatched: number | undefined;
    if (s.match) {
      // Mean over the first 50 probes (a full pass of a slow peer at 1M items takes minutes).
      const cnt = Math.min(50, probes.length);
      let tot = 0;
      for (let p = 0; p < cnt; p++) tot += s.match(p);
      meanMatched = tot / cnt;
    }
    const m = lat.get(`${s.name}/match`);
    const t = lat.get(`${s.name}/topk`);
    return {
      corpus,
      system: s.name,
      items: entries.length,
      built: s.built,
      complete: s.complete,
      buildS: s.buildMs / 1000,
      memMB: s.heapMB,
      rssMB: s.rssMB,
      meanMatched,
      matchP50us: m?.p50,
      matchP99us: m?.p99,
      topkP50us: t?.p50,
      topkP99us: t?.p99,
    };
  });
  const storeEntries = entries.length > o.storeItems ? entries.slice(0, o.storeItems) : entries;
  rows.push(...(await storeRows(corpus, storeEntries, log)));
  return rows;
}

function table(rows: Row[]): string {
  const f = (x: number | undefined, d = 1) => (x === undefined ? '–' : x.toFixed(d));
  const head = '| corpus | system | items | build s | mem MB (heap+ext) | RSS MB | mean matched | match p50 µs | match p99 µs | top-10 p50 µs | top-10 p99 µs |';
  const sep = '|' + '---|'.repeat(11);
  const lines = rows.map(
    (r) =>
      `| ${r.corpus} | ${r.system} | ${r.complete ? r.built : `${r.built} of ${r.items} (stopped at budget)`} | ${f(r.buildS, 2)} | ${f(r.memMB)} | ${f(r.rssMB)} | ${f(r.meanMatched)} | ${f(r.matchP50us)} | ${f(r.matchP99us)} | ${f(r.topkP50us)} | ${f(r.topkP99us)} |`,
  );
  return [head, sep, ...lines].join('\n');
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = args.includes('--json');
  const items = a.number('--items', 200_000);
  const queries = a.number('--queries', 200);
  const seed = a.number('--seed', 42);
  const timeMs = a.number('--time', 1000);
  const budgetMs = a.number('--peer-budget', 180) * 1000;
  const storeItems = a.number('--store-items', 100_000);
  const log = (s: string) => process.stderr.write(s + '\n');
  const rows: Row[] = [];
  const o = { timeMs, budgetMs, storeItems };
  if (!args.includes('--skip-nfcorpus')) {
    const c = nfcorpus();
    rows.push(...(await benchCorpus('nfcorpus', c.entries, c.probes, o, log)));
  }
  if (!args.includes('--skip-synthetic')) {
    const t0 = performance.now();
    const c = synthetic(items, queries, seed);
    log(`synthetic corpus generated in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    rows.push(...(await benchCorpus(`synthetic-${items}`, c.entries, c.probes, o, log)));
  }
  if (json) {
    process.stdout.write(JSON.stringify({ bench: 'index', node: process.version, items, queries, seed, timeMs, peerBudgetS: budgetMs / 1000, storeItems, rows }) + '\n');
  } else {
    process.stdout.write(table(rows) + '\n');
  }
}
