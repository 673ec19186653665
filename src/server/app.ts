/**
 * The search service: `buildSearchServer(opts)` returns a fastify instance (not
 * listening) that serves one round's item index from memory.
 *
 *   GET  /v1/search?q=&k=&explain=   keyword retrieval (generated query keywords + raw query)
 *   POST /v1/search                  a Boolean retrieval program (program.ts)
 *   GET  /v1/items/:id               an item's keywords in every generation held
 *   GET  /v1/keywords?prefix=&limit= vocabulary look-up (flexsearch)
 *   GET  /v1/generations             committed generations and the served one
 *   POST /v1/admin/reload            load the newest generation now (bearer token)
 *   GET  /health, /metrics, /openapi.json, /docs
 *
 * Every request reads the live snapshot once at its start and uses only that object,
 * so a generation switch never disturbs a request in flight.
 */
import type { DriftProvider } from './drift.ts';
import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { silentLogger } from '../../index/core/log.ts';
import { normalizeSelf } from '../../index/text/normalize.ts';
import { topKIndex } from '../../index/view/topk.ts';
import type { Explanation, KeywordView } from '../../index/view/view.ts';
import { RANKERS, type Ranker } from '../../generators/planner/rankers.ts';
import { createApp, parseOrThrow, type ConnectionLimits } from './http.ts';
import { opsRouteDocs, registerOpsRoutes } from './ops.ts';
import { createServerMetrics, type ServerMetrics } from './metrics.ts';
import { buildOpenApi, renderDocsHtml, SchemaConverter, type RouteDoc } from './openapi.ts';
import {
  buildFieldIndex,
  DEFAULT_PROGRAM_WORK,
  explainProgramHits,
  parseProgram,
  ProgramNodeSchema,
  programTexts,
  runProgram,
  WorkMeter,
  type FieldIndex,
  fieldSets,
  positiveTerms,
  type FieldPredicate,
  type ProgramNode,
  type ProgramTerms,
} from './program.ts';
import { LruCache, QueryKeywordResolver, type ResolvedKeywords } from './queryKeywords.ts';
import type { LiveSnapshot, Snapshot } from './state.ts';
import { VocabularyIndex } from './vocab.ts';

export const SearchLimitsSchema = z.strictObject({
  maxQueryLength: z.number().int().min(1).max(100_000).default(DEFAULTS.serve.maxQueryLength),
  maxK: z.number().int().min(1).max(1_000_000).default(DEFAULTS.serve.maxK),
  defaultK: z.number().int().min(1).default(DEFAULTS.serve.defaultK),
  bodyLimit: z
    .number()
    .int()
    .min(256)
    .max(64 * 1024 * 1024)
    .default(DEFAULTS.serve.bodyLimit),
  keywordBudgetMs: z.number().int().min(1).max(600_000).default(DEFAULTS.serve.keywordBudgetMs),
  cacheSize: z.number().int().min(0).default(DEFAULTS.serve.keywordCacheSize),
  maxProgramDepth: z.number().int().min(1).max(64).default(8),
  maxProgramNodes: z.number().int().min(1).max(10_000).default(128),
  maxProgramList: z.number().int().min(1).max(10_000).default(64),
  maxPrefixResults: z.number().int().min(1).max(10_000).default(100),
  /** Cap of one Boolean program's work (program.ts WorkMeter units). */
  maxProgramWork: z.number().int().min(1_000).default(DEFAULT_PROGRAM_WORK),
});
export type SearchLimits = z.output<typeof SearchLimitsSchema>;

export interface SearchServerOptions {
  live: LiveSnapshot;
  /** Bearer token for the admin endpoints; unset → open (the server binds to loopback by default). */
  token?: string;
  limits?: z.input<typeof SearchLimitsSchema>;
  log?: Logger;
  metrics?: ServerMetrics;
  /** Serves GET /v1/drift (vocabulary drift report); absent → 404. */
  drift?: DriftProvider;
  /** Request and headers time-outs, keep-alive, the connection cap (index/core/defaults.ts `http`). */
  connections?: ConnectionLimits;
  /** Another engine answers /v1/search's matched sets and ranking (GET and Boolean programs) (cogr serve --backend opensearch); absent → the in-memory view. */
  backend?: SearchBackend;
}

