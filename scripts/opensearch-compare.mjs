#!/usr/bin/env node
// Every query of a dataset through `cogr serve` (memory, keyword-bag BM25) and `cogr serve
// --backend opensearch` side by side (docs/opensearch.md):
//   COGR_HOME=<home> node scripts/opensearch-compare.mjs --dataset med --url U[,U2,…] --index ALIAS
// Prints one JSON line: queries whose planned keywords and served sets (the first `matched`
// items: the match rule's set, or the run's empty-plan floor) are identical, those that
// differ, and the mean top-10 overlap. Needs `npm run build` and an export of the same run.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const arg = (name) => {
  const i = process.argv.indexOf(name);
  if (i < 0 || !process.argv[i + 1]) {
    console.error(`${name}: required (--dataset D --url U[,U2,…] --index ALIAS)`);
    process.exit(2);
  }
  return process.argv[i + 1];
};
const [dataset, urls, alias] = [arg('--dataset'), arg('--url'), arg('--index')];
const BIN = fileURLToPath(new URL('../bin/cogr.mjs', import.meta.url));
const children = [];

function serve(args) {
  const c = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--max-k', '100000', '--max-query-length', '100000', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(c);
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${err}`)), 300_000);
    c.stderr.on('data', (d) => {
      err += d;
      const m = /listening address=(\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    c.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
}

async function search(base, q) {
  const res = await fetch(`${base}/v1/search?q=${encodeURIComponent(q)}&k=100000`, { signal: AbortSignal.timeout(60_000) });
  return res.json();
}

try {
  const { loadDataset } = await import(new URL('../dist/src/datasets/index.js', import.meta.url).href);
  const queries = (await loadDataset(dataset)).corpus.queries.map((q) => q.text);
  const [memory, backend] = await Promise.all([
    serve(['--rank', 'keywords']),
    serve(['--backend', 'opensearch', '--url', urls, '--index', alias]),
  ]);
  const out = { dataset, queries: queries.length, identical: 0, different: 0, errors: 0, meanTop10Overlap: 0 };
  let overlap = 0;
  let ranked = 0;
  for (const q of queries) {
    const [a, b] = await Promise.all([search(memory, q), search(backend, q)]);
    if (a.error || b.error) {
      out.errors++;
      console.error(`error on ${JSON.stringify(q)}: ${JSON.stringify(a.error ?? b.error)}`);
      continue;
    }
    // The served set is the first `matched` items (a backfill may follow it, in each server's ranker order).
    const sa = new Set(a.items.slice(0, a.matched).map((h) => h.id));
    const sb = new Set(b.items.slice(0, b.matched).map((h) => h.id));
    const same =
      a.matched === b.matched &&
      sa.size === sb.size &&
      [...sa].every((id) => sb.has(id)) &&
      JSON.stringify(a.keywords.generated) === JSON.stringify(b.keywords.generated);
    if (!same) {
      out.different++;
      console.error(`different on ${JSON.stringify(q)}: matched ${a.matched} vs ${b.matched}`);
    } else out.identical++;
    if (a.items.length > 0) {
      const top = new Set(a.items.slice(0, 10).map((h) => h.id));
      overlap += b.items.slice(0, 10).filter((h) => top.has(h.id)).length / Math.min(10, a.items.length);
      ranked++;
    }
  }
  out.meanTop10Overlap = ranked ? Number((overlap / ranked).toFixed(4)) : null;
  console.log(JSON.stringify(out));
  if (out.different > 0 || out.errors > 0) process.exitCode = 1;
} finally {
  for (const c of children) c.kill('SIGTERM');
}
