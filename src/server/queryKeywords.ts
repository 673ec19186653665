/**
 * Query keywords for the search API: the served round's query-side generator, behind
 * an LRU cache and a time budget. When the generator fails or runs out of time the
 * search falls back to the raw query string as its only keyword, and says so. A text with
 * no searchable term (no word at all, or — the planner says — none the served items
 * know) is `no_terms`: nothing is searched for it.
 *
 * The cache is keyed by (the snapshot's keyword epoch, normalised query text), so a
 * generation switch never serves keywords of the previous round's generator; a catalog
 * write keeps the epoch (the same generator: the write changes which items the keywords
 * match, not the keywords), a refresh of the planner's items changes it. Requests for the same
 * text while its keywords are being generated share that one generation; an answer that
 * arrives after its budget still fills the cache; when every request waiting for it has
 * run out of time, the generation is cancelled (a queued one never reaches a worker).
 */
import { normalizeKeywordSet, normalizeSelf } from '../../index/text/normalize.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { KeywordPoolBusy } from './keywordPool.ts';
import { textTokens } from '../../index/text/analyzer.ts';
import { NoSearchableTerms, type QueryKeywordSource } from './state.ts';

export type FallbackReason = 'timeout' | 'busy' | 'error' | 'no_generator' | 'empty' | 'no_terms';

export interface ResolvedKeywords {
  /** Normalised generated keywords (empty on fallback). */
  keywords: string[];
  /** Where they came from: the source's name, or "raw" on fallback. */
  source: string;
  cached: boolean;
  fallback: { reason: FallbackReason; message: string } | null;
}

/** A small LRU map (Map keeps insertion order; a hit moves the key to the end). */
export class LruCache<V> {
  private readonly map = new Map<string, V>();
  constructor(readonly capacity: number) {}
  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: string, value: V): void {
    if (this.capacity <= 0) return;
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.capacity) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
    }
  }
  delete(key: string): void {
    this.map.delete(key);
  }
  get size(): number {
    return this.map.size;
  }
  clear(): void {
    this.map.clear();
  }
}

export interface KeywordResolverOptions {
  /** Time budget for one generation, milliseconds. */
  budgetMs: number;
  cacheSize: number;
  onCacheHit?: () => void;
  onCacheMiss?: () => void;
  onFallback?: (reason: FallbackReason) => void;
}

/** One generation in flight, shared by every request that asks for the same text meanwhile. */
interface InFlight {
  promise: Promise<string[]>;
  controller: AbortController;
  waiting: number;
}

export class QueryKeywordResolver {
  private readonly cache: LruCache<string[] | { noTerms: string }>;
  private readonly inflight = new Map<string, InFlight>();
  constructor(private readonly opts: KeywordResolverOptions) {
    this.cache = new LruCache(opts.cacheSize);
  }

  private fallback(reason: FallbackReason, message: string): ResolvedKeywords {
    this.opts.onFallback?.(reason);
    return { keywords: [], source: 'raw', cached: false, fallback: { reason, message } };
  }

  /** Start (or join) the generation of one text; its answer fills the cache even when it comes too late for its first caller. */
  private start(source: QueryKeywordSource, key: string, text: string): InFlight {
    let f = this.inflight.get(key);
    if (f) return f;
    const controller = new AbortController();
    const promise = Promise.resolve().then(() => source.keywords(text, controller.signal));
    f = { promise, controller, waiting: 0 };
    this.inflight.set(key, f);
    promise.then(
      (out) => this.cache.set(key, normalizeKeywordSet(out).keywords),
      // A text the served data has no word for stays so for this snapshot: cached like an answer.
      (e: unknown) => {
        if (e instanceof NoSearchableTerms) this.cache.set(key, { noTerms: e.message });
      },
    );
    const done = f;
    void promise
      .finally(() => {
        if (this.inflight.get(key) === done) this.inflight.delete(key);
      })
      .catch(() => {});
    return f;
  }

  async resolve(source: QueryKeywordSource | null, version: number | string, text: string): Promise<ResolvedKeywords> {
    // A text without a single word (blank, punctuation, stop words only) is not searched,
    // whatever the generator: there is nothing to generate keywords from.
    if (textTokens(text).length === 0) return this.fallback('no_terms', new NoSearchableTerms(text, 'no_words').message);
    if (!source) return this.fallback('no_generator', 'no query-side generator is configured for this round');
    const key = `${version}\u0000${source.name}\u0000${normalizeSelf(text)}`;
    const hit = this.cache.get(key);
    if (hit) {
      this.opts.onCacheHit?.();
      if (!Array.isArray(hit)) return { ...this.fallback('no_terms', hit.noTerms), cached: true };
      // An empty set is cached too: the generator is deterministic per round, so asking again would not help.
      if (hit.length === 0) return { ...this.fallback('empty', 'the generator returned no valid keyword'), cached: true };
      return { keywords: hit, source: source.name, cached: true, fallback: null };
    }
    this.opts.onCacheMiss?.();
    const f = this.start(source, key, text);
    f.waiting++;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.opts.budgetMs);
    });
    try {
      const out = await Promise.race([f.promise, timeout]);
      if (out === 'timeout') {
        // Nobody waits any more: a request still queued for a worker is dropped.
        if (--f.waiting === 0) {
          f.controller.abort();
          if (this.inflight.get(key) === f) this.inflight.delete(key);
        }
        return this.fallback('timeout', `keyword generation exceeded ${this.opts.budgetMs} ms`);
      }
      f.waiting--;
      const { keywords } = normalizeKeywordSet(out);
      if (keywords.length === 0) return this.fallback('empty', 'the generator returned no valid keyword');
      return { keywords, source: source.name, cached: false, fallback: null };
    } catch (e) {
      f.waiting--;
      if (e instanceof NoSearchableTerms) return this.fallback('no_terms', e.message);
      if (e instanceof KeywordPoolBusy) return this.fallback('busy', e.message);
      if (isCogrError(e, 'ABORTED')) return this.fallback('timeout', `keyword generation exceeded ${this.opts.budgetMs} ms`);
      return this.fallback('error', e instanceof Error ? e.message : String(e));
    } finally {
      clearTimeout(timer);
    }
  }
}
