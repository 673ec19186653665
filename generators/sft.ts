/**
 * The SFT phase (the paper's Algorithm 1) for the embedded policies:
 * 1. the base generator writes M = 10 keywords per item; for the embedded policy the base
 *    generator is its untrained candidate ranking (deterministic);
 * 2. each training query's target is the N = 15 most frequent keywords pooled (as a
 *    multiset) over its relevant items' keywords (ties: keyword order);
 * 3. both policies are trained by maximum likelihood on (item, S_i) and (query, S_q); the
 *    query policy sees the item index built from the base item keywords as its opposite
 *    side, and learns word → keyword associations from its targets.
 * `exportTrl` writes the same data as JSONL in TRL's conversational prompt–completion
 * format, with the prompts of the LLM generator (generators/prompts/).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULTS } from '../index/defaults.ts';
import { silentLogger, type Logger } from '../index/log.ts';
import type { Corpus, IndexEntry, Item, Query } from '../index/types.ts';
import { KeywordView } from '../index/view.ts';
import { EmbeddedPolicy, type SftReport } from './policy/model.ts';
import { DEFAULT_PROMPT_DIR, loadPromptTemplate, renderPrompt } from './prompts.ts';
import type { GenerateInput } from './types.ts';


export function itemInput(item: Item): GenerateInput {
  return { id: item.id, title: item.title, text: item.text };
}
export function queryInput(q: Query): GenerateInput {
  return { id: q.id, text: q.text };
}

/** The base generator's M keywords per item: the policy's deterministic candidate ranking. */
export function baseItemKeywords(policy: EmbeddedPolicy, items: readonly Item[], M = DEFAULTS.sft.itemKeywords): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const it of items) out.set(it.id, policy.rank(itemInput(it), M));
  return out;
}

/** The N most frequent keywords pooled over each training query's relevant items. */
export function buildQueryTargets(
  trainQueries: readonly Query[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
  itemKeywords: ReadonlyMap<string, readonly string[]>,
  N = DEFAULTS.sft.queryKeywords,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const q of trainQueries) {
    const counts = new Map<string, number>();
    for (const id of relevant.get(q.id) ?? []) for (const k of itemKeywords.get(id) ?? []) counts.set(k, (counts.get(k) ?? 0) + 1);
    if (counts.size === 0) continue;
    out.set(
      q.id,
      [...counts.entries()]
        .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
        .slice(0, N)
        .map(([k]) => k),
    );
  }
  return out;
}

/**
 * Precision-favouring query targets: for each training query, the candidate keywords of
 * the query policy (its opposite side attached) chosen greedily to maximise the F1 of
 * the matched set (S_q ∪ {q}) against rel(q) on `itemView`, in the order chosen; a
 * keyword is added only while it raises F1 by more than `minGain`. Queries for which no
 * candidate helps get no target. Reachable by construction (every target is a candidate).
 */
