/**
 * The catalog's HTTP routes (bearer token when the server has one):
 *
 *   PUT    /v1/items/{id}                    add or replace an item {title, text, fields?}
 *   DELETE /v1/items/{id}                    delete an item
 *   POST   /v1/items/batch                   {ops: [{op: add|update|upsert|delete|keywords, id, …}]}: one generation
 *   PUT    /v1/items/{id}/keywords           set its keywords by hand {keywords}: kept across later generator runs
 *   DELETE /v1/items/{id}/keywords           clear them: the item generator's keywords for its text again
 *   POST   /v1/items/{id}/keywords/preview   {keywords}: what they would do, nothing committed (src/catalog/preview.ts)
 *
 * A write is one batch for the catalog writer (src/catalog/writer.ts, in the writer thread
 * of `cogr serve --writable`): validated whole, committed as one item generation, then
 * published through the engine (the snapshot swapped in; a backend's index updated first)
 * before it is answered, so an acknowledged write is already searchable. Without a writer
 * the write routes answer 501.
 */
import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { previewKeywords } from '../catalog/preview.ts';
import { BatchOpSchema, ItemDocSchema, KeywordListSchema, type LocatedOp, type OpSource } from '../catalog/ops.ts';
import type { CatalogCommit } from '../catalog/writer.ts';
import { bearerGuard, parseOrThrow } from './http.ts';
import type { RouteDoc } from './openapi.ts';
import type { PublishOutcome, SearchEngine } from './engine.ts';
import type { LiveSnapshot } from './state.ts';

/** What the routes need of the catalog writer. */
export interface CatalogService {
  apply(ops: readonly LocatedOp[], source: OpSource): Promise<CatalogCommit>;
}

const ItemParams = z.strictObject({
  id: z.string().min(1, 'must not be empty').max(1024, 'longer than 1024 characters').describe('item id'),
});
const KeywordsBody = z.strictObject({ keywords: KeywordListSchema.describe('the keywords (at most K_max)') });
const BatchBody = z.strictObject({
  ops: z
    .array(BatchOpSchema)
    .min(1, 'must hold at least one operation')
    .max(DEFAULTS.catalog.maxBatch, `at most ${DEFAULTS.catalog.maxBatch} operations`),
});

const WriteResponseSchema = z.object({
  generation: z.number().describe('the item generation the write committed'),
  base: z.number().describe('the generation it was built on'),
  root: z.number().describe("the run's item generation the catalog builds on"),
  seq: z.number().describe('the catalog delta it applied'),
  served: z.number().describe('the item generation searches answer from now (the committed one, or a newer one)'),
  reloadError: z
    .object({ code: z.string(), message: z.string() })
    .optional()
    .describe('the write is committed but the server could not swap it in yet (it retries)'),
  counts: z.object({ added: z.number(), updated: z.number(), deleted: z.number(), handSet: z.number(), cleared: z.number() }),
  items: z
    .array(z.object({ id: z.string(), keywords: z.array(z.string()), handSet: z.boolean() }))
    .describe("every item set, with its keywords now (the item generator's, or those set by hand)"),
  removed: z.array(z.string()),
  generator: z.string().nullable().describe('the item generator that made the keywords (null: none was needed)'),
});
const PreviewQuerySchema = z.object({
  id: z.string(),
  text: z.string(),
  relevant: z.boolean(),
  f1Before: z.number(),
  f1After: z.number(),
  delta: z.number(),
});
const PreviewResponseSchema = z.object({
  id: z.string(),
  itemGeneration: z.number(),
  queryGeneration: z.number(),
  current: z.array(z.string()),
  keywords: z.array(z.string()).describe('the keywords as they would be stored (normalised, de-duplicated)'),
  reward: z
    .number()
    .describe(
      "the counterfactual item reward against the served query generation: the sum of the judged queries' F1 change (−1 over the keyword budget), as the loop computes it",
    ),
  reason: z.string().nullable(),
  matched: z.object({ before: z.number(), after: z.number() }).describe('stored queries that match the item now, and would'),
  judged: z.object({ gained: z.array(PreviewQuerySchema), lost: z.array(PreviewQuerySchema) }),
  unjudged: z.object({
    gained: z.array(z.object({ id: z.string(), text: z.string() })),
    lost: z.array(z.object({ id: z.string(), text: z.string() })),
  }),
});

