/**
 * `npm run bench -- index [--items N] [--queries Q] [--seed S] [--time MS]
 *                          [--peer-budget SEC] [--store-items N] [--skip-nfcorpus]
 *                          [--skip-synthetic] [--peers LIST] [--store-only]
 *                          [--skip-store-gen1] [--json]`
 *
 * The keyword index against its peers, same keyword bags (--peers, default
 * "flexsearch,wink,fts5,xapian"; "none" for ours only; "opensearch" on request):
 * - `opensearch`: one OpenSearch node (bench/peers/opensearch.ts), loaded and queried as
 *   `cogr export opensearch` and `cogr serve --backend opensearch` do, over HTTP.
 * - `cogr`: KeywordView (index/view/view.ts) built from the entries: CSR postings in typed
 *   arrays, plus the word postings and bounds of the pruned top k (index/view/topk.ts), built
 *   in the timed build. matched = the whole CoGR matched set (`view.match`, keyword-level
 *   OR incl. the self keyword); top-10 = `view.search(probe, {k: 10})` (exact BM25 over
 *   words, dynamic pruning); the `cogr exhaustive` row is the same top 10 by scoring
 *   every matched entity (`view.searchExhaustive`), the reference the pruning must equal.
 * - `sqlite-fts5`, `xapian`: native engines through Debian's python3 (bench/peers/:
 *   each keyword one token, so term queries reproduce our matched sets; ranked by their
 *   own BM25 over the words; timed per query inside their own process; installed by the
 *   setup step when missing, skipped with a line saying why when they cannot run). Their
 *   matched sets are checked against ours (size and Σ entity index) on the first 50
 *   probes; memory is their process's RSS growth, Xapian's disk its database folder.
 * Every peer is fed our match keys (keywords normalised and analysed as the view does,
 * default analyzer `english`) and their analysed words, so matched sets can agree.
 * - `flexsearch`: an `Index` whose documents are the entity's keyword keys (self
 *   included), each keyword one token (custom `encode` splitting on "|"); a probe is its
 *   keywords joined by "|" searched with `suggest: true` (union of the tokens), which
 *   is the same matched set as ours; top-10 is flexsearch's own ranking.
 * - `wink`: wink-bm25-text-search over the words of the same bags (BM25, k1 = 1.2,
 *   b = 0.75); a probe is its words. Its result set is every entity sharing a WORD
 *   (a superset of the CoGR set); matched = `search(words, N)`, top-10 = `search(words, 10)`.
 * Build time and memory (heap + external/ArrayBuffer delta and RSS delta after a forced
 * GC, structures kept alive) per system; latency p50/p99 with tinybench over a rotating
 * list of probes, each JavaScript system measured right after its build and released
 * before the next is built (so no system's queries pay for another's heap in garbage
 * collection). The load average of the machine and its cores are reported with the
 * figures (--json: loadAvgStart/loadAvgEnd, cpus). A peer that does not finish building
 * within --peer-budget seconds (default 180) is reported as such, with how many entities
 * it had added. The ratios cogr / peer (below 1: ours is faster or smaller) for whole-set
 * and top-10 p50/p99, build time and memory follow the table (--json: `ratios`), and
 * exhaustive / pruned top 10 per corpus (--json: `pruning`).
 * `store` rows: committing the entries as one generation (KeywordIndexStore, temp dir;
 * at most --store-items entities, default 100,000; 0 for none): the LevelDB part (staged
 * above 250,000 operations, its progress lines at most every 10 s) and the view + files
 * part are timed apart, disk is reported for the LevelDB and the generation files apart
 * (bytes per item); then (unless --skip-store-gen1) a second generation with 10 % of the
 * entities changed; then the database is closed and a reader opens generation 0 from its
 * published files (SHA-256 checked) with its top-k index (time; memory = the bytes it
 * holds: the view file's buffer and the top-k index's arrays) and runs one pass of every
 * probe over it. --store-only skips the in-memory
 * rows and peers (the store's commit builds the view anyway). --json adds peakRssMB.
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
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Index } from 'flexsearch';
import { Bench } from 'tinybench';
import { openDb, type CogrDb } from '../index/store/db.ts';
import type { Logger } from '../index/core/log.ts';
import { PublishedIndex } from '../index/store/published.ts';
import { keywordWords, makeKeywordNormalizer } from '../index/text/normalize.ts';
import { DEFAULT_ANALYZER } from '../index/text/analyzer.ts';
import { createRng, randInt, type Rng } from '../index/core/random.ts';
import { KeywordIndexStore } from '../index/store/store.ts';
import type { IndexEntry } from '../index/core/types.ts';
import { topKIndex, topKIndexBytes } from '../index/view/topk.ts';
import { KeywordView, type Probe } from '../index/view/view.ts';
import { parseBenchArgs } from './args.ts';
import { nfcorpusDocs, nfcorpusTitleQueries } from './fixtures.ts';
import { opensearchPeer } from './peers/opensearch.ts';
import { NATIVE_PEERS, nativeSetup, runPeer, writePeerInput, type NativePeer, type PeerResult } from './peers/native.ts';

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
    const kws = [
      e.keywords[randInt(rng, e.keywords.length)],
      e.keywords[randInt(rng, e.keywords.length)],
      e.keywords[randInt(rng, e.keywords.length)],
    ];
    kws.push(phrases[phrase()], phrases[phrase()]);
    probes.push({ self: `${words[word()]} ${words[word()]} ${words[word()]}`, keywords: kws });
  }
  return { entries, probes };
}

const STOP = new Set(
  'the and for with from that this were was are has have had not but its into than then also been which their these those between during after before over under more most such other each both only can may our all any per via about'.split(
    ' ',
  ),
);
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
    const ranked = [...tf]
      .map(([g, f]) => [g, f * Math.log(docs.length / df.get(g)!)] as const)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
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
const PEERS = ['flexsearch', 'wink', ...NATIVE_PEERS, 'opensearch'] as const;
/** The default --peers: all but opensearch, which starts a JVM node (`--peers …,opensearch`). */
const DEFAULT_PEERS = PEERS.filter((p) => p !== 'opensearch');
type Peer = (typeof PEERS)[number];

