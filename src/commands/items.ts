/**
 * `cogr items`: the served catalog, written and previewed from the command line (the HTTP
 * routes of `cogr serve --writable` do the same, src/server/catalogRoutes.ts).
 *
 *   add | update | delete --from <file.jsonl>   one batch, one new item generation (src/catalog/writer.ts)
 *   keywords --from <file.jsonl>                 keywords set by hand ({"id", "keywords": [...] | null})
 *   preview --id <id> --keywords "a; b; c"       what those keywords would do, nothing committed
 *   fold --to <folder>                           the run's dataset with the catalog's writes, for the next run
 *
 * Every sub-command takes --db and --round (the served generation, default best, as `cogr
 * serve`), and --dataset (default: the stored run's). Writes hold the database's lock for
 * the batch: beside a `cogr serve --writable` (which holds it) they are refused (DB_LOCKED)
 * — write through its API instead; beside a plain `cogr serve --watch` the new generation
 * is served within moments. preview and fold read the published files without the lock.
 */
import type { Command } from 'commander';
import { openDb } from '../../index/store/db.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { Corpus } from '../../index/core/types.ts';
import { llmOptionsFromEnv } from '../../generators/llm.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { checkPublishedRunData, readRunAt } from '../run/state.ts';
import { llmCache } from '../run/policies.ts';
import { ITEM_GENERATORS, itemKeywordsFactory } from '../catalog/itemKeywords.ts';
import { readOpsFile } from '../catalog/ops.ts';
import { CatalogWriter, type CatalogCommit } from '../catalog/writer.ts';
import { previewKeywords, type KeywordPreview } from '../catalog/preview.ts';
import { foldCatalog } from '../catalog/fold.ts';
import type { RoundSelector } from '../catalog/served.ts';
import { LiveSnapshot } from '../server/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { dbPath, parseChoice, parseLatestOr, withDbOption, withLlmOptions, type LlmFlags } from './options.ts';

interface ItemsFlags extends LlmFlags {
  db?: string;
  round: string;
  dataset?: string;
  itemGenerator: string;
  from?: string;
  json?: boolean;
}

function roundOf(flag: string): RoundSelector {
  return flag === 'best' ? 'best' : parseLatestOr('--round', flag);
}

/** The dataset of the served run (or --dataset), checked against the run's fingerprint. */
async function servedCorpus(path: string, dataset: string | undefined): Promise<{ corpus: Corpus | null; name: string | null }> {
  const run = dataset ? null : await readRunAt(path);
  if (dataset) {
    const d = await loadDataset(dataset, { logger: stderrLogger });
    return { corpus: d.corpus, name: dataset };
  }
  if (!run) return { corpus: null, name: null };
  const { corpus } = await loadRunCorpus(run.config, stderrLogger);
  checkPublishedRunData(path, run, corpus);
  return { corpus, name: run.config.dataset };
}

function summary(c: CatalogCommit): string {
  const n = c.counts;
  const parts = [
    n.added && `${n.added} added`,
    n.updated && `${n.updated} updated`,
    n.deleted && `${n.deleted} deleted`,
    n.handSet && `${n.handSet} hand-set`,
    n.cleared && `${n.cleared} cleared`,
  ].filter(Boolean);
  return `committed item generation ${c.generation} on ${c.base} (catalog delta ${c.seq}): ${parts.join(', ')}${c.generator ? `; keywords from the ${c.generator}` : ''}\n`;
}

async function write(kind: 'add' | 'update' | 'delete' | 'keywords', flags: ItemsFlags): Promise<void> {
  if (!flags.from) throw cogrError('INVALID_ARGUMENT', '--from: required, a JSONL file');
  // The whole file is read and validated before the database is opened: a bad line writes nothing.
  const ops = readOpsFile(flags.from, kind);
  const path = dbPath(flags.db);
  const { corpus } = await servedCorpus(path, flags.dataset);
  const generator = parseChoice('--item-generator', flags.itemGenerator, ITEM_GENERATORS);
  const db = await openDb(path, { logger: stderrLogger, createIfMissing: false });
  try {
    const writer = await CatalogWriter.open(db, {
      round: roundOf(flags.round),
      corpus,
      itemKeywords: itemKeywordsFactory(generator, () => llmOptionsFromEnv(flags), { cache: llmCache(db), logger: stderrLogger }),
      log: stderrLogger,
    });
    const res = await writer.apply(ops, 'file');
    process.stdout.write(flags.json ? JSON.stringify(res) + '\n' : summary(res));
  } finally {
    await db.close();
  }
}

