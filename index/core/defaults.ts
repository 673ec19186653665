/**
 * Every default of the project in one place: the method's settings (the paper's where it
 * gives one), the retrieval and decoding parameters, and the limits of the HTTP servers.
 * Schemas (`RunConfigSchema`, the server limits, the LLM options), command-line help and
 * the components themselves read their defaults from here, so a default is changed once.
 * It lives at the bottom (index/) because every folder needs some of it.
 */

/** Keyword budget K_max on both sides (paper: 30). */
export const K_MAX = 30;

export const DEFAULTS = deepFreeze({
  /** Keyword budget K_max on both sides. */
  kMax: K_MAX,
  /**
   * BM25 over keyword words (Robertson & Zaragoza 2009; Lucene's defaults): k1 ∈ [0, 3]
   * saturates term frequency, b ∈ [0, 1] normalises document length.
   */
  bm25: { k1: 1.2, b: 0.75 },
  /** Decoding (paper): rollouts at temperature 1.0 without nucleus truncation; indexing and evaluation at 0.7, top-p 0.8. */
  decoding: {
    rollout: { temperature: 1.0, topP: 1.0 },
    index: { temperature: 0.7, topP: 0.8 },
  },
  /**
   * A co-evolution run: the paper's R = 5 rounds and G = 8; GRPO epochs per half-round
   * fewer than the paper's 10 / 5 (which trained 4B LLMs): the embedded planner's GRPO moves
   * two parameters (stop term and α) and the item policy's four query-side weights, which
   * settle within a few epochs, and NFCorpus's 5 folds stay within 15 minutes on 2 cores.
   */
  run: {
    seed: 1,
    folds: 5,
    evalFraction: 0.2,
    rounds: 5,
    groupSize: 8,
    queryEpochs: 3,
    itemEpochs: 3,
    sftEpochs: 5,
    /** Learning rate of the item policy's GRPO updates (Adagrad). */
    lr: 0.3,
    /** Dev split carved from the training queries: a half-round whose dev F1 falls is not adopted. */
    devFraction: 0.2,
    /** A half-round is adopted when its mean dev gain is at least this many standard errors (and not negative). */
    adoptZ: 1,
    /**
     * What the adoption test pairs: 'leaveout' (item half-rounds: the dev queries and every core
     * training query scored as held out against items decoded without its group's offers;
     * query half-rounds: the dev queries), 'dev' (the dev queries), 'pooled' or 'crossfit'.
     */
    adoptOn: 'leaveout' as 'dev' | 'pooled' | 'crossfit' | 'leaveout',
    /** Inner folds of the core training queries for `adoptOn: 'crossfit'` (a shadow half-round per fold). */
    crossfitFolds: 2,
    /** Groups of core training queries that `adoptOn: 'leaveout'` leaves out together (one query each when there are fewer). */
    leaveOutGroups: 10,
    /**
     * How α is tuned on training queries whose judgements also fitted the relevance model:
     * 'insample' (planned as held out with the model fitted on them) or 'crossfit' (each of
     * `alphaFolds` inner folds planned with a model fitted without it; crossfit.ts tuneAlpha).
     */
    alphaTuning: 'insample' as 'insample' | 'crossfit',
    alphaFolds: 5,
    /**
     * After the rounds, refit the served step on every training query (core and dev): the
     * relevance model refitted with the run's options, α tuned on them, the items re-indexed
     * by the step's item policy with all of them offering (refit.ts refitStep).
     */
    refit: true,
    /** Refit only when a cross-fitted learning curve over the training queries says |dev| more queries help (refit.ts refitTest). */
    refitTest: false,
    /**
     * The refit test's z: the refit stands when the curve's mean gain is at least z standard
     * errors (1: a half-round's rule, the refit must earn its place; 0: declined only when the
     * curve falls; -1: declined only when it falls by more than one SE).
     */
    refitZ: 1,
    /** The refit's α: 'tune' (tuned again on every training query against the refit's index) or 'keep' (the chosen step's, as hyper-parameters are kept when a model is refitted on train + dev). */
    refitAlpha: 'tune' as 'tune' | 'keep',
    /**
     * What the final refit serves: 'keywords' (the keyword plans' matched sets, the CoGR rule),
     * 'model' (the relevance model's expected-F1 sets) or 'auto' (the model's sets when, over
     * every training query cross-fitted, they beat the keyword plans by one standard error).
     */
    servedSet: 'keywords' as 'keywords' | 'model' | 'auto',
    /**
     * Whether every matched set is cut where its own expected F1 peaks (ranking.ts
     * matchedCut): 'no', 'yes', or 'auto' (when, over the core training queries planned as
     * held out at SFT, the cut sets beat the whole ones by the adoption test).
     */
    cut: 'auto' as 'no' | 'yes' | 'auto',
    /** The served set's floor: fallback (top c by p when nothing matches), auto (and top m by p added to every set), none; c and m chosen on training queries. */
    floor: 'fallback' as 'fallback' | 'auto' | 'none',
    /** The floors m tried (0 = none) and the largest fallback c. */
    floorGrid: [0, 1, 2, 3, 5, 10, 20] as readonly number[],
    fallbackMaxCutoff: 100,
    /** The served list's depth: the served set, then the other items in the ranker's order (the depth of the baselines' runs). */
    backfill: 1000,
    /** What the query side offers items in item half-rounds: the keywords of the training queries that judge them relevant or rank them high ('labels', their names, needs the open vocabulary). */
    itemQuerySide: 'keywords' as 'labels' | 'keywords',
    /**
     * The shared vocabulary (generators/policy/vocabulary.ts): keywords are phrases several
     * items hold; a keyword of the index, or of a query's plan, is carried by at least
     * minCarriers items; a planned keyword shares a word with its query or co-occurs with one
     * at NPMI ≥ relatedness (generators/planner/related.ts).
     */
    vocabulary: 'shared' as 'shared' | 'open',
    minCarriers: 3,
    relatedness: 0.7,
    /**
     * With a run's embeddings model (--embeddings): a planned keyword is at cosine ≥ this to
     * its query under that encoder (0.3, the cut keyword audits call "related"); -1: no such rule.
     */
    keywordCosine: 0.3,
    itemRankDepth: 20,
    clip: 0.2,
    klCoef: 0,
    beta: 1,
    dropDegenerateGroups: true,
    /** How matched sets are ranked: auto (the ranker with the best nDCG@10 on the dev and training queries, chosen at SFT), model, text, mix or keywords. */
    rank: 'auto' as 'auto' | 'model' | 'text' | 'mix' | 'keywords',
  },
  /**
   * SFT (Algorithm 1): M keywords per item from the base generator (the paper's M = 10,
   * or, by default, the M of itemKeywordsGrid with the best training F1), N per pooled
   * query target (the paper's LLM targets).
   */
  sft: { itemKeywords: 10, itemKeywordsGrid: [5, 10, 20], queryKeywords: 15, lr: 0.1 },
  /** The demo: the paper's settings scaled to finish in well under a minute on 2 cores. */
  demo: { dataset: 'nfcorpus', rounds: 2, queryEpochs: 2, itemEpochs: 2, sftEpochs: 5 },
  /** The query planner (generators/planner/planner.ts). */
  planner: {
    topItems: 100,
    lambda: 20,
    lr: 0.02,
    grpoParams: 'global' as 'all' | 'terms' | 'global',
    /** ε floor of 2·Σp in ln G; L2 shrinkage of a GRPO step; bytes of per-query feature caches; most candidates per query. */
    epsilon: 1e-9,
    l2: 1e-4,
    cacheBytes: 256 << 20,
    maxCandidates: 256,
  },
  /** The relevance model (generators/planner/relevance.ts). */
  relevance: {
    analyzer: 'english' as 'english' | 'none',
    neighbours: 10,
    profileDepth: 50,
    l2: 1,
    judgements: true,
    queryTf: true,
    /** BM25 + RM3 features (generators/planner/feedback.ts) beside the text BM25 ones. */
    rm3: true,
    /** The words of the text BM25 features: wink's tokens with Porter2 (what runs stored before the option ran with) or Lucene's EnglishAnalyzer chain. */
    textAnalysis: 'wink' as 'lucene' | 'wink',
    /** Above this many distinct rows, negative rows are subsampled (seeded). */
    maxRows: 4_000_000,
    seed: 1,
  },
  /** GRPO advantages: A = (r − mean) / (std + eps). */
  grpo: { eps: 1e-6 },
  /** CoSearch's semantic grouping: inputs with token-level F1 ≥ delta share a group of at least minSize inputs. */
  grouping: { delta: 0.8, minSize: 3 },
  /** Layered reward (format → budget → result): fixed rewards of the first two layers per side. */
  layered: {
    invalidFormatReward: { query: -1, item: -1 },
    overBudgetReward: { query: 0, item: -1 },
  },
  /** The BM25 baseline's cut-off search; the text analysis of the BM25 and RM3 baselines (index/text/english.ts: `lucene`, Lucene's EnglishAnalyzer chain, or `wink`, unstemmed letter/digit runs). */
  baseline: { maxCutoff: 1000, analysis: 'lucene' as 'lucene' | 'wink' },
  /**
   * Words of one text that are analysed: an item's title or text, or a query's text, longer
   * than maxWords white-space separated words is cut after its maxWords-th word when the
   * dataset is loaded (src/datasets/common.ts CorpusBuilder); the words dropped are counted
   * and logged with the file and line, in `datasets add` and in every run that loads it.
   * Lucene's old per-field cap was 10,000 terms; no text of the shipped collections comes
   * near 100,000 (NFCorpus's longest is under 10,000).
   */
  text: { maxWords: 100_000 },
  /** `cogr serve`. */
  serve: {
    host: '127.0.0.1',
    port: 8080,
    maxQueryLength: 512,
    maxK: 1000,
    defaultK: 10,
    bodyLimit: 64 * 1024,
    keywordBudgetMs: 250,
    keywordCacheSize: 10_000,
  },
  /**
   * Catalog writes (`cogr items`, `cogr serve --writable`): the query planner's relevance
   * model is rebuilt over the items' new texts once writes have paused for refreshQuietMs,
   * and at the latest refreshMaxMs after the first write it lacks; the catalog keeps its
   * newest keepGenerations generations of a root (older ones are deleted, their changes
   * folded forward); a write is acknowledged once served, or after ackTimeoutMs (committed,
   * `served` says which generation is); a batch holds at most maxBatch items.
   */
  catalog: {
    refreshQuietMs: 2_000,
    refreshMaxMs: 30_000,
    keepGenerations: 4,
    ackTimeoutMs: 30_000,
    maxBatch: 100_000,
  },
  /** `cogr reward-server`. */
  rewardServer: {
    host: '127.0.0.1',
    port: 8081,
    bodyLimit: 8 * 1024 * 1024,
    maxBatch: 4096,
    maxTextLength: 65_536,
  },
  /**
   * Connections of both HTTP servers (`cogr serve`, `cogr reward-server`): a request (line,
   * headers and body) must arrive within requestTimeoutMs (Node's default is 300 s, nginx
   * cuts a stalled body after 60 s), its headers within headersTimeoutMs, an idle
   * keep-alive connection is closed after keepAliveTimeoutMs, the deadlines are checked
   * every timeoutCheckMs, and at most maxConnections are open, fewer when the open-file
   * limit (`ulimit -n`) minus fdReserve is lower (so connections never exhaust the
   * descriptors): beyond it a new connection closes the one that has waited longest
   * without a request being handled (a body still trickling in, or idle keep-alive).
   */
  http: {
    requestTimeoutMs: 30_000,
    headersTimeoutMs: 20_000,
    keepAliveTimeoutMs: 10_000,
    timeoutCheckMs: 1_000,
    maxConnections: 10_000,
    fdReserve: 128,
    /** Arrays and objects a JSON body may nest (checked on its bytes as they arrive, before parsing). */
    maxJsonDepth: 64,
  },
  /**
   * OpenAI-compatible endpoints. The deadline of an attempt counts from sending, so a server
   * that answers one request at a time queues the others on its side: it works while
   * concurrency × its answer time stays below the deadline (2 × 60 s against 120 s; a local
   * server at 20 s per answer has 3× to spare). A hung endpoint fails an input after 5
   * attempts (≈ 10 min), and the inputs not yet sent then fail at once.
   */
  llm: {
    concurrency: 2,
    maxRetries: 4,
    timeoutMs: 120_000,
    /**
     * Completion tokens per sample: the structured-output schema bounds an answer to
     * maxKeywords keywords of at most maxKeywordLength characters, which closes well within
     * this; a sample that still reaches it (finish_reason "length") is reported as cut off.
     */
    maxTokens: 160,
    /** Keywords a sample may hold (the schema's maxItems; the run's K_max when that is lower). */
    maxKeywords: 12,
    /** Characters of one keyword (the schema's maxLength). */
    maxKeywordLength: 60,
  },
  /**
   * `cogr llm serve`: one sequence at a time on one thread (two threads beside other load
   * collapse to a few tokens/s), at most queueSize requests waiting (then 429), a deadline
   * on every request from its arrival, a context of contextSize tokens (prompt + max_tokens
   * beyond it is a 400), at most maxN choices and maxTokens completion tokens per request.
   */
  /** The embeddings client (src/embeddings/client.ts) and the shipped embeddings server (cogr embeddings serve). */
  embeddings: { batchSize: 32, timeoutMs: 120_000, maxRetries: 2 },
  embeddingsServe: {
    host: '127.0.0.1',
    port: 8001,
    maxInputs: 256,
    maxChars: 100_000,
    bodyLimit: 4 * 1024 * 1024,
    requestTimeoutMs: 120_000,
  },
  llmServe: {
    host: '127.0.0.1',
    port: 8000,
    threads: 1,
    contextSize: 2048,
    queueSize: 16,
    requestTimeoutMs: 120_000,
    maxN: 16,
    maxTokens: 1024,
    bodyLimit: 1024 * 1024,
  },
});

type DeepReadonly<T> = { readonly [K in keyof T]: T[K] extends object ? DeepReadonly<T[K]> : T[K] };

function deepFreeze<T extends object>(o: T): DeepReadonly<T> {
  for (const v of Object.values(o)) if (typeof v === 'object' && v !== null) deepFreeze(v as object);
  return Object.freeze(o) as DeepReadonly<T>;
}