/**
 * A search engine holding an exported generation (src/opensearch/backend.ts). The query's
 * keywords are still planned here; the engine applies the match rule and BM25 to them.
 */
export interface SearchBackend {
  /** Named in `ranking.chosen`. */
  readonly name: string;
  /** The item generation the engine serves (its index's record). */
  generation(): number;
  search(
    probe: { self: string; keywords: readonly string[] },
    k: number,
  ): Promise<{ matched: number; items: { id: string; score: number }[] }>;
  /** POST /v1/search: a Boolean program's matched set and top k (src/opensearch/program.ts). */
  searchProgram(node: ProgramNode, terms: ProgramTerms, k: number): Promise<{ matched: number; items: { id: string; score: number }[] }>;
}

const OptionsSchema = z.object({
  live: z.custom<LiveSnapshot>((v) => typeof v === 'object' && v !== null && typeof (v as LiveSnapshot).get === 'function', {
    message: 'expected a LiveSnapshot',
  }),
  token: z.string().min(1, 'must not be empty when given').optional(),
  limits: SearchLimitsSchema.optional(),
});

const boolParam = z
  .enum(['true', 'false', '1', '0'], { error: 'expected true, false, 1 or 0' })
  .optional()
  .transform((v) => v === 'true' || v === '1');

export function searchSchemas(l: SearchLimits) {
  const searchQuery = z.strictObject({
    q: z
      .string({ error: 'required, a string' })
      .min(1, 'must not be empty')
      .max(l.maxQueryLength, `longer than ${l.maxQueryLength} characters`)
      // Blank is empty, as for a program's text (a 400); other texts with no searchable term are fallback no_terms.
      .refine((s) => s.trim().length > 0, 'must not be empty')
      .describe('the query text'),
    k: z.coerce
      .number({ error: 'expected an integer' })
      .int('expected an integer')
      .min(1, 'must be at least 1')
      .max(l.maxK, `must be at most ${l.maxK}`)
      .default(l.defaultK)
      .describe('how many items to return (the matched set may be larger)'),
    explain: boolParam.describe('add matched keywords and BM25 term contributions per item'),
  });
  const programBody = z.strictObject({
    program: z.unknown(),
    k: z
      .number({ error: 'expected an integer' })
      .int('expected an integer')
      .min(1, 'must be at least 1')
      .max(l.maxK, `must be at most ${l.maxK}`)
      .default(l.defaultK),
    explain: z.boolean({ error: 'expected a boolean' }).default(false),
  });
  const programBodyDoc = programBody.extend({ program: ProgramNodeSchema });
  const itemParams = z.strictObject({ id: z.string().min(1).max(1024).describe('item id') });
  const keywordsQuery = z.strictObject({
    prefix: z.string({ error: 'required, a string' }).min(1, 'must not be empty').max(100, 'longer than 100 characters'),
    limit: z.coerce
      .number({ error: 'expected an integer' })
      .int('expected an integer')
      .min(1, 'must be at least 1')
      .max(l.maxPrefixResults, `must be at most ${l.maxPrefixResults}`)
      .default(20),
  });
  return { searchQuery, programBody, programBodyDoc, itemParams, keywordsQuery };
}

// ---- response schemas (documentation) ----

