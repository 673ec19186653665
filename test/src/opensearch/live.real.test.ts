/**
 * Live: OpenSearch as cogr's serving backend on a real three-node cluster
 * (scripts/opensearch.sh; `npm test` installs the distribution first). Skipped only when
 * COGR_SKIP_OPENSEARCH=1.
 *
 * A small stored MED run (`cogr demo --rounds 0`), its best generation exported with 2
 * shards and 1 replica (`cogr export opensearch`), then `cogr serve` (memory, ranked by
 * keyword-bag BM25) beside `cogr serve --backend opensearch` holding all three nodes:
 *   - every MED query: the same planned keywords and the same matched set; top-10 overlap reported;
 *   - a re-export of the same generation is a no-op;
 *   - alias swaps (`export --force` and ten `_aliases` swaps) during a search loop: no failed search;
 *   - the cluster manager killed during a search loop: no failed search, writes resume after the election.
 * No timing is asserted; every wait is on a condition with a generous deadline.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDataset } from '../../../src/datasets/index.ts';
import { OpenSearchNodes } from '../../../src/opensearch/client.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin/cogr.mjs');
const SCRIPT = join(ROOT, 'scripts/opensearch.sh');
const skip = process.env.COGR_SKIP_OPENSEARCH === '1';

const tmp = skip ? '' : mkdtempSync(join(tmpdir(), 'cogr-opensearch-'));
const home = join(tmp, 'home');
const cluster = join(tmp, 'cluster');
const env = { ...process.env, COGR_HOME: home };
const children: ChildProcess[] = [];
let clusterStarted = false;

interface Hit {
  id: string;
  score: number;
}
interface SearchResponse {
  generation: number;
  matched: number;
  keywords: { generated: string[] };
  items: Hit[];
}

function run(args: string[], timeoutMs = 900_000): string {
  const r = spawnSync(args[0], args.slice(1), { env, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.status ?? r.signal}):\n${r.stderr}\n${r.stdout}`);
  return r.stdout;
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A base port P with P..P+2 (HTTP) and P+100..P+102 (transport) free. */
async function freeBase(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const p = 20_000 + Math.floor(Math.random() * 20_000);
    let ok = true;
    for (const q of [p, p + 1, p + 2, p + 100, p + 101, p + 102]) if (!(await portFree(q))) ok = false;
    if (ok) return p;
  }
  throw new Error('no free ports');
}

/** `cogr serve …` in its own process; resolves with its base URL once it listens. */
async function serve(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--max-k', '5000', ...args], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${stderr}`)), 300_000);
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      const m = /listening address=(http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited ${code}: ${stderr}`));
    });
  });
}

async function search(base: string, q: string, k: number): Promise<SearchResponse> {
  const res = await fetch(`${base}/v1/search?q=${encodeURIComponent(q)}&k=${k}`, { signal: AbortSignal.timeout(60_000) });
  const body = (await res.json()) as SearchResponse & { error?: unknown };
  if (res.status !== 200) throw new Error(`GET /v1/search ${res.status}: ${JSON.stringify(body)}`);
  return body;
}

async function waitFor<T>(what: string, deadlineMs: number, probe: () => Promise<T | null>): Promise<T> {
  const end = Date.now() + deadlineMs;
  let last: unknown = null;
  while (Date.now() < end) {
    try {
      const v = await probe();
      if (v !== null) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${what}: not within ${deadlineMs} ms (${last instanceof Error ? last.message : String(last)})`);
}

/**
 * Searches every query in turn against the backend server until `stop` resolves, each
 * answer checked against the expected matched set; returns the count and every failure.
 */
async function searchLoop(
  base: string,
  queries: readonly string[],
  expected: ReadonlyMap<string, Set<string>>,
  stop: Promise<unknown>,
  progress: { searches: number },
): Promise<{ searches: number; failures: string[] }> {
  let done = false;
  void stop.finally(() => (done = true));
  const failures: string[] = [];
  // Two searches in flight at a time.
  const worker = async (offset: number) => {
    for (let i = offset; !done; i += 2) {
      const q = queries[i % queries.length];
      try {
        const r = await search(base, q, 5000);
        const want = expected.get(q)!;
        const got = new Set(r.items.map((h) => h.id));
        if (r.matched !== want.size || got.size !== want.size || [...want].some((id) => !got.has(id)))
          failures.push(`${q}: matched ${r.matched}, expected ${want.size}`);
      } catch (e) {
        failures.push(`${q}: ${e instanceof Error ? e.message : String(e)}`);
      }
      progress.searches++;
    }
  };
  await Promise.all([worker(0), worker(1)]);
  return { searches: progress.searches, failures };
}

/** Waits until `n` more searches of the loop have finished. */
async function searchesPass(progress: { searches: number }, n: number): Promise<void> {
  const from = progress.searches;
  await waitFor(`${n} searches`, 300_000, async () => (progress.searches >= from + n ? true : null));
}

