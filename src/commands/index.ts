/**
 * `cogr index ...`: the keyword inverted index on LevelDB (index/store/store.ts).
 *
 *   import  --side item|query --from <file.jsonl> [--patch] [--base <g>|empty] [--label <text>]
 *           commits a new generation from lines {"id", "title"?, "keywords": [...]} and
 *           prints its number. Without --patch the file is the whole generation
 *           (entities absent from it are removed); unchanged entities are not rewritten.
 *           The same file imported again with the same options commits nothing (importJsonl).
 *   search  --query <raw> --keywords "<kw1>|<kw2>" [--generation g] [--k 10] [--all] [--json]
 *           or --batch <file.jsonl> [--run-file <path>] [--run-tag t]: every line's probe,
 *           written as a TREC run (src/trec.ts); --rank model|text|mix orders the matched set
 *           by the stored run's planner (--embeddings on a run fitted with embeddings)
 *   explain --query <raw> --keywords "<kw1>|..." --id <id> [--generation g] [--json]
 *   list    [--json]      diff --from a --to b [--json]      delete --generation g [--force]
 * delete refuses a generation that a step (or import) of the stored run uses, naming it,
 * unless --force.
 * Every sub-command takes --db <dir> (default $COGR_HOME/db) and --side (default item);
 * search and explain also --k1 and --b (BM25, defaults 1.2 and 0.75). import and delete
 * write through the LevelDB (and its lock); search, explain, list and diff read the
 * published generation files (index/store/published.ts), checked on open, without the lock.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { PublishedIndex, type GenerationInfo } from '../../index/store/published.ts';
import type { Side } from '../../index/core/types.ts';
import type { Bm25Params, Probe } from '../../index/view/view.ts';
import { idSchema, jsonlRecords } from '../datasets/common.ts';
import { RANKERS } from '../../generators/planner/rankers.ts';
import { bestStep, RunState } from '../run/state.ts';
import { renderTable } from '../table.ts';
import {
  dbPath,
  parseChoice,
  parseIntFlag,
  parseLatestOr,
  parseNumberFlag,
  parseSide,
  RUN_EMBEDDINGS_HELP,
  withDbOption,
  withEmbeddingsOptions,
  type EmbeddingsFlags,
} from './options.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';

const batchLineSchema = z.object({
  id: idSchema,
  query: z.string().optional(),
  keywords: z.array(z.string()).optional(),
});

const lineSchema = z.object({
  id: idSchema,
  title: z.string().optional(),
  keywords: z.array(z.string()),
});

export interface ImportOptions {
  base?: number | null;
  patch?: boolean;
  meta?: Record<string, unknown>;
}

/**
 * Read a JSONL file of {"id", "title"?, "keywords"} lines into a writer and commit.
 * Errors name the file and line: DATA_MISSING, DATA_FORMAT, DUPLICATE_ID.
 *
 * Idempotent, as `import-generation` is: the generation's metadata records the file's
 * SHA-256 (`digest`), path, mode, base and label, and when the side's latest generation is
 * already this file's import with the same options (a re-run, say after a kill), nothing is
 * committed and that generation is answered (`reused: true`, published first if a kill left
 * it without files). Building on it again could only give the same generation.
 */
export async function importJsonl(
  store: KeywordIndexStore,
  side: Side,
  file: string,
  opts: ImportOptions = {},
): Promise<{ generation: number; entities: number; changed: number; rejectedKeywords: number; reused: boolean }> {
  const mode = opts.patch ? 'patch' : 'replace';
  const w = store.writer(side, { ...(opts.base !== undefined ? { base: opts.base } : {}), mode });
  let entities = 0;
  for (const { value } of jsonlRecords(file, lineSchema, { uniqueId: (v) => v.id })) {
    w.set(value.id, value.title ?? '', value.keywords);
    entities++;
  }
  const digest = createHash('sha256').update(readFileSync(file)).digest('hex');
  const meta: Record<string, unknown> = {
    source: file,
    digest,
    mode,
    base: opts.base === undefined ? 'latest' : opts.base,
    ...(opts.meta ?? {}),
  };
  await store.recover();
  const latest = await store.latest(side);
  if (latest !== null) {
    const was = (await store.generationInfo(side, latest)).meta;
    const same = ['source', 'digest', 'mode', 'label'].every((k) => JSON.stringify(was[k]) === JSON.stringify(meta[k]));
    if (same && (opts.base === undefined || was.base === opts.base)) {
      stderrLogger.info(
        `${file}: ${side} generation ${latest} is already this file's import (sha256 ${digest.slice(0, 12)}); not committed again`,
      );
      return { generation: latest, entities, changed: 0, rejectedKeywords: 0, reused: true };
    }
  }
  const res = await w.commitWithStats(meta);
  return { generation: res.generation, entities, changed: res.changed, rejectedKeywords: res.rejectedKeywords, reused: false };
}