export function catalogRouteDocs(): RouteDoc[] {
  // Writes: refused by the catalog (409 an id that is there, 404 one that is not), the item
  // generator (502), the disk (503 read-only, 507 full); 501 on a server without a writer.
  const write = [404, 409, 501, 502, 503, 507];
  const w = (r: Omit<RouteDoc, 'tag' | 'auth'>): RouteDoc => ({ ...r, tag: 'catalog', auth: true });
  return [
    w({
      method: 'put',
      path: '/v1/items/{id}',
      summary:
        "Add or replace an item: its keywords from the served round's item generator (kept if set by hand); answered once searchable",
      params: ItemParams,
      body: ItemDocSchema,
      response: WriteResponseSchema,
      errors: write,
    }),
    w({
      method: 'delete',
      path: '/v1/items/{id}',
      summary: 'Delete an item: nothing matches it any more; answered once served',
      params: ItemParams,
      response: WriteResponseSchema,
      errors: write,
    }),
    w({
      method: 'post',
      path: '/v1/items/batch',
      summary: 'Apply a batch of item writes as one generation: all of it or none of it (a refusal names ops[i] and the field)',
      body: BatchBody,
      response: WriteResponseSchema,
      errors: write,
    }),
    w({
      method: 'put',
      path: '/v1/items/{id}/keywords',
      summary: "Set an item's keywords by hand: marked hand-set, kept across later generator runs until cleared",
      params: ItemParams,
      body: KeywordsBody,
      response: WriteResponseSchema,
      errors: write,
    }),
    w({
      method: 'delete',
      path: '/v1/items/{id}/keywords',
      summary: "Clear an item's hand-set keywords: the item generator's keywords for its text again",
      params: ItemParams,
      response: WriteResponseSchema,
      errors: write,
    }),
    w({
      method: 'post',
      path: '/v1/items/{id}/keywords/preview',
      summary:
        'What setting these keywords would do, without committing: the judged queries gained and lost with their F1 change, the counterfactual item reward, and the unjudged stored queries whose matched sets change',
      params: ItemParams,
      body: KeywordsBody,
      response: PreviewResponseSchema,
      errors: [404],
    }),
  ];
}

export function registerCatalogRoutes(
  app: FastifyInstance,
  o: { live: LiveSnapshot; engine: SearchEngine; token: string | undefined; catalog: CatalogService | null },
): void {
  const guard = { preHandler: bearerGuard(o.token) };
  // Commits finish in the writer's order; they are published in that order too.
  let published: Promise<unknown> = Promise.resolve();
  const write = async (ops: LocatedOp[]) => {
    if (!o.catalog)
      throw cogrError(
        'NOT_IMPLEMENTED',
        'catalog writes: this server was started without --writable (cogr serve --writable --token T writes the catalog)',
      );
    const commit = await o.catalog.apply(ops, 'request');
    const run = published.then(() =>
      o.engine.publish({
        generation: commit.generation,
        base: commit.base,
        set: commit.items.map((i) => i.id),
        removed: commit.removed,
      }),
    );
    published = run.catch(() => undefined);
    // Committed: answered once served, or (the swap slower than the deadline) saying it is not yet.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<PublishOutcome>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            generation: o.live.get().item.generation,
            error: {
              code: 'DEADLINE_EXCEEDED',
              message: `committed, not served within ${DEFAULTS.catalog.ackTimeoutMs} ms; the server swaps it in when it can`,
            },
          }),
        DEFAULTS.catalog.ackTimeoutMs,
      );
    });
    let pub: PublishOutcome;
    try {
      pub = await Promise.race([run, late]);
    } catch (e) {
      pub = { generation: o.live.get().item.generation, error: { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e) } };
    } finally {
      clearTimeout(timer);
    }
    return { ...commit, served: pub.generation, ...(pub.error ? { reloadError: pub.error } : {}) };
  };
  const idOf = (params: unknown) => parseOrThrow(ItemParams, params, 'INVALID_ARGUMENT').id;

  app.put('/v1/items/:id', guard, async (req) => {
    const id = idOf(req.params);
    const doc = parseOrThrow(ItemDocSchema, req.body ?? undefined, 'INVALID_BODY');
    return write([{ op: { op: 'upsert', id, ...doc }, where: 'id' }]);
  });
  app.delete('/v1/items/:id', guard, async (req) => write([{ op: { op: 'delete', id: idOf(req.params) }, where: 'id' }]));
  app.post('/v1/items/batch', guard, async (req) => {
    const body = parseOrThrow(BatchBody, req.body ?? undefined, 'INVALID_BODY');
    return write(body.ops.map((op, i) => ({ op, where: `ops[${i}]` })));
  });
  app.put('/v1/items/:id/keywords', guard, async (req) => {
    const id = idOf(req.params);
    const { keywords } = parseOrThrow(KeywordsBody, req.body ?? undefined, 'INVALID_BODY');
    return write([{ op: { op: 'keywords', id, keywords }, where: 'id' }]);
  });
  app.delete('/v1/items/:id/keywords', guard, async (req) =>
    write([{ op: { op: 'keywords', id: idOf(req.params), keywords: null }, where: 'id' }]),
  );
  app.post('/v1/items/:id/keywords/preview', guard, async (req) => {
    const snap = o.live.get();
    const id = idOf(req.params);
    const { keywords } = parseOrThrow(KeywordsBody, req.body ?? undefined, 'INVALID_BODY');
    return previewKeywords(snap.item, snap.query, snap.judgements, id, keywords);
  });
}
