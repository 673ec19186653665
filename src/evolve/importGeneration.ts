/**
 * `importGeneration`: keywords produced elsewhere (an external model) become a new
 * generation of a side of a stored run (training entities only on the query side:
 * held-out queries' keywords are used only to evaluate), evaluated on the held-out
 * queries like any other step and recorded in the run store's `imports`.
 *
 * Idempotent: the commit meta carries the file's sha256 (`digest`) and its path, and when
 * the side's latest generation is already that file's import (an import killed after its
 * commit but before its caller saw the answer, run again) nothing is committed: that
 * generation is evaluated against the current item generation (`reused: true`), and when
 * the run store already holds the record of that very evaluation it is returned as it is,
 * not appended again. Whatever boundary a kill lands on (index/core/failpoint.ts), the re-run
 * converges: committed generations without files are published first (`store.recover`), the
 * reused generation is evaluated and recorded, and a record already in the database is
 * published to run.json again.
 *
 * `half` (`--half rR-side`): the file is an external trainer's result of that half-round of
 * the run (trained against its frozen generations, run/context.ts frozenHalfRound). An item
 * file then replaces the keywords of the half-round's frozen item generation (not the
 * latest one), a query file's held-out queries are matched against the frozen item
 * generation, the file's training entities are scored with the half-round's one scorer (the
 * reward the trainer was given: `trainReward`), and the record names the half-round, so the
 * half-rounds after it build on it where the run has no step of that name (state.ts frozenFor).
 *
 * `against` (`--against rR-query`, query side, not with `half`): the held-out queries are
 * matched against that half-round's frozen item generation instead of the latest one (a
 * model's keywords before its half-round, e.g. round.sh's SFT stage, measured on the item
 * index that half-round trains against, whatever items were imported since).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { CogrDb } from '../../index/store/db.ts';
import { cogrError } from '../../index/core/errors.ts';
import { failpoint } from '../../index/core/failpoint.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import { normalizeKeywordSet } from '../../index/text/normalize.ts';
import { deriveSeed } from '../../index/core/random.ts';
import type { Corpus, Side } from '../../index/core/types.ts';
import { jsonlRecords } from '../datasets/common.ts';
import { frozenHalfRound, openRun, runPlanner, type FrozenHalfRound } from '../run/context.ts';
import { parseHalfRound, type HeldOutMetrics, type ImportRecord } from '../run/state.ts';
import { evaluateQueries, plannerKeywords, type QueryKeywordsFn } from './evaluate.ts';

const ImportLine = z.object({
  id: z.union([z.string().min(1), z.number()]).transform(String),
  keywords: z.array(z.string()),
  title: z.string().optional(),
});

/** Read `{"id", "keywords": [...], "title"?}` lines; every id must be a known entity. */
export function readKeywordFile(path: string, known: ReadonlySet<string>, side: Side): Map<string, { keywords: string[]; title?: string }> {
  const out = new Map<string, { keywords: string[]; title?: string }>();
  for (const { value, line } of jsonlRecords(path, ImportLine, { uniqueId: (v) => v.id })) {
    if (!known.has(value.id))
      throw cogrError('NOT_FOUND', `${path}:${line}: unknown ${side} id ${JSON.stringify(value.id)} (not in the run's dataset)`);
    out.set(value.id, {
      keywords: normalizeKeywordSet(value.keywords).keywords,
      ...(value.title !== undefined ? { title: value.title } : {}),
    });
  }
  if (out.size === 0) throw cogrError('DATA_FORMAT', `${path}: no keyword lines`);
  return out;
}