export function greedyQueryTargets(
  queryPolicy: EmbeddedPolicy,
  itemView: KeywordView,
  trainQueries: readonly Query[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
  N = DEFAULTS.sft.queryKeywords,
  minGain = 1e-9,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const inSet = new Uint8Array(itemView.size);
  const isRel = new Uint8Array(itemView.size);
  for (const q of trainQueries) {
    const relIds = relevant.get(q.id);
    if (!relIds || relIds.size === 0) continue;
    const nRel = relIds.size;
    const relOrd: number[] = [];
    for (const id of relIds) {
      const o = itemView.ordinalOf(id);
      if (o >= 0) {
        isRel[o] = 1;
        relOrd.push(o);
      }
    }
    const base = itemView.match({ self: q.text, keywords: [] });
    let nRet = 0;
    let tp = 0;
    const touched: number[] = [];
    for (const e of base) {
      inSet[e] = 1;
      touched.push(e);
      nRet++;
      tp += isRel[e];
    }
    const cands = queryPolicy.candidateKeywords(queryInput(q));
    const posts = cands.map((k) => itemView.match({ keywords: [k] }));
    const used = new Uint8Array(cands.length);
    const chosen: string[] = [];
    let f1 = (2 * tp) / (nRet + nRel);
    while (chosen.length < N) {
      let best = -1;
      let bestF = f1 + minGain;
      let bestTie = '';
      for (let c = 0; c < cands.length; c++) {
        if (used[c]) continue;
        let dn = 0;
        let dt = 0;
        for (const e of posts[c]) {
          if (!inSet[e]) {
            dn++;
            dt += isRel[e];
          }
        }
        if (dt === 0) continue;
        const f = (2 * (tp + dt)) / (nRet + dn + nRel);
        if (f > bestF || (f === bestF && best >= 0 && cands[c] < bestTie)) {
          best = c;
          bestF = f;
          bestTie = cands[c];
        }
      }
      if (best < 0) break;
      used[best] = 1;
      chosen.push(cands[best]);
      for (const e of posts[best]) {
        if (!inSet[e]) {
          inSet[e] = 1;
          touched.push(e);
          nRet++;
          tp += isRel[e];
        }
      }
      f1 = bestF;
    }
    for (const e of touched) inSet[e] = 0;
    for (const o of relOrd) isRel[o] = 0;
    if (chosen.length > 0) out.set(q.id, chosen);
  }
  return out;
}

/** The item index entries (self = title) for a keyword assignment. */
export function itemEntries(items: readonly Item[], keywords: ReadonlyMap<string, readonly string[]>): IndexEntry[] {
  return items.map((it) => ({ id: it.id, self: it.title, keywords: [...(keywords.get(it.id) ?? [])] }));
}

export interface SftRunOptions {
  corpus: Pick<Corpus, 'items' | 'queries' | 'relevant'>;
  /** Ids of the training queries (held-out queries must not be here). */
  trainQueryIds: readonly string[];
  M?: number;
  N?: number;
  epochs?: number;
  lr?: number;
  seed?: number;
  kMax?: number;
  /**
   * Query targets: 'pooled' (the paper's top-N pooled keywords of the relevant items),
   * 'greedy' (greedyQueryTargets: F1-maximising candidates, precision-favouring), or
   * 'both' (greedy first, then the pooled ones that are candidates, up to N). Default 'both'.
   */
  queryTargets?: 'pooled' | 'greedy' | 'both';
  logger?: Logger;
}

export interface SftResult {
  itemPolicy: EmbeddedPolicy;
  queryPolicy: EmbeddedPolicy;
  itemKeywords: Map<string, string[]>;
  queryTargets: Map<string, string[]>;
  /** The item index built from the base item keywords (the query policy's opposite side). */
  itemView: KeywordView;
  itemReport: SftReport;
  queryReport: SftReport;
}

export function runSft(opts: SftRunOptions): SftResult {
  const log = opts.logger ?? silentLogger;
  const { items, queries, relevant } = opts.corpus;
  const seed = opts.seed ?? 1;
  const epochs = opts.epochs ?? 5;
  const cfg = opts.kMax ? { kMax: opts.kMax } : {};
  const itemPolicy = new EmbeddedPolicy('item', cfg);
  itemPolicy.fitStats(items.map(itemInput));
  const itemKeywords = baseItemKeywords(itemPolicy, items, opts.M ?? DEFAULTS.sft.itemKeywords);
  log.info('sft: base item keywords', { items: items.length, M: opts.M ?? DEFAULTS.sft.itemKeywords });
  const train = new Set(opts.trainQueryIds);
  const trainQueries = queries.filter((q) => train.has(q.id));
  const queryTargets = buildQueryTargets(trainQueries, relevant, itemKeywords, opts.N ?? DEFAULTS.sft.queryKeywords);
  const itemReport = itemPolicy.trainSft(
    items.map((it) => ({ input: itemInput(it), target: itemKeywords.get(it.id) ?? [] })),
    { epochs, lr: opts.lr, seed },
  );
  log.info('sft: item policy trained', { loss: itemReport.epochLoss.at(-1), coverage: itemReport.coverage });

  const itemView = KeywordView.build('item', 0, itemEntries(items, itemKeywords));
  const queryPolicy = new EmbeddedPolicy('query', cfg);
  queryPolicy.fitStats(queries.map(queryInput));
  queryPolicy.attachOpposite(itemView);
  const qExamples = trainQueries.filter((q) => queryTargets.has(q.id)).map((q) => ({ input: queryInput(q), target: queryTargets.get(q.id)! }));
  queryPolicy.fitAssociations(qExamples);
  const mode = opts.queryTargets ?? 'both';
  let examples = qExamples;
  let targetsUsed = queryTargets;
  if (mode !== 'pooled') {
    const N = opts.N ?? DEFAULTS.sft.queryKeywords;
    const greedy = greedyQueryTargets(queryPolicy, itemView, trainQueries, relevant, N);
    examples = trainQueries
      .filter((q) => greedy.has(q.id) || (mode === 'both' && queryTargets.has(q.id)))
      .map((q) => {
        const g = greedy.get(q.id) ?? [];
        if (mode === 'greedy') return { input: queryInput(q), target: g };
        const cand = new Set(queryPolicy.candidateKeywords(queryInput(q)));
        const extra = (queryTargets.get(q.id) ?? []).filter((k) => cand.has(k) && !g.includes(k));
        return { input: queryInput(q), target: [...g, ...extra].slice(0, N) };
      });
    targetsUsed = new Map(examples.map((ex) => [ex.input.id, ex.target]));
  }
  const queryReport = queryPolicy.trainSft(examples, { epochs, lr: opts.lr, seed: seed + 1 });
  log.info('sft: query policy trained', { queries: qExamples.length, loss: queryReport.epochLoss.at(-1), coverage: queryReport.coverage });
  return { itemPolicy, queryPolicy, itemKeywords, queryTargets: targetsUsed, itemView, itemReport, queryReport };
}

/**
 * Write `item.jsonl` and `query.jsonl` under dir: one line per example,
 * {"prompt": [{"role": "system", ...}, {"role": "user", ...}], "completion": [{"role":
 * "assistant", "content": "{\"keywords\": [...]}"}]} (TRL's conversational
 * prompt–completion format). Returns the number of lines written per file.
 */
export function exportTrl(
  dir: string,
  data: {
    items: readonly Item[];
    itemKeywords: ReadonlyMap<string, readonly string[]>;
    queries: readonly Query[];
    queryTargets: ReadonlyMap<string, readonly string[]>;
    promptDir?: string;
  },
): { item: number; query: number } {
  mkdirSync(dir, { recursive: true });
  const promptDir = data.promptDir ?? DEFAULT_PROMPT_DIR;
  const write = (side: 'item' | 'query', rows: { input: GenerateInput; keywords: readonly string[] }[]) => {
    const t = loadPromptTemplate(side, promptDir);
    const lines = rows.map((r) =>
      JSON.stringify({
        prompt: renderPrompt(t, r.input),
        completion: [{ role: 'assistant', content: JSON.stringify({ keywords: r.keywords }) }],
      }),
    );
    writeFileSync(join(dir, `${side}.jsonl`), lines.length ? lines.join('\n') + '\n' : '');
    return lines.length;
  };
  const item = write(
    'item',
    data.items.filter((it) => data.itemKeywords.has(it.id)).map((it) => ({ input: itemInput(it), keywords: data.itemKeywords.get(it.id)! })),
  );
  const query = write(
    'query',
    data.queries.filter((q) => data.queryTargets.has(q.id)).map((q) => ({ input: queryInput(q), keywords: data.queryTargets.get(q.id)! })),
  );
  return { item, query };
}
