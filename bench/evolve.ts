/**
 * `npm run bench -- evolve --items N --queries Q --relevant R [--rounds 1] [--seed 1]
 *  [--workers W] [--served-set keywords|model|auto] [--out DIR] [--json]`
 * `npm run bench -- evolve --sizes 5000x500x100,20000x3000x300,40000x13500x1000 [--rounds 1] [--out DIR] [--chart-only]`
 *
 * The main job at scale: a seeded synthetic judged text collection (judgedCollection.ts)
 * and one real run over it — the same code as `cogr evolve --folds 5 --fold 0`
 * (runCoevolution, src/evolve/run.ts) in a fresh database under a temporary folder —
 * timed phase by phase. Phases are cut at the run's own log and progress events (the
 * `phase …` debug lines of run.ts and generators/sft.ts, the SFT progress labels, the
 * GRPO epochs' progress): relevance fit, M trials, α tuning, query targets, item policy,
 * indexing, query generation, floor and ranker choices, each half-round's setup, GRPO and
 * dev + held-out evaluation. Per phase: wall seconds and cores used (process CPU time,
 * workers included, / wall); for the run: wall, CPU, peak RSS (process.resourceUsage
 * maxRSS) and the load average before and after (the machine may be shared).
 *
 * With `--sizes`, each size runs in its own child process (so each peak RSS is its own),
 * and the table, `evolve.json` and a chart (`evolve.svg`, `evolve.html`: stacked bars of
 * seconds per phase group) are written under `--out` (default: a folder under the
 * system's temporary directory). A single size writes `evolve-<N>x<Q>x<R>.json` there;
 * `--chart-only` renders the table and chart from those files without running anything.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDb } from '../index/store/db.ts';
import type { Logger } from '../index/core/log.ts';
import { runCoevolution } from '../src/evolve/run.ts';
import type { RunConfig } from '../src/run/config.ts';
import type { ProgressSink } from '../src/progress.ts';
import { parseBenchArgs } from './args.ts';
import { renderEvolveChart, type EvolveBenchResult, type PhaseTiming } from './evolveChart.ts';
import { judgedCollection } from './judgedCollection.ts';
import { round } from './fixtures.ts';
import { writeResultJson } from './writeJson.ts';

/** A phase clock: marks (label, wall, CPU); a phase runs from its mark to the next. */
class PhaseClock {
  private readonly marks: { label: string; t: number; cpu: number }[] = [];
  mark(label: string): void {
    const last = this.marks.at(-1);
    if (last && last.label === label) return;
    const u = process.cpuUsage();
    this.marks.push({ label, t: performance.now(), cpu: (u.user + u.system) / 1e6 });
  }
  phases(): PhaseTiming[] {
    const out = new Map<string, PhaseTiming>();
    for (let i = 0; i + 1 < this.marks.length; i++) {
      const a = this.marks[i];
      const b = this.marks[i + 1];
      if (a.label === '') continue;
      const p = out.get(a.label) ?? { phase: a.label, seconds: 0, cpuSeconds: 0, cores: 0 };
      p.seconds += (b.t - a.t) / 1000;
      p.cpuSeconds += b.cpu - a.cpu;
      out.set(a.label, p);
    }
    return [...out.values()].map((p) => ({
      phase: p.phase,
      seconds: round(p.seconds, 3),
      cpuSeconds: round(p.cpuSeconds, 3),
      cores: p.seconds > 0 ? round(p.cpuSeconds / p.seconds, 2) : 0,
    }));
  }
}

/** The phase a log line or a progress phase starts, or null (not a boundary). */
export function phaseOf(msg: string): string | null {
  let m: RegExpExecArray | null;
  if (msg.startsWith('phase ')) return msg.slice(6);
  if ((m = /^step (\S+): start$/.exec(msg))) return `${m[1]}: setup`;
  if ((m = /^step (\S+): done/.exec(msg))) return '';
  if (msg === 'sft: fitting the relevance model') return 'sft: relevance fit';
  if (msg.startsWith('sft: trying M')) return 'sft: M trials';
  if (msg === 'sft: training the item policy') return 'sft: item policy';
  if ((m = /^(\S+): indexing items$/.exec(msg))) return `${m[1]}: indexing`;
  if ((m = /^(r\d+-(?:query|item)) epoch /.exec(msg))) return `${m[1]}: GRPO`;
  return null;
}

type ServedSet = RunConfig['servedSet'];

