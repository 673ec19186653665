/**
 * Entry point of the reward worker threads (loaded by Piscina). A task carries a
 * registered scorer's id and its SharedArrayBuffer-backed data; views and scorers are
 * reconstructed once per id and thread and kept for the next tasks (the last few only,
 * so that old rounds can be collected). Every reward is computed by the scorer
 * (rewards/scorer.ts); results are plain arrays.
 */
import { KeywordView } from '../index/view/view.ts';
import { cogrError, isCogrError } from '../index/core/errors.ts';
import { buildItemRewardCache, type ItemRewardCache } from '../rewards/itemReward.ts';
import { scorerFromData, type ItemScorer, type QueryScorer, type ScoredBatch } from '../rewards/scorer.ts';
import { Piscina } from 'piscina';
import type { ContextHandles, ViewHandle, WorkerTask } from './shared.ts';

const KEEP_VIEWS = 6;
const KEEP_SCORERS = 4;

const views = new Map<number, KeywordView>();
const scorers = new Map<number, QueryScorer | ItemScorer>();

/** Most recently used last; the oldest entries beyond `keep` are dropped. */
function remember<T>(map: Map<number, T>, id: number, make: () => T, keep: number): T {
  let v = map.get(id);
  if (v === undefined) {
    v = make();
    map.set(id, v);
    while (map.size > keep) map.delete(map.keys().next().value as number);
  } else {
    map.delete(id);
    map.set(id, v);
  }
  return v;
}

function view(h: ViewHandle): KeywordView {
  return remember(views, h.id, () => new KeywordView(h.data), KEEP_VIEWS);
}

function scorer(h: ContextHandles): QueryScorer | ItemScorer {
  return remember(
    scorers,
    h.id,
    () =>
      scorerFromData(
        h.side === 'query'
          ? { side: 'query', itemView: view(h.item), judgements: h.judgements, options: h.options }
          : { side: 'item', itemView: view(h.item), queryView: view(h.query), relevance: h.relevance, cache: h.cache, options: h.options },
      ),
    KEEP_SCORERS,
  );
}

function transferCache(c: ItemRewardCache): unknown {
  const buffers = [c.nRet.buffer, c.nTp.buffer, c.qrefOff.buffer, c.qref.buffer];
  // Piscina.move marks the wrapper movable: the buffers are transferred, not copied.
  return Piscina.move({
    [Piscina.transferableSymbol]: buffers,
    [Piscina.valueSymbol]: c,
  } as never);
}

/**
 * The task handler. Errors cross the thread boundary by structured clone, which keeps
 * only name, message and stack, so a CogrError's code is put into the message.
 */
export default function rewardWorker(task: WorkerTask): unknown {
  try {
    return handle(task);
  } catch (e) {
    if (isCogrError(e)) throw new Error(`${e.code}: ${e.message}`);
    throw e;
  }
}

function handle(task: WorkerTask): unknown {
  switch (task.kind) {
    case 'buildCache': {
      const { item, query, relevance } = task.ctx;
      return transferCache(
        buildItemRewardCache({ itemView: view(item), queryView: view(query), relevance }, { start: task.start, end: task.end }),
      );
    }
    case 'rewards':
      return scorer(task.ctx).score(task.batch) satisfies ScoredBatch<unknown>;
    default:
      throw cogrError('INVALID_ARGUMENT', `unknown worker task ${JSON.stringify((task as { kind?: unknown }).kind)}`);
  }
}
