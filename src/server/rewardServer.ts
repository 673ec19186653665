/**
 * The reward server (`cogr reward-server`): CoGR rewards against frozen generations over
 * HTTP, for an external RL trainer.
 *
 *   POST /get_reward        OpenRLHF's remote reward-model shape:
 *                           {query: [full text], prompts: [prompt], labels: [label]}
 *                           → {rewards: [r], scores: [r], extra_logs: {name: [per sample]}}
 *   POST /v1/reward/query   {id, keywords | completion} → query reward with its counts
 *   POST /v1/reward/item    {id, keywords | completion} → item marginal reward with the
 *                           number of queries it affects
 *   plus /health, /metrics, /openapi.json, /docs, POST /v1/admin/reload.
 *
 * A label names the entity whose reward is wanted: `query:<id>` or `item:<id>`, or a
 * bare id for the server's default side. The completion is the text after the prompt
 * (`query[i]` minus `prompts[i]`, or, when the prompt is not a prefix, the text after
 * the last assistant turn marker of a known chat template), with end-of-turn tokens
 * removed. Keywords are read with the tolerant parser of generators/parse.ts and scored
 * by the layered reward (invalid_format / over_budget / ok, rewards/layered.ts).
 *
 * With `half` (a co-evolution run's half-round, `cogr reward-server --half rR-side`) every
 * reward comes from that half-round's one scorer (src/run/context.ts halfRoundScorerData:
 * the run's β and K_max, queries scored as held out, the counterfactual over the core
 * training queries, the half-round's frozen base generations): the reward a completion gets
 * here is the one the loop and `cogr rollouts` give it. Only the half-round's side is served.
 * Without it (generations without a run), per served snapshot:
 *   query side: F_β of the set the served item index matches for S_q ∪ {q} (q = the
 *               query text from the dataset) against rel(q);
 *   item side:  the incremental counterfactual marginal ΔΣ_q F(q) against the served
 *               query index, with the reward cache of the served generations.
 */
