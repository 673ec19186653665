/**
 * The TypeScript side of the TRL trainer (trainers/trl/): what the Python trainer reads
 * and what comes back from it, with cogr's own code so both sides agree.
 *
 *   node dist/src/trainers/trl.js prompts --db <db> --out <dir> [--items n] [--seed s] [--queries n] [--judged n]
 *       the stored run's LLM prompts (generators/prompts/, compact: the user message alone,
 *       as the model was fine-tuned with, `cogr sft --db <run> --export`): query-core.jsonl (GRPO prompts, label query:<id>, the run's core
 *       training queries only: the reward server serves no other), query-all.jsonl (the core
 *       training queries (or n of them, sampled, with --queries n) and every held-out query, for keywords: dev queries enter no
 *       generation), item-sample.jsonl (n items sampled,
 *       seeded, from those judged relevant to a core training query: the only items whose
 *       keywords move the counterfactual reward; GRPO prompts), item-judged.jsonl (all of them,
 *       or n sampled with --judged n: the item keywords the item half-round imports), core.txt, split.json
 *   node dist/src/trainers/trl.js parse --from completions.jsonl --out keywords.jsonl
 *       model text → `{id, keywords}` lines for `cogr import-generation`, read with the
 *       tolerant parser the reward server and the LLM generator use (generators/parse.ts);
 *       an output that is not a keyword list becomes an empty set and is counted
 *   node dist/src/trainers/trl.js report --dir <work> [--title t]
 *       report.html (training reward per GRPO step, held-out F1 per stage, styled as the
 *       drift report) and table.md from the stage outputs round.sh wrote
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';
import { cogrError, CogrError } from '../../index/core/errors.ts';
import { writeAtomic } from '../../index/core/paths.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { createRng, shuffle } from '../../index/core/random.ts';
import { parseKeywordOutput } from '../../generators/parse.ts';
import { loadPromptTemplate, renderPrompt } from '../../generators/prompts.ts';
import { itemInput, queryInput } from '../../generators/sft.ts';
import { CSS, escapeHtml, lineChart, SIDE_COLOURS } from '../drift/report.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { coreIds, readRunAt } from '../run/state.ts';

function flag(args: string[], name: string, fallback?: string): string {
  const i = args.indexOf(name);
  if (i >= 0 && i + 1 < args.length) return args[i + 1];
  if (fallback !== undefined) return fallback;
  throw cogrError('INVALID_ARGUMENT', `${name}: required`);
}

function jsonl(rows: readonly unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
}

function readJsonl(path: string): { value: Record<string, unknown>; line: number }[] {
  if (!existsSync(path)) throw cogrError('DATA_MISSING', `${path}: no such file`);
  const out: { value: Record<string, unknown>; line: number }[] = [];
  readFileSync(path, 'utf8')
    .split('\n')
    .forEach((l, i) => {
      if (!l.trim()) return;
      let v: unknown;
      try {
        v = JSON.parse(l);
      } catch (e) {
        throw cogrError('DATA_FORMAT', `${path}:${i + 1}: not JSON (${(e as Error).message})`);
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw cogrError('DATA_FORMAT', `${path}:${i + 1}: expected an object`);
      out.push({ value: v as Record<string, unknown>, line: i + 1 });
    });
  return out;
}

export async function writePrompts(
  dbPath: string,
  out: string,
  items: number,
  seed: number,
  /** Core training queries to write keywords for (0: all); the held-out ones are always all there. */
  queries = 0,
  /** Judged items to write keywords for (item-judged.jsonl; 0: all). */
  judgedItems = 0,
): Promise<{ core: number; all: number; items: number }> {
  const run = await readRunAt(dbPath);
  if (!run) throw cogrError('NOT_FOUND', `${dbPath}: no co-evolution run (run \`cogr demo --dataset D --rounds 0\` first)`);
  const corpus = (await loadRunCorpus(run.config, stderrLogger)).corpus;
  // The most keywords an answer may hold, as the LLM path asks a server for (generators/llm.ts):
  // the prompts say it and the trainer's constrained decoding (trainers/trl/keyword_grammar.py) enforces it.
  const kMax = Math.min(run.config.kMax ?? K_MAX, DEFAULTS.llm.maxKeywords);
  const byQuery = new Map(corpus.queries.map((q) => [q.id, q]));
  const qt = loadPromptTemplate('query');
  const it = loadPromptTemplate('item');
  const core = coreIds(run.split);
  const dev = new Set(run.split.dev);
  const prompt = (id: string) => renderPrompt(qt, queryInput(byQuery.get(id)!), [], kMax, 'compact');
  mkdirSync(out, { recursive: true });
  writeAtomic(join(out, 'query-core.jsonl'), jsonl(core.map((id) => ({ id, label: `query:${id}`, prompt: prompt(id) }))));
  // Keywords are needed for the core training queries (the query generation) and the held-out ones (the evaluation); dev queries enter neither.
  const keywordCore = queries > 0 && queries < core.length ? shuffle(core, createRng(seed + 1)).slice(0, queries) : core;
  const all = [...keywordCore, ...run.split.eval];
  const eval_ = new Set(run.split.eval);
  writeAtomic(
    join(out, 'query-all.jsonl'),
    jsonl(all.map((id) => ({ id, split: eval_.has(id) ? 'eval' : dev.has(id) ? 'dev' : 'core', prompt: prompt(id) }))),
  );
  const judged = new Set<string>();
  for (const id of core) for (const i of corpus.relevant.get(id) ?? []) judged.add(i);
  const pool = corpus.items.filter((i) => judged.has(i.id));
  const picked = shuffle(pool, createRng(seed)).slice(0, items);
  const itemPrompt = (i: (typeof pool)[number]) => ({
    id: i.id,
    label: `item:${i.id}`,
    prompt: renderPrompt(it, itemInput(i), [], kMax, 'compact'),
  });
  writeAtomic(join(out, 'item-sample.jsonl'), jsonl(picked.map(itemPrompt)));
  const judgedPick = judgedItems > 0 && judgedItems < pool.length ? shuffle(pool, createRng(seed + 2)).slice(0, judgedItems) : pool;
  writeAtomic(join(out, 'item-judged.jsonl'), jsonl(judgedPick.map(itemPrompt)));
  writeAtomic(join(out, 'core.txt'), core.join('\n') + '\n');
  writeAtomic(
    join(out, 'split.json'),
    JSON.stringify({
      dataset: run.config.dataset,
      core: core.length,
      dev: run.split.dev.length,
      eval: run.split.eval.length,
      keywordCore: keywordCore.length,
      itemPool: pool.length,
      itemSample: picked.length,
      maxKeywords: kMax,
      maxKeywordLength: DEFAULTS.llm.maxKeywordLength,
    }) + '\n',
  );
  stderrLogger.info(
    `prompts: ${core.length} core training queries, ${all.length} queries for keywords (${keywordCore.length} core and ${run.split.eval.length} held out), ${picked.length} of ${pool.length} judged items → ${out}`,
  );
  return { core: core.length, all: all.length, items: picked.length };
}

