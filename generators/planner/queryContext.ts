/**
 * What the planner knows of a query against the attached item view, built once and cached
 * (`PlannerContexts`): p over the view's ordinals and E = Σp (from the relevance model's
 * `queryProbabilities`, which needs no dense feature matrix), its label, its
 * candidate keywords (the keywords and titles of its top items by p and its own 1–3-grams
 * the view knows, its own {q} and label left out), and the starting state of a plan per
 * mode (held out or not: U₀ and each candidate's Σp and count outside it). The per-plan
 * scratch arrays sized by the view live here too.
 */
import { textTokens } from '../../index/text/analyzer.ts';
import { cogrError } from '../../index/core/errors.ts';
import { KEYWORD_MAX_CHARS, KEYWORD_MAX_WORDS, normalizeKeyword, normalizeSelf } from '../../index/text/normalize.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { STOP_WORDS } from '../policy/stopwords.ts';
import type { PlannerConfig, RelevanceSource } from './config.ts';
import { denseVectorsOf, TEXT_SCORE_COLUMN } from './relevance.ts';
import { Relatedness } from './related.ts';

/** Longest run of query words looked up as an item's title. */
const MAX_NAME_WORDS = 32;

/** No keyword ordinal. */
const NONE = -1;

/** Per-query cache: probabilities over view ordinals, candidates, start states. */
export interface QueryContext {
  text: string;
  p: Float64Array | null;
  /** The query's normalised text BM25 over the view's ordinals (the relevance model's `textScoreColumn`), computed with p. */
  textScores: Float64Array | null;
  pVersion: number;
  E: number;
  /** Candidate keyword ordinals (sorted) for this p and view; own keys excluded. */
  cands: Int32Array | null;
  /** The candidates before the encoder's rule (`keywordCosine`), built ahead by `prefetchKeywordVectors` for `cands`. */
  lexical: number[] | null;
  selfO: number;
  labelO: number;
  label: string | null;
  /** Items' titles (2+ words) the query's text holds, as keyword ordinals and surface forms: the plan starts with them (config `names`). */
  namesO: number[];
  names: string[];
  /** The starting state per mode (0: planned as held out, 1: with its own {q} and label): U₀ and every candidate's (Σp, count) outside it. */
  start: [StartState | null, StartState | null];
}

export interface StartState {
  U0: Int32Array;
  S0: number;
  dS: Float64Array;
  dN: Int32Array;
}

function words(text: string): string[] {
  const s = normalizeSelf(text);
  return s.length === 0 ? [] : s.split(' ');
}

/** A query's label: null when its own string is within the keyword limits, else its 8 highest-idf content words in order. */
export function queryLabel(relevance: RelevanceSource, text: string): string | null {
  const ws = words(text);
  if (ws.length === 0) return null;
  if (ws.length <= KEYWORD_MAX_WORDS && ws.join(' ').length <= KEYWORD_MAX_CHARS) return null;
  const an = relevance.analyzer;
  const content: { w: string; i: number; idf: number }[] = [];
  ws.forEach((w, i) => {
    if (STOP_WORDS.has(w)) return;
    const t = relevance.textWords ? relevance.textWords(w) : textTokens(w, an);
    if (t.length === 0) return;
    content.push({ w, i, idf: relevance.wordIdf(t[0]) });
  });
  const keep = new Set(
    [...content]
      .sort((a, b) => b.idf - a.idf || a.i - b.i)
      .slice(0, KEYWORD_MAX_WORDS)
      .map((x) => x.i),
  );
  let out = content.filter((x) => keep.has(x.i)).map((x) => x.w);
  while (out.length > 0 && out.join(' ').length > KEYWORD_MAX_CHARS) out = out.slice(0, -1);
  return out.length ? normalizeKeyword(out.join(' ')) : null;
}

/** The planner's attached item view and the contexts of the queries planned against it. */
export class PlannerContexts {
  view: KeywordView | null = null;
  /** View ordinal → relevance-model ordinal (−1: unknown to the model). */
  viewToModel: Int32Array | null = null;
  // Scratch of one plan: membership of U per item, and each candidate's slot stamped per plan.
  inU = new Uint8Array(0);
  slot = new Int32Array(0);
  slotStamp = new Int32Array(0);
  stampEpoch = 0;
  private readonly contexts = new Map<string, QueryContext>();
  private cacheBytes = 0;
  private titles: Uint8Array | null = null;
  private related: Relatedness | null = null;