const ExplainSchema = z.object({
  matchedKeywords: z.array(z.string()),
  score: z.number(),
  docLength: z.number(),
  avgDocLength: z.number(),
  terms: z.array(z.object({ word: z.string(), tf: z.number(), df: z.number(), idf: z.number(), contribution: z.number() })),
  formula: z.string(),
  ranking: z
    .object({
      ranker: z.enum(RANKERS),
      score: z
        .number()
        .describe("the ranker's score: p(item | query), normalised text BM25, (p / p_max + text) / 2 for mix, or keyword-bag BM25"),
      keywordScore: z.number().describe('keyword-bag BM25 (the formula above)'),
    })
    .optional(),
});
/** Which ranker ordered the served set, what chose it, the floor, and the empty-plan fallback (generators/planner/ranking.ts). */
const RankingInfoSchema = z.object({
  ranker: z.enum(RANKERS),
  chosen: z.string(),
  floor: z.number(),
  /** The served list's depth: items after the first `matched` of the answer are the other items in the ranker's order (0: none). */
  backfill: z.number().optional(),
  fallback: z.string().nullable(),
  /** The run's set guard chose the relevance model's own sets: every query is served its expected-F1 cut by p at this α, not its keyword matches. */
  modelAlpha: z.number().optional(),
  reason: z.string().optional(),
});
type RankingInfo = z.infer<typeof RankingInfoSchema>;

const HitSchema = z.object({ id: z.string(), score: z.number(), title: z.string().optional(), explain: ExplainSchema.optional() });
const KeywordsUsedSchema = z.object({
  generated: z.array(z.string()).describe('keywords from the query-side generator (empty on fallback)'),
  raw: z.string().describe('the normalised raw query, always one extra keyword'),
  source: z.string().describe('generator name, or "raw" on fallback'),
  cached: z.boolean(),
});
const FallbackSchema = z
  .object({ reason: z.enum(['timeout', 'busy', 'error', 'no_generator', 'empty', 'no_terms']), message: z.string() })
  .nullable()
  .describe(
    'why the generated keywords are missing; no_terms: the text has no searchable term (blank, stop words only, or no word the served items know), and nothing is matched for it',
  );
export const SearchResponseSchema = z.object({
  round: z.number().nullable(),
  generation: z.number(),
  query: z.string(),
  keywords: KeywordsUsedSchema,
  fallback: FallbackSchema,
  ranking: RankingInfoSchema.optional().describe(
    "how the served set was ordered: the ranker, what chose it (the run's choice at SFT, --rank, or the default), the floor m, and 'empty_plan' when the keywords matched nothing and the top items by p were served instead",
  ),
  matched: z.number().describe('size of the served set: the whole matched set (with the floor, when the run has one)'),
  items: z
    .array(HitSchema)
    .describe(
      "the served set in the ranker's order; with a backfill (ranking.backfill) the items after the first `matched` are the other items in the same order (their score is the ranker's − 2)",
    ),
});
const ProgramResponseSchema = z.object({
  round: z.number().nullable(),
  generation: z.number(),
  matched: z.number(),
  rankingKeywords: z.array(z.string()),
  texts: z.array(z.object({ text: z.string(), keywords: z.array(z.string()), source: z.string(), fallback: FallbackSchema })),
  items: z.array(HitSchema),
});
const ItemResponseSchema = z.object({
  id: z.string(),
  title: z.string().optional(),
  fields: z.record(z.string(), z.string()).optional(),
  served: z.object({ generation: z.number(), self: z.string(), keywords: z.array(z.string()) }).nullable(),
  generations: z.array(z.object({ generation: z.number(), self: z.string(), keywords: z.array(z.string()) })),
});
const GenerationsResponseSchema = z.object({
  served: z.object({
    round: z.number().nullable(),
    item: z.number(),
    query: z.number().nullable(),
    reason: z.string().nullable().describe('why the served generation is not the newest, null when it is'),
  }),
  generations: z.array(
    z.object({
      side: z.enum(['item', 'query']),
      generation: z.number(),
      round: z.number().nullable(),
      entities: z.number(),
      keywords: z.number().describe('vocabulary size (distinct keywords, self keywords included)'),
    }),
  ),
  problems: z
    .array(z.object({ side: z.enum(['item', 'query']), generation: z.number(), code: z.string(), message: z.string() }))
    .describe('generations whose files failed their check (never served)'),
});
const KeywordsResponseSchema = z.object({
  prefix: z.string(),
  generation: z.number(),
  keywords: z.array(z.object({ keyword: z.string(), entities: z.number() })),
});
const DriftQuerySchema = z.strictObject({
  from: z.string().regex(/^\d+$/, 'expected a generation number').optional(),
  to: z
    .string()
    .regex(/^(\d+|latest)$/, 'expected a generation number or latest')
    .optional(),
  limit: z.string().regex(/^\d+$/, 'expected a positive integer').optional(),
});
const DriftResponseSchema = z.object({
  version: z.number(),
  range: z.object({ from: z.number(), to: z.number().nullable() }),
  sides: z.record(z.string(), z.unknown()),
  alignment: z.array(z.unknown()),
  f1: z.array(z.object({ round: z.number(), side: z.enum(['item', 'query', 'refit']), f1: z.number() })),
  limit: z.number(),
});
function explainJson(ex: Explanation): z.infer<typeof ExplainSchema> {
  return {
    matchedKeywords: ex.matchedKeywords,
    score: ex.score,
    docLength: ex.docLength,
    avgDocLength: ex.avgDocLength,
    terms: ex.terms,
    formula: ex.formula,
  };
}

