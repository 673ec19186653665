/**
 * The keyword worker (keywordPool.ts): keeps the generators it was sent, rebuilt once
 * per generation (queryGenerator.ts), and answers one query text at a time.
 */
import { parentPort } from 'node:worker_threads';
import { KeywordView } from '../../index/view/view.ts';
import type { FromWorker, ToWorker } from './keywordPool.ts';
import { rebuildQueryGenerator, type QueryPlanner } from './queryGenerator.ts';
import { NoSearchableTerms } from './state.ts';
import { denseVectorsOf, type RelevanceModel } from '../../generators/planner/relevance.ts';
import { registerCorpusVectors } from '../embeddings/dense.ts';
import type { Item } from '../../index/core/types.ts';

const port = parentPort;
if (!port) throw new Error('keywordWorker.ts runs as a worker thread');
const planners = new Map<string, QueryPlanner>();
const itemLists = new Map<string, readonly Item[]>();
/** The relevance model last built per (planner round, items key): reused by the next generator over the same items. */
const models = new Map<string, RelevanceModel>();
const reply = (m: FromWorker) => port.postMessage(m);
let denseModel: string | null = null;

port.on('message', (m: ToWorker) => {
  if (m.t === 'items') {
    itemLists.set(m.key, m.items);
    return;
  }
  if (m.t === 'dropItems') {
    itemLists.delete(m.key);
    for (const k of [...models.keys()]) if (k.endsWith(`\u0000${m.key}`)) models.delete(k);
    return;
  }
  if (m.t === 'load') {
    try {
      const d = m.payload.dense;
      if (d) denseModel = d.model;
      if (d && denseVectorsOf(d.model) === undefined) {
        registerCorpusVectors(
          {
            model: d.model,
            dim: d.dim,
            items: new Map(d.ids.map((id, i) => [id, d.data.subarray(i * d.dim, (i + 1) * d.dim)])),
            queries: new Map(),
          },
          d.endpoint,
        );
      }
      const { doc, itemsKey } = m.payload;
      const items = itemsKey === null ? null : (itemLists.get(itemsKey) ?? null);
      if (itemsKey !== null && !items) throw new Error(`no items sent as ${itemsKey}`);
      const modelKey = `${doc.round}\u0000${itemsKey}`;
      const planner = rebuildQueryGenerator(doc, new KeywordView(m.payload.view), items, models.get(modelKey));
      if (planner.relevance) models.set(modelKey, planner.relevance);
      planners.set(m.key, planner);
      reply({ t: 'loaded', key: m.key });
    } catch (e) {
      reply({ t: 'loaded', key: m.key, error: e instanceof Error ? e.message : String(e) });
    }
    return;
  }
  if (m.t === 'release') {
    planners.delete(m.key);
    return;
  }
  const planner = planners.get(m.key);
  if (!planner) {
    reply({ t: 'error', id: m.id, message: `no generator loaded as ${m.key}` });
    return;
  }
  // The query's vector (from the serving thread's embeddings endpoint) for the dense features.
  if (m.vector && denseModel !== null) denseVectorsOf(denseModel)?.addQuery(m.t === 'rank' ? m.req.text : m.text, m.vector);
  if (m.t === 'rank') {
    Promise.resolve()
      .then(() => planner.rank(m.req))
      .then(
        (ranked) => reply({ t: 'ranked', id: m.id, ranked }),
        (e: unknown) => reply({ t: 'error', id: m.id, message: e instanceof Error ? e.message : String(e) }),
      );
    return;
  }
  Promise.resolve()
    .then(() => planner.plan(m.text))
    .then(
      (keywords) => reply({ t: 'result', id: m.id, keywords }),
      (e: unknown) =>
        reply(
          e instanceof NoSearchableTerms
            ? { t: 'noTerms', id: m.id }
            : { t: 'error', id: m.id, message: e instanceof Error ? e.message : String(e) },
        ),
    );
});