async function runOnce(opts: {
  items: number;
  queries: number;
  relevant: number;
  rounds: number;
  seed: number;
  workers?: number;
  servedSet?: ServedSet;
}) {
  const loadBefore = loadavg().map((x) => round(x, 2));
  const c0 = performance.now();
  const corpus = judgedCollection({ items: opts.items, queries: opts.queries, relevant: opts.relevant, seed: opts.seed });
  const collectionSeconds = (performance.now() - c0) / 1000;
  const clock = new PhaseClock();
  const verbose = process.env.COGR_BENCH_VERBOSE === '1';
  const onLog = (msg: string) => {
    const p = phaseOf(msg);
    if (p !== null) clock.mark(p);
    if (verbose && p !== null) process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  };
  const logger: Logger = { info: onLog, debug: onLog, warn: (m) => process.stderr.write(`warning: ${m}\n`) };
  const progress: ProgressSink = { start: (p) => onLog(p), tick() {}, end() {} };
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-evolve-'));
  const db = await openDb(join(dir, 'db'));
  const u0 = process.cpuUsage();
  const t0 = performance.now();
  let res;
  try {
    res = await runCoevolution(
      db,
      corpus,
      {
        dataset: corpus.name,
        folds: 5,
        fold: 0,
        rounds: opts.rounds,
        seed: 1,
        ...(opts.workers ? { workers: opts.workers } : {}),
        ...(opts.servedSet ? { servedSet: opts.servedSet } : {}),
      },
      { logger, progress },
    );
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const wallSeconds = (performance.now() - t0) / 1000;
  const u = process.cpuUsage(u0);
  const cpuSeconds = (u.user + u.system) / 1e6;
  const phases = clock.phases();
  const stepSeconds = (step: string) => phases.filter((p) => p.phase.startsWith(`${step}:`));
  const result: EvolveBenchResult = {
    items: opts.items,
    queries: opts.queries,
    relevant: opts.relevant,
    rounds: opts.rounds,
    seed: opts.seed,
    ...(opts.servedSet ? { servedSet: opts.servedSet } : {}),
    split: { core: res.split.train.length - res.split.dev.length, dev: res.split.dev.length, eval: res.split.eval.length },
    collectionSeconds: round(collectionSeconds, 3),
    phases,
    steps: res.steps.map((s) => {
      const ps = stepSeconds(s.step);
      const sec = ps.reduce((a, p) => a + p.seconds, 0);
      const cpu = ps.reduce((a, p) => a + p.cpuSeconds, 0);
      return {
        step: s.step,
        seconds: round(sec, 3),
        cores: sec > 0 ? round(cpu / sec, 2) : 0,
        heldOutF1: round(s.metrics.f1, 4),
        devF1: s.dev ? round(s.dev.f1, 4) : null,
        adopted: s.adopted,
      };
    }),
    wallSeconds: round(wallSeconds, 3),
    cpuSeconds: round(cpuSeconds, 3),
    cores: round(cpuSeconds / wallSeconds, 2),
    peakRssMiB: round(process.resourceUsage().maxRSS / 1024, 1),
    loadBefore,
    loadAfter: loadavg().map((x) => round(x, 2)),
    node: process.version,
    finishedAt: new Date().toISOString(),
  };
  return result;
}

function fmtS(s: number): string {
  return s >= 100 ? s.toFixed(0) : s >= 10 ? s.toFixed(1) : s.toFixed(2);
}

/**
 * The table of one or more sizes: a row per phase, a column per size: wall seconds, CPU
 * seconds (the process's, workers included) and cores = CPU / wall (below 1 on a busy
 * machine: the run waited for a core).
 */
export function renderEvolveTable(results: readonly EvolveBenchResult[]): string {
  const names: string[] = [];
  for (const r of results) for (const p of r.phases) if (!names.includes(p.phase)) names.push(p.phase);
  const head = ['phase', ...results.map((r) => `${r.items}×${r.queries}×${r.relevant}: wall s / CPU s (cores)`)];
  const rows: string[][] = names.map((n) => [
    n,
    ...results.map((r) => {
      const p = r.phases.find((x) => x.phase === n);
      return p ? `${fmtS(p.seconds)} / ${fmtS(p.cpuSeconds)} (${p.cores.toFixed(2)})` : '';
    }),
  ]);
  rows.push(['total', ...results.map((r) => `${fmtS(r.wallSeconds)} / ${fmtS(r.cpuSeconds)} (${r.cores.toFixed(2)})`)]);
  rows.push(['SFT / each half-round, wall s', ...results.map((r) => r.steps.map((s) => `${s.step} ${fmtS(s.seconds)}`).join(', '))]);
  rows.push(['peak RSS MiB', ...results.map((r) => r.peakRssMiB.toFixed(0))]);
  rows.push(['core / dev / held-out queries', ...results.map((r) => `${r.split.core} / ${r.split.dev} / ${r.split.eval}`)]);
  rows.push(['held-out F1 (best step)', ...results.map((r) => bestF1(r))]);
  rows.push(['load avg before → after', ...results.map((r) => `${r.loadBefore[0]} → ${r.loadAfter[0]}`)]);
  const md = [`| ${head.join(' | ')} |`, `|---|${results.map(() => '---:').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
  return md.join('\n') + '\n';
}

function bestF1(r: EvolveBenchResult): string {
  const adopted = r.steps.filter((s) => s.adopted);
  const last = adopted.at(-1);
  return last ? `${last.heldOutF1.toFixed(4)} (${last.step})` : '';
}

function parseSizes(s: string): { items: number; queries: number; relevant: number }[] {
  return s.split(',').map((part) => {
    const [items, queries, relevant] = part.split('x').map(Number);
    if (![items, queries].every((x) => Number.isInteger(x) && x > 0))
      throw new Error(`--sizes: ${JSON.stringify(part)} is not ITEMSxQUERIES[xRELEVANT]`);
    return { items, queries, relevant: Number.isInteger(relevant) && relevant > 0 ? relevant : Math.max(1, Math.round(items / 40)) };
  });
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const rounds = a.number('--rounds', 1, { min: 0, integer: true });
  const seed = a.number('--seed', 1, { min: 0, integer: true });
  const workers = a.number('--workers', 0, { min: 0, integer: true });
  const out = a.string('--out', join(tmpdir(), 'cogr-bench-evolve'));
  // --served-set: the run's set guard option (default: the run's default); named in the JSON file's name.
  const served = a.string('--served-set', '');
  if (served !== '' && !['keywords', 'model', 'auto'].includes(served))
    throw new Error(`--served-set: ${JSON.stringify(served)} is not one of keywords, model, auto`);
  const servedSet = served === '' ? undefined : (served as ServedSet);
  const suffix = servedSet ? `-${servedSet}` : '';
  mkdirSync(out, { recursive: true });
  const sizes = a.string('--sizes', '');
  if (sizes === '') {
    const items = a.number('--items', 5000, { min: 1, integer: true });
    const queries = a.number('--queries', 500, { min: 2, integer: true });
    const relevant = a.number('--relevant', 100, { min: 1, integer: true });
    const r = await runOnce({
      items,
      queries,
      relevant,
      rounds,
      seed,
      ...(workers ? { workers } : {}),
      ...(servedSet ? { servedSet } : {}),
    });
    const file = join(out, `evolve-${items}x${queries}x${relevant}${suffix}.json`);
    await writeResultJson(file, r);
    if (json) process.stdout.write(JSON.stringify(r) + '\n');
    else process.stdout.write(renderEvolveTable([r]) + `(JSON: ${file})\n`);
    return;
  }
  const results: EvolveBenchResult[] = [];
  // --chart-only: the table and chart of sizes measured before (their JSON under --out).
  const chartOnly = a.has('--chart-only');
  for (const s of parseSizes(sizes)) {
    const file = join(out, `evolve-${s.items}x${s.queries}x${s.relevant}${suffix}.json`);
    if (chartOnly) {
      results.push(JSON.parse(readFileSync(file, 'utf8')) as EvolveBenchResult);
      continue;
    }
    process.stderr.write(`evolve bench: ${s.items} items × ${s.queries} queries × ${s.relevant} relevant …\n`);
    const child = spawnSync(
      process.execPath,
      [
        ...process.execArgv,
        process.argv[1],
        'evolve',
        '--items',
        String(s.items),
        '--queries',
        String(s.queries),
        '--relevant',
        String(s.relevant),
        '--rounds',
        String(rounds),
        '--seed',
        String(seed),
        '--out',
        out,
        '--json',
        ...(workers ? ['--workers', String(workers)] : []),
        ...(servedSet ? ['--served-set', servedSet] : []),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 },
    );
    if (child.status !== 0) throw new Error(`evolve bench at ${s.items}×${s.queries} failed (exit ${child.status})`);
    results.push(JSON.parse(readFileSync(file, 'utf8')) as EvolveBenchResult);
  }
  await writeResultJson(join(out, 'evolve.json'), results);
  const svg = renderEvolveChart(results);
  writeFileSync(join(out, 'evolve.svg'), svg + '\n');
  writeFileSync(
    join(out, 'evolve.html'),
    `<!doctype html><meta charset="utf-8"><title>cogr evolve at scale</title><body style="font-family:system-ui,sans-serif">${svg}<pre>${renderEvolveTable(results).replace(/&/g, '&amp;').replace(/</g, '&lt;')}</pre></body>\n`,
  );
  if (json) process.stdout.write(JSON.stringify(results) + '\n');
  else process.stdout.write(renderEvolveTable(results) + `(JSON, SVG and HTML under ${out})\n`);
}
