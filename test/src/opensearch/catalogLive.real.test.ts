/**
 * Live: the OpenSearch backend follows catalog writes (issue 48), on a real one-node
 * cluster (scripts/opensearch.sh; skipped only when COGR_SKIP_OPENSEARCH=1). A served run of
 * the small synthetic dataset is exported behind an alias; `cogr serve --backend opensearch
 * --writable` takes writes (each applied to a clone of the alias's index and swapped in)
 * while a search loop runs against it: no search fails, an acknowledged write is what the
 * backend answers, and at the end the backend's matched sets equal those of a `cogr serve`
 * answering from memory over the same database, and only the live index and the one before
 * it are left.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogRun, json, send, startServe, type CatalogRun, type ServeChild } from '../_catalogFixture.ts';

const SCRIPT = fileURLToPath(new URL('../../../scripts/opensearch.sh', import.meta.url));
const skip = process.env.COGR_SKIP_OPENSEARCH === '1';

let run: CatalogRun;
let url = '';
let cluster = '';
const servers: ServeChild[] = [];

beforeAll(async () => {
  if (skip) return;
  run = catalogRun('cogr-os-catalog-');
  // The nodes run as uid 65534 when the tests run as root: their folder must be reachable.
  chmodSync(run.dir, 0o755);
  cluster = join(run.dir, 'cluster');
  const port = 21_000 + Math.floor(Math.random() * 9_000);
  const r = spawnSync(
    'bash',
    [SCRIPT, 'start', '--dir', cluster, '--nodes', '1', '--port', String(port), '--heap', '512m', '--timeout', '900'],
    {
      encoding: 'utf8',
      timeout: 1_000_000,
    },
  );
  expect(r.status, r.stderr).toBe(0);
  url = r.stdout.trim().split('\n')[0];
}, 1_200_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  if (cluster) spawnSync('bash', [SCRIPT, 'stop', '--dir', cluster, '--timeout', '120'], { stdio: 'inherit', timeout: 180_000 });
  run?.cleanup();
}, 300_000);

const matchedSet = (body: { matched: number; items: { id: string }[] }) => new Set(body.items.slice(0, body.matched).map((h) => h.id));

describe.skipIf(skip)('OpenSearch follows catalog writes', () => {
  it('each write swapped in whole while searches run; the same matched sets as the memory engine after', async () => {
    const db = run.copy();
    const exp = run.cogr('export', 'opensearch', '--db', db, '--url', url, '--index', 'shop', '--replicas', '0', '--json');
    expect(exp.status, exp.stderr).toBe(0);
    const os = await startServe([
      '--db',
      db,
      '--token',
      'tok',
      '--writable',
      '--backend',
      'opensearch',
      '--url',
      url,
      '--index',
      'shop',
      '--max-k',
      '5000',
    ]);
    servers.push(os);
    const queries = readFileSync(join(run.dataset, 'queries.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { text: string }).text);
    queries.push('t0w3 t1w4 review', 't2w1 note', 'hand picked');
    // A search loop beside the writes: every search must answer 200.
    let stop = false;
    const failures: string[] = [];
    let searches = 0;
    const loop = (async () => {
      for (let i = 0; !stop; i++) {
        const r = await json(`${os.base}/v1/search?q=${encodeURIComponent(queries[i % queries.length])}&k=5000`).catch((e: Error) => ({
          status: 0,
          body: e.message,
        }));
        if (r.status !== 200) failures.push(`${r.status} ${JSON.stringify(r.body)}`);
        searches++;
      }
    })();
    const ids = async (q: string) => matchedSet((await json(`${os.base}/v1/search?q=${encodeURIComponent(q)}&k=5000`)).body);
    const add = await json(
      `${os.base}/v1/items/OS-1`,
      send('PUT', { title: 't0w3 t1w4 review', text: 't0w3 t0w3 t1w4 t1w4 review', fields: { brand: 'acme' } }),
    );
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(add.body.served).toBe(add.body.generation);
    expect(await ids('t0w3 t1w4 review')).toContain('OS-1');
    const other = await json(
      `${os.base}/v1/items/OS-2`,
      send('PUT', { title: 't2w1 note', text: 't2w1 t2w1 note', fields: { size: '3.5' } }),
    );
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    const hit = (await json(`${os.base}/v1/search?q=t2w1+note&k=10&fields=size`)).body.items.find((h: { id: string }) => h.id === 'OS-2');
    expect(hit).toMatchObject({ title: 't2w1 note', fields: { size: '3.5' } });
    expect((await json(`${os.base}/v1/items/OS-1`, send('DELETE'))).status).toBe(200);
    expect(await ids('t0w3 t1w4 review')).not.toContain('OS-1');
    expect((await json(`${os.base}/v1/items/d0-1/keywords`, send('PUT', { keywords: ['hand picked'] }))).status).toBe(200);
    expect(await ids('hand picked')).toContain('d0-1');
    const last = await json(
      `${os.base}/v1/items/batch`,
      send('POST', {
        ops: [
          { op: 'delete', id: 'd0-2' },
          { op: 'update', id: 'd0-3', title: 't0w9 x', text: 't0w9 t0w9 x' },
        ],
      }),
    );
    expect(last.status, JSON.stringify(last.body)).toBe(200);
    stop = true;
    await loop;
    expect(failures, `${failures.length} of ${searches} searches failed`).toEqual([]);
    expect(searches).toBeGreaterThan(0);
    // The alias serves the last write's generation, and only it and the index before it are left.
    const health = await json(`${os.base}/health`);
    expect(health.body.generation).toBe(last.body.generation);
    const indices = (await (await fetch(`${url}/_cat/indices/shop-*?h=index&format=json`)).json()) as { index: string }[];
    expect(indices.length).toBeLessThanOrEqual(2);
    // The memory engine over the same database answers the same matched sets.
    const mem = await startServe(['--db', db, '--max-k', '5000']);
    servers.push(mem);
    expect((await json(`${mem.base}/health`)).body.generation).toBe(last.body.generation);
    for (const q of queries) {
      const a = await json(`${os.base}/v1/search?q=${encodeURIComponent(q)}&k=5000`);
      const b = await json(`${mem.base}/v1/search?q=${encodeURIComponent(q)}&k=5000`);
      expect(a.body.keywords.generated, q).toEqual(b.body.keywords.generated);
      expect(matchedSet(a.body), q).toEqual(matchedSet(b.body));
    }
  }, 600_000);
});