import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';
import { cogrError, isCogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { silentLogger } from '../../index/core/log.ts';
import { normalizeKeywordSet } from '../../index/text/normalize.ts';
import type { Corpus, Side } from '../../index/core/types.ts';
import { parseKeywordOutput } from '../../generators/parse.ts';
import type { RewardReason } from '../../rewards/layered.ts';
import {
  createItemScorer,
  createQueryScorer,
  type ItemRewardDetail,
  type ItemScorer,
  type QueryRewardDetail,
  type QueryScorer,
} from '../../rewards/scorer.ts';
import { bearerGuard, createApp, parseOrThrow, type ConnectionLimits } from './http.ts';
import { createServerMetrics, type ServerMetrics } from './metrics.ts';
import { buildOpenApi, renderDocsHtml, SchemaConverter, type RouteDoc } from './openapi.ts';
import { opsRouteDocs, registerOpsRoutes } from './ops.ts';
import type { LiveSnapshot, Snapshot } from './state.ts';
import { NO_FLOOR } from '../../generators/planner/ranking.ts';
import type { KeywordView } from '../../index/view/view.ts';

export const RewardLimitsSchema = z.strictObject({
  bodyLimit: z
    .number()
    .int()
    .min(256)
    .max(256 * 1024 * 1024)
    .default(DEFAULTS.rewardServer.bodyLimit),
  maxBatch: z.number().int().min(1).max(100_000).default(DEFAULTS.rewardServer.maxBatch),
  maxTextLength: z.number().int().min(1).max(10_000_000).default(DEFAULTS.rewardServer.maxTextLength),
});

export interface RewardServerOptions {
  live: LiveSnapshot;
  /** Query texts and relevance judgements of the dataset the generations were built from. */
  corpus: Pick<Corpus, 'queries' | 'relevant'>;
  /** Side of a bare label (default: query). */
  defaultSide?: Side;
  kMax?: number;
  beta?: number;
  /**
   * Query ids of the dataset withheld from rewards, with why: `dev` (they decide which
   * half-rounds are adopted) or `held-out` (they measure the result). A label naming one is
   * answered as withheld, not as unknown.
   */
  withheld?: ReadonlyMap<string, 'dev' | 'held-out'>;
  /** A batch with a label that cannot be scored (unknown or withheld) is refused whole (404) instead of answered with null for it. */
  strictLabels?: boolean;
  token?: string;
  limits?: z.input<typeof RewardLimitsSchema>;
  log?: Logger;
  metrics?: ServerMetrics;
  /** Request and headers time-outs, keep-alive, the connection cap (index/core/defaults.ts `http`). */
  connections?: ConnectionLimits;
  /** A run's half-round: its side's rewards from its one scorer (kMax and beta are the run's, not these options'). */
  half?: { name: string; side: Side; scorer: QueryScorer | ItemScorer };
}

const OptionsSchema = z.object({
  live: z.custom<LiveSnapshot>((v) => typeof v === 'object' && v !== null && typeof (v as LiveSnapshot).get === 'function', {
    message: 'expected a LiveSnapshot',
  }),
  corpus: z.custom<RewardServerOptions['corpus']>(
    (v) => typeof v === 'object' && v !== null && Array.isArray((v as Corpus).queries) && (v as Corpus).relevant instanceof Map,
    {
      message: 'expected a corpus with queries and relevant',
    },
  ),
  defaultSide: z.enum(['query', 'item']).default('query'),
  kMax: z.number().int().min(1).default(K_MAX),
  beta: z.number().positive().default(DEFAULTS.run.beta),
  token: z.string().min(1, 'must not be empty when given').optional(),
  limits: RewardLimitsSchema.optional(),
  strictLabels: z.boolean().default(false),
});

/** Keywords one sample of the plain endpoints may list. */
const MAX_KEYWORDS = 10_000;

/** The flag that serves a withheld query's rewards. */
const WITHHELD_FLAG = { dev: '--include-dev', 'held-out': '--include-held-out' } as const;
const WITHHELD_WHY = {
  dev: 'a dev query of the run (dev queries decide which half-rounds are adopted)',
  'held-out': 'a held-out query of the run (held-out queries measure the result)',
} as const;

// ---- completion extraction ----

/** Where an assistant turn starts in common chat templates (the text after the last one is the completion). */
const ASSISTANT_MARKERS: readonly RegExp[] = [
  /<\|im_start\|>assistant\s*\n?/g, // ChatML (Qwen, ...)
  /<\|start_header_id\|>assistant<\|end_header_id\|>\s*/g, // Llama 3
  /<start_of_turn>model\s*\n?/g, // Gemma
  /<\|assistant\|>\s*/g, // Phi / Zephyr
  /\[\/INST\]\s*/g, // Llama 2 / Mistral
  /^###\s*(?:Response|Assistant)\s*:?[ \t]*\n?/gm, // Alpaca-style
];
const END_TOKENS = /(?:<\|im_end\|>|<\|eot_id\|>|<end_of_turn>|<\|endoftext\|>|<\|end\|>|<\/s>|<eos>)+/g;

/** The completion inside a full text (prompt + response) with the chat template removed. */
export function stripChatTemplate(full: string, prompt: string): string {
  let rest: string;
  if (prompt.length > 0 && full.startsWith(prompt)) rest = full.slice(prompt.length);
  else {
    let cut = -1;
    for (const re of ASSISTANT_MARKERS) {
      re.lastIndex = 0;
      let m: RegExpExecArray | null;
      while ((m = re.exec(full)) !== null) {
        if (m.index + m[0].length > cut) cut = m.index + m[0].length;
        if (m[0].length === 0) re.lastIndex++;
      }
    }
    rest = cut >= 0 ? full.slice(cut) : full;
  }
  // A prompt that already ended with the assistant marker leaves none; strip a leading one anyway.
  for (const re of ASSISTANT_MARKERS) {
    re.lastIndex = 0;
    const m = re.exec(rest);
    if (m && m.index === 0) rest = rest.slice(m[0].length);
  }
  return rest.replace(END_TOKENS, '').trim();
}

/** `query:<id>` / `item:<id>`, or a bare id for the default side. */
export function parseLabel(label: string, defaultSide: Side): { side: Side; id: string } {
  const m = /^(query|item):(.+)$/s.exec(label);
  return m ? { side: m[1] as Side, id: m[2] } : { side: defaultSide, id: label };
}

// ---- scorers per snapshot ----

export interface QueryRewardAnswer extends QueryRewardDetail {
  side: 'query';
  id: string;
  reward: number;
  reason: RewardReason;
  keywords: string[];
}

export interface ItemRewardAnswer extends ItemRewardDetail {
  side: 'item';
  id: string;
  reward: number;
  reason: RewardReason;
  keywords: string[];
}

/**
 * The scorers of each served snapshot (rewards/scorer.ts), built on first use: the query
 * scorer from the dataset's query texts (or the query index's, for ids the dataset does
 * not have) and judgements, the item scorer with its reward cache once an item reward is
 * asked (it needs the query-side generation).
 */
class SnapshotScorers {
  private readonly bySnapshot = new WeakMap<Snapshot, { query: QueryScorer | null; item: ItemScorer | null }>();
  constructor(
    private readonly corpus: RewardServerOptions['corpus'],
    private readonly options: { kMax: number; beta: number },
    private readonly withheld: ReadonlyMap<string, 'dev' | 'held-out'> = new Map(),
    private readonly half: RewardServerOptions['half'] = undefined,
  ) {}

  private entry(snap: Snapshot): { query: QueryScorer | null; item: ItemScorer | null } {
    let e = this.bySnapshot.get(snap);
    if (!e) this.bySnapshot.set(snap, (e = { query: null, item: null }));
    return e;
  }

  query(snap: Snapshot): QueryScorer {
    if (this.half) return this.half.scorer as QueryScorer;
    const e = this.entry(snap);
    if (!e.query) {
      const queryText = new Map<string, string>();
      if (snap.query) for (let q = 0; q < snap.query.size; q++) queryText.set(snap.query.id(q), snap.query.selfOf(q));
      for (const q of this.corpus.queries) queryText.set(q.id, q.text);
      e.query = createQueryScorer(snap.item, { relevant: this.corpus.relevant, queryText }, this.options);
    }
    return e.query;
  }

  item(snap: Snapshot): ItemScorer {
    if (this.half) return this.half.scorer as ItemScorer;
    const e = this.entry(snap);
    if (!e.item) {
      if (!snap.query) throw cogrError('NOT_FOUND', 'label: item rewards need a query-side generation, and the database has none');
      e.item = createItemScorer(snap.item, snap.query, { relevant: this.corpus.relevant }, this.options);
    }
    return e.item;
  }

  /** One sample's reward with its counts; `parsed` null = the output did not parse (invalid_format). */
  answer(snap: Snapshot, side: Side, id: string, parsed: readonly string[] | null): QueryRewardAnswer | ItemRewardAnswer {
    const sample = [{ id, keywords: parsed }];
    if (this.half && side !== this.half.side)
      throw cogrError(
        'NOT_FOUND',
        `id: ${side} ${JSON.stringify(id)}: this server scores half-round ${this.half.name}, whose rewards are ${this.half.side} rewards`,
        { id },
      );
    if (side === 'query') {
      const why = this.withheld.get(id);
      if (why !== undefined)
        throw cogrError(
          'NOT_FOUND',
          `id: query ${JSON.stringify(id)} is withheld from rewards: ${WITHHELD_WHY[why]}; cogr reward-server ${WITHHELD_FLAG[why]} serves it`,
          { id, withheld: why },
        );
      const r = this.query(snap).score(sample, { details: true });
      const reward = r.rewards[0];
      const detail = r.details![0];
      if (reward === null || r.reasons[0] === null || !detail)
        throw cogrError(
          'NOT_FOUND',
          this.half
            ? `id: no query ${JSON.stringify(id)} among the core training queries half-round ${this.half.name} is scored over`
            : `id: no query ${JSON.stringify(id)} in the dataset or the query index`,
          { id },
        );
      return { side, id, reward, reason: r.reasons[0], keywords: r.keywords![0], ...detail };
    }
    if (snap.item.ordinalOf(id) < 0)
      throw cogrError('NOT_FOUND', `id: no item ${JSON.stringify(id)} in the served item generation ${snap.item.generation}`, { id });
    const r = this.item(snap).score(sample, { details: true });
    return { side, id, reward: r.rewards[0]!, reason: r.reasons[0]!, keywords: r.keywords![0], ...r.details![0]! };
  }
}

/** What /health and /metrics show of a half-round's server: its frozen generations, never reloaded (a half-round does not change). */
export function halfRoundSnapshot(
  half: { name: string; round: number; base: string; itemView: KeywordView; queryView: KeywordView | null },
  corpus: Pick<Corpus, 'items'>,
): Snapshot {
  const info = (side: Side, v: KeywordView) => ({ side, generation: v.generation, round: null, entities: v.size, keywords: v.numKeywords });
  return {
    round: half.round,
    item: half.itemView,
    query: half.queryView,
    itemGenerations: [half.itemView],
    generations: [info('item', half.itemView), ...(half.queryView ? [info('query', half.queryView)] : [])],
    problems: [],
    reason: `half-round ${half.name}: the frozen generations of step ${half.base}`,
    fields: new Map(),
    titles: new Map(corpus.items.map((i) => [i.id, i.title])),
    texts: new Map(),
    handSet: new Map(),
    catalog: null,
    judgements: null,
    keywordEpoch: `half-round ${half.name}`,
    keywordSource: null,
    ranking: { ranker: 'keywords', floor: NO_FLOOR, source: `half-round ${half.name}` },
  };
}

// ---- HTTP ----

export function rewardSchemas(l: z.output<typeof RewardLimitsSchema>) {
  const text = z.string({ error: 'expected a string' }).max(l.maxTextLength, `longer than ${l.maxTextLength} characters`);
  const getReward = z
    .strictObject({
      query: z
        .array(text, { error: 'expected an array of strings' })
        .min(1, 'must not be empty')
        .max(l.maxBatch, `more than ${l.maxBatch} entries`)
        .describe('full texts: prompt + response'),
      prompts: z.array(text, { error: 'expected an array of strings' }).max(l.maxBatch).optional().describe('the prompts, same order'),
      labels: z
        .array(z.string({ error: 'expected a string' }).min(1, 'must not be empty').max(1024), { error: 'expected an array of strings' })
        .describe('entity per sample: "query:<id>", "item:<id>" or a bare id'),
    })
    .superRefine((b, ctx) => {
      if (b.labels.length !== b.query.length)
        ctx.addIssue({ code: 'custom', path: ['labels'], message: `has ${b.labels.length} entries, query has ${b.query.length}` });
      if (b.prompts && b.prompts.length !== b.query.length)
        ctx.addIssue({ code: 'custom', path: ['prompts'], message: `has ${b.prompts.length} entries, query has ${b.query.length}` });
    });
  const single = z
    .strictObject({
      id: z.string({ error: 'required, a string' }).min(1, 'must not be empty').max(1024),
      keywords: z
        .array(z.string({ error: 'expected a string' }).max(1000), { error: 'expected an array of strings' })
        .max(MAX_KEYWORDS)
        .optional()
        .describe('the candidate keyword set'),
      completion: text.optional().describe('raw generator output, parsed tolerantly'),
    })
    .superRefine((b, ctx) => {
      if ((b.keywords === undefined) === (b.completion === undefined))
        ctx.addIssue({ code: 'custom', path: ['keywords'], message: 'give exactly one of keywords, completion' });
    });
  return { getReward, single };
}

const LabelError = z.object({
  index: z.number().describe('the sample'),
  label: z.string(),
  code: z.string().describe('NOT_FOUND'),
  message: z.string().describe('an unknown id, or a withheld (dev or held-out) query named as such'),
});
const GetRewardResponse = z.object({
  rewards: z.array(z.number().nullable()).describe('null for a sample whose label cannot be scored (named in errors)'),
  scores: z.array(z.number().nullable()),
  extra_logs: z
    .record(z.string(), z.array(z.number()))
    .describe('per-sample logs: format_ok, over_budget, matched, affected, side_item (0 for a sample without a reward)'),
  errors: z
    .array(LabelError)
    .optional()
    .describe(
      'the samples whose label cannot be scored, when some can (a batch none of whose labels can be scored, or any with --strict-labels, is a 404)',
    ),
});

/** Time the scoring of one batch holds the event loop before giving it a turn. */
const SCORE_SLICE_MS = 4;
const QueryAnswerSchema = z.object({
  side: z.literal('query'),
  id: z.string(),
  reward: z.number(),
  reason: z.enum(['invalid_format', 'over_budget', 'ok']),
  keywords: z.array(z.string()),
  matched: z.number(),
  truePositives: z.number(),
  relevant: z.number(),
  precision: z.number(),
  recall: z.number(),
});
const ItemAnswerSchema = z.object({
  side: z.literal('item'),
  id: z.string(),
  reward: z.number(),
  reason: z.enum(['invalid_format', 'over_budget', 'ok']),
  keywords: z.array(z.string()),
  matched: z.number(),
  referenceMatched: z.number(),
  affected: z.number(),
});

function parsedKeywords(b: { keywords?: string[]; completion?: string }): string[] | null {
  if (b.keywords !== undefined) return normalizeKeywordSet(b.keywords).keywords;
  const p = parseKeywordOutput(b.completion ?? '');
  return p.ok ? p.keywords : null;
}

/** The reward server's OpenAPI document (`GET /openapi.json`; docs/http-api.md is generated from it by `npm run docs`). */
export function rewardOpenApi(limits: z.output<typeof RewardLimitsSchema>): Record<string, unknown> {
  const schemas = rewardSchemas(limits);
  const routes: RouteDoc[] = [
    {
      method: 'post',
      path: '/get_reward',
      tag: 'reward',
      summary: "Rewards in OpenRLHF's remote reward-model shape",
      description:
        'labels carry the entity: "query:<id>", "item:<id>" or a bare id (default side). The completion is the text after the prompt, chat template removed.',
      body: schemas.getReward,
      response: GetRewardResponse,
      auth: true,
      errors: [400, 404, 413],
    },
    {
      method: 'post',
      path: '/v1/reward/query',
      tag: 'reward',
      summary: "One query's reward with its counts",
      body: schemas.single,
      response: QueryAnswerSchema,
      auth: true,
      errors: [400, 404, 413],
    },
    {
      method: 'post',
      path: '/v1/reward/item',
      tag: 'reward',
      summary: "One item's marginal reward with the affected query count",
      body: schemas.single,
      response: ItemAnswerSchema,
      auth: true,
      errors: [400, 404, 413],
    },
    ...opsRouteDocs(),
  ];
  const conv = new SchemaConverter();
  return buildOpenApi(
    { title: 'cogr reward server', version: '1', description: 'CoGR rewards against frozen generations, for external RL trainers.' },
    routes,
    conv,
  );
}

export function buildRewardServer(opts: RewardServerOptions): FastifyInstance {
  const o = parseOrThrow(OptionsSchema, opts, 'INVALID_ARGUMENT', 'options');
  const limits = o.limits ?? RewardLimitsSchema.parse({});
  const live = opts.live;
  const log = opts.log ?? silentLogger;
  const metrics = opts.metrics ?? createServerMetrics();
  if (opts.half && opts.half.scorer.side !== opts.half.side)
    throw cogrError('INVALID_ARGUMENT', 'options.half: the scorer is not of its side');
  const scorers = new SnapshotScorers(opts.corpus, { kMax: o.kMax, beta: o.beta }, opts.withheld, opts.half);
  const schemas = rewardSchemas(limits);
  // zod compiles and V8 optimises a schema's checks over its first uses (~100 ms, then ~30,
  // for a full batch): paid here at start, not inside the first requests.
  const full = Array.from({ length: limits.maxBatch }, () => 'x');
  for (let k = 0; k < 3; k++) schemas.getReward.safeParse({ query: full, prompts: full, labels: full });
  const app = createApp({
    bodyLimit: limits.bodyLimit,
    // No array, object or string of a valid body is larger: parsing and the schema's checks stay bounded whatever the body.
    json: { maxEntries: Math.max(limits.maxBatch, MAX_KEYWORDS), maxStringLength: limits.maxTextLength },
    log,
    metrics,
    ...(opts.connections ? { connections: opts.connections } : {}),
  });
  const guard = bearerGuard(o.token);

  const openapi = rewardOpenApi(limits);

  app.post('/get_reward', { onRequest: guard }, async (req) => {
    const snap = live.get();
    const b = parseOrThrow(schemas.getReward, req.body ?? {}, 'INVALID_BODY');
    const rewards: (number | null)[] = [];
    const errors: z.infer<typeof LabelError>[] = [];
    const logs = {
      format_ok: [] as number[],
      over_budget: [] as number[],
      matched: [] as number[],
      affected: [] as number[],
      side_item: [] as number[],
    };
    let slice = performance.now();
    for (let i = 0; i < b.query.length; i++) {
      // A batch of thousands of long texts is scored in slices, the event loop served between them.
      if (performance.now() - slice > SCORE_SLICE_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        slice = performance.now();
      }
      const { side, id } = parseLabel(b.labels[i], o.defaultSide);
      const completion = stripChatTemplate(b.query[i], b.prompts?.[i] ?? '');
      const p = parseKeywordOutput(completion);
      const parsed = p.ok ? p.keywords : null;
      let ans: QueryRewardAnswer | ItemRewardAnswer;
      try {
        ans = scorers.answer(snap, side, id, parsed);
      } catch (e) {
        if (isCogrError(e) && e.code === 'NOT_FOUND') {
          const message = `labels[${i}]: ${e.message.replace(/^id: /, '')}`;
          if (o.strictLabels) throw cogrError('NOT_FOUND', message, { index: i, label: b.labels[i], ...e.details });
          errors.push({ index: i, label: b.labels[i], code: e.code, message });
          rewards.push(null);
          for (const l of Object.values(logs)) l.push(0);
          continue;
        }
        throw e;
      }
      rewards.push(ans.reward);
      logs.format_ok.push(ans.reason === 'invalid_format' ? 0 : 1);
      logs.over_budget.push(ans.reason === 'over_budget' ? 1 : 0);
      logs.matched.push(ans.matched);
      logs.affected.push(ans.side === 'item' ? ans.affected : 0);
      logs.side_item.push(ans.side === 'item' ? 1 : 0);
    }
    // Nothing to answer: the labels are wrong, not one sample.
    if (errors.length === b.query.length)
      throw cogrError('NOT_FOUND', errors.length === 1 ? errors[0].message : `labels: none can be scored (${errors[0].message}; ...)`, {
        errors,
      });
    return { rewards, scores: rewards, extra_logs: logs, ...(errors.length > 0 ? { errors } : {}) };
  });

  app.post('/v1/reward/query', { onRequest: guard }, async (req) => {
    const b = parseOrThrow(schemas.single, req.body ?? {}, 'INVALID_BODY');
    return scorers.answer(live.get(), 'query', b.id, parsedKeywords(b));
  });

  app.post('/v1/reward/item', { onRequest: guard }, async (req) => {
    const b = parseOrThrow(schemas.single, req.body ?? {}, 'INVALID_BODY');
    return scorers.answer(live.get(), 'item', b.id, parsedKeywords(b));
  });

  registerOpsRoutes(app, { live, metrics, token: o.token, openapi, docsHtml: renderDocsHtml(openapi) });
  return app;
}