/**
 * Per-snapshot look-up structures (vocabulary and field indexes, the top-k index), built when a snapshot
 * is loaded (before it is swapped in; the first one before the server is ready to listen),
 * never by the first request that needs them.
 */
class SnapshotCaches {
  private readonly vocab = new WeakMap<KeywordView, Promise<VocabularyIndex>>();
  private readonly fields = new WeakMap<Snapshot, FieldIndex>();
  async prepare(s: Snapshot): Promise<void> {
    this.fieldIndex(s);
    // Decode the string tables once now (ids, keywords, words), not in a request.
    s.item.ids();
    s.item.vocabulary();
    // The word postings and bounds of the pruned top k (index/view/topk.ts).
    topKIndex(s.item.data);
    await this.vocabulary(s.item);
  }
  vocabulary(view: KeywordView): Promise<VocabularyIndex> {
    let v = this.vocab.get(view);
    if (!v) this.vocab.set(view, (v = VocabularyIndex.build(view)));
    return v;
  }
  fieldIndex(s: Snapshot): FieldIndex {
    let f = this.fields.get(s);
    if (!f) this.fields.set(s, (f = buildFieldIndex(s.item, s.fields)));
    return f;
  }
}

export function searchRouteDocs(l: SearchLimits, conv: SchemaConverter): RouteDoc[] {
  const s = searchSchemas(l);
  conv.name(ProgramNodeSchema, 'ProgramNode');
  return [
    {
      method: 'get',
      path: '/v1/search',
      tag: 'search',
      summary: 'Keyword retrieval for a query text',
      description:
        "The query's keywords come from the served round's query-side generator (cached, under a time budget); on failure or time-out the raw query is the only keyword and `fallback` says why. Items match when they share a keyword with the query (the raw query and item titles count as keywords) and are ranked by BM25 over keyword words.",
      query: s.searchQuery,
      response: SearchResponseSchema,
      errors: [400],
    },
    {
      method: 'post',
      path: '/v1/search',
      tag: 'search',
      summary: 'Run a Boolean retrieval program (and / or / not over keyword, any_of, text and field predicates)',
      body: s.programBodyDoc,
      response: ProgramResponseSchema,
      errors: [400, 413, 415],
    },
    {
      method: 'get',
      path: '/v1/items/{id}',
      tag: 'index',
      summary: "An item's keywords in every generation held",
      params: s.itemParams,
      response: ItemResponseSchema,
      errors: [404],
    },
    {
      method: 'get',
      path: '/v1/keywords',
      tag: 'index',
      summary: 'Vocabulary look-up by word prefix',
      query: s.keywordsQuery,
      response: KeywordsResponseSchema,
      errors: [400],
    },
    {
      method: 'get',
      path: '/v1/generations',
      tag: 'index',
      summary: 'Committed generations and the served one',
      response: GenerationsResponseSchema,
    },
    {
      method: 'get',
      path: '/v1/drift',
      tag: 'analysis',
      summary: 'Vocabulary drift across generations (the JSON of `cogr drift`)',
      query: DriftQuerySchema,
      response: DriftResponseSchema,
      errors: [400, 404, 409],
    },
    ...opsRouteDocs(),
  ];
}

