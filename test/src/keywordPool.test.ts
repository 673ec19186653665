/**
 * Keyword generation off the event loop (src/server/keywordPool.ts), with real worker
 * threads: the real worker answers exactly what the generator answers in process; the
 * time budget falls back to the raw query while a worker is busy (held until the test
 * releases it), and the late answer
 * still fills the cache; queued requests whose budget ran out never reach a worker; a
 * full queue is refused at once; a crashed worker fails only its request and is replaced.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { KeywordView } from '../../index/view/view.ts';
import { KeywordView as View } from '../../index/view/view.ts';
import { runSft } from '../../generators/sft.ts';
import { shareAll } from '../../workers/shared.ts';
import { KeywordWorkerPool } from '../../src/server/keywordPool.ts';
import { QueryKeywordResolver } from '../../src/server/queryKeywords.ts';
import { NoSearchableTerms, type QueryKeywordSource } from '../../src/server/state.ts';
import { generatorKeywordSource } from '../../src/server/storeLoader.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';

const SCRIPTED = fileURLToPath(new URL('../fixtures/scriptedKeywordWorker.ts', import.meta.url));
const corpus = synthCorpus();
const doc = { kind: 'planner' as const, round: 0, json: null as unknown };
let itemView: KeywordView;
let inProcess: QueryKeywordSource;

beforeAll(() => {
  const relevant = new Map(corpus.queries.map((q) => [q.id, new Set(corpus.relevant.get(q.id) ?? [])]));
  const sft = runSft({ items: corpus.items, trainQueries: corpus.queries, relevant, M: 6, epochs: 2, seed: 3 });
  const entries = corpus.items.map((it) => ({
    id: it.id,
    self: it.title,
    keywords: sft.itemPolicy.decode({ id: it.id, title: it.title, text: it.text }, { greedy: true }).keywords,
  }));
  itemView = new View(shareAll(View.build('item', 0, entries).data));
  doc.json = sft.planner.toJSON();
  sft.planner.attachOpposite(itemView);
  inProcess = generatorKeywordSource(sft.planner, { temperature: 0 });
});

const pools: KeywordWorkerPool[] = [];
afterAll(async () => {
  for (const p of pools) await p.close();
});
function pool(opts: ConstructorParameters<typeof KeywordWorkerPool>[0] = {}): KeywordWorkerPool {
  const p = new KeywordWorkerPool(opts);
  pools.push(p);
  return p;
}

describe('the real keyword worker', () => {
  it('answers exactly what the query planner answers in process', async () => {
    const p = pool({ size: 2 });
    await p.load('k1', { doc: doc as never, view: itemView.data }, { key: 'dataset', items: corpus.items });
    const texts = [...corpus.queries.map((q) => q.text), 't0w3 t1w4 study', 'nothing known here'];
    // Keywords, or the refusal of a text none of whose words the items know (NoSearchableTerms).
    const outcome = (p: Promise<string[]>) =>
      p.then(
        (k) => ({ keywords: k }),
        (e: unknown) => ({ refused: e instanceof NoSearchableTerms ? 'no_terms' : String(e) }),
      );
    const got = await Promise.all(texts.map((t) => outcome(p.plan('k1', t))));
    for (let i = 0; i < texts.length - 1; i++)
      expect(got[i]).toEqual(await outcome(inProcess.keywords(texts[i], new AbortController().signal)));
    expect(got.some((k) => 'keywords' in k && k.keywords.length > 0)).toBe(true);
    // A text no item knows a word of: the bare planner would offer the keywords of the
    // items likeliest a priori; the served one refuses it, and search answers no_terms.
    expect(await outcome(inProcess.keywords(texts.at(-1)!, new AbortController().signal))).toMatchObject({
      keywords: expect.arrayContaining([expect.any(String)]),
    });
    expect(got.at(-1)).toEqual({ refused: 'no_terms' });
    // A generator that cannot be rebuilt fails the load, naming why.
    await expect(p.load('bad', { doc: { ...doc, json: { version: 99 } } as never, view: itemView.data }, null)).rejects.toMatchObject({
      code: 'WORKER_ERROR',
    });
  });
});

describe('the pool', () => {
  it('lets the budget fall back while a worker is busy; the late answer fills the cache', async () => {
    const p = pool({ size: 1, workerEntry: SCRIPTED });
    await p.load('k', { doc: doc as never, view: itemView.data }, null);
    const plans: Promise<string[]>[] = [];
    const source: QueryKeywordSource = {
      name: 'scripted',
      keywords: (text, signal) => {
        const plan = p.plan('k', text, signal);
        plans.push(plan);
        return plan;
      },
    };
    const resolver = new QueryKeywordResolver({ budgetMs: 20, cacheSize: 10 });
    // The worker is held until the test releases it: never faster than the budget, however busy the machine.
    const releaseDir = mkdtempSync(join(tmpdir(), 'cogr-pool-'));
    onTestFinished(() => rmSync(releaseDir, { recursive: true, force: true }));
    const release = join(releaseDir, 'release');
    const held = `hold ${release}`;
    // The event loop stays free while the worker works: a timer fires before the answer.
    const order: string[] = [];
    const timer = new Promise<void>((r) => setTimeout(() => (order.push('timer'), r()), 1));
    const first = await resolver.resolve(source, 1, held);
    order.push('resolved');
    await timer;
    expect(first.fallback).toEqual({ reason: 'timeout', message: 'keyword generation exceeded 20 ms' });
    expect(order[0]).toBe('timer');
    // Meanwhile queued requests run out of budget and are dropped before reaching the worker.
    const dropped = await resolver.resolve(source, 1, 'never planned');
    expect(dropped.fallback?.reason).toBe('timeout');
    expect(p.queued).toBe(0);
    // The held generation finishes and fills the cache.
    writeFileSync(release, '');
    expect(await plans[0]).toEqual(['hold', release]);
    await new Promise((r) => setImmediate(r));
    const again = await resolver.resolve(source, 1, held);
    // (keywords normalised: the file's path loses its edge punctuation)
    expect(again).toMatchObject({
      keywords: ['hold', expect.stringContaining('release')],
      source: 'scripted',
      cached: true,
      fallback: null,
    });
    // The dropped one never ran: it is not cached and is generated now.
    const now = await new QueryKeywordResolver({ budgetMs: 5000, cacheSize: 10 }).resolve(source, 1, 'never planned');
    expect(now.keywords).toEqual(['never', 'planned']);
  });

  it('refuses at once when the queue is full, and replaces a crashed worker', async () => {
    const p = pool({ size: 1, maxQueue: 1, workerEntry: SCRIPTED });
    await p.load('k', { doc: doc as never, view: itemView.data }, null);
    const busy = p.plan('k', 'block 300');
    const queued = p.plan('k', 'second');
    await expect(p.plan('k', 'third')).rejects.toThrow('the keyword workers are busy (1 requests waiting)');
    expect(await busy).toEqual(['block', '300']);
    expect(await queued).toEqual(['second']);
    await expect(p.plan('k', 'crash')).rejects.toMatchObject({ code: 'WORKER_ERROR' });
    // The replacement has the generator loaded and answers.
    expect(await p.plan('k', 'after crash')).toEqual(['after', 'crash']);
  });

  it('rebuilds a generator over new items in new workers while the old ones keep answering', async () => {
    const p = pool({ size: 2, workerEntry: SCRIPTED });
    await p.load('k1', { doc: doc as never, view: itemView.data }, { key: 'a', items: corpus.items });
    // Over the same items: loaded into the workers serving (a catalog write's new view).
    await p.load('k2', { doc: doc as never, view: itemView.data }, { key: 'a', items: corpus.items });
    // Over new items: a rebuild, held until the test says; the workers serving answer meanwhile.
    const dir = mkdtempSync(join(tmpdir(), 'cogr-pool-rolling-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const release = join(dir, 'release');
    let loaded = false;
    const rebuild = p
      .load(`hold:${release}`, { doc: doc as never, view: itemView.data }, { key: 'b', items: corpus.items.slice(1) })
      .then(() => {
        loaded = true;
      });
    for (let i = 0; i < 6; i++) expect(await p.plan('k2', `during ${i}`)).toEqual(['during', String(i)]);
    expect(loaded).toBe(false);
    writeFileSync(release, '');
    await rebuild;
    expect(p.size).toBe(2);
    expect(await p.plan(`hold:${release}`, 'new one')).toEqual(['new', 'one']);
    expect(await p.plan('k2', 'old one')).toEqual(['old', 'one']);
  });
});