export async function importGeneration(
  db: CogrDb,
  corpus: Corpus,
  side: Side,
  path: string,
  logger: Logger = silentLogger,
  opts: { half?: string; against?: string } = {},
): Promise<ImportRecord> {
  const run = await openRun(db, corpus);
  const { store, evalQueries } = run;
  // A run of this command killed between its commit and the generation's files left it unpublished.
  await store.recover();
  let half: FrozenHalfRound | null = null;
  if (opts.half !== undefined) {
    const h = parseHalfRound(opts.half);
    if (h.side !== side) throw cogrError('INVALID_ARGUMENT', `--half ${opts.half}: a ${h.side} half-round, imported with --side ${h.side}`);
    half = await frozenHalfRound(run, h.side, h.round);
  }
  let against: FrozenHalfRound | null = null;
  if (opts.against !== undefined) {
    if (side !== 'query')
      throw cogrError('INVALID_ARGUMENT', `--against ${opts.against}: only query keywords are evaluated against an item index`);
    if (half)
      throw cogrError(
        'INVALID_ARGUMENT',
        `--against and --half: a half-round's query keywords are evaluated against its own frozen item index`,
      );
    const h = parseHalfRound(opts.against);
    if (h.side !== 'query')
      throw cogrError(
        'INVALID_ARGUMENT',
        `--against ${opts.against}: expected a query half-round (rR-query), whose frozen item index is used`,
      );
    against = await frozenHalfRound(run, h.side, h.round);
  }
  // Query keywords of a half-round (or --against's) are matched against its frozen item generation, others against the latest.
  const frozenItems = side === 'query' ? (half ?? against) : null;
  const known = new Set(side === 'item' ? corpus.items.map((i) => i.id) : corpus.queries.map((q) => q.id));
  const lines = readKeywordFile(path, known, side);
  const digest = createHash('sha256').update(readFileSync(path)).digest('hex');
  const latestOwn = await store.latest(side);
  const latestMeta = latestOwn === null ? null : (await store.generationInfo(side, latestOwn)).meta;
  const reused =
    latestOwn !== null &&
    latestMeta?.step === 'import' &&
    latestMeta.digest === digest &&
    latestMeta.source === path &&
    (half === null || latestMeta.half === half.name);
  if (reused)
    logger.info(
      `${path}: ${side} generation ${latestOwn} is already this file's import (sha256 ${digest.slice(0, 12)}); not committed again`,
    );
  const byItem = new Map(corpus.items.map((i) => [i.id, i]));
  let generation: number;
  let metrics: HeldOutMetrics;
  let heldOutFromFile = 0;
  if (side === 'item') {
    if (reused) generation = latestOwn;
    else {
      // A half-round's item keywords replace those of its frozen item generation.
      const w = store.writer('item', { base: half ? half.itemView.generation : latestOwn });
      for (const [id, v] of lines) w.set(id, v.title ?? byItem.get(id)!.title, v.keywords);
      generation = await w.commit({ step: 'import', source: path, digest, ...(half ? { half: half.name } : {}) });
    }
    const view = await store.openView('item', generation);
    const planner = await runPlanner(run, 'latest');
    planner.attachOpposite(view);
    metrics = evaluateQueries(
      view,
      evalQueries,
      plannerKeywords(planner, deriveSeed(run.config.seed, 'import'), run.config),
      corpus,
      run.config.beta,
    ).metrics;
  } else {
    // Held-out and dev queries never enter a generation (they would reach item rewards).
    if (reused) generation = latestOwn;
    else {
      const w = store.writer('query', { base: latestOwn });
      let written = 0;
      const core = new Map(run.coreQueries.map((q) => [q.id, q]));
      for (const [id, v] of lines) {
        const q = core.get(id);
        if (!q) continue;
        w.set(id, q.text, v.keywords);
        written++;
      }
      if (written === 0) logger.warn(`${path}: no training query in the file; the new query generation equals the previous one`);
      generation = await w.commit({ step: 'import', source: path, digest, ...(half ? { half: half.name } : {}) });
    }
    const latestItem = frozenItems ? frozenItems.itemView.generation : await store.latest('item');
    if (latestItem === null) throw cogrError('NOT_FOUND', 'no item generation to evaluate against');
    const view = frozenItems ? frozenItems.itemView : await store.openView('item', latestItem);
    const fromFile: QueryKeywordsFn = (q) => lines.get(q.id)?.keywords ?? [];
    heldOutFromFile = run.split.eval.filter((id) => lines.has(id)).length;
    if (heldOutFromFile < evalQueries.length)
      logger.warn(
        `${path}: ${evalQueries.length - heldOutFromFile} held-out queries have no keywords in the file; they are evaluated with their raw text only`,
      );
    // A run fitted with embeddings: the imported keywords' cosines to their queries in the audit, through its planner's relevance model.
    const audit =
      run.config.embeddingsModel !== null ? { planner: await runPlanner(run, 'latest'), noRankings: true, cosines: true } : undefined;
    metrics = evaluateQueries(view, evalQueries, fromFile, corpus, run.config.beta, audit).metrics;
  }
  const itemGeneration = frozenItems ? frozenItems.itemView.generation : ((await store.latest('item')) ?? undefined);
  const { state } = run;
  if (reused) {
    const same = (await state.imports()).find(
      (r) => r.side === side && r.generation === generation && r.digest === digest && r.itemGeneration === itemGeneration,
    );
    if (same) {
      // Killed between the record and run.json: the readers' copy gets it now.
      await state.publish();
      return same;
    }
  }
  const rec: ImportRecord = {
    side,
    generation,
    source: path,
    entities: lines.size,
    heldOutFromFile,
    metrics,
    importedAt: new Date().toISOString(),
    digest,
    ...(itemGeneration !== undefined ? { itemGeneration } : {}),
    ...(half
      ? {
          half: half.name,
          queryGeneration: side === 'query' ? generation : half.queryView!.generation,
          trainReward: trainReward(half, lines),
        }
      : {}),
    reused,
  };
  failpoint('import-generation:before-record');
  await state.appendImport(rec);
  return rec;
}

/** The mean reward of the file's training entities under the half-round's one scorer (entities it does not score left out). */
function trainReward(half: FrozenHalfRound, lines: ReadonlyMap<string, { keywords: string[] }>): { mean: number; entities: number } {
  const r = half.scorer.score([...lines].map(([id, v]) => ({ id, keywords: v.keywords })));
  const scored = r.rewards.filter((x): x is number => x !== null);
  return { mean: scored.length ? scored.reduce((a, b) => a + b, 0) / scored.length : 0, entities: scored.length };
}
