/**
 * The search service: `buildSearchServer(opts)` returns a fastify instance (not
 * listening) that serves one round's item index from memory, or through a search backend.
 *
 *   GET  /v1/search?q=&k=&explain=&fields=   keyword retrieval (generated query keywords + raw query)
 *   POST /v1/search                  the same with {q, k, explain, fields}, or a Boolean retrieval program {program, …} (program.ts)
 *   GET  /v1/items/:id               an item's keywords in every generation held
 *   GET  /v1/keywords?prefix=&limit= vocabulary look-up (flexsearch)
 *   GET  /v1/generations             committed generations and the served one
 *   POST /v1/admin/reload            load the newest generation now (bearer token)
 *   GET  /health, /metrics, /openapi.json, /docs
 *   PUT|DELETE /v1/items/:id, POST /v1/items/batch, PUT|DELETE /v1/items/:id/keywords,
 *   POST /v1/items/:id/keywords/preview   the catalog (catalogRoutes.ts)
 *
 * Every route is written once against the engine (engine.ts): the in-memory view, or a
 * backend such as OpenSearch. Every request reads the live snapshot once at its start and
 * uses only that object, so a generation switch never disturbs a request in flight.
 */
import type { DriftProvider } from './drift.ts';
import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { silentLogger } from '../../index/core/log.ts';
import { normalizeSelf } from '../../index/text/normalize.ts';
import { createApp, parseOrThrow, type ConnectionLimits } from './http.ts';
import { registerOpsRoutes } from './ops.ts';
import { createServerMetrics, type ServerMetrics } from './metrics.ts';
import { buildOpenApi, renderDocsHtml, SchemaConverter } from './openapi.ts';
import { parseProgram, programTexts, WorkMeter } from './program.ts';
import { QueryKeywordResolver, type ResolvedKeywords } from './queryKeywords.ts';
import type { LiveSnapshot, Snapshot } from './state.ts';
import { catalogRouteDocs, registerCatalogRoutes, type CatalogService } from './catalogRoutes.ts';
import {
  searchRouteDocs,
  searchSchemas,
  SearchLimitsSchema,
  withTransportStatuses,
  type SearchLimits,
  type TextSearchRequest,
} from './api.ts';
import {
  backendEngine,
  memoryEngine,
  ServedRanking,
  SnapshotCaches,
  type EngineHit,
  type SearchBackend,
  type SearchEngine,
} from './engine.ts';

export type { SearchBackend } from './engine.ts';

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
  /** Catalog writes (cogr serve --writable): the item write routes; absent → they answer 501. */
  catalog?: CatalogService;
}

const OptionsSchema = z.object({
  live: z.custom<LiveSnapshot>((v) => typeof v === 'object' && v !== null && typeof (v as LiveSnapshot).get === 'function', {
    message: 'expected a LiveSnapshot',
  }),
  token: z.string().min(1, 'must not be empty when given').optional(),
  limits: SearchLimitsSchema.optional(),
});

/** A hit as answered: its title, and the fields asked for. */
function hitJson(snap: Snapshot, h: EngineHit, fields: readonly string[]) {
  const e = snap.item.ordinalOf(h.id);
  const title = snap.titles.get(h.id) ?? (e >= 0 ? snap.item.selfOf(e) : undefined);
  let asked: Record<string, string> | undefined;
  if (fields.length > 0) {
    asked = {};
    const own = snap.fields.get(h.id);
    for (const name of fields) {
      if (name === '*') Object.assign(asked, own);
      if (name === 'text' || name === '*') {
        const text = snap.texts.get(h.id);
        if (text !== undefined) asked.text = text;
      } else if (own && Object.prototype.hasOwnProperty.call(own, name)) asked[name] = own[name];
    }
  }
  return {
    id: h.id,
    score: h.score,
    ...(title !== undefined ? { title } : {}),
    ...(asked ? { fields: asked } : {}),
    ...(h.explain ? { explain: h.explain } : {}),
  };
}