export function parseCompletions(from: string, out: string): { lines: number; invalid: number; truncated: number } {
  let invalid = 0;
  let truncated = 0;
  const rows = readJsonl(from).map(({ value, line }) => {
    if (typeof value.id !== 'string' || typeof value.completion !== 'string')
      throw cogrError('DATA_FORMAT', `${from}:${line}: expected {id, completion} strings`);
    if (value.truncated === true) truncated++;
    const p = parseKeywordOutput(value.completion);
    if (!p.ok) invalid++;
    return { id: value.id, keywords: p.ok ? p.keywords : [] };
  });
  writeAtomic(out, jsonl(rows));
  stderrLogger.info(
    `parse: ${rows.length} completions → ${out}; ${invalid} not a keyword list (empty set), ${truncated} cut off at the token budget`,
  );
  return { lines: rows.length, invalid, truncated };
}

interface StageF1 {
  stage: string;
  f1: number;
  precision: number;
  recall: number;
  what: string;
}

function readJson(path: string): Record<string, unknown> | null {
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : null;
}

/** The table and chart of a round.sh work folder (what is there; a missing stage is shown as missing). */
export function renderReport(dir: string, title: string): { html: string; markdown: string } {
  const steps = (name: string) =>
    existsSync(join(dir, name))
      ? readJsonl(join(dir, name))
          .map(({ value }) => value)
          .filter((v) => typeof v.reward === 'number')
          .map((v) => ({
            step: Number(v.step),
            reward: Number(v.reward),
            std: Number(v.reward_std ?? 0),
            zero: Number(v.frac_reward_zero_std ?? NaN),
            loss: Number(v.loss ?? NaN),
          }))
      : [];
  const q = steps('grpo-query.log.jsonl');
  const i = steps('grpo-item.log.jsonl');
  const demo = readJson(join(dir, 'demo.json'));
  const f1s: StageF1[] = [];
  const imp = (file: string, stage: string, what: string) => {
    const r = readJson(join(dir, file));
    const m = (r?.metrics ?? null) as { f1: number; precision: number; recall: number } | null;
    if (m) f1s.push({ stage, f1: m.f1, precision: m.precision, recall: m.recall, what });
  };
  imp('import-sft-query.json', 'LLM after SFT (before the query half-round)', 'LLM query keywords, SFT item index');
  imp('import-query.json', 'LLM after the query half-round', 'LLM query keywords, SFT item index');
  imp(
    'import-item.json',
    'after the item half-round (planner queries)',
    "the run's planner keywords, item index with the LLM's item keywords",
  );
  imp('import-query-after-item.json', 'LLM after the item half-round', 'LLM query keywords, item index with the LLM item keywords');
  const baselines: StageF1[] = [];
  if (demo) {
    const sft = (demo.steps as { step: string; metrics?: { f1: number; precision: number; recall: number } }[] | undefined)?.find(
      (r) => r.step === 'sft',
    )?.metrics;
    if (sft)
      baselines.push({
        stage: 'embedded planner (cogr SFT)',
        f1: sft.f1,
        precision: sft.precision,
        recall: sft.recall,
        what: 'planner keywords, SFT item index',
      });
    const b = (demo.baselines as Record<string, { f1: number; precision: number; recall: number; cutoff: number }> | undefined)?.bm25;
    if (b)
      baselines.push({
        stage: `BM25 (cut-off ${b.cutoff})`,
        f1: b.f1,
        precision: b.precision,
        recall: b.recall,
        what: 'full text, cut-off tuned on training queries',
      });
  }
  const f4 = (x: number) => (Number.isFinite(x) ? x.toFixed(4) : '—');
  const rewardRows = (name: string, s: typeof q) =>
    s.map(
      (r) =>
        `| ${name} | ${r.step} | ${f4(r.reward)} | ${f4(r.std)} | ${Number.isFinite(r.zero) ? r.zero.toFixed(2) : '—'} | ${f4(r.loss)} |`,
    );
  const markdown =
    `| half-round | GRPO step | mean reward | reward std | groups with all rewards equal | loss |\n|---|---|---|---|---|---|\n` +
    [...rewardRows('query', q), ...rewardRows('item', i)].join('\n') +
    `\n\n| held-out queries | P | R | F1 | what is matched |\n|---|---|---|---|---|\n` +
    [...f1s, ...baselines].map((r) => `| ${r.stage} | ${f4(r.precision)} | ${f4(r.recall)} | ${f4(r.f1)} | ${r.what} |`).join('\n') +
    '\n';
  const chart = lineChart({
    name: 'reward',
    title: 'Training reward per GRPO step (mean over the step\u2019s completions)',
    xLabel: 'GRPO step',
    yLabel: 'reward',
    yScale: 'linear',
    yFormat: (v) => String(+v.toPrecision(3)),
    series: [
      {
        name: 'query half-round (F1 vs frozen item index)',
        colour: SIDE_COLOURS.query,
        points: q.map((r) => ({ x: r.step, y: r.reward })),
      },
      { name: 'item half-round (counterfactual)', colour: SIDE_COLOURS.item, points: i.map((r) => ({ x: r.step, y: r.reward })) },
    ],
  });
  const f1Chart = lineChart({
    name: 'heldout-f1',
    title: 'Held-out F1 per stage (dashed: planner and BM25 on the same split)',
    xLabel: 'stage',
    yLabel: 'held-out F1',
    yScale: 'linear',
    yFormat: (v) => v.toFixed(2),
    yDomain: [0, Math.max(0.1, ...f1s.map((r) => r.f1), ...baselines.map((r) => r.f1))],
    series: [
      { name: 'LLM', colour: SIDE_COLOURS.query, points: f1s.map((r, k) => ({ x: k, y: r.f1 })) },
      ...baselines.map((b, k) => ({
        name: b.stage,
        colour: k === 0 ? '#16a34a' : '#64748b',
        dash: '6 4',
        points: f1s.map((_, j) => ({ x: j, y: b.f1 })),
      })),
    ],
  });
  const tableHtml = (head: string[], rows: string[][], caption: string) =>
    `<table class="summary"><caption>${escapeHtml(caption)}</caption><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>` +
    rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`).join('') +
    '</tbody></table>';
  const html = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${CSS}</style></head>
<body>
<h1>${escapeHtml(title)}</h1>
<p class="sub">trainers/trl/round.sh: SFT, a GRPO query half-round, a GRPO item half-round; rewards from cogr reward-server</p>
<div class="grid2"><div class="card">${chart}</div><div class="card">${f1Chart}</div></div>
${tableHtml(
  ['stage', 'P', 'R', 'F1', 'what is matched'],
  [...f1s, ...baselines].map((r) => [r.stage, f4(r.precision), f4(r.recall), f4(r.f1), r.what]),
  'Held-out queries',
)}
${tableHtml(
  ['half-round', 'GRPO step', 'mean reward', 'reward std', 'groups all equal', 'loss'],
  [...q.map((r) => ['query', r]), ...i.map((r) => ['item', r])].map(([s, r]) => {
    const x = r as (typeof q)[number];
    return [s as string, String(x.step), f4(x.reward), f4(x.std), Number.isFinite(x.zero) ? x.zero.toFixed(2) : '—', f4(x.loss)];
  }),
  'Training reward per GRPO step',
)}
</body></html>
`;
  return { html, markdown };
}