function mem(): { heap: number; rss: number } {
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed + m.external, rss: m.rss };
}

/**
 * The match keys our view indexes (normalised and analysed as `KeywordView.build` does,
 * default analyzer): every peer is fed these keys and their words, so that matched sets
 * can agree and BM25 counts the same words.
 */
const keys = makeKeywordNormalizer({ memo: Infinity, analyzer: DEFAULT_ANALYZER });

/** Keyword keys of an entry (self included), computed once for the peers. */
function bags(entries: readonly IndexEntry[]): string[][] {
  return entries.map((e) => {
    const s = new Set<string>();
    for (const raw of e.keywords) {
      const k = keys.key(raw);
      if (k !== null) s.add(k);
    }
    const self = keys.selfKey(e.self);
    if (self) s.add(self);
    return [...s];
  });
}
function probeBag(p: Probe): string[] {
  const s = new Set<string>();
  for (const raw of p.keywords) {
    const k = keys.key(raw);
    if (k !== null) s.add(k);
  }
  const self = keys.selfKey(p.self ?? '');
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
  topKIndex(view.data);
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

/** The same top 10 without pruning (every matched entity scored): the reference row. */
function exhaustiveCogr(view: KeywordView, probes: Probe[]): System {
  return {
    name: 'cogr exhaustive',
    built: view.size,
    complete: true,
    buildMs: NaN,
    heapMB: NaN,
    rssMB: NaN,
    topk: (p) => view.searchExhaustive(probes[p], { k: 10 }).items.length,
  };
}

function buildFlex(b: string[][], probes: Probe[], budgetMs: number): { sys: System; index: Index } {
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
  const n = b.length;
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

function buildWink(bagList: string[][], probes: Probe[], budgetMs: number): System {
  const b = bagList.map((kws) => kws.flatMap(keywordWords).join(' '));
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
  const n = b.length;
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
  /** Matched sets checked against cogr's: "agreeing/checked" (size only for flexsearch; size and Σ entity index for the native peers). */
  agree?: string;
  diskMB?: number;
  version?: string;
  /** Why a peer has no figures (not installable, failed). */
  skipped?: string;
  /** Store rows: the commit's LevelDB part and its view + generation files part (s). */
  leveldbS?: number;
  publishS?: number;
  diskLevelDbBytesPerItem?: number;
  diskFilesBytesPerItem?: number;
  memBytesPerItem?: number;
  /** opensearch: the node's RSS growth over the build (its heap is touched at start). */
  rssGrowthMB?: number;
}

/** cogr / peer for the latencies, build time and memory (below 1: ours is faster or smaller). */
interface Ratio {
  corpus: string;
  peer: string;
  matchP50?: number;
  matchP99?: number;
  topkP50?: number;
  topkP99?: number;
  build?: number;
  mem?: number;
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

/** Size in bytes of the files under a folder. */
function folderBytes(dir: string): number {
  let total = 0;
  for (const f of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, f.name);
    total += f.isDirectory() ? folderBytes(p) : statSync(p).size;
  }
  return total;
}

/** p50 / p99 in µs of one pass of fn over every probe (no warm-up beyond the first call). */
function onePass(n: number, fn: (p: number) => unknown): { p50: number; p99: number } {
  fn(0);
  const xs: number[] = [];
  for (let p = 0; p < n; p++) {
    const t = performance.now();
    fn(p);
    xs.push((performance.now() - t) * 1000);
  }
  xs.sort((x, y) => x - y);
  return { p50: xs[Math.floor(xs.length / 2)], p99: xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))] };
}