function previewText(p: KeywordPreview): string {
  const f = (x: number) => x.toFixed(4);
  const rows: string[] = [
    `item ${p.id} (item generation ${p.itemGeneration}, query generation ${p.queryGeneration}): matched by ${p.matched.before} stored queries now, ${p.matched.after} with the new keywords`,
    `counterfactual item reward (Σ F1 change over judged queries): ${p.reward >= 0 ? '+' : ''}${p.reward.toFixed(6)}${p.reason ? ` (${p.reason})` : ''}`,
  ];
  for (const [what, list] of [
    ['gain', p.judged.gained],
    ['lose', p.judged.lost],
  ] as const)
    for (const q of list)
      rows.push(
        `  ${what} ${q.id}${q.relevant ? ' (relevant)' : ''}: F1 ${f(q.f1Before)} → ${f(q.f1After)} (${q.delta >= 0 ? '+' : ''}${f(q.delta)})  ${q.text}`,
      );
  for (const q of p.unjudged.gained) rows.push(`  gain ${q.id} (unjudged)  ${q.text}`);
  for (const q of p.unjudged.lost) rows.push(`  lose ${q.id} (unjudged)  ${q.text}`);
  return rows.join('\n') + '\n';
}

async function preview(flags: ItemsFlags & { id?: string; keywords?: string }): Promise<void> {
  if (!flags.id) throw cogrError('INVALID_ARGUMENT', '--id: required, the item');
  if (flags.keywords === undefined) throw cogrError('INVALID_ARGUMENT', '--keywords: required, the keywords separated by ";"');
  const keywords = flags.keywords
    .split(';')
    .map((k) => k.trim())
    .filter((k) => k.length > 0);
  const path = dbPath(flags.db);
  const { corpus } = await servedCorpus(path, flags.dataset);
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath: path, round: roundOf(flags.round), ...(corpus ? { corpus } : {}) }));
  await live.reload();
  const snap = live.get();
  const p = previewKeywords(snap.item, snap.query, snap.judgements, flags.id, keywords);
  process.stdout.write(flags.json ? JSON.stringify(p) + '\n' : previewText(p));
}

async function fold(flags: ItemsFlags & { to?: string }): Promise<void> {
  if (!flags.to) throw cogrError('INVALID_ARGUMENT', '--to: required, a new folder');
  const path = dbPath(flags.db);
  const { corpus, name } = await servedCorpus(path, flags.dataset);
  if (!corpus || !name)
    throw cogrError('NOT_FOUND', `${path} holds no co-evolution run to fold the catalog into its dataset (give --dataset)`);
  const r = await foldCatalog({ dbPath: path, round: roundOf(flags.round), corpus, dataset: name, to: flags.to });
  process.stdout.write(
    flags.json
      ? JSON.stringify(r) + '\n'
      : `wrote ${r.folder}: ${r.items} items (${r.added} added, ${r.updated} updated, ${r.deleted} deleted by the catalog), ${r.queries} queries, ${r.judgements} judgements (${r.droppedJudgements} of deleted items left out), ${r.handSet} hand-set keyword lists; next: cogr evolve --dataset ${r.folder}\n`,
  );
}

function common(cmd: Command): Command {
  return withLlmOptions(
    withDbOption(cmd)
      .option('--round <round>', 'the served generation to write on: "best" (the run\'s), "latest" or a round number', 'best')
      .option('--dataset <name|path>', "the dataset of the index (default: the stored run's)")
      .option(
        '--item-generator <kind>',
        "keywords of new and changed items from: auto (the round's item policy; an LLM endpoint when the round's items were imported from one) | embedded | openai",
        'auto',
      )
      .option('--json', 'print one JSON object'),
  );
}

export function register(program: Command): void {
  const items = program
    .command('items')
    .description('write the served catalog (add, update, delete, keywords), preview keywords, fold into a dataset');
  for (const [kind, help] of [
    ['add', 'add items: lines {"id", "title", "text", "fields"?}; an id already there is refused'],
    ['update', 'replace items: lines {"id", "title", "text", "fields"?}; an id not there is refused'],
    ['delete', 'delete items: lines {"id"}'],
    [
      'keywords',
      'set keywords by hand (kept across later generator runs until cleared): lines {"id", "keywords": [...]}, or null to clear',
    ],
  ] as const)
    common(items.command(kind).description(help))
      .requiredOption('--from <file.jsonl>', 'the batch (all of it is committed as one generation, or none of it)')
      .action(async (flags: ItemsFlags) => write(kind, flags));
  common(
    items
      .command('preview')
      .description("what setting an item's keywords would do: queries gained and lost, their F1 change, the counterfactual reward"),
  )
    .requiredOption('--id <id>', 'the item')
    .requiredOption('--keywords <list>', 'the keywords, separated by ";"')
    .action(async (flags: ItemsFlags & { id?: string; keywords?: string }) => preview(flags));
  common(items.command('fold').description("the run's dataset with the catalog's writes, as a new dataset folder for the next run"))
    .requiredOption('--to <folder>', 'a new folder')
    .action(async (flags: ItemsFlags & { to?: string }) => fold(flags));
}
