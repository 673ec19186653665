/**
 * `cogr items fold`: the served catalog as a dataset for the next training run. A run
 * trains on a fixed snapshot of its dataset (its data fingerprint, run/fingerprint.ts, is
 * checked on every resume and by the servers), so catalog writes never change a run's data;
 * this writes the run's dataset with the catalog's writes applied as a new dataset folder in
 * cogr's JSONL format, for `cogr evolve --dataset <folder>` (or `cogr datasets add`):
 *
 *   items.jsonl     the dataset's items, deleted ones left out, changed ones replaced, added ones after
 *   queries.jsonl   the dataset's queries
 *   qrels.jsonl     its judgements, those of deleted items left out (counted)
 *   keywords.jsonl  the keywords set by hand ({"id", "keywords"}: `cogr items keywords --from` sets them again)
 *   catalog.json    where it came from: dataset, database, root and served generation, catalog delta
 *
 * The folder is written under a temporary name and renamed into place; an existing folder
 * is refused, never overwritten.
 */
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { cogrError, systemError } from '../../index/core/errors.ts';
import type { Corpus } from '../../index/core/types.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import { readRunAt } from '../run/state.ts';
import { resolveSelector, selectGenerations, servedHead, type RoundSelector } from './served.ts';
import { catalogItems, PublishedCatalog } from './state.ts';

export interface FoldResult {
  folder: string;
  items: number;
  /** Relative to the dataset: items the catalog added, changed and deleted. */
  added: number;
  updated: number;
  deleted: number;
  queries: number;
  judgements: number;
  /** Judgements left out because their item was deleted. */
  droppedJudgements: number;
  handSet: number;
  generation: number;
}

const lines = (rows: readonly unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');

export async function foldCatalog(opts: {
  dbPath: string;
  round: RoundSelector;
  corpus: Corpus;
  dataset: string;
  to: string;
}): Promise<FoldResult> {
  const to = resolve(opts.to);
  if (existsSync(to)) throw cogrError('INVALID_ARGUMENT', `--to: ${to} exists; give a new folder (a fold never overwrites one)`, { to });
  const files = new PublishedIndex(opts.dbPath);
  await files.checkExists();
  const items = await files.listGenerations('item');
  const queries = await files.listGenerations('query');
  const run = await readRunAt(opts.dbPath);
  const sel = selectGenerations(items, queries, resolveSelector(run, opts.round).selector);
  const { root, head } = servedHead(items, sel.item);
  const state = await new PublishedCatalog(opts.dbPath).stateOf(head);
  const folded = catalogItems(opts.corpus.items, state);
  const inDataset = new Set(opts.corpus.items.map((it) => it.id));
  const kept = new Set(folded.map((it) => it.id));
  let added = 0;
  let updated = 0;
  let deleted = 0;
  for (const [id, d] of state.docs) {
    if (d === null) deleted += inDataset.has(id) ? 1 : 0;
    else if (inDataset.has(id)) updated++;
    else added++;
  }
  const qrels: { query_id: string; item_id: string; grade: number }[] = [];
  let dropped = 0;
  for (const [q, judged] of opts.corpus.qrels)
    for (const [i, grade] of judged) {
      if (kept.has(i)) qrels.push({ query_id: q, item_id: i, grade });
      else dropped++;
    }
  const tmp = join(dirname(to), `.tmp-${basename(to)}-${process.pid}`);
  try {
    await mkdir(tmp, { recursive: true });
    await writeFile(
      join(tmp, 'items.jsonl'),
      lines(folded.map((it) => ({ id: it.id, title: it.title, text: it.text, ...(it.fields ? { fields: it.fields } : {}) }))),
    );
    await writeFile(join(tmp, 'queries.jsonl'), lines(opts.corpus.queries.map((q) => ({ id: q.id, text: q.text }))));
    await writeFile(join(tmp, 'qrels.jsonl'), lines(qrels));
    await writeFile(
      join(tmp, 'keywords.jsonl'),
      lines([...state.handSet].filter(([id]) => kept.has(id)).map(([id, keywords]) => ({ id, keywords }))),
    );
    await writeFile(
      join(tmp, 'catalog.json'),
      JSON.stringify(
        {
          format: 'cogr-catalog-fold',
          dataset: opts.dataset,
          db: resolve(opts.dbPath),
          root,
          generation: head.generation,
          delta: state.seq,
          foldedAt: new Date().toISOString(),
        },
        null,
        2,
      ) + '\n',
    );
    await rename(tmp, to);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true }).catch(() => {});
    throw systemError(e, to, `writing ${to}`) ?? e;
  }
  return {
    folder: to,
    items: folded.length,
    added,
    updated,
    deleted,
    queries: opts.corpus.queries.length,
    judgements: qrels.length,
    droppedJudgements: dropped,
    handSet: [...state.handSet.keys()].filter((id) => kept.has(id)).length,
    generation: head.generation,
  };
}
