/**
 * `npm run bench -- cli [--json] [--runs 9] [--items 1000]`
 *
 * Start-up cost of the compiled `cogr` command, against bare Node, as whole processes:
 * each round spawns `node -e 0` (bare_node), `cogr --help` (help) and `cogr index search`
 * on a small database (index_search: open the LevelDB, load the latest item generation
 * into a view, search, print JSON), one after the other, so that a load spike on a
 * shared machine hits all three; reported are the medians over the rounds of the wall
 * times and of the per-round ratios to bare Node. Every run is cold (a new process).
 *
 * The database: the first `--items` NFCorpus documents, each keyed by its first 10
 * distinct words of 4+ letters, self keyword = its id, committed as one item
 * generation in a temp folder.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withDb } from '../index/store/db.ts';
import { packageRoot } from '../index/core/paths.ts';
import { KeywordIndexStore } from '../index/store/store.ts';
import { renderTable } from '../src/table.ts';
import { parseBenchArgs } from './args.ts';
import { median, nfcorpusDocs, round } from './fixtures.ts';

function wallMs(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const runs = a.number('--runs', 9, { min: 5, integer: true });
  const items = a.number('--items', 1000, { min: 1, integer: true });
  const bin = join(packageRoot(), 'bin', 'cogr.mjs');
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-cli-'));
  try {
    const db = join(dir, 'db');
    await withDb(db, async (d) => {
      const w = new KeywordIndexStore(d).writer('item');
      for (const doc of nfcorpusDocs().slice(0, items))
        w.set(doc.id, doc.id, [...new Set(doc.text.split(' ').filter((x) => x.length >= 4))].slice(0, 10));
      await w.commit({ label: 'bench cli' });
    });
    const env = { ...process.env, COGR_HOME: join(dir, 'home') };
    const commands = {
      bare_node: ['-e', '0'],
      help: [bin, '--help'],
      index_search: [
        bin,
        'index',
        'search',
        '--db',
        db,
        '--query',
        'breast cancer',
        '--keywords',
        'statin|breast|cancer',
        '--k',
        '10',
        '--json',
      ],
    };
    // One warm-up of each (file cache), then the counted rounds.
    for (const c of Object.values(commands)) wallMs(c, env);
    const times: Record<keyof typeof commands, number[]> = { bare_node: [], help: [], index_search: [] };
    for (let r = 0; r < runs; r++) for (const [k, c] of Object.entries(commands)) times[k as keyof typeof commands].push(wallMs(c, env));
    const ratio = (k: 'help' | 'index_search') => median(times[k].map((t, i) => t / times.bare_node[i]));
    const out = {
      bench: 'cli',
      node: process.version,
      runs,
      items,
      bare_node_ms: round(median(times.bare_node), 1),
      help_ms: round(median(times.help), 1),
      index_search_ms: round(median(times.index_search), 1),
      help_vs_bare_node: round(ratio('help'), 2),
      index_search_vs_bare_node: round(ratio('index_search'), 2),
    };
    const table = renderTable(
      ['command', 'median ms', 'min ms', 'max ms', '× bare node'],
      (['bare_node', 'help', 'index_search'] as const).map((k) => [
        k === 'bare_node' ? 'node -e 0' : k === 'help' ? 'cogr --help' : 'cogr index search (small db)',
        median(times[k]).toFixed(1),
        Math.min(...times[k]).toFixed(1),
        Math.max(...times[k]).toFixed(1),
        k === 'bare_node' ? '1.00' : ratio(k).toFixed(2),
      ]),
      { right: [1, 2, 3, 4] },
    );
    if (json) {
      process.stderr.write(table);
      process.stdout.write(JSON.stringify(out) + '\n');
    } else process.stdout.write(`cold starts, ${runs} rounds, medians\n${table}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