/** The steps (and imports) of the stored run that use a generation, by name ("step r1-item (the run's best step)"). */
async function generationUsers(db: CogrDb, side: Side, g: number): Promise<string[]> {
  const state = new RunState(db);
  const steps = await state.steps();
  const best = bestStep(steps);
  const out: string[] = [];
  for (const s of steps) {
    if ((side === 'item' ? s.itemGeneration : s.queryGeneration) === g)
      out.push(`step ${s.step}${s === best ? " (the run's best step)" : ''}`);
  }
  for (const i of await state.imports()) if (i.side === side && i.generation === g) out.push(`the import from ${i.source}`);
  return out;
}

// ---- option parsing ---------------------------------------------------------------

interface CommonOpts {
  db?: string;
  side: string;
}

async function withStore<T>(o: CommonOpts, create: boolean, fn: (store: KeywordIndexStore, db: CogrDb) => Promise<T>): Promise<T> {
  const db = await openDb(dbPath(o.db), { createIfMissing: create, logger: stderrLogger });
  try {
    return await fn(new KeywordIndexStore(db), db);
  } finally {
    await db.close();
  }
}

/** The published generation files: what search, explain, list and diff read (no database lock). */
/**
 * The stored run's served query planner (its best step's, the final refit's when it has
 * one; SFT's when no step is adopted) over its dataset's items (read from the published
 * files), for --rank model|text|mix; imported on use, so the other index commands start as
 * fast as before. A run fitted with embeddings needs --embeddings serving its model (refused
 * without it, naming the model): the items' and `texts`' vectors are embedded ahead (cached),
 * another text's is fetched when the planner scores it.
 */
async function storedPlanner(path: string, flags: EmbeddingsFlags, texts: readonly string[] = []): Promise<KeywordPlanner> {
  const [{ readRunAt, bestServing }, { loadRunCorpus }, { loadPlanner }, { publishedPolicyStore }, { registerRunEmbeddings }] =
    await Promise.all([
      import('../run/state.ts'),
      import('../run/corpus.ts'),
      import('../run/policies.ts'),
      import('../run/published.ts'),
      import('../embeddings/dense.ts'),
    ]);
  const run = await readRunAt(path);
  if (!run)
    throw cogrError(
      'NOT_FOUND',
      `--rank model|text|mix needs a co-evolution run in ${path} (its planner and dataset); none is stored there`,
    );
  const { corpus } = await loadRunCorpus(run.config, stderrLogger);
  const extra = texts.filter((t) => t.trim().length > 0).map((text, i) => ({ id: `search-${i}`, text }));
  await registerRunEmbeddings(flags, run.config, { items: corpus.items, queries: [...corpus.queries, ...extra] }, stderrLogger);
  return loadPlanner(publishedPolicyStore(path), bestServing(run.steps)?.plannerRound ?? 0, corpus.items);
}

function published(o: CommonOpts): PublishedIndex {
  return new PublishedIndex(dbPath(o.db));
}

function probeOf(o: { query?: string; keywords?: string }): Probe {
  const keywords = (o.keywords ?? '').split('|').filter((k) => k.trim().length > 0);
  return { self: o.query ?? '', keywords };
}

function bm25Of(o: { k1?: string; b?: string }): Bm25Params {
  return {
    k1: parseNumberFlag('--k1', o.k1, { min: 0, max: 100 }) ?? DEFAULTS.bm25.k1,
    b: parseNumberFlag('--b', o.b, { min: 0, max: 1 }) ?? DEFAULTS.bm25.b,
  };
}

function generationFlag(flag: string, g: string): number {
  return parseIntFlag(flag, g, 0)!;
}

function out(s: string): void {
  process.stdout.write(s.endsWith('\n') ? s : s + '\n');
}

function common(c: Command): Command {
  return withDbOption(c).option('--side <side>', 'item or query', 'item');
}