export async function main(argv: string[]): Promise<void> {
  const [cmd, ...args] = argv;
  if (cmd === 'prompts') {
    const items = Number(flag(args, '--items', '32'));
    const seed = Number(flag(args, '--seed', '1'));
    const queries = Number(flag(args, '--queries', '0'));
    const judged = Number(flag(args, '--judged', '0'));
    if (!Number.isInteger(judged) || judged < 0)
      throw cogrError('INVALID_ARGUMENT', `--judged: expected an integer ≥ 0, got ${JSON.stringify(flag(args, '--judged'))}`);
    if (!Number.isInteger(items) || items < 1)
      throw cogrError('INVALID_ARGUMENT', `--items: expected an integer ≥ 1, got ${JSON.stringify(flag(args, '--items'))}`);
    if (!Number.isInteger(queries) || queries < 0)
      throw cogrError('INVALID_ARGUMENT', `--queries: expected an integer ≥ 0, got ${JSON.stringify(flag(args, '--queries'))}`);
    await writePrompts(flag(args, '--db'), flag(args, '--out'), items, seed, queries, judged);
  } else if (cmd === 'parse') {
    parseCompletions(flag(args, '--from'), flag(args, '--out'));
  } else if (cmd === 'report') {
    const dir = flag(args, '--dir');
    const r = renderReport(dir, flag(args, '--title', 'cogr + TRL: one alternating round'));
    writeAtomic(join(dir, 'report.html'), r.html);
    writeAtomic(join(dir, 'table.md'), r.markdown);
    process.stdout.write(r.markdown);
  } else throw cogrError('INVALID_ARGUMENT', `expected prompts, parse or report, got ${JSON.stringify(cmd ?? '')}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(
      e instanceof CogrError ? `error[${e.code}]: ${e.message}\n` : `error[INTERNAL]: ${(e as Error).stack ?? String(e)}\n`,
    );
    process.exit(e instanceof CogrError && e.status < 500 ? 2 : 1);
  });
}
