/**
 * `cogr audit [--db <dir>] [--round best|latest|N] [--dataset <name|path>] [--queries <file.jsonl>]
 *   [--items <n>] [--embeddings <url>] [--embeddings-model <name>] [--examples <n>] [--json]`
 * `cogr audit --url <http://host:port> ...`
 *
 * Are a run's keywords language or addresses? Every query of the dataset (or of --queries:
 * JSON lines {"id", "text"}) gets its keywords from the served round's query planner — read
 * from the published files as `cogr serve` reads them, or, with --url, from a running
 * `cogr serve` (GET /v1/search, then POST /v1/search {"program": {"keyword": k}} to count
 * what each keyword matches) — and the item keywords of the first --items items (default:
 * all) are counted the same way; src/drift/keywordAudit.ts says what each figure is. With
 * --embeddings (an OpenAI-compatible /v1/embeddings endpoint, e.g. `cogr embeddings serve`'s
 * all-MiniLM-L6-v2), the cosine of each query keyword to its query text too; a stored run fitted
 * with embeddings plans with the queries' vectors (and the items', when they are its relevance
 * features) from that endpoint (withRunVectors).
 */
import type { Command } from 'commander';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger, type Logger } from '../../index/core/log.ts';
import type { Corpus, Query } from '../../index/core/types.ts';
import {
  auditItems,
  auditLine,
  auditQueries,
  keywordMatches,
  ownTextMatches,
  relatedLine,
  type AuditedQuery,
  type KeywordAudit,
} from '../drift/keywordAudit.ts';
import { loadDataset } from '../datasets/index.ts';
import { readJsonl, idSchema } from '../datasets/common.ts';
import { EmbeddingsClient, parseEmbeddingsUrl } from '../embeddings/client.ts';
import { resolveEmbeddingsUrl } from '../embeddings/venv.ts';
import { registerRunEmbeddings, type RunEncoder } from '../embeddings/dense.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { readRunAt } from '../run/state.ts';
import { loadQueryGenerator, rebuildQueryGenerator } from '../server/queryGenerator.ts';
import { NoSearchableTerms } from '../server/queryTypes.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { dbPath, parseIntFlag, parseLatestOr, withDbOption } from './options.ts';
import { z } from 'zod';

interface AuditFlags {
  db?: string;
  round?: string;
  dataset?: string;
  queries?: string;
  items?: string;
  url?: string;
  embeddings?: string;
  embeddingsModel?: string;
  embeddingsCache?: string;
  examples?: string;
  json?: boolean;
}

interface Audited {
  audit: KeywordAudit;
  queries: AuditedQuery[];
}

const QueryLine = z.object({ id: idSchema, text: z.string() });

async function auditQueriesOf(flags: AuditFlags, corpus: Corpus | null): Promise<Query[]> {
  if (flags.queries !== undefined) return readJsonl(flags.queries, QueryLine).map((r) => ({ id: r.value.id, text: r.value.text }));
  if (!corpus) throw cogrError('INVALID_ARGUMENT', '--queries <file.jsonl> or a dataset (--dataset, or the stored run’s) is needed');
  return corpus.queries;
}

/** Cosines of each query's keywords to its text, through an embeddings endpoint. */
async function withCosines(queries: AuditedQuery[], url: string, model: string | undefined, log: Logger): Promise<AuditedQuery[]> {
  const client = new EmbeddingsClient({ baseURL: url, ...(model !== undefined ? { model } : {}) });
  const texts = [...new Set(queries.flatMap((q) => [q.text.slice(0, 500), ...q.keywords]))];
  const vec = new Map<string, Float32Array>();
  for (let i = 0; i < texts.length; i += client.batchSize) {
    const batch = texts.slice(i, i + client.batchSize);
    (await client.embedBatch(batch)).forEach((v, j) => vec.set(batch[j], v));
    log.info(`audit: embedded ${Math.min(i + client.batchSize, texts.length)} of ${texts.length} texts`);
  }
  const cos = (a: Float32Array, b: Float32Array) => {
    let s = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.length; i++) {
      s += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
    return na > 0 && nb > 0 ? s / Math.sqrt(na * nb) : 0;
  };
  return queries.map((q) => ({ ...q, cosines: q.keywords.map((k) => cos(vec.get(q.text.slice(0, 500))!, vec.get(k)!)) }));
}

