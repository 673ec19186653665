/**
 * Entry point of the reward worker threads (loaded by Piscina through tsx). A task
 * carries a context's id and its SharedArrayBuffer-backed data; the views are
 * reconstructed once per id and thread and kept for the next tasks (the last few
 * contexts only, so that old rounds can be collected). Results are plain arrays.
 */
import { workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { KeywordView, type ViewData } from '../index/view.ts';
import { buildItemRewardCache, itemRewardsBatch, type ItemRewardCache, type ItemRewardContext } from '../rewards/itemReward.ts';
import { queryReward } from '../rewards/queryReward.ts';
import { cogrError, isCogrError } from '../index/errors.ts';
import type { ContextHandles, QueryRewardOutcome, WorkerTask, WorkerTestHooks } from './shared.ts';

const KEEP_VIEWS = 6;

interface Live {
  itemView: KeywordView;
  queryView: KeywordView | null;
}
const live = new Map<number, KeywordView>();
const hooks: WorkerTestHooks = (workerData as { testHooks?: WorkerTestHooks } | null)?.testHooks ?? {};

function view(id: number, data: ViewData): KeywordView {
  let v = live.get(id);
  if (!v) {
    v = new KeywordView(data);
    live.set(id, v);
    while (live.size > KEEP_VIEWS) live.delete(live.keys().next().value as number);
  } else {
    // Most recently used last.
    live.delete(id);
    live.set(id, v);
  }
  return v;
}

function views(h: ContextHandles): Live {
  return {
    itemView: view(h.itemViewId, h.itemData),
    queryView: h.queryData ? view(h.queryViewId, h.queryData) : null,
  };
}

function itemContext(h: ContextHandles): ItemRewardContext {
  const v = views(h);
  if (!v.queryView || !h.relevance) {
    throw cogrError('INVALID_ARGUMENT', 'the context has no query view or relevance data: item rewards need both');
  }
  return { itemView: v.itemView, queryView: v.queryView, relevance: h.relevance, kMax: h.kMax, beta: h.beta };
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
    case 'buildCache':
      return transferCache(buildItemRewardCache(itemContext(task.ctx), { start: task.start, end: task.end }));
    case 'itemRewards': {
      if (hooks.exitOnItem !== undefined && task.batch.some((t) => t.item === hooks.exitOnItem)) process.exit(1);
      const ctx = itemContext(task.ctx);
      if (!task.ctx.cache) throw cogrError('INVALID_ARGUMENT', 'the context has no item-reward cache: build it first');
      return itemRewardsBatch(ctx, task.ctx.cache, task.batch);
    }
    case 'queryRewards': {
      const { itemView } = views(task.ctx);
      return task.batch.map((t): QueryRewardOutcome[] =>
        t.candidates.map((c) => {
          const r = queryReward(itemView, { self: t.self, keywords: c }, t.relevant, {
            kMax: task.ctx.kMax,
            beta: task.ctx.beta,
            nRel: t.nRel,
          });
          return { reward: r.reward, nRet: r.nRet, tp: r.tp };
        }),
      );
    }
    default:
      throw cogrError('INVALID_ARGUMENT', `unknown worker task ${JSON.stringify((task as { kind?: unknown }).kind)}`);
  }
}