export function register(program: Command): void {
  const index = program.command('index');

  common(index.command('import'))
    .description('commit a new generation from a JSONL file of {"id", "title"?, "keywords": [...]} and print its number')
    .requiredOption('--from <file>', 'JSONL file, one entity per line')
    .option('--patch', 'only set/replace the entities in the file (default: the file is the whole generation)')
    .option('--base <g>', 'generation to build from: a number or "empty" (default: the latest)')
    .option('--label <text>', 'a label stored in the generation metadata')
    .option('--json', 'print one JSON object instead of the bare number')
    .action(async (o: CommonOpts & { from: string; patch?: boolean; base?: string; label?: string; json?: boolean }) => {
      const side = parseSide('--side', o.side);
      const base = o.base === undefined ? undefined : o.base === 'empty' ? null : generationFlag('--base', o.base);
      const res = await withStore(o, true, (store) =>
        importJsonl(store, side, o.from, { base, patch: o.patch ?? false, meta: o.label === undefined ? {} : { label: o.label } }),
      );
      if (res.rejectedKeywords > 0)
        stderrLogger.warn('keywords rejected by normalisation (empty or over the limits)', { count: res.rejectedKeywords });
      out(o.json ? JSON.stringify({ side, ...res }) : String(res.generation));
    });

  withEmbeddingsOptions(common(index.command('search')), `with --rank model|text|mix on ${RUN_EMBEDDINGS_HELP}`)
    .description('retrieve by the CoGR rule ((S_q ∪ {q}) ∩ (S_i ∪ {i}) ≠ ∅), ranked by BM25')
    .option('--generation <g>', 'generation number or "latest"', 'latest')
    .option('--query <text>', 'the raw query ({q}, one extra keyword)', '')
    .option('--keywords <list>', 'the probe keywords separated by "|"', '')
    .option('--k <n>', 'how many ranked items to print', '10')
    .option('--all', 'print every matched item')
    .option('--k1 <x>', `BM25 k1 (default ${DEFAULTS.bm25.k1})`)
    .option('--b <x>', `BM25 b (default ${DEFAULTS.bm25.b})`)
    .option(
      '--rank <ranker>',
      "order of the matched set: keywords (keyword-bag BM25) | model (p(item | query)) | text (text BM25) | mix ((p / p_max + text) / 2) — model, text and mix use the stored run's SFT planner and dataset (item side)",
      'keywords',
    )
    .option(
      '--backfill <n>',
      "with --rank model|text|mix: list the matched set ranked, then the other items by the same ranker until n are listed (a search engine's more results; 0: the matched set alone)",
      '0',
    )
    .option(
      '--batch <file>',
      'search every line {"id", "query"?, "keywords"?: [...]} of a JSONL file and write a TREC run file (qid Q0 docid rank score tag; the top --k, or with --all every matched item, of each; ties by docid as trec_eval) to --run-file or stdout',
    )
    .option('--run-file <path>', 'with --batch: the run file (default: stdout)')
    .option('--run-tag <tag>', "with --batch: the run file's tag column", 'cogr-index')
    .option('--json', 'print one JSON object')
    .action(
      async (
        o: CommonOpts &
          EmbeddingsFlags & {
            generation?: string;
            query?: string;
            keywords?: string;
            k: string;
            all?: boolean;
            k1?: string;
            b?: string;
            rank: string;
            backfill: string;
            batch?: string;
            runFile?: string;
            runTag: string;
            json?: boolean;
          },
      ) => {
        const side = parseSide('--side', o.side);
        const k = parseIntFlag('--k', o.k, 0)!;
        const params = bm25Of(o);
        const ranker = parseChoice('--rank', o.rank, RANKERS);
        const depth = parseIntFlag('--backfill', o.backfill, 0)!;
        if (depth > 0 && ranker === 'keywords')
          throw cogrError(
            'INVALID_ARGUMENT',
            '--backfill needs --rank model|text|mix (the keyword bag scores nothing outside the matched set)',
          );
        const gen = parseLatestOr('--generation', o.generation);
        const view = await published(o).openView(side, gen);
        const generation = view.generation;
        if (o.batch !== undefined) {
          const [{ servedList }, { trecOrder, writeRunFile, formatRun }] = await Promise.all([
            import('../../generators/planner/ranking.ts'),
            import('../trec.ts'),
          ]);
          if (ranker !== 'keywords' && side !== 'item')
            throw cogrError('INVALID_ARGUMENT', '--rank model|text|mix ranks items: use it with --side item');
          const records = function* () {
            for (const r of jsonlRecords(o.batch!, batchLineSchema, { uniqueId: (v) => v.id })) yield r.value;
          };
          // With the planner the whole file is read (and checked) first: a run fitted with embeddings embeds its
          // texts in one go. The keyword bag alone streams it.
          const lines = ranker === 'keywords' ? null : [...records()];
          const planner =
            lines === null
              ? null
              : await storedPlanner(
                  dbPath(o.db),
                  o,
                  lines.map((l) => l.query ?? ''),
                );
          planner?.attachOpposite(view);
          const queries: { queryId: string; hits: { id: string; score: number }[] }[] = [];
          const t0 = Date.now();
          for (const value of lines ?? records()) {
            const probe: Probe = { self: value.query ?? '', keywords: value.keywords ?? [] };
            if (!view.hasSearchableTerm(probe)) {
              queries.push({ queryId: value.id, hits: [] });
              continue;
            }
            const whole = view.search(probe, { all: true, params });
            const ranked = planner
              ? servedList(whole.items, ranker, planner, { id: value.id, text: value.query ?? '' }, view, depth)
              : whole.items;
            const hits = trecOrder(ranked.map((x) => ({ id: x.id, score: x.score })));
            queries.push({ queryId: value.id, hits: o.all ? hits : hits.slice(0, k) });
            if (queries.length % 1000 === 0)
              stderrLogger.info(`search --batch: ${queries.length} queries, ${(queries.length / ((Date.now() - t0) / 1000)).toFixed(0)}/s`);
          }
          if (o.runFile === undefined) out(formatRun(queries, o.runTag).replace(/\n$/, ''));
          else {
            const lines = await writeRunFile(o.runFile, queries, o.runTag);
            stderrLogger.info(`run file ${o.runFile}: ${queries.length} queries, ${lines} lines (${side} generation ${generation})`);
          }
          return;
        }
        const probe = probeOf(o);
        // As the search API: a probe with no searchable term matches nothing, and says so.
        const fallback = view.hasSearchableTerm(probe)
          ? null
          : {
              reason: 'no_terms' as const,
              message: 'the query has no searchable term (blank, stop words only, or no word or keyword the generation knows)',
            };
        let res = fallback
          ? { matched: 0, items: [] as { id: string; score: number }[] }
          : view.search(probe, { k, all: o.all ?? false, params });
        if (ranker !== 'keywords' && !fallback) {
          if (side !== 'item') throw cogrError('INVALID_ARGUMENT', '--rank model|text|mix ranks items: use it with --side item');
          const [planner, { servedList }] = await Promise.all([
            storedPlanner(dbPath(o.db), o, [o.query ?? '']),
            import('../../generators/planner/ranking.ts'),
          ]);
          planner.attachOpposite(view);
          const whole = view.search(probe, { all: true, params });
          const ranked = servedList(whole.items, ranker, planner, { id: 'cli', text: o.query ?? '' }, view, depth);
          res = { matched: whole.matched, items: o.all ? ranked : ranked.slice(0, k) };
        }
        const items = res.items.map((x) => ({ id: x.id, score: x.score }));
        if (o.json) {
          out(JSON.stringify({ generation, matched: res.matched, fallback, rank: ranker, items }));
          return;
        }
        out(`${side} generation ${generation}: ${res.matched} matched${fallback ? ` (fallback no_terms: ${fallback.message})` : ''}`);
        if (items.length > 0)
          out(
            renderTable(
              ['rank', 'id', 'score'],
              items.map((x, i) => [String(i + 1), x.id, x.score.toFixed(4)]),
            ),
          );
      },
    );

  common(index.command('explain'))
    .description('why an entity matches a probe: shared keywords and each BM25 term')
    .requiredOption('--id <id>', 'the entity id')
    .option('--generation <g>', 'generation number or "latest"', 'latest')
    .option('--query <text>', 'the raw query ({q})', '')
    .option('--keywords <list>', 'the probe keywords separated by "|"', '')
    .option('--k1 <x>', `BM25 k1 (default ${DEFAULTS.bm25.k1})`)
    .option('--b <x>', `BM25 b (default ${DEFAULTS.bm25.b})`)
    .option('--json', 'print one JSON object')
    .action(
      async (
        o: CommonOpts & { id: string; generation?: string; query?: string; keywords?: string; k1?: string; b?: string; json?: boolean },
      ) => {
        const side = parseSide('--side', o.side);
        const params = bm25Of(o);
        const gen = parseLatestOr('--generation', o.generation);
        const view = await published(o).openView(side, gen);
        const generation = view.generation;
        const ex = view.explain(probeOf(o), o.id, params);
        if (!ex) throw cogrError('NOT_FOUND', `id ${JSON.stringify(o.id)} is not in ${side} generation ${generation}`, { id: o.id });
        if (o.json) {
          out(JSON.stringify({ generation, ...ex }));
          return;
        }
        out(`${side} generation ${generation}, id ${ex.id}: ${ex.matched ? 'matched' : 'NOT matched'}`);
        out(`matched keywords: ${ex.matchedKeywords.length ? ex.matchedKeywords.map((k) => JSON.stringify(k)).join(', ') : '(none)'}`);
        out(`score ${ex.score.toFixed(6)} = ${ex.formula}`);
        if (ex.terms.length > 0) {
          out(
            renderTable(
              ['word', 'tf', 'df', 'idf', 'contribution'],
              ex.terms.map((t) => [t.word, String(t.tf), String(t.df), t.idf.toFixed(6), t.contribution.toFixed(6)]),
            ),
          );
        }
      },
    );

  common(index.command('list'))
    .description('list the committed generations of a side')
    .option('--json', 'print one JSON object')
    .action(async (o: CommonOpts & { json?: boolean }) => {
      const side = parseSide('--side', o.side);
      const gens = await published(o).listGenerations(side);
      const present = new Set(gens.map((g) => g.generation));
      // A parent deleted since (`index delete`) is said to be so.
      const parentOf = (g: GenerationInfo) =>
        g.parent === null ? '-' : present.has(g.parent) ? String(g.parent) : `${g.parent} (deleted)`;
      if (o.json) {
        out(JSON.stringify({ side, generations: gens.map((g) => ({ ...g, parentDeleted: g.parent !== null && !present.has(g.parent) })) }));
        return;
      }
      if (gens.length === 0) {
        out(`no ${side} generation`);
        return;
      }
      out(
        renderTable(
          ['generation', 'parent', 'size', 'changed', 'avg length', 'created', 'meta'],
          gens.map((g) => [
            String(g.generation),
            parentOf(g),
            String(g.size),
            String(g.changed),
            g.size === 0 ? '0' : (g.totalLength / g.size).toFixed(2),
            g.createdAt,
            JSON.stringify(g.meta),
          ]),
        ),
      );
    });

  common(index.command('diff'))
    .description('compare two generations of a side')
    .requiredOption('--from <a>', 'older generation')
    .requiredOption('--to <b>', 'newer generation')
    .option('--json', 'print one JSON object')
    .action(async (o: CommonOpts & { from: string; to: string; json?: boolean }) => {
      const side = parseSide('--side', o.side);
      const a = generationFlag('--from', o.from);
      const b = generationFlag('--to', o.to);
      const d = await published(o).diff(side, a, b);
      if (o.json) {
        out(JSON.stringify(d));
        return;
      }
      out(
        `${side} ${a} -> ${b}: ${d.added.length} added, ${d.removed.length} removed, ${d.changed.length} changed; keywords +${d.keywordsAdded} -${d.keywordsDropped}`,
      );
    });

  common(index.command('delete'))
    .description(
      'delete one generation (the others read exactly as before); a generation a step of the stored run uses is refused unless --force',
    )
    .requiredOption('--generation <g>', 'the generation to delete')
    .option('--force', "delete it even when a step of the stored run uses it (that step's result can then no longer be served)")
    .action(async (o: CommonOpts & { generation: string; force?: boolean }) => {
      const side = parseSide('--side', o.side);
      const g = generationFlag('--generation', o.generation);
      await withStore(o, false, async (store, db) => {
        const users = await generationUsers(db, side, g);
        if (users.length > 0 && !o.force) {
          throw cogrError(
            'INVALID_ARGUMENT',
            `${side} generation ${g} is used by ${users.join(', ')} of the run stored in ${db.path}; deleting it would leave ${users.length > 1 ? 'them' : 'it'} without ${side} keywords (\`cogr serve\` could no longer serve the run's result); --force deletes it anyway`,
            { side, generation: g, users },
          );
        }
        await store.deleteGeneration(side, g);
        if (users.length > 0)
          stderrLogger.warn(`deleted a generation the stored run uses (--force): ${users.join(', ')}; \`cogr verify\` reports them`);
      });
      out(`deleted ${side} generation ${g}`);
    });
}