let urls: string[] = [];
let os: OpenSearchNodes;
let memory = '';
let backend = '';
let queries: string[] = [];
const expected = new Map<string, Set<string>>();

beforeAll(async () => {
  if (skip) return;
  // The nodes run as uid 65534 when the tests run as root: their folder must be reachable.
  chmodSync(tmp, 0o755);
  run([process.execPath, BIN, 'demo', '--dataset', 'med', '--rounds', '0', '--sft-epochs', '1', '--quiet', '--json']);
  const base = await freeBase();
  clusterStarted = true;
  const out = run([
    'bash',
    SCRIPT,
    'start',
    '--dir',
    cluster,
    '--nodes',
    '3',
    '--port',
    String(base),
    '--heap',
    '512m',
    '--timeout',
    '900',
  ]);
  urls = out.trim().split('\n');
  expect(urls).toHaveLength(3);
  os = new OpenSearchNodes(urls, { timeoutMs: 30_000 });
  queries = (await loadDataset('med')).corpus.queries.map((q) => q.text);
}, 1_200_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  if (clusterStarted) spawnSync('bash', [SCRIPT, 'stop', '--dir', cluster, '--timeout', '120'], { stdio: 'inherit', timeout: 180_000 });
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}, 300_000);

/** `cogr export opensearch` of the MED run into the alias med (2 shards, 1 replica), with more flags. */
function exportMed(...flags: string[]): string[] {
  return [
    process.execPath,
    BIN,
    'export',
    'opensearch',
    '--url',
    urls.join(','),
    '--index',
    'med',
    '--shards',
    '2',
    '--replicas',
    '1',
    ...flags,
  ];
}