/** The search API's OpenAPI document (`GET /openapi.json`; docs/http-api.md is generated from it by `npm run docs`). */
export function searchOpenApi(limits: SearchLimits): Record<string, unknown> {
  const conv = new SchemaConverter();
  return buildOpenApi(
    {
      title: 'cogr search API',
      version: '1',
      description:
        'Keyword co-evolution retrieval: search a trained round over HTTP, and keep its catalog up to date. Errors have the shape {error: {code, message, details}}.',
    },
    withTransportStatuses([...searchRouteDocs(limits, conv), ...catalogRouteDocs()]),
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

  const ranking = new ServedRanking(limits.keywordBudgetMs, limits.cacheSize);
  const engine: SearchEngine = opts.backend ? backendEngine(opts.backend, live, ranking, caches) : memoryEngine(live, ranking, caches);
  const resolveText = (snap: Snapshot, text: string): Promise<ResolvedKeywords> =>
    resolver.resolve(snap.keywordSource, snap.keywordEpoch, text);

  /** GET /v1/search, and POST /v1/search with a query text. */
  async function textSearch(p: TextSearchRequest) {
    const snap = live.get();
    const version = live.currentVersion;
    const kw = await resolveText(snap, p.q);
    // A query with no searchable term matches nothing (not the items likeliest a priori).
    const noTerms = kw.fallback?.reason === 'no_terms';
    const a = await engine.search({ snap, version, text: p.q, keywords: kw.keywords, noTerms, k: p.k, explain: p.explain });
    return {
      round: snap.round,
      generation: a.generation,
      query: p.q,
      keywords: { generated: kw.keywords, raw: normalizeSelf(p.q), source: kw.source, cached: kw.cached },
      fallback: kw.fallback,
      ...(a.ranking ? { ranking: a.ranking } : {}),
      matched: a.matched,
      items: a.items.map((h) => hitJson(snap, h, p.fields)),
    };
  }

  /** POST /v1/search with a Boolean program. */
  async function programSearch(body: unknown) {
    const snap = live.get();
    const b = parseOrThrow(schemas.programBody, body, 'INVALID_BODY');
    const program = parseProgram(b.program, {
      maxDepth: limits.maxProgramDepth,
      maxNodes: limits.maxProgramNodes,
      maxList: limits.maxProgramList,
      maxText: limits.maxQueryLength,
    });
    const texts = [...new Set(programTexts(program))];
    const resolved = await Promise.all(texts.map((t) => resolveText(snap, t)));
    const textKeywords = new Map<string, readonly string[]>();
    texts.forEach((t, i) => textKeywords.set(t, resolved[i].keywords));
    const noTerms = new Set(texts.filter((_, i) => resolved[i].fallback?.reason === 'no_terms'));
    const meter = new WorkMeter(limits.maxProgramWork);
    const a = await engine.program({ snap, program, texts, textKeywords, noTerms, k: b.k, explain: b.explain, meter });
    return {
      round: snap.round,
      generation: a.generation,
      matched: a.matched,
      rankingKeywords: a.rankingKeywords,
      texts: texts.map((t, i) => ({ text: t, keywords: resolved[i].keywords, source: resolved[i].source, fallback: resolved[i].fallback })),
      items: a.items.map((h) => hitJson(snap, h, b.fields)),
    };
  }

  app.get('/v1/search', async (req) => textSearch(parseOrThrow(schemas.searchQuery, req.query, 'INVALID_ARGUMENT')));

  app.post('/v1/search', async (req) => {
    const body = req.body;
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body))
      throw cogrError('INVALID_BODY', 'body: expected a JSON object {q, k?, explain?, fields?} or {program, k?, explain?, fields?}');
    // A program stays {program}; any other object is a query text's search, as GET answers it (its fields validated there).
    if ('program' in body) return programSearch(body);
    if (!('q' in body))
      throw cogrError(
        'INVALID_BODY',
        'q or program: one is required ({q, k?, explain?, fields?} searches a query text as GET does; {program, k?, explain?, fields?} runs a Boolean program)',
        { field: 'q' },
      );
    return textSearch(parseOrThrow(schemas.textBody, body, 'INVALID_BODY'));
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
      served:
        e >= 0
          ? {
              generation: snap.item.generation,
              self: snap.item.selfOf(e),
              keywords: snap.item.keywordsOf(e),
              handSet: snap.handSet.has(id),
            }
          : null,
      generations,
    };
  });

  app.get('/v1/keywords', async (req) => {
    const snap = live.get();
    const p = parseOrThrow(schemas.keywordsQuery, req.query, 'INVALID_ARGUMENT');
    const { generation, index } = await caches.lookupFor(snap.item);
    return { prefix: p.prefix, generation, keywords: index.lookup(p.prefix, p.limit) };
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

  registerCatalogRoutes(app, { live, engine, token: parsed.token, catalog: opts.catalog ?? null });
  registerOpsRoutes(app, { live, metrics, token: parsed.token, openapi, docsHtml });
  return app;
}
