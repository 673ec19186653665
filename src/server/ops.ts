/**
 * Operational routes both servers expose: `/health`, `/metrics`, `/openapi.json`,
 * `/docs` and `POST /v1/admin/reload` (bearer token when configured).
 */
import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { cogrError } from '../../index/core/errors.ts';
import { bearerGuard, sendError } from './http.ts';
import { PROMETHEUS_CONTENT_TYPE, type ServerMetrics } from './metrics.ts';
import type { RouteDoc } from './openapi.ts';
import type { LiveSnapshot } from './state.ts';

export const HealthSchema = z.object({
  status: z
    .enum(['ok', 'degraded'])
    .describe(
      'degraded: the last reload failed (the previous generation is still served), or a newer generation failed its file check and an older one is served',
    ),
  round: z.number().nullable(),
  generation: z.number(),
  served: z
    .object({
      item: z.number(),
      query: z.number().nullable(),
      reason: z.string().nullable().describe('why the served generation is not the newest, null when it is'),
    })
    .describe('the generations served'),
  problems: z
    .array(z.object({ side: z.enum(['item', 'query']), generation: z.number(), code: z.string(), message: z.string() }))
    .describe('generations whose files failed their check (never served)'),
  catalog: z
    .object({
      seq: z.number().describe('the catalog write the served generation ends on'),
      plannerStale: z
        .boolean()
        .describe(
          "the query planner's relevance model lacks texts of recent writes (rebuilt once writes pause); queries' keywords may differ from a fresh load's until then",
        ),
    })
    .nullable()
    .describe('catalog writes on the served generation; null when it has none'),
  version: z.number().describe('number of successful loads'),
  loadedAt: z.string().nullable(),
  lastAttemptAt: z.string().nullable(),
  lastError: z.object({ code: z.string(), message: z.string() }).nullable(),
});

export const ReloadSchema = z.object({
  swapped: z.boolean(),
  version: z.number(),
  item: z.object({ generation: z.number(), previous: z.number().nullable() }),
});

export function opsRouteDocs(): RouteDoc[] {
  return [
    {
      method: 'post',
      path: '/v1/admin/reload',
      tag: 'admin',
      summary: 'Load the newest generation now',
      auth: true,
      response: ReloadSchema,
      errors: [409],
    },
    { method: 'get', path: '/health', tag: 'ops', summary: 'Served generation and reload status', response: HealthSchema },
    { method: 'get', path: '/metrics', tag: 'ops', summary: 'Prometheus metrics', responseType: PROMETHEUS_CONTENT_TYPE },
    { method: 'get', path: '/openapi.json', tag: 'ops', summary: 'This OpenAPI document' },
    { method: 'get', path: '/docs', tag: 'ops', summary: 'HTML docs rendered from the OpenAPI document', responseType: 'text/html' },
  ];
}

export function registerOpsRoutes(
  app: FastifyInstance,
  o: { live: LiveSnapshot; metrics: ServerMetrics; token: string | undefined; openapi: unknown; docsHtml: string },
): void {
  const { live, metrics } = o;
  app.post('/v1/admin/reload', { onRequest: bearerGuard(o.token) }, async (_req, reply) => {
    const out = await live.reload();
    if (out.error) {
      const code = (['DB_LOCKED', 'DB_VERSION', 'DB_CORRUPT', 'NOT_FOUND'] as const).find((c) => c === out.error!.code) ?? 'INTERNAL';
      return sendError(
        reply,
        cogrError(code, `reload failed, still serving generation ${out.item.generation}: ${out.error.message}`, {
          servedGeneration: out.item.generation,
          retry: true,
        }),
      );
    }
    return { swapped: out.swapped, version: out.version, item: out.item };
  });

  app.get('/health', async () => {
    const snap = live.get();
    const st = live.status();
    return {
      status: st.stale || snap.reason !== null ? 'degraded' : 'ok',
      round: snap.round,
      generation: snap.item.generation,
      served: { item: snap.item.generation, query: snap.query ? snap.query.generation : null, reason: snap.reason },
      problems: snap.problems,
      catalog: snap.catalog ? { seq: snap.catalog.seq, plannerStale: snap.catalog.plannerStale } : null,
      version: st.version,
      loadedAt: st.loadedAt,
      lastAttemptAt: st.lastAttemptAt,
      lastError: st.lastError,
    };
  });

  app.get('/metrics', async (_req, reply) => reply.type(PROMETHEUS_CONTENT_TYPE).send(metrics.registry.render()));
  app.get('/openapi.json', async () => o.openapi);
  app.get('/docs', async (_req, reply) => reply.type('text/html; charset=utf-8').send(o.docsHtml));
}