async function storeRows(
  corpus: string,
  entries: IndexEntry[],
  probes: Probe[],
  o: { gen1: boolean },
  log: (s: string) => void,
): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-index-'));
  try {
    const path = join(dir, 'db');
    let db: CogrDb | null = await openDb(path);
    // The store's progress lines (one per staged batch), at most one every 10 s here.
    let lastLine = -Infinity;
    let leveldbDoneAt = 0;
    const logger: Logger = {
      info: (m, f) => {
        if (m === 'committed keyword index generation') leveldbDoneAt = performance.now();
        if (m === 'staged commit' && performance.now() - lastLine < 10_000) return;
        lastLine = performance.now();
        log(
          `  ${m} ${Object.entries(f ?? {})
            .map(([k, v]) => `${k}=${String(v)}`)
            .join(' ')}`,
        );
      },
      warn: (m) => log(`  warning: ${m}`),
      debug: () => {},
    };
    let store: KeywordIndexStore | null = new KeywordIndexStore(db, { logger });
    const t0 = performance.now();
    // The writer lives only inside this call (its memory is not the reader's below).
    await (async (s: KeywordIndexStore) => {
      const w = s.writer('item');
      for (const e of entries) w.set(e.id, e.self, e.keywords);
      await w.commit();
    })(store);
    const commitMs = performance.now() - t0;
    const publishMs = performance.now() - leveldbDoneAt;
    const pubDir = join(path, 'published');
    const diskPub0 = folderBytes(pubDir);
    const diskDb0 = folderBytes(dir) - diskPub0;
    log(
      `  store commit ${(commitMs / 1000).toFixed(1)} s (LevelDB ${((commitMs - publishMs) / 1000).toFixed(1)} s, view + files ${(publishMs / 1000).toFixed(1)} s); on disk: LevelDB ${(diskDb0 / 2 ** 20).toFixed(0)} MB (${(diskDb0 / entries.length).toFixed(0)} B/item), files ${(diskPub0 / 2 ** 20).toFixed(0)} MB (${(diskPub0 / entries.length).toFixed(0)} B/item)`,
    );
    const rows: Row[] = [];
    const base = { corpus, items: entries.length, complete: true };
    rows.push({
      ...base,
      system: 'store: commit gen 0 (LevelDB + view + files)',
      built: entries.length,
      buildS: commitMs / 1000,
      memMB: NaN,
      rssMB: NaN,
      diskMB: (diskDb0 + diskPub0) / 2 ** 20,
      leveldbS: (commitMs - publishMs) / 1000,
      publishS: publishMs / 1000,
      diskLevelDbBytesPerItem: diskDb0 / entries.length,
      diskFilesBytesPerItem: diskPub0 / entries.length,
    });
    if (o.gen1) {
      // Generation 1: 10 % of the entities get one keyword replaced (copy-on-write commit).
      const t2 = performance.now();
      await (async (s: KeywordIndexStore) => {
        const w2 = s.writer('item');
        for (let i = 0; i < entries.length; i += 10)
          w2.set(entries[i].id, entries[i].self, [...entries[i].keywords.slice(1), 'bench replacement']);
        await w2.commit();
      })(store);
      const commit2Ms = performance.now() - t2;
      log(`  store commit gen 1 (10% changed) ${(commit2Ms / 1000).toFixed(1)} s`);
      rows.push({
        ...base,
        system: 'store: commit gen 1 (10% changed)',
        built: entries.length,
        buildS: commit2Ms / 1000,
        memMB: NaN,
        rssMB: NaN,
        diskMB: folderBytes(dir) / 2 ** 20,
      });
    }
    await db.close();
    // What a reader (serve, search) does: open the published generation 0 without the
    // database, check its SHA-256, and build the top-k index; then one pass of the probes.
    db = null;
    store = null;
    const t1 = performance.now();
    const view = await new PublishedIndex(path).openView('item', 0);
    const openMs = performance.now() - t1;
    const t1b = performance.now();
    const ix = topKIndex(view.data);
    const topkMs = performance.now() - t1b;
    // What the reader holds, counted exactly (a heap delta here would be blurred by the
    // writer's memory being freed meanwhile): the view file, read whole into one buffer,
    // and the top-k index's arrays.
    const fileBytes = view.data.post.buffer.byteLength;
    const ixBytes = topKIndexBytes(ix);
    const held = fileBytes + ixBytes;
    log(
      `  reader open ${(openMs / 1000).toFixed(1)} s (+ ${(topkMs / 1000).toFixed(1)} s top-k index); holds ${(held / 2 ** 20).toFixed(0)} MB (${(held / entries.length).toFixed(0)} B/item: view file ${(fileBytes / entries.length).toFixed(0)}, top-k index ${(ixBytes / entries.length).toFixed(0)})`,
    );
    const qm = onePass(probes.length, (p) => view.match(probes[p]).length);
    const qt = onePass(probes.length, (p) => view.search(probes[p], { k: 10 }).items.length);
    rows.push({
      ...base,
      system: 'store: reader opens gen 0 (+ top-k index), one query pass',
      built: view.size,
      buildS: (openMs + topkMs) / 1000,
      memMB: held / 2 ** 20,
      rssMB: NaN,
      memBytesPerItem: held / entries.length,
      matchP50us: qm.p50,
      matchP99us: qm.p99,
      topkP50us: qt.p50,
      topkP99us: qt.p99,
    });
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchCorpus(
  corpus: string,
  entries: IndexEntry[],
  probes: Probe[],
  o: { timeMs: number; budgetMs: number; storeItems: number; peers: readonly Peer[]; storeOnly: boolean; gen1: boolean },
  log: (s: string) => void,
): Promise<Row[]> {
  log(`${corpus}: ${entries.length} items, ${probes.length} probes`);
  // The in-memory systems are unreachable once queryRows returns (at 10M items the store
  // rows need that memory).
  const rows = o.storeOnly ? [] : await queryRows(corpus, entries, probes, o, log);
  const storeEntries = entries.length > o.storeItems ? entries.slice(0, o.storeItems) : entries;
  if (o.storeItems > 0) rows.push(...(await storeRows(corpus, storeEntries, probes, o, log)));
  return rows;
}

async function queryRows(
  corpus: string,
  entries: IndexEntry[],
  probes: Probe[],
  o: { timeMs: number; budgetMs: number; peers: readonly Peer[] },
  log: (s: string) => void,
): Promise<Row[]> {
  const { sys: cogr, view } = buildCogr(entries, probes);
  log(`  cogr built in ${(cogr.buildMs / 1000).toFixed(1)} s`);
  const check = Math.min(50, probes.length);
  const bagList = o.peers.length > 0 ? bags(entries) : [];
  // Each JavaScript system is measured right after its build and released before the
  // next one is built: another system's heap in the same process slows everyone's
  // queries through garbage collection (measured: ×5–8 on our queries at 1M items).
  const measure = async (systems: System[], agree?: string): Promise<Row[]> => {
    const lat = await latency(systems, probes.length, o.timeMs);
    return systems.map((s) => {
      let meanMatched: number | undefined;
      if (s.match) {
        // Mean over the first 50 probes (a full pass of a slow peer at 1M items takes minutes).
        let tot = 0;
        for (let p = 0; p < check; p++) tot += s.match(p);
        meanMatched = tot / check;
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
        agree: s === systems[0] ? agree : undefined,
      };
    });
  };
  const rows = await measure([cogr, exhaustiveCogr(view, probes)]);
  if (o.peers.includes('flexsearch')) {
    const flex = buildFlex(bagList, probes, o.budgetMs);
    log(`  flexsearch ${flex.sys.complete ? 'built' : 'stopped'} in ${(flex.sys.buildMs / 1000).toFixed(1)} s (${flex.sys.built} items)`);
    // Sanity: flexsearch's union is the CoGR matched set (sizes compared).
    let agree: string | undefined;
    if (flex.sys.match) {
      let ok = 0;
      const n = Math.min(probes.length, 20);
      for (let p = 0; p < n; p++) if (flex.sys.match(p) === view.match(probes[p]).length) ok++;
      agree = `${ok}/${n}`;
      log(`  flexsearch matched-set size agrees with cogr on ${ok}/${n} probes`);
    }
    rows.push(...(await measure([flex.sys], agree)));
  }
  if (o.peers.includes('wink')) {
    const wink = buildWink(bagList, probes, o.budgetMs);
    log(`  wink ${wink.complete ? 'built' : 'stopped'} in ${(wink.buildMs / 1000).toFixed(1)} s (${wink.built} items)`);
    rows.push(...(await measure([wink])));
  }
  const natives = o.peers.filter((p): p is NativePeer => (NATIVE_PEERS as readonly string[]).includes(p));
  if (natives.length > 0) rows.push(...(await nativeRows(corpus, entries, probes, view, bagList, natives, o, check, log)));
  if (o.peers.includes('opensearch')) rows.push(await openSearchRow(corpus, entries.length, probes, view, o, check, log));
  return rows;
}

/** The OpenSearch peer (bench/peers/opensearch.ts): one node, the same generation, over HTTP; skipped with the reason when it cannot run. */
async function openSearchRow(
  corpus: string,
  items: number,
  probes: Probe[],
  view: KeywordView,
  o: { timeMs: number },
  check: number,
  log: (s: string) => void,
): Promise<Row> {
  try {
    const r = await opensearchPeer(view, probes, { timeMs: o.timeMs, check }, log);
    return {
      corpus,
      system: 'opensearch',
      items,
      built: items,
      complete: true,
      buildS: r.buildS,
      memMB: r.memMB,
      rssMB: r.rssMB,
      rssGrowthMB: r.rssGrowthMB,
      diskMB: r.diskMB,
      meanMatched: r.meanMatched,
      agree: r.agree,
      matchP50us: r.match.p50,
      matchP99us: r.match.p99,
      topkP50us: r.topk.p50,
      topkP99us: r.topk.p99,
      version: r.version,
    };
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    log(`  opensearch: skipped — ${why}`);
    return { corpus, system: 'opensearch', items, built: 0, complete: false, buildS: NaN, memMB: NaN, rssMB: NaN, skipped: why };
  }
}

/** The native peers on the same bags and probes, each in its own Python process. */
async function nativeRows(
  corpus: string,
  entries: IndexEntry[],
  probes: Probe[],
  view: KeywordView,
  bagList: string[][],
  peers: readonly NativePeer[],
  o: { timeMs: number; budgetMs: number },
  check: number,
  log: (s: string) => void,
): Promise<Row[]> {
  const rows: Row[] = [];
  const setup = nativeSetup(peers, log);
  const runnable = peers.filter((p) => !setup.get(p)?.skipped);
  for (const p of peers) {
    const st = setup.get(p)!;
    if (st.skipped) {
      log(`  ${p}: skipped — ${st.skipped}`);
      rows.push({
        corpus,
        system: p === 'fts5' ? 'sqlite-fts5' : p,
        items: entries.length,
        built: 0,
        complete: false,
        buildS: NaN,
        memMB: NaN,
        rssMB: NaN,
        skipped: st.skipped,
      });
    }
  }
  if (runnable.length === 0) return rows;
  // Our matched sets as (size, Σ input index) for the agreement check.
  const inputIndex = new Int32Array(view.size);
  for (let i = 0; i < entries.length; i++) inputIndex[view.ordinalOf(entries[i].id)] = i;
  const ours: [number, number][] = [];
  for (let q = 0; q < check; q++) {
    const m = view.match(probes[q]);
    let sum = 0;
    for (const e of m) sum += inputIndex[e];
    ours.push([m.length, sum]);
  }
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-peers-'));
  try {
    await writePeerInput(dir, bagList, probes.map(probeBag), { time_ms: o.timeMs, budget_s: o.budgetMs / 1000, k: 10, check });
    for (const p of runnable) {
      let r: PeerResult;
      try {
        r = await runPeer(p, dir, o.budgetMs / 1000 + 1800);
      } catch (e) {
        const why = (e as Error).message;
        log(`  ${p}: failed — ${why}`);
        rows.push({
          corpus,
          system: p === 'fts5' ? 'sqlite-fts5' : p,
          items: entries.length,
          built: 0,
          complete: false,
          buildS: NaN,
          memMB: NaN,
          rssMB: NaN,
          skipped: why,
        });
        continue;
      }
      let ok = 0;
      let meanMatched: number | undefined;
      if (r.sets) {
        for (let q = 0; q < r.sets.length; q++) if (r.sets[q][0] === ours[q][0] && r.sets[q][1] === ours[q][1]) ok++;
        meanMatched = r.sets.reduce((a, x) => a + x[0], 0) / r.sets.length;
      }
      log(
        `  ${r.system} ${r.version} ${r.complete ? 'built' : 'stopped'} in ${r.build_s.toFixed(1)} s (${r.built} items)${r.sets ? `; matched sets agree with cogr on ${ok}/${r.sets.length} probes (size and Σ ids)` : ''}`,
      );
      rows.push({
        corpus,
        system: r.system,
        items: entries.length,
        built: r.built,
        complete: r.complete,
        buildS: r.build_s,
        memMB: r.rss_mb,
        rssMB: r.rss_mb,
        meanMatched,
        matchP50us: r.match?.p50_us,
        matchP99us: r.match?.p99_us,
        topkP50us: r.topk?.p50_us,
        topkP99us: r.topk?.p99_us,
        agree: r.sets ? `${ok}/${r.sets.length}` : undefined,
        diskMB: r.disk_mb,
        version: r.version,
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** cogr / peer for every peer row of every corpus. */
function ratios(rows: Row[]): Ratio[] {
  const out: Ratio[] = [];
  const q = (a?: number, b?: number) =>
    a !== undefined && b !== undefined && Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : undefined;
  for (const ours of rows.filter((r) => r.system === 'cogr')) {
    for (const r of rows) {
      if (r.corpus !== ours.corpus || r.system === 'cogr' || r.system.startsWith('store:') || r.skipped || !r.complete) continue;
      out.push({
        corpus: r.corpus,
        peer: r.system,
        matchP50: q(ours.matchP50us, r.matchP50us),
        matchP99: q(ours.matchP99us, r.matchP99us),
        topkP50: q(ours.topkP50us, r.topkP50us),
        topkP99: q(ours.topkP99us, r.topkP99us),
        build: q(ours.buildS, r.buildS),
        mem: q(ours.memMB, r.memMB),
      });
    }
  }
  return out;
}

function table(rows: Row[]): string {
  const f = (x: number | undefined, d = 1) => (x === undefined || Number.isNaN(x) ? '–' : x.toFixed(d));
  const head =
    '| corpus | system | items | build s | mem MB (heap+ext; peers: RSS) | RSS MB | disk MB | mean matched | agree | match p50 µs | match p99 µs | top-10 p50 µs | top-10 p99 µs |';
  const sep = '|' + '---|'.repeat(13);
  const lines = rows.map((r) =>
    r.skipped
      ? `| ${r.corpus} | ${r.system} | skipped: ${r.skipped} ||||||||||||`
      : `| ${r.corpus} | ${r.system} | ${r.complete ? r.built : `${r.built} of ${r.items} (stopped at budget)`} | ${f(r.buildS, 2)} | ${f(r.memMB)} | ${f(r.rssMB)} | ${f(r.diskMB)} | ${f(r.meanMatched)} | ${r.agree ?? '–'} | ${f(r.matchP50us)} | ${f(r.matchP99us)} | ${f(r.topkP50us)} | ${f(r.topkP99us)} |`,
  );
  const rt = ratios(rows);
  const rhead = '| corpus | cogr / peer | match p50 | match p99 | top-10 p50 | top-10 p99 | build | memory |';
  const rlines = rt.map(
    (r) =>
      `| ${r.corpus} | ${r.peer} | ${f(r.matchP50, 3)} | ${f(r.matchP99, 3)} | ${f(r.topkP50, 3)} | ${f(r.topkP99, 3)} | ${f(r.build, 3)} | ${f(r.mem, 3)} |`,
  );
  return [head, sep, ...lines, '', rhead, '|' + '---|'.repeat(8), ...rlines].join('\n');
}

export async function run(args: string[]): Promise<void> {
  const loadAvgStart = loadavg();
  const a = parseBenchArgs(args);
  const json = args.includes('--json');
  const items = a.number('--items', 200_000);
  const queries = a.number('--queries', 200);
  const seed = a.number('--seed', 42);
  const timeMs = a.number('--time', 1000);
  const budgetMs = a.number('--peer-budget', 180) * 1000;
  const storeItems = a.number('--store-items', 100_000);
  const peerArg = a.string('--peers', DEFAULT_PEERS.join(','));
  const peers = peerArg === 'none' ? [] : peerArg.split(',').map((x) => x.trim());
  for (const p of peers)
    if (!(PEERS as readonly string[]).includes(p))
      throw new Error(`--peers: unknown peer ${JSON.stringify(p)} (known: ${PEERS.join(', ')}, or none)`);
  const log = (s: string) => process.stderr.write(s + '\n');
  const rows: Row[] = [];
  const o = {
    timeMs,
    budgetMs,
    storeItems,
    peers: peers as Peer[],
    storeOnly: args.includes('--store-only'),
    gen1: !args.includes('--skip-store-gen1'),
  };
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
  const rt = ratios(rows);
  // Pruned vs exhaustive top 10 (ours), per corpus.
  const pruning = rows
    .filter((r) => r.system === 'cogr')
    .map((r) => {
      const ex = rows.find((x) => x.corpus === r.corpus && x.system === 'cogr exhaustive');
      return {
        corpus: r.corpus,
        exhaustiveVsPrunedTop10P50: ex?.topkP50us && r.topkP50us ? ex.topkP50us / r.topkP50us : undefined,
        exhaustiveVsPrunedTop10P99: ex?.topkP99us && r.topkP99us ? ex.topkP99us / r.topkP99us : undefined,
      };
    });
  if (json) {
    process.stderr.write(table(rows) + '\n');
    process.stdout.write(
      JSON.stringify({
        bench: 'index',
        node: process.version,
        cpus: cpus().length,
        loadAvgStart,
        loadAvgEnd: loadavg(),
        peakRssMB: process.resourceUsage().maxRSS / 1024,
        items,
        queries,
        seed,
        timeMs,
        peerBudgetS: budgetMs / 1000,
        storeItems,
        peers,
        rows,
        ratios: rt,
        pruning,
      }) + '\n',
    );
  } else {
    process.stdout.write(table(rows) + '\n');
    for (const p of pruning)
      process.stdout.write(
        `${p.corpus}: exhaustive / pruned top-10 p50 ${p.exhaustiveVsPrunedTop10P50?.toFixed(2) ?? '–'}×, p99 ${p.exhaustiveVsPrunedTop10P99?.toFixed(2) ?? '–'}×\n`,
      );
    process.stdout.write(
      `load average at start ${loadAvgStart.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')} (${cpus().length} cores)\n`,
    );
  }
}