/**
 * A run fitted with an embeddings model's cosines (`--embeddings` on evolve or demo) plans with
 * them: the audited queries' vectors and, when they are relevance features, the items', from
 * --embeddings (the endpoint the cosines to the query come from too, which must serve the run's
 * model), registered for its relevance model as `cogr serve --embeddings` does.
 */
async function withRunVectors(
  flags: AuditFlags,
  encoder: RunEncoder | null,
  corpus: Corpus | null,
  queries: readonly Query[],
  log: Logger,
): Promise<void> {
  if ((encoder?.embeddingsModel ?? null) === null) return;
  if (!corpus) throw cogrError('INVALID_ARGUMENT', "the run's embeddings need the dataset's items (give --dataset)");
  await registerRunEmbeddings(flags, encoder, { items: corpus.items, queries: [...queries] }, log);
}

/** The audit of a stored run, read from its published files as `cogr serve` reads them. */
async function auditStored(flags: AuditFlags, log: Logger): Promise<Audited> {
  const path = dbPath(flags.db);
  const run = await readRunAt(path);
  const corpus = flags.dataset
    ? (await loadDataset(flags.dataset, { logger: log })).corpus
    : run
      ? (await loadRunCorpus(run.config, log)).corpus
      : null;
  const queries = await auditQueriesOf(flags, corpus);
  await withRunVectors(flags, run?.config ?? null, corpus, queries, log);
  const loader = storeSnapshotLoader({
    dbPath: path,
    round: (flags.round ?? 'best') === 'best' ? 'best' : parseLatestOr('--round', flags.round),
    ...(corpus ? { corpus } : {}),
    keywordSource: async (ctx) => {
      const doc = await loadQueryGenerator(ctx.policies, ctx.round, ctx.plannerRound);
      if (!doc) return null;
      const gen = rebuildQueryGenerator(doc, ctx.item, ctx.items);
      return { name: 'embedded', keywords: async (text: string) => gen.plan(text) };
    },
    log,
  });
  const snap = await loader.load();
  if (!snap.keywordSource) throw cogrError('NOT_FOUND', `${path}: the served round has no query planner to audit`);
  const out: AuditedQuery[] = [];
  const never = new AbortController().signal;
  for (const q of queries) {
    let keywords: string[] = [];
    try {
      keywords = await snap.keywordSource.keywords(q.text, never);
    } catch (e) {
      if (!(e instanceof NoSearchableTerms)) throw e;
    }
    out.push({
      text: q.text,
      keywords,
      matches: keywords.map((k) => keywordMatches(snap.item, k)),
      ownMatches: ownTextMatches(snap.item, q.text),
    });
  }
  const limit = parseIntFlag('--items', flags.items, 1, 100_000_000);
  const item = auditItems(snap.item, limit);
  return { audit: { query: auditQueries(out), item }, queries: out };
}

