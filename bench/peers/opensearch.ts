/**
 * The OpenSearch peer of `npm run bench -- index --peers opensearch`: a one-node cluster
 * started by scripts/opensearch.sh (in a temp folder, loopback, 1 GB heap), the same
 * generation loaded as `cogr export opensearch` loads one (src/opensearch/index.ts: match
 * keys as `keyword`, bag words as a BM25 `text` field; 1 shard, 0 replicas, bulk batches of
 * 2,000), and queried as `cogr serve --backend opensearch` queries it, over HTTP:
 * matched = the match rule's `terms` filter with `size: 0` (the count), top-10 = the same
 * with BM25 and `size: 10`. Latency is measured one request at a time (the client's HTTP
 * round trip included), rotating over the probes for --time ms each. Build time is the
 * index creation, bulk load, refresh and count check; memory (`memMB`, `rssMB`) is the
 * node's whole RSS after the build — the JVM touches its whole heap at start, so the growth
 * over the build (`rssGrowthMB`) says little —; disk is the node's data folder. Matched-set sizes are checked against
 * cogr's on the first 50 probes.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../../index/core/paths.ts';
import { silentLogger } from '../../index/core/log.ts';
import type { KeywordView, Probe } from '../../index/view/view.ts';
import { OpenSearchNodes } from '../../src/opensearch/client.ts';
import { loadIndex, META_FORMAT, searchIndex, type IndexMeta } from '../../src/opensearch/index.ts';

const SCRIPT = join(packageRoot(), 'scripts', 'opensearch.sh');

export interface OpenSearchRow {
  version: string;
  buildS: number;
  memMB: number;
  rssMB: number;
  rssGrowthMB: number;
  diskMB: number;
  agree: string;
  meanMatched: number;
  match: { p50: number; p99: number };
  topk: { p50: number; p99: number };
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function rssMB(dir: string): number {
  const pid = readFileSync(join(dir, 'node-0', 'pid'), 'utf8').trim();
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function duMB(path: string): number {
  let total = 0;
  const walk = (p: string) => {
    const st = statSync(p);
    if (st.isDirectory()) for (const f of readdirSync(p)) walk(join(p, f));
    else total += st.size;
  };
  walk(path);
  return total / 2 ** 20;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function timeLoop(n: number, timeMs: number, f: (i: number) => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  const us: number[] = [];
  const end = performance.now() + timeMs;
  for (let i = 0; performance.now() < end || us.length < 50; i++) {
    const t0 = performance.now();
    await f(i % n);
    us.push((performance.now() - t0) * 1000);
  }
  return { p50: quantile(us, 0.5), p99: quantile(us, 0.99) };
}

/** Start a node, load the view, measure, stop; throws with the reason when the node cannot run. */
export async function opensearchPeer(
  view: KeywordView,
  probes: readonly Probe[],
  o: { timeMs: number; check: number },
  log: (s: string) => void,
): Promise<OpenSearchRow> {
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-opensearch-'));
  chmodSync(dir, 0o755);
  const cluster = join(dir, 'cluster');
  let started = false;
  try {
    let port = 0;
    for (let t = 0; t < 200 && port === 0; t++) {
      const p = 20_000 + Math.floor(Math.random() * 20_000);
      if ((await portFree(p)) && (await portFree(p + 100))) port = p;
    }
    if (port === 0) throw new Error('no free port');
    started = true;
    const st = spawnSync(
      'bash',
      [SCRIPT, 'start', '--dir', cluster, '--nodes', '1', '--port', String(port), '--heap', '1g', '--timeout', '900'],
      {
        encoding: 'utf8',
        timeout: 1_000_000,
      },
    );
    if (st.status !== 0) throw new Error(`scripts/opensearch.sh start failed: ${st.stderr.trim().split('\n').slice(-3).join(' ')}`);
    const url = st.stdout.trim().split('\n')[0];
    const os = new OpenSearchNodes([url], { timeoutMs: 60_000 });
    const version = (await os.request<{ version: { number: string } }>('GET', '/')).body.version.number;
    const rss0 = rssMB(cluster);
    const meta: IndexMeta = {
      format: META_FORMAT,
      version: 1,
      db: 'bench',
      dataset: null,
      round: null,
      side: 'item',
      generation: view.generation,
      digest: 'bench',
      analyzer: view.analyzer.name,
      k1: 1.2,
      b: 0.75,
      items: view.size,
      exportedAt: new Date().toISOString(),
    };
    const t0 = performance.now();
    await loadIndex(os, 'bench', view, meta, {
      titles: new Map(),
      fields: new Map(),
      shards: 1,
      replicas: 0,
      batchSize: 2_000,
      log: silentLogger,
    });
    const buildS = (performance.now() - t0) / 1000;
    const rss1 = rssMB(cluster);
    log(`  opensearch ${version} built in ${buildS.toFixed(1)} s (${view.size} items)`);
    const probe = (p: Probe) => ({ self: p.self ?? '', keywords: p.keywords });
    let ok = 0;
    let tot = 0;
    const n = Math.min(o.check, probes.length);
    for (let q = 0; q < n; q++) {
      const r = await searchIndex(os, 'bench', meta, probe(probes[q]), 0);
      tot += r.matched;
      if (r.matched === view.match(probes[q]).length) ok++;
    }
    log(`  opensearch matched-set size agrees with cogr on ${ok}/${n} probes`);
    const match = await timeLoop(probes.length, o.timeMs, (i) => searchIndex(os, 'bench', meta, probe(probes[i]), 0));
    const topk = await timeLoop(probes.length, o.timeMs, (i) => searchIndex(os, 'bench', meta, probe(probes[i]), 10));
    return {
      version,
      buildS,
      memMB: rss1,
      rssMB: rss1,
      rssGrowthMB: rss1 - rss0,
      diskMB: duMB(join(cluster, 'node-0', 'data')),
      agree: `${ok}/${n}`,
      meanMatched: tot / Math.max(1, n),
      match,
      topk,
    };
  } finally {
    if (started) spawnSync('bash', [SCRIPT, 'stop', '--dir', cluster, '--timeout', '120'], { stdio: 'ignore', timeout: 180_000 });
    rmSync(dir, { recursive: true, force: true });
  }
}
