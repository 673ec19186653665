/**
 * The search API's shapes: the request schemas every route validates with at the boundary
 * (zod, messages naming the field), the response schemas the OpenAPI document shows, and
 * the route documents themselves with every status each route can answer.
 */
import { z } from 'zod';
import { DEFAULTS } from '../../index/core/defaults.ts';
import type { Explanation } from '../../index/view/view.ts';
import { RANKERS } from '../../generators/planner/rankers.ts';
import type { RouteDoc, SchemaConverter } from './openapi.ts';
import { opsRouteDocs } from './ops.ts';
import { DEFAULT_PROGRAM_WORK, ProgramNodeSchema } from './program.ts';

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

const boolParam = z
  .enum(['true', 'false', '1', '0'], { error: 'expected true, false, 1 or 0' })
  .optional()
  .transform((v) => v === 'true' || v === '1');

/** A field a search result may carry on request: one of the items' structured fields, or `text` (the item's description). */
const fieldName = z.string().min(1, 'must not be empty').max(100, 'longer than 100 characters');
const FIELDS_HELP =
  'more of each item in the results: its structured fields by name, `text` (its description), or `*` (every structured field and the text); the title is always there';

/** What a search asks for, from GET's parameters or POST's body (one shape after parsing). */
export interface TextSearchRequest {
  q: string;
  k: number;
  explain: boolean;
  fields: string[];
}

export function searchSchemas(l: SearchLimits) {
  const q = z
    .string({ error: 'required, a string' })
    .min(1, 'must not be empty')
    .max(l.maxQueryLength, `longer than ${l.maxQueryLength} characters`)
    // Blank is empty, as for a program's text (a 400); other texts with no searchable term are fallback no_terms.
    .refine((s) => s.trim().length > 0, 'must not be empty')
    .describe('the query text');
  const kInt = z
    .number({ error: 'expected an integer' })
    .int('expected an integer')
    .min(1, 'must be at least 1')
    .max(l.maxK, `must be at most ${l.maxK}`);
  const kHelp = 'how many items to return (the matched set may be larger)';
  const searchQuery = z.strictObject({
    q,
    k: z.coerce
      .number({ error: 'expected an integer' })
      .int('expected an integer')
      .min(1, 'must be at least 1')
      .max(l.maxK, `must be at most ${l.maxK}`)
      .default(l.defaultK)
      .describe(kHelp),
    explain: boolParam.describe('add matched keywords and BM25 term contributions per item'),
    fields: z
      .string()
      .max(4096, 'longer than 4096 characters')
      .optional()
      .transform((s, ctx) => {
        const names = s === undefined ? [] : s.split(',').map((x) => x.trim());
        for (const n of names) {
          const r = fieldName.safeParse(n);
          if (!r.success) ctx.addIssue({ code: 'custom', message: `a field name ${r.error.issues[0]?.message ?? 'is invalid'}` });
        }
        return names;
      })
      .describe(`${FIELDS_HELP}; comma-separated`),
  });
  const fieldsBody = z.array(fieldName).max(100, 'at most 100 names').default([]).describe(FIELDS_HELP);
  /** POST /v1/search with a query text: the same as GET. */
  const textBody = z.strictObject({
    q,
    k: kInt.default(l.defaultK).describe(kHelp),
    explain: z.boolean({ error: 'expected a boolean' }).default(false),
    fields: fieldsBody,
  });
  const programBody = z.strictObject({
    program: z.unknown(),
    k: kInt.default(l.defaultK),
    explain: z.boolean({ error: 'expected a boolean' }).default(false),
    fields: fieldsBody,
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
  return { searchQuery, textBody, programBody, programBodyDoc, itemParams, keywordsQuery };
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
export type ExplainJson = z.infer<typeof ExplainSchema>;

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
  /** The run serves its matched sets cut where their expected F1 peaks (`--cut`): `matched` counts the items kept. */
  cut: z.boolean().optional(),
  reason: z.string().optional(),
});
export type RankingInfo = z.infer<typeof RankingInfoSchema>;

const HitSchema = z.object({
  id: z.string(),
  score: z.number(),
  title: z.string().optional().describe("the item's title (from the dataset or the catalog; else the index's own title keyword)"),
  fields: z.record(z.string(), z.string()).optional().describe('the fields asked for with `fields`, those the item has'),
  explain: ExplainSchema.optional(),
});
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
export const ItemResponseSchema = z.object({
  id: z.string(),
  title: z.string().optional(),
  fields: z.record(z.string(), z.string()).optional(),
  served: z
    .object({
      generation: z.number(),
      self: z.string(),
      keywords: z.array(z.string()),
      handSet: z.boolean().describe('the keywords were set by hand (PUT /v1/items/{id}/keywords) and are kept until cleared'),
    })
    .nullable(),
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

export function explainJson(ex: Explanation): ExplainJson {
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
 * Statuses every route can answer besides its own: a malformed request or bad URL (400), a
 * request not received in time (408), an Expect header other than 100-continue (417),
 * headers over the limit (431), an internal error (500) — http.ts answers them all in the
 * API's error shape; a route with a body also 413 (too large) and 415 (not JSON); a route
 * with a path parameter also 414 (over the router's limit).
 */
export function withTransportStatuses(routes: readonly RouteDoc[]): RouteDoc[] {
  return routes.map((r) => {
    const own = r.errors ?? [];
    const body = r.method !== 'get' ? [413, 415] : [];
    const param = r.path.includes('{') ? [414] : [];
    const all = new Set([400, 408, 417, 431, 500, ...body, ...param, ...own, ...(r.auth ? [401] : [])]);
    return { ...r, errors: [...all].sort((a, b) => a - b) };
  });
}

/** The search routes' documents (the catalog's write routes are catalogRouteDocs, src/server/catalogRoutes.ts). */
export function searchRouteDocs(l: SearchLimits, conv: SchemaConverter): RouteDoc[] {
  const s = searchSchemas(l);
  conv.name(ProgramNodeSchema, 'ProgramNode');
  // An engine other than the process's memory (OpenSearch) can fail (502) or miss its deadline (504).
  const engine = [502, 504];
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
      errors: engine,
    },
    {
      method: 'post',
      path: '/v1/search',
      tag: 'search',
      summary:
        'Keyword retrieval for a query text ({q, k, explain, fields}, answered as GET), or a Boolean retrieval program ({program, k, explain, fields}: and / or / not over keyword, any_of, text and field predicates)',
      body: z.union([s.textBody, s.programBodyDoc]),
      response: z.union([SearchResponseSchema, ProgramResponseSchema]),
      errors: engine,
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
      errors: [404, 409],
    },
    ...opsRouteDocs(),
  ];
}