  constructor(
    private readonly relevance: RelevanceSource,
    private readonly config: PlannerConfig,
  ) {
    this.related = Relatedness.of(relevance, config.relatedness);
  }

  /** Attach the frozen item index (clears per-query probabilities, candidates and start states). */
  attach(view: KeywordView | null): void {
    this.view = view;
    this.viewToModel = null;
    this.titles = null;
    for (const c of this.contexts.values()) {
      c.p = null;
      c.textScores = null;
      c.cands = null;
      c.lexical = null;
      c.start = [null, null];
    }
    if (!view) return;
    const map = new Int32Array(view.size);
    for (let e = 0; e < view.size; e++) map[e] = this.relevance.itemOrdinal(view.id(e));
    this.viewToModel = map;
    this.inU = new Uint8Array(view.size);
    this.slot = new Int32Array(view.numKeywords);
    this.slotStamp = new Int32Array(view.numKeywords);
  }

  requireView(): KeywordView {
    if (!this.view) throw cogrError('INVALID_ARGUMENT', 'the query planner has no item index attached');
    return this.view;
  }

  /** Drop cached per-query features, probabilities and candidates. */
  clear(): void {
    this.contexts.clear();
    this.cacheBytes = 0;
  }

  /** Per-query features, probabilities (over view ordinals) and candidates, cached. */
  get(q: { id: string; text: string }): QueryContext {
    const c = this.scored(q);
    if (!c.cands) {
      const lexical = c.lexical ?? this.lexicalCandidates(q.text, c.p!, [c.selfO, c.labelO, ...c.namesO]);
      c.lexical = null;
      c.cands = this.judgedCandidates(q.text, c.p!, lexical);
    }
    return c;
  }

  /**
   * Under the encoder's keyword rule (`keywordCosine`, its vectors fetched from an endpoint
   * as they are first needed): the vectors every one of these queries' candidates lacks,
   * fetched in one call before the queries are planned one by one. Planned alone, each query
   * asks for the few its candidates lack, and a pass over many queries waits on one round
   * trip per query. The candidates are the ones \`get\` then judges; nothing else changes.
   */
  prefetchKeywordVectors(queries: readonly { id: string; text: string }[]): void {
    // Nothing to judge against without an attached view (a planner loaded but not yet attached).
    if (this.config.keywordCosine === null || queries.length < 2 || !this.view) return;
    const model = this.config.keywordModel ?? this.relevance.embeddingsModel ?? null;
    const dense = model !== null ? denseVectorsOf(model) : undefined;
    if (!dense?.canFetch) return;
    const view = this.requireView();
    const texts = new Set<string>();
    for (const q of queries) {
      const c = this.scored(q);
      if (c.cands) continue;
      c.lexical ??= this.lexicalCandidates(q.text, c.p!, [c.selfO, c.labelO, ...c.namesO]);
      if (c.lexical.length === 0) continue;
      texts.add(q.text);
      for (const k of c.lexical) texts.add(view.surface(k));
    }
    if (texts.size > 0) dense.vectorsOf([...texts]);
  }

  /** p over the view's ordinals. */
  probabilities(q: { id: string; text: string }): Float64Array {
    return this.scored(q).p!;
  }