/** The search API's OpenAPI document (`GET /openapi.json`; docs/http-api.md is generated from it by `npm run docs`). */
export function searchOpenApi(limits: SearchLimits): Record<string, unknown> {
  const conv = new SchemaConverter();
  return buildOpenApi(
    {
      title: 'cogr search API',
      version: '1',
      description:
        'Keyword co-evolution retrieval: search a trained round over HTTP. Errors have the shape {error: {code, message, details}}.',
    },
    searchRouteDocs(limits, conv),
    conv,
  );
}

export function buildSearchServer(opts: SearchServerOptions): FastifyInstance {
  const parsed = parseOrThrow(OptionsSchema, opts, 'INVALID_ARGUMENT', 'options');
  const limits = parsed.limits ?? SearchLimitsSchema.parse({});
  const live = opts.live;
  const log = opts.log ?? silentLogger;
  const metrics = opts.metrics ?? createServerMetrics();
  const schemas = searchSchemas(limits);
  const caches = new SnapshotCaches();
  const resolver = new QueryKeywordResolver({
    budgetMs: limits.keywordBudgetMs,
    cacheSize: limits.cacheSize,
    onCacheHit: () => metrics.cacheHits.inc(),
    onCacheMiss: () => metrics.cacheMisses.inc(),
    onFallback: (reason) => metrics.fallbacks.inc({ reason }),
  });
  const setGauge = (s: Snapshot) => {
    metrics.servedGeneration.set(s.item.generation, { side: 'item' });
    if (s.query) metrics.servedGeneration.set(s.query.generation, { side: 'query' });
  };
  setGauge(live.get());
  live.onSwap((s) => setGauge(s));
  // The first snapshot's structures are built now; the server is ready (and listens) once
  // they are, so no first request waits for them.
  const firstPrepared = caches
    .prepare(live.get())
    .catch((e: unknown) => log.warn('building the look-up structures failed', { error: e instanceof Error ? e.message : String(e) }));
  live.onPrepare((s) => caches.prepare(s));
  live.onReload((o) => metrics.reloads.inc({ outcome: o.error ? `failed_${o.error.code}` : o.swapped ? 'swapped' : 'unchanged' }));

  const app = createApp({ bodyLimit: limits.bodyLimit, log, metrics, ...(opts.connections ? { connections: opts.connections } : {}) });
  app.addHook('onReady', async () => {
    await firstPrepared;
  });
  const openapi = searchOpenApi(limits);
  const docsHtml = renderDocsHtml(openapi);

  const rankedCache = new LruCache<{ set: { matched: number; items: { id: string; score: number }[] } | null; info: RankingInfo }>(
    limits.cacheSize,
  );
  const resolveText = (snap: Snapshot, version: number, text: string): Promise<ResolvedKeywords> =>
    resolver.resolve(snap.keywordSource, version, text);

  app.get('/v1/search', async (req) => {
    const snap = live.get();
    const version = live.currentVersion;
    const p = parseOrThrow(schemas.searchQuery, req.query, 'INVALID_ARGUMENT');
    const kw = await resolveText(snap, version, p.q);
    const probe = { self: p.q, keywords: kw.keywords };
    // A query with no searchable term matches nothing (not the items likeliest a priori).
    const noTerms = kw.fallback?.reason === 'no_terms';
    if (opts.backend) return backendSearch(opts.backend, snap, version, p, kw, noTerms);
    // The served set's order and floor (the run's choice): from the planner in the keyword workers, else keyword-bag BM25.
    const ranked = noTerms ? null : await rankServed(snap, version, p.q, kw.keywords, p.k);
    const res =
      ranked === null ? { matched: 0, items: [] as { id: string; score: number }[] } : (ranked.set ?? snap.item.search(probe, { k: p.k }));
    return {
      round: snap.round,
      generation: snap.item.generation,
      query: p.q,
      keywords: { generated: kw.keywords, raw: normalizeSelf(p.q), source: kw.source, cached: kw.cached },
      fallback: kw.fallback,
      ...(ranked ? { ranking: ranked.info } : {}),
      matched: res.matched,
      items: res.items.map((h) => {
        const title = snap.titles.get(h.id);
        const ex = p.explain ? snap.item.explain(probe, h.id) : null;
        return {
          id: h.id,
          score: h.score,
          ...(title !== undefined ? { title } : {}),
          ...(ex
            ? {
                explain: {
                  ...explainJson(ex),
                  ...(ranked ? { ranking: { ranker: ranked.info.ranker, score: h.score, keywordScore: ex.score } } : {}),
                },
              }
            : {}),
        };
      }),
    };
  });

  /**
   * POST /v1/search answered by the backend (src/opensearch/program.ts): the same response
   * shape as the in-memory program's; field predicates are evaluated on the served dataset's
   * fields here and sent as ids; explain from the in-memory view of the same generation only.
   */
  async function backendProgram(
    backend: SearchBackend,
    snap: Snapshot,
    program: ProgramNode,
    b: { k: number; explain?: boolean },
    texts: string[],
    resolved: ResolvedKeywords[],
    textKeywords: ReadonlyMap<string, readonly string[]>,
    noTerms: ReadonlySet<string>,
    meter: WorkMeter,
  ) {
    const fieldIndex = caches.fieldIndex(snap);
    const fieldIds = (f: FieldPredicate, path: string): string[] => {
      const ids = new Set<string>();
      for (const s of fieldSets(fieldIndex, f, path).sets) for (const o of s) ids.add(snap.item.id(o));
      return [...ids];
    };
    const res = await backend.searchProgram(program, { textKeywords, noTerms, fieldIds }, b.k);
    const { keywords: rankingKeywords } = positiveTerms(program, { textKeywords });
    const local = backend.generation() === snap.item.generation;
    const explained =
      b.explain && local
        ? await explainProgramHits(
            snap.item,
            {
              matched: res.matched,
              items: res.items.map((h) => ({ ...h, ordinal: snap.item.ordinalOf(h.id) })),
              rankingKeywords,
              rankingTexts: texts,
            },
            meter,
          )
        : null;
    return {
      round: snap.round,
      generation: backend.generation(),
      matched: res.matched,
      rankingKeywords,
      texts: texts.map((t, i) => ({ text: t, keywords: resolved[i].keywords, source: resolved[i].source, fallback: resolved[i].fallback })),
      items: res.items.map((h, i) => {
        const title = snap.titles.get(h.id);
        const ex = explained ? explained[i] : null;
        return { id: h.id, score: h.score, ...(title !== undefined ? { title } : {}), ...(ex ? { explain: explainJson(ex) } : {}) };
      }),
    };
  }

  /** GET /v1/search answered by the backend: the same response shape; explain from the in-memory view of the same generation only. */
  async function backendSearch(
    backend: SearchBackend,
    snap: Snapshot,
    version: number,
    p: { q: string; k: number; explain: boolean },
    kw: ResolvedKeywords,
    noTerms: boolean,
  ): Promise<z.infer<typeof SearchResponseSchema>> {
    const probe = { self: p.q, keywords: kw.keywords };
    let res: { matched: number; items: { id: string; score: number }[] } = noTerms
      ? { matched: 0, items: [] }
      : await backend.search(probe, p.k);
    const generation = backend.generation();
    const local = generation === snap.item.generation;
    let info: RankingInfo = { ranker: 'keywords', chosen: backend.name, floor: 0, fallback: null };
    // Keywords that match nothing: the run's empty-plan floor (the top c items by p, in the
    // run's ranker order), computed here from the same generation, as cogr serve serves it.
    // A run whose set guard chose the relevance model's own sets serves them the same way.
    const modelSets = snap.ranking.floor.modelAlpha !== undefined;
    if ((res.matched === 0 || modelSets) && !noTerms && local && (snap.ranking.floor.fallback > 0 || modelSets)) {
      const floor = await rankServed(snap, version, p.q, kw.keywords, p.k);
      if (floor.set && (floor.info.fallback === 'empty_plan' || floor.info.modelAlpha !== undefined)) {
        res = floor.set;
        const what = floor.info.modelAlpha !== undefined ? "the relevance model's own sets" : 'empty-plan floor';
        info = { ...floor.info, chosen: `${backend.name} (${what}: ${floor.info.chosen})` };
      }
    }
    return {
      round: snap.round,
      generation,
      query: p.q,
      keywords: { generated: kw.keywords, raw: normalizeSelf(p.q), source: kw.source, cached: kw.cached },
      fallback: kw.fallback,
      ranking: local
        ? info
        : { ...info, reason: `the backend serves item generation ${generation}, this server's planner generation ${snap.item.generation}` },
      matched: res.matched,
      items: res.items.map((h) => {
        const title = snap.titles.get(h.id);
        const ex = p.explain && local ? snap.item.explain(probe, h.id) : null;
        return { id: h.id, score: h.score, ...(title !== undefined ? { title } : {}), ...(ex ? { explain: explainJson(ex) } : {}) };
      }),
    };
  }

  /**
   * The served set ordered by the snapshot's ranker, with its floor (generators/planner/
   * ranking.ts), computed by the query planner in the keyword workers under the keyword
   * budget; null (keyword-bag BM25 of the matched set, no floor) when the ranker is
   * keywords without a floor, the source cannot rank (LLM, none) or the budget ran out —
   * `info` says which ranker answered and why.
   */
  async function rankServed(
    snap: Snapshot,
    version: number,
    text: string,
    keywords: string[],
    k: number,
  ): Promise<{ set: { matched: number; items: { id: string; score: number }[] } | null; info: RankingInfo }> {
    const r = snap.ranking;
    // The same snapshot, text, keywords and k always rank the same: answers are cached like the keywords.
    const key = `${version}\u0000${normalizeSelf(text)}\u0000${keywords.join('\u0001')}\u0000${k}`;
    const hit = rankedCache.get(key);
    if (hit) return hit;
    const out = await rankServedUncached(snap, text, keywords, k, r);
    if (out.set) rankedCache.set(key, out);
    return out;
  }
  async function rankServedUncached(
    snap: Snapshot,
    text: string,
    keywords: string[],
    k: number,
    r: Snapshot['ranking'],
  ): Promise<{ set: { matched: number; items: { id: string; score: number }[] } | null; info: RankingInfo }> {
    const info = (ranker: Ranker, fallback: string | null, reason: string | null): RankingInfo => ({
      ranker,
      chosen: r.source,
      floor: r.floor.floor,
      ...(r.floor.backfill ? { backfill: r.floor.backfill } : {}),
      fallback,
      ...(r.floor.modelAlpha !== undefined && reason === null ? { modelAlpha: r.floor.modelAlpha } : {}),
      ...(reason ? { reason } : {}),
    });
    const src = snap.keywordSource;
    if (r.ranker === 'keywords' && r.floor.floor === 0 && r.floor.fallback === 0 && r.floor.modelAlpha === undefined)
      return { set: null, info: info('keywords', null, null) };
    if (!src?.rank)
      return {
        set: null,
        info: info('keywords', null, `the ${src?.name ?? 'raw-query'} keyword source cannot rank by ${r.ranker}: keyword-bag BM25`),
      };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), limits.keywordBudgetMs);
    try {
      const out = await src.rank({ text, keywords, ranker: r.ranker, floor: r.floor, limit: k }, controller.signal);
      const items = out.ordinals.map((o, i) => ({ id: snap.item.id(o), score: out.scores[i] }));
      return { set: { matched: out.matched, items }, info: info(r.ranker, out.fallback, null) };
    } catch (e) {
      return {
        set: null,
        info: info('keywords', null, `ranking by ${r.ranker} failed (${e instanceof Error ? e.message : String(e)}): keyword-bag BM25`),
      };
    } finally {
      clearTimeout(timer);
    }
  }

  app.post('/v1/search', async (req) => {
    const snap = live.get();
    const version = live.currentVersion;
    if (req.body === undefined || req.body === null)
      throw cogrError('INVALID_BODY', 'body: expected a JSON object {program, k?, explain?}');
    const b = parseOrThrow(schemas.programBody, req.body, 'INVALID_BODY');
    const program = parseProgram(b.program, {
      maxDepth: limits.maxProgramDepth,
      maxNodes: limits.maxProgramNodes,
      maxList: limits.maxProgramList,
      maxText: limits.maxQueryLength,
    });
    const texts = [...new Set(programTexts(program))];
    const resolved = await Promise.all(texts.map((t) => resolveText(snap, version, t)));
    const textKeywords = new Map<string, readonly string[]>();
    texts.forEach((t, i) => textKeywords.set(t, resolved[i].keywords));
    const noTerms = new Set(texts.filter((_, i) => resolved[i].fallback?.reason === 'no_terms'));
    const meter = new WorkMeter(limits.maxProgramWork);
    if (opts.backend) return backendProgram(opts.backend, snap, program, b, texts, resolved, textKeywords, noTerms, meter);
    const result = await runProgram(program, { view: snap.item, fieldIndex: caches.fieldIndex(snap), textKeywords, noTerms }, b.k, meter);
    const explained = b.explain ? await explainProgramHits(snap.item, result, meter) : null;
    return {
      round: snap.round,
      generation: snap.item.generation,
      matched: result.matched,
      rankingKeywords: result.rankingKeywords,
      texts: texts.map((t, i) => ({ text: t, keywords: resolved[i].keywords, source: resolved[i].source, fallback: resolved[i].fallback })),
      items: result.items.map((h, i) => {
        const title = snap.titles.get(h.id);
        const ex = explained ? explained[i] : null;
        return { id: h.id, score: h.score, ...(title !== undefined ? { title } : {}), ...(ex ? { explain: explainJson(ex) } : {}) };
      }),
    };
  });

  app.get('/v1/items/:id', async (req) => {
    const snap = live.get();
    const { id } = parseOrThrow(schemas.itemParams, req.params, 'INVALID_ARGUMENT');
    const generations: { generation: number; self: string; keywords: string[] }[] = [];
    for (const v of snap.itemGenerations) {
      const e = v.ordinalOf(id);
      if (e >= 0) generations.push({ generation: v.generation, self: v.selfOf(e), keywords: v.keywordsOf(e) });
    }
    const e = snap.item.ordinalOf(id);
    if (e < 0 && generations.length === 0) throw cogrError('NOT_FOUND', `id: no item ${JSON.stringify(id)} in the served index`, { id });
    const title = snap.titles.get(id);
    const fields = snap.fields.get(id);
    return {
      id,
      ...(title !== undefined ? { title } : {}),
      ...(fields ? { fields: { ...fields } } : {}),
      served: e >= 0 ? { generation: snap.item.generation, self: snap.item.selfOf(e), keywords: snap.item.keywordsOf(e) } : null,
      generations,
    };
  });

  app.get('/v1/keywords', async (req) => {
    const snap = live.get();
    const p = parseOrThrow(schemas.keywordsQuery, req.query, 'INVALID_ARGUMENT');
    return { prefix: p.prefix, generation: snap.item.generation, keywords: (await caches.vocabulary(snap.item)).lookup(p.prefix, p.limit) };
  });

  app.get('/v1/generations', async () => {
    const snap = live.get();
    return {
      served: { round: snap.round, item: snap.item.generation, query: snap.query ? snap.query.generation : null, reason: snap.reason },
      generations: snap.generations,
      problems: snap.problems,
    };
  });

  app.get('/v1/drift', async (req) => {
    if (!opts.drift) throw cogrError('NOT_FOUND', 'this server has no database to analyse (drift is served by cogr serve)');
    return opts.drift(req.query as Record<string, unknown>);
  });

  registerOpsRoutes(app, { live, metrics, token: parsed.token, openapi, docsHtml });
  return app;
}