describe.skipIf(skip)('OpenSearch backend on a live three-node cluster', () => {
  it('exports the MED generation (2 shards, 1 replica); a re-export is a no-op', () => {
    const args = exportMed('--json');
    const first = JSON.parse(run(args)) as { index: string; items: number; unchanged: boolean; previous: string | null };
    expect(first).toMatchObject({ items: 1033, unchanged: false, previous: null });
    const again = JSON.parse(run(args)) as { index: string; unchanged: boolean };
    expect(again).toMatchObject({ index: first.index, unchanged: true });
  }, 600_000);

  it('cogr serve --backend opensearch: the same keywords and matched set as cogr serve on every MED query; top-10 overlap reported', async () => {
    memory = await serve(['--rank', 'keywords']);
    backend = await serve(['--backend', 'opensearch', '--url', urls.join(','), '--index', 'med']);
    let overlap = 0;
    let nonEmpty = 0;
    for (const q of queries) {
      const a = await search(memory, q, 5000);
      const b = await search(backend, q, 5000);
      expect(b.keywords.generated, q).toEqual(a.keywords.generated);
      expect(b.generation).toBe(a.generation);
      // Keywords that match nothing get the run's empty-plan floor (top items by p) on both.
      // The served set is the first `matched` items (a backfill may follow it, in each server's ranker order).
      const want = a.items.slice(0, a.matched).map((h) => h.id);
      expect(b.matched, q).toBe(a.matched);
      expect(new Set(b.items.slice(0, b.matched).map((h) => h.id)), q).toEqual(new Set(want));
      expected.set(q, new Set(want));
      // Ranking sanity: scores descending.
      for (let i = 1; i < b.items.length; i++) expect(b.items[i].score).toBeLessThanOrEqual(b.items[i - 1].score);
      if (want.length > 0) {
        nonEmpty++;
        const top = new Set(a.items.slice(0, 10).map((h) => h.id));
        const n = Math.min(10, a.items.length);
        overlap += b.items.slice(0, 10).filter((h) => top.has(h.id)).length / n;
      }
    }
    expect(nonEmpty).toBeGreaterThan(0);
    const mean = overlap / nonEmpty;
    console.log(`OpenSearch vs cogr keyword-bag BM25: mean top-10 overlap ${mean.toFixed(3)} over ${nonEmpty} MED queries with a match`);
    expect(mean).toBeGreaterThan(0.5);
  }, 600_000);

  it('POST /v1/search: Boolean programs match the same items on the backend as in memory', async () => {
    const post = async (base: string, program: unknown): Promise<SearchResponse> => {
      const res = await fetch(`${base}/v1/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ program, k: 5000 }),
        signal: AbortSignal.timeout(60_000),
      });
      const body = (await res.json()) as SearchResponse & { error?: unknown };
      if (res.status !== 200) throw new Error(`POST /v1/search ${res.status}: ${JSON.stringify(body)}`);
      return body;
    };
    let compared = 0;
    let nonEmpty = 0;
    for (let i = 0; i + 1 < Math.min(queries.length, 16); i += 2) {
      const [q1, q2] = [queries[i], queries[i + 1]];
      const kw = (await search(memory, q1, 1)).keywords.generated;
      const programs = [
        { text: q1 },
        { or: [{ text: q1 }, { text: q2 }] },
        { and: [{ text: q1 }, { not: { keyword: kw[0] ?? 'nothing' } }] },
        { any_of: kw.slice(0, 3).length ? kw.slice(0, 3) : ['nothing'] },
        { and: [{ or: [{ text: q1 }, { text: q2 }] }, { not: { text: q2 } }] },
      ];
      for (const program of programs) {
        const a = await post(memory, program);
        const b = await post(backend, program);
        const what = JSON.stringify(program);
        expect(b.matched, what).toBe(a.matched);
        expect(new Set(b.items.map((h) => h.id)), what).toEqual(new Set(a.items.map((h) => h.id)));
        compared++;
        if (a.matched > 0) nonEmpty++;
      }
    }
    console.log(`Boolean programs: ${compared} compared (${nonEmpty} with a match), the same matched sets in memory and on OpenSearch`);
    expect(nonEmpty).toBeGreaterThan(compared / 2);
  }, 600_000);

  it('alias swaps during a search loop: no failed search', async () => {
    let swaps = 0;
    const progress = { searches: 0 };
    const swapping = (async () => {
      await searchesPass(progress, 4);
      // A new index of the same generation, published by the exporter's own swap...
      const forced = JSON.parse(run(exportMed('--force', '--json'))) as { index: string; previous: string };
      expect(forced.previous).not.toBe(forced.index);
      swaps++;
      // ...then ten swaps back and forth in single _aliases calls.
      let [from, to] = [forced.index, forced.previous];
      for (let i = 0; i < 10; i++) {
        await os.request('POST', '/_aliases', {
          actions: [{ remove: { index: from, alias: 'med', must_exist: true } }, { add: { index: to, alias: 'med' } }],
        });
        swaps++;
        [from, to] = [to, from];
        // Searches on each side of every swap.
        await searchesPass(progress, 2);
      }
    })();
    const loop = await searchLoop(backend, queries, expected, swapping, progress);
    await swapping;
    console.log(`alias swaps: ${swaps} swaps, ${loop.searches} searches, ${loop.failures.length} failed`);
    expect(swaps).toBe(11);
    expect(loop.searches).toBeGreaterThan(0);
    expect(loop.failures).toEqual([]);
  }, 600_000);

  it('the cluster manager killed during a search loop: no failed search; writes resume after the election', async () => {
    await os.request('PUT', '/cogr-writes', { settings: { index: { number_of_shards: 1, number_of_replicas: 1 } } });
    await os.request('GET', '/_cluster/health/cogr-writes?wait_for_status=green&timeout=120s', undefined, { timeoutMs: 130_000 });
    const managers = (await os.request<{ node: string }[]>('GET', '/_cat/cluster_manager?format=json')).body;
    const manager = managers[0].node;
    const node = Number(/^node-(\d+)$/.exec(manager)![1]);
    let writeAfter = -1;
    let afterKill = 0;
    const progress = { searches: 0 };
    const killing = (async () => {
      // Some searches before the kill.
      await searchesPass(progress, 4);
      run(['bash', SCRIPT, 'kill', '--dir', cluster, '--node', String(node)]);
      const atKill = progress.searches;
      const survivors = new OpenSearchNodes(
        urls.filter((_, i) => i !== node),
        { timeoutMs: 10_000 },
      );
      // Writes need a manager (elected among the two left) and a primary of the shard.
      writeAfter = await waitFor('a write after the kill', 300_000, async () => {
        const r = await survivors.request<{ result: string }>(
          'PUT',
          '/cogr-writes/_doc/after-kill?timeout=5s',
          { at: Date.now() },
          { timeoutMs: 10_000 },
        );
        return r.body.result === 'created' || r.body.result === 'updated' ? 1 : null;
      });
      const now = (await survivors.request<{ node: string }[]>('GET', '/_cat/cluster_manager?format=json')).body[0].node;
      expect(now).not.toBe(manager);
      // Searches go on a while with the new manager (the dead node still in the client's list).
      await searchesPass(progress, 20);
      afterKill = progress.searches - atKill;
    })();
    const loop = await searchLoop(
      backend,
      queries,
      expected,
      killing.catch(() => undefined),
      progress,
    );
    await killing;
    console.log(
      `manager ${manager} killed: ${loop.searches} searches (${afterKill} after the kill), ${loop.failures.length} failed; a write succeeded after the election`,
    );
    expect(writeAfter).toBe(1);
    expect(afterKill).toBeGreaterThanOrEqual(20);
    expect(loop.searches).toBeGreaterThan(0);
    expect(loop.failures).toEqual([]);
  }, 900_000);
});