/** The audit of a running `cogr serve`, through its HTTP API only. */
async function auditServed(flags: AuditFlags, log: Logger): Promise<Audited> {
  const base = parseEmbeddingsUrl('--url', flags.url!).replace(/\/+$/, '');
  const corpus = flags.dataset ? (await loadDataset(flags.dataset, { logger: log })).corpus : null;
  const queries = await auditQueriesOf(flags, corpus);
  const get = async (path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(base + path, {
      method: body === undefined ? 'GET' : 'POST',
      signal: AbortSignal.timeout(60_000),
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    if (!res.ok) return null;
    return res.json();
  };
  const counts = new Map<string, number>();
  const matches = async (k: string) => {
    let c = counts.get(k);
    if (c === undefined) {
      const r = (await get('/v1/search', { program: { keyword: k }, k: 1 })) as { matched?: number } | null;
      counts.set(k, (c = r?.matched ?? 0));
    }
    return c;
  };
  const out: AuditedQuery[] = [];
  for (const q of queries) {
    const r = (await get(`/v1/search?${new URLSearchParams({ q: q.text.slice(0, 500), k: '1' })}`)) as {
      keywords?: { generated?: string[] };
      matched?: number;
      ranking?: { fallback?: string | null };
    } | null;
    const keywords = r?.keywords?.generated ?? [];
    const m: number[] = [];
    for (const k of keywords) m.push(await matches(k));
    // A query given no keyword is matched by its own text alone ({q}), unless the server says that matched nothing (its floor served instead).
    const ownMatches = r?.ranking?.fallback === 'empty_plan' ? 0 : (r?.matched ?? 0);
    out.push({ text: q.text, keywords, matches: m, ...(keywords.length === 0 && r !== null ? { ownMatches } : {}) });
    if (out.length % 100 === 0) log.info(`audit: ${out.length} of ${queries.length} queries`);
  }
  const ids = corpus ? corpus.items.map((it) => it.id).slice(0, parseIntFlag('--items', flags.items, 1, 100_000_000) ?? 300) : [];
  let itemKeywords = 0;
  let one = 0;
  const perKeyword = new Map<string, number>();
  for (const id of ids) {
    const r = (await get(`/v1/items/${encodeURIComponent(id)}`)) as { served?: { keywords?: string[] } } | null;
    for (const k of r?.served?.keywords ?? []) {
      const c = await matches(k);
      itemKeywords++;
      if (c <= 1) one++;
      perKeyword.set(k, c);
    }
  }
  const sorted = [...perKeyword.values()].sort((a, b) => a - b);
  const med =
    sorted.length === 0
      ? null
      : sorted.length % 2
        ? sorted[sorted.length >> 1]
        : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
  return {
    audit: {
      query: auditQueries(out),
      item: {
        items: ids.length,
        keywords: itemKeywords,
        keywordsPerItem: ids.length ? itemKeywords / ids.length : 0,
        shareOneItem: itemKeywords ? one / itemKeywords : 0,
        medianItemsPerKeyword: med,
      },
    },
    queries: out,
  };
}

export function register(program: Command): void {
  withDbOption(program.command('audit'))
    .description(
      "are a run's keywords language or addresses: what each query keyword and item keyword matches, and how they relate to the query",
    )
    .option('--round <round>', 'round: "best" (what cogr serve serves), "latest" or a number', 'best')
    .option('--url <url>', 'audit a running cogr serve through its HTTP API instead of the stored files')
    .option('--dataset <name|path>', "the queries and items (default: the stored run's dataset)")
    .option('--queries <file.jsonl>', 'audit these queries instead (JSON lines {"id", "text"})')
    .option('--items <n>', 'item keywords of the first n items (default: all; with --url 300)')
    .option(
      '--embeddings <url>',
      'an OpenAI-compatible /v1/embeddings base URL (or auto: the shipped server started for this command): the cosine of each query keyword to its query, and the share at 0.3 or more: all, taken from the query, added, by query length; a run fitted with embeddings (evolve/demo --embeddings) also plans with its vectors, so it must serve the run’s model',
    )
    .option('--embeddings-model <name>', 'the embeddings model to ask for (default: the first one the endpoint lists)')
    .option(
      '--embeddings-cache <dir>',
      "a run fitted with embeddings: the database caching its items' and queries' vectors (default $COGR_HOME/db; one a running cogr serve holds is skipped, with a warning)",
    )
    .option('--examples <n>', 'queries shown with their keywords', '8')
    .option('--json', 'print one JSON object')
    .action(async (flags: AuditFlags) => {
      const log = stderrLogger;
      const r = flags.url !== undefined ? await auditServed(flags, log) : await auditStored(flags, log);
      let queries = r.queries;
      let audit = r.audit;
      if (flags.embeddings !== undefined && flags.embeddings !== 'none') {
        queries = await withCosines(
          queries,
          parseEmbeddingsUrl('--embeddings', (await resolveEmbeddingsUrl(flags.embeddings, log))!),
          flags.embeddingsModel,
          log,
        );
        audit = { ...audit, query: auditQueries(queries) };
      }
      const n = parseIntFlag('--examples', flags.examples, 0, 1_000_000) ?? 8;
      const examples = queries.slice(0, n).map((q) => ({
        query: q.text,
        keywords: q.keywords.map((k, i) => ({ keyword: k, matches: q.matches[i], ...(q.cosines ? { cosine: q.cosines[i] } : {}) })),
      }));
      if (flags.json) {
        process.stdout.write(JSON.stringify({ ...audit, examples }) + '\n');
        return;
      }
      const related = relatedLine(audit.query.related);
      process.stdout.write(`${auditLine(audit)}\n${related ? `${related}\n` : ''}\n`);
      const shown = (k: (typeof examples)[number]['keywords'][number]) =>
        `${k.keyword} (${k.matches}${k.cosine !== undefined ? `, ${k.cosine.toFixed(2)}` : ''})`;
      for (const e of examples) process.stdout.write(`${e.query.slice(0, 100)}\n  → ${e.keywords.map(shown).join(', ') || '(none)'}\n`);
    });
}