  /** A query's context with p and the text scores over the view (its candidates only when `get` asked for them). */
  private scored(q: { id: string; text: string }): QueryContext {
    const key = `${q.id}\u0001${q.text}`;
    let c = this.contexts.get(key);
    const view = this.requireView();
    if (!c) {
      // What a context holds: p, the text scores and the start states over the view's
      // items (the features are the relevance model's, memoised there when asked for).
      const bytes = view.size * 8 * 3;
      if (this.cacheBytes + bytes > this.config.cacheBytes) {
        this.contexts.clear();
        this.cacheBytes = 0;
      }
      const label = this.config.labels ? queryLabel(this.relevance, q.text) : null;
      c = {
        text: q.text,
        p: null,
        textScores: null,
        pVersion: -1,
        E: 0,
        cands: null,
        lexical: null,
        selfO: NONE,
        labelO: NONE,
        label,
        namesO: [],
        names: [],
        start: [null, null],
      };
      this.contexts.set(key, c);
      this.cacheBytes += bytes;
    }
    const version = this.relevance.weightsVersion;
    if (!c.p || c.pVersion !== version) {
      const m = this.modelScores(q);
      const map = this.viewToModel!;
      const p = new Float64Array(view.size);
      const text = new Float64Array(view.size);
      let E = 0;
      for (let e = 0; e < view.size; e++) {
        if (map[e] < 0) continue;
        p[e] = m.p[map[e]];
        text[e] = m.text[map[e]];
        E += p[e];
      }
      c.p = p;
      c.textScores = text;
      c.E = E;
      c.pVersion = version;
      c.cands = null;
      c.lexical = null;
      c.start = [null, null];
      c.selfO = this.selfOrdinal(q.text);
      c.labelO = c.label ? this.ordinalOf(c.label) : NONE;
      if (this.config.names) {
        c.namesO = this.namesIn(q.text, c.selfO);
        c.names = c.namesO.map((o) => view.surface(o));
      }
    }
    return c;
  }

  /**
   * The query's text BM25 over each item's title and description, normalised by the best
   * item (the relevance model's `sTfNorm` feature, query words weighted by their counts, or
   * `sNorm` for models without it; 0 when the item shares no word with the query), over
   * the attached view's ordinals (cached with p).
   */
  textScores(q: { id: string; text: string }): Float64Array {
    return this.scored(q).textScores!;
  }

  /** p and the text scores over the relevance model's ordinals, in one pass (its `queryScores`, or read from its dense features). */
  private modelScores(q: { id: string; text: string }): { p: Float64Array; text: Float64Array } {
    const rel = this.relevance;
    if (rel.queryScores) return rel.queryScores(q);
    const x = rel.features(q);
    const d = rel.dim;
    const col = rel.textScoreColumn ?? TEXT_SCORE_COLUMN;
    const text = new Float64Array(x.length / d);
    for (let i = 0; i < text.length; i++) text[i] = x[i * d + col];
    return { p: rel.probabilities(q, x), text };
  }

  /** View keyword ordinal of a raw keyword (−1 when the index does not know it). */
  ordinalOf(raw: string): number {
    return this.requireView().ordinalOfKeyword(raw);
  }
  private selfOrdinal(text: string): number {
    const o = this.requireView().probeKeywordOrdinals({ self: text, keywords: [] });
    return o.length ? o[0] : NONE;
  }

  /**
   * Candidate keyword ordinals: keywords and titles of the top-T items by p, and the query's
   * own 1–3-grams; its own {q}, label and names excluded. Under the shared vocabulary's rules
   * (config `minCarriers`, `relatedness`): only keywords at least that many items carry, no
   * item's title, and only keywords related to the query (related.ts). The encoder's rule
   * (`keywordCosine`) is judgedCandidates'.
   */
  private lexicalCandidates(text: string, p: Float64Array, own: readonly number[]): number[] {
    const view = this.requireView();
    const d = view.data;
    const n = view.size;
    const vocab = this.config.minCarriers > 0;
    const out = new Set<number>();
    for (const e of topByP(p, Math.min(this.config.topItems, n))) {
      for (let j = d.fwdOff[e]; j < d.fwdOff[e + 1]; j++) out.add(d.fwd[j]);
      if (d.self[e] >= 0 && !vocab) out.add(d.self[e]);
    }
    const ws = words(text);
    for (let i = 0; i < ws.length; i++) {
      if (STOP_WORDS.has(ws[i])) continue;
      for (let m = 1; m <= 3 && i + m <= ws.length; m++) {
        if (STOP_WORDS.has(ws[i + m - 1])) continue;
        const o = this.ordinalOf(ws.slice(i, i + m).join(' '));
        if (o >= 0) out.add(o);
      }
    }
    for (const o of own) out.delete(o);
    let list = [...out];
    if (vocab) {
      const titles = this.selfKeys();
      const min = this.config.minCarriers;
      list = list.filter((k) => sharedKeyword(view, titles, k, min));
    }
    const tau = this.config.relatedness;
    if (tau !== null && this.related) {
      const rel = this.related.forQuery(text);
      list = list.filter((k) => rel(view.surface(k)) >= tau);
    }
    return list;
  }

