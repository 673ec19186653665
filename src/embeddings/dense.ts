/**
 * Dense retrieval over a corpus: the items' and queries' vectors from an embeddings
 * endpoint (client.ts, cached in a project database) and cosine ranking over them.
 *
 * `embedCorpus` opens the cache database only while it embeds (so a run or a server that
 * opens the same database afterwards is not locked out) and returns unit-length vectors
 * of every item (its title + text, as BM25 indexes it) and of every query text.
 */
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { cogrError, isCogrError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import type { Corpus, Item } from '../../index/core/types.ts';
import { cogrHome } from '../home.ts';
import { join, resolve } from 'node:path';
import { EmbeddingsClient, embeddingsTimeoutFromEnv, embedTexts, normalized, parseEmbeddingsUrl } from './client.ts';
import { DenseVectors, registerDenseVectors } from '../../generators/planner/relevance.ts';
import { SyncEmbedder, type SyncEmbedderOptions } from './syncEmbedder.ts';
import { resolveEmbeddingsUrl, storedRunEmbeddings } from './venv.ts';
import type { RunConfig } from '../run/config.ts';

export function denseItemText(item: Pick<Item, 'title' | 'text'>): string {
  if (item.title === '' || item.text.startsWith(item.title)) return item.text;
  return `${item.title} ${item.text}`;
}

/** Unit vectors of a set of ids in one matrix; cosine = dot product. */
export class DenseIndex {
  readonly ids: string[];
  readonly dim: number;
  readonly size: number;
  private readonly m: Float32Array;

  constructor(ids: readonly string[], vectors: readonly Float32Array[]) {
    if (ids.length !== vectors.length) throw cogrError('INTERNAL', `dense index: ${ids.length} ids for ${vectors.length} vectors`);
    this.ids = [...ids];
    this.size = ids.length;
    this.dim = vectors[0]?.length ?? 0;
    this.m = new Float32Array(this.size * this.dim);
    vectors.forEach((v, i) => {
      if (v.length !== this.dim)
        throw cogrError('EMBEDDINGS_FORMAT', `dense index: vector of ${ids[i]} has dimension ${v.length}, expected ${this.dim}`);
      this.m.set(normalized(v), i * this.dim);
    });
  }

  /** Cosine of a query vector with every row (the query is normalised here). */
  scores(query: Float32Array): Float64Array {
    if (query.length !== this.dim)
      throw cogrError('EMBEDDINGS_FORMAT', `a query vector has dimension ${query.length}, the items' have ${this.dim}`);
    const q = normalized(query);
    const d = this.dim;
    const out = new Float64Array(this.size);
    for (let i = 0; i < this.size; i++) {
      let s = 0;
      const o = i * d;
      for (let j = 0; j < d; j++) s += this.m[o + j] * q[j];
      out[i] = s;
    }
    return out;
  }

  /** Row indices by score (`scores(query)`), best first (ties by index), at most `limit`. */
  rank(s: Float64Array, limit = this.size): Int32Array {
    const order = Int32Array.from({ length: this.size }, (_, i) => i).sort((a, b) => s[b] - s[a] || a - b);
    return order.subarray(0, Math.min(limit, this.size));
  }
}

export interface CorpusVectors {
  model: string;
  dim: number;
  /** Vector of each item id. */
  items: Map<string, Float32Array>;
  /** Vector of each query text. */
  queries: Map<string, Float32Array>;
}

export interface EmbeddingsSetup {
  client: EmbeddingsClient;
  /** The cache database's folder (opened only while embedding); null: no cache. */
  cachePath: string | null;
}

/** The `--embeddings*` flags (commands/options.ts withEmbeddingsOptions). */
export interface EmbeddingsFlags {
  embeddings?: string;
  embeddingsModel?: string;
  embeddingsTimeout?: string;
  embeddingsCache?: string;
}

/** The client and cache from `--embeddings*` flags; null without `--embeddings`. */
export function embeddingsFromFlags(flags: EmbeddingsFlags, env: NodeJS.ProcessEnv = process.env): EmbeddingsSetup | null {
  // `none`: no encoder, said outright (round.sh passes it to every command of a round).
  if (flags.embeddings === undefined || flags.embeddings === 'none') {
    if (flags.embeddingsModel !== undefined) throw cogrError('INVALID_ARGUMENT', '--embeddings-model needs --embeddings URL');
    return null;
  }
  const baseURL = parseEmbeddingsUrl('--embeddings', flags.embeddings);
  let timeoutMs = embeddingsTimeoutFromEnv(env);
  if (flags.embeddingsTimeout !== undefined) {
    const t = flags.embeddingsTimeout.trim();
    timeoutMs = /^\d+$/.test(t) ? Number(t) : NaN;
    if (!(timeoutMs >= 1 && timeoutMs <= 86_400_000))
      throw cogrError(
        'INVALID_ARGUMENT',
        `--embeddings-timeout: expected an integer in [1, 86400000] (milliseconds), got ${JSON.stringify(flags.embeddingsTimeout)}`,
      );
  }
  return {
    client: new EmbeddingsClient({ baseURL, ...(flags.embeddingsModel !== undefined ? { model: flags.embeddingsModel } : {}), timeoutMs }),
    cachePath: flags.embeddingsCache ?? join(cogrHome(env), 'db'),
  };
}

/** embeddingsFromFlags after `--embeddings auto` is resolved (the shipped server started for this process, src/embeddings/venv.ts). */
export async function embeddingsSetupOf(flags: EmbeddingsFlags, log: Logger = silentLogger): Promise<EmbeddingsSetup | null> {
  const embeddings = await resolveEmbeddingsUrl(flags.embeddings, log);
  return embeddingsFromFlags({ ...flags, ...(embeddings !== undefined ? { embeddings } : {}) });
}

/**
 * The endpoint a stored run fitted with `runModel`'s embeddings is read with: refused without
 * one, or when the endpoint serves another model, naming both (serve, audit). Without
 * --embeddings, a run of the shipped model or of the built-in encoder gets its own
 * (venv.ts storedRunEmbeddings): only another model's run needs the flag.
 */
export async function runEmbeddingsSetup(setup: EmbeddingsSetup | null, runModel: string): Promise<EmbeddingsSetup> {
  if (setup === null)
    throw cogrError(
      'INVALID_ARGUMENT',
      `the stored run's relevance model uses ${runModel} embeddings: give --embeddings URL of an endpoint serving ${runModel}`,
      { embeddings: runModel },
    );
  const model = await setup.client.modelName();
  if (model !== runModel)
    throw cogrError(
      'INVALID_ARGUMENT',
      `--embeddings: the endpoint serves ${model}, the stored run was fitted with ${runModel}; give --embeddings-model ${runModel} or an endpoint serving it`,
      { embeddings: runModel, endpoint: model },
    );
  return setup;
}

async function withCache<T>(
  path: string | null,
  fn: (db: CogrDb | null) => Promise<T>,
  open?: CogrDb,
  log: Logger = silentLogger,
): Promise<T> {
  if (path === null) return fn(null);
  // The cache is a database this process already holds open (a command's run database): use it.
  if (open && resolve(open.path) === resolve(path)) return fn(open);
  let db: CogrDb;
  try {
    db = await openDb(path);
  } catch (e) {
    // Held by another process (a running cogr serve or evolve): the vectors are computed without it.
    if (!isCogrError(e, 'DB_LOCKED')) throw e;
    log.warn(
      `embeddings: the cache ${path} is in use by another process: every vector is asked of the endpoint and none is cached (--embeddings-cache DIR caches them elsewhere)`,
    );
    return fn(null);
  }
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Every item's and query's vector (items first, then queries), cached. */
export async function embedCorpus(
  corpus: Pick<Corpus, 'items' | 'queries'>,
  setup: EmbeddingsSetup,
  log: Logger = silentLogger,
  extraQueries: readonly string[] = [],
  openDb?: CogrDb,
): Promise<CorpusVectors> {
  return withCache(
    setup.cachePath,
    async (db) => {
      const items = await embedTexts(corpus.items.map(denseItemText), setup.client, { db, log, what: 'items' });
      const qTexts = [...new Set([...corpus.queries.map((q) => q.text), ...extraQueries])];
      const queries = await embedTexts(qTexts, setup.client, { db, log, what: 'queries' });
      if (items.dim !== queries.dim && queries.vectors.length > 0 && items.vectors.length > 0)
        throw cogrError(
          'EMBEDDINGS_FORMAT',
          `embeddings endpoint ${setup.client.baseURL}: items have dimension ${items.dim}, queries ${queries.dim}`,
        );
      // No items (an encoder that only judges keywords): the model and dimension are the queries'.
      const from = items.vectors.length > 0 ? items : queries;
      return {
        model: from.model,
        dim: from.dim,
        items: new Map(corpus.items.map((it, i) => [it.id, items.vectors[i]])),
        queries: new Map(qTexts.map((t, i) => [t, queries.vectors[i]])),
      };
    },
    openDb,
    log,
  );
}

const PROGRESS_MS = 10_000;

/** The endpoint a thread's planner asks for the vectors it lacks (keywords under `keywordCosine`): the setup's, its model and deadline. */
export function syncEndpoint(setup: EmbeddingsSetup, model: string): SyncEmbedderOptions {
  return { baseURL: setup.client.baseURL, model, timeoutMs: setup.client.timeoutMs };
}

/**
 * Register a corpus's vectors for the relevance models and planners of this thread, with the
 * endpoint (if any) asked synchronously for the texts they lack: the keywords a planner
 * judges under `keywordCosine` (generators/planner/queryContext.ts).
 */
export function registerCorpusVectors(
  v: Pick<CorpusVectors, 'model' | 'dim' | 'items' | 'queries'>,
  endpoint: SyncEmbedderOptions | null,
  log: Logger = silentLogger,
): DenseVectors {
  const dense = new DenseVectors(v.model, v.dim, v.items, v.queries);
  if (endpoint !== null) {
    const embedder = new SyncEmbedder(endpoint);
    // A line every PROGRESS_MS at most: texts fetched so far and the rate while fetching.
    let fetched = 0;
    let busyMs = 0;
    let lastLog = Date.now();
    dense.setFetcher((texts) => {
      const t0 = Date.now();
      const out = embedder.embed(texts);
      fetched += texts.length;
      busyMs += Date.now() - t0;
      if (Date.now() - lastLog >= PROGRESS_MS) {
        lastLog = Date.now();
        log.info(
          `embeddings: ${fetched} keyword texts fetched for the planner's keyword rule (${(fetched / Math.max(busyMs / 1000, 1e-3)).toFixed(0)}/s while fetching)`,
        );
      }
      return out;
    });
  }
  registerDenseVectors(dense);
  return dense;
}

/**
 * What a stored run asks of an encoder: its model (null: none), and whether the query–item
 * cosines are relevance features (every item embedded) or the encoder only judges the planned
 * keywords (`--embeddings-features no`: query and keyword texts only, no item).
 */
export type RunEncoder = Pick<RunConfig, 'embeddingsModel' | 'embeddingsFeatures'>;

/** The items a run's encoder needs vectors of: all of them with features, none for a judge only. */
export function encodedItems<T>(encoder: RunEncoder, items: readonly T[]): T[] {
  return encoder.embeddingsFeatures ? [...items] : [];
}

/**
 * For a command that loads a stored run's planner (audit, rollouts, import-generation,
 * reward-server): when the run was fitted with embeddings, the queries' vectors (and the
 * items', when they are relevance features) from `--embeddings` (refused without it, or from
 * an endpoint serving another model, naming the model), registered with that endpoint asked
 * for the keywords' (runEmbeddingsSetup, registerCorpusVectors). `openDb`: the database the
 * command holds open, used as the cache when it is the cache's. A run without embeddings:
 * nothing, and a warning when --embeddings was given.
 */
export async function registerRunEmbeddings(
  flags: EmbeddingsFlags,
  encoder: RunEncoder | null,
  corpus: Pick<Corpus, 'items' | 'queries'>,
  log: Logger,
  openDb?: CogrDb,
): Promise<void> {
  const runModel = encoder?.embeddingsModel ?? null;
  const given = await embeddingsSetupOf({ ...flags, embeddings: storedRunEmbeddings(flags.embeddings, runModel) }, log);
  if (encoder === null || runModel === null) {
    if (given !== null) log.warn('--embeddings: the stored run was fitted without embeddings; the vectors are not used');
    return;
  }
  const setup = await runEmbeddingsSetup(given, runModel);
  const v = await embedCorpus({ items: encodedItems(encoder, corpus.items), queries: corpus.queries }, setup, log, [], openDb);
  registerCorpusVectors(v, syncEndpoint(setup, runModel), log);
}