  /** The lexical candidates the encoder's rule keeps (`keywordCosine`), at most `maxCandidates` of them (the likeliest items' first), sorted. */
  private judgedCandidates(text: string, p: Float64Array, lexical: readonly number[]): Int32Array {
    const view = this.requireView();
    const d = view.data;
    let list = [...lexical];
    const minCos = this.config.keywordCosine;
    if (minCos !== null && list.length > 0) {
      const cos = keywordCosines(
        this.relevance,
        text,
        list.map((k) => view.surface(k)),
        this.config.keywordModel,
      );
      list = list.filter((_, i) => cos[i] >= minCos);
    }
    const cap = this.config.maxCandidates;
    if (cap > 0 && list.length > cap) {
      const mean = (k: number) => {
        let s = 0;
        for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) s += p[d.post[j]];
        return s / (d.postOff[k + 1] - d.postOff[k] + 1);
      };
      const m = new Map(list.map((k) => [k, mean(k)]));
      list = list.sort((a, b) => m.get(b)! - m.get(a)! || a - b).slice(0, cap);
    }
    return Int32Array.from(list).sort();
  }

  /** Per keyword ordinal of the attached view, 1 when it is some item's title ({i}) and no item's keyword (titleOnlyKeys). */
  private selfKeys(): Uint8Array {
    this.titles ??= titleOnlyKeys(this.requireView());
    return this.titles;
  }

  /**
   * The items' titles of two to KEYWORD_MAX_WORDS words that the query's text holds as a run
   * of its words (by match key), longest first, none inside another; not the query's own {q}.
   */
  private namesIn(text: string, selfO: number): number[] {
    const view = this.requireView();
    const ws = words(text).slice(0, MAX_NAME_WORDS);
    const titles = this.selfKeys();
    const found: { o: number; i: number; m: number }[] = [];
    for (let m = Math.min(ws.length, KEYWORD_MAX_WORDS); m >= 2; m--) {
      for (let i = 0; i + m <= ws.length; i++) {
        if (found.some((f) => i >= f.i && i + m <= f.i + f.m)) continue;
        const o = view.probeKeywordOrdinals({ self: ws.slice(i, i + m).join(' '), keywords: [] })[0];
        if (o === undefined || o === selfO || titles[o] !== 1 || found.some((f) => f.o === o)) continue;
        if (normalizeKeyword(view.surface(o)) === null) continue;
        found.push({ o, i, m });
      }
    }
    return found.map((f) => f.o);
  }

  /** U₀ and the candidates' (Σp, count) outside it, per mode (cached with the candidates). */
  startState(ctx: QueryContext, asHeldOut: boolean): StartState {
    const mode = asHeldOut ? 0 : 1;
    const cached = ctx.start[mode];
    if (cached) return cached;
    const d = this.requireView().data;
    const p = ctx.p!;
    const inU = this.inU;
    const U: number[] = [];
    let S0 = 0;
    // Held out: the query's own {q} and label are not in U₀ (the names of other items are).
    for (const o of asHeldOut ? ctx.namesO : [ctx.selfO, ctx.labelO, ...ctx.namesO]) {
      if (o < 0) continue;
      for (let j = d.postOff[o]; j < d.postOff[o + 1]; j++) {
        const e = d.post[j];
        if (inU[e]) continue;
        inU[e] = 1;
        U.push(e);
        S0 += p[e];
      }
    }
    const cand = ctx.cands!;
    const dS = new Float64Array(cand.length);
    const dN = new Int32Array(cand.length);
    for (let c = 0; c < cand.length; c++) {
      const k = cand[c];
      let ds = 0;
      let dn = 0;
      for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) {
        const e = d.post[j];
        if (!inU[e]) {
          ds += p[e];
          dn++;
        }
      }
      dS[c] = ds;
      dN[c] = dn;
    }
    for (const e of U) inU[e] = 0;
    const st: StartState = { U0: Int32Array.from(U), S0, dS, dN };
    ctx.start[mode] = st;
    return st;
  }
}

/** The `k` entity ordinals with the highest p (ties: lower ordinal first), best first. */
export function topByP(p: Float64Array, k: number): number[] {
  const n = p.length;
  if (k <= 0) return [];
  if (k >= n) return Array.from({ length: n }, (_, i) => i).sort((a, b) => p[b] - p[a] || a - b);
  // binary heap of the best k (min at the root)
  const heap: number[] = [];
  const worse = (a: number, b: number) => p[a] < p[b] || (p[a] === p[b] && a > b);
  for (let i = 0; i < n; i++) {
    if (heap.length < k) {
      heap.push(i);
      let c = heap.length - 1;
      while (c > 0) {
        const pa = (c - 1) >> 1;
        if (worse(heap[c], heap[pa])) {
          [heap[c], heap[pa]] = [heap[pa], heap[c]];
          c = pa;
        } else break;
      }
    } else if (worse(heap[0], i)) {
      heap[0] = i;
      let c = 0;
      for (;;) {
        const l = 2 * c + 1;
        const r = l + 1;
        let m = c;
        if (l < k && worse(heap[l], heap[m])) m = l;
        if (r < k && worse(heap[r], heap[m])) m = r;
        if (m === c) break;
        [heap[c], heap[m]] = [heap[m], heap[c]];
        c = m;
      }
    }
  }
  return heap.sort((a, b) => p[b] - p[a] || a - b);
}

/** Per keyword ordinal of `view`, 1 when it is some item's title ({i}) and no item's keyword. */
export function titleOnlyKeys(view: KeywordView): Uint8Array {
  const d = view.data;
  const t = new Uint8Array(view.numKeywords);
  for (let e = 0; e < d.self.length; e++) if (d.self[e] >= 0) t[d.self[e]] = 1;
  for (let j = 0; j < d.fwd.length; j++) t[d.fwd[j]] = 0;
  return t;
}

/**
 * The shared vocabulary's rule for a query keyword (config `minCarriers` > 0): keyword ordinal
 * `k` of `view` is some item's keyword, not only a title (`titleOnly`: titleOnlyKeys), and at
 * least `minCarriers` items carry it. The planner's candidates and the LLM's vocabulary
 * (src/evolve/sftData.ts queryVocabulary) both keep to it.
 */
export function sharedKeyword(view: KeywordView, titleOnly: Uint8Array, k: number, minCarriers: number): boolean {
  return titleOnly[k] === 0 && view.keywordDf(k) >= minCarriers;
}

/**
 * The cosine of each keyword (surface form) with a query text under an embeddings model (the
 * planner's and the oracle's `keywordCosine` rule): `model`, or the relevance source's own
 * when null; the vectors registered in this thread (relevance.ts DenseVectors), the missing
 * ones fetched in one call.
 */
export function keywordCosines(
  relevance: RelevanceSource,
  text: string,
  keywords: readonly string[],
  model: string | null = null,
): Float64Array {
  model ??= relevance.embeddingsModel ?? null;
  if (model === null)
    throw cogrError('INVALID_ARGUMENT', "the planner's keywordCosine rule needs a relevance model with embeddings (none is configured)");
  const dense = denseVectorsOf(model);
  if (!dense)
    throw cogrError(
      'DATA_MISSING',
      `the planner's keywordCosine rule needs ${model} vectors: give --embeddings URL of an endpoint serving ${model}`,
      {
        embeddings: model,
      },
    );
  const out = new Float64Array(keywords.length);
  if (keywords.length === 0) return out;
  const [q, ...ks] = dense.vectorsOf([text, ...keywords]);
  let qq = 0;
  for (let j = 0; j < q.length; j++) qq += q[j] * q[j];
  ks.forEach((k, i) => {
    let dot = 0;
    let kk = 0;
    for (let j = 0; j < k.length; j++) {
      dot += q[j] * k[j];
      kk += k[j] * k[j];
    }
    out[i] = qq > 0 && kk > 0 ? dot / Math.sqrt(qq * kk) : 0;
  });
  return out;
}
