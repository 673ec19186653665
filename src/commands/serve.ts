/**
 * `cogr serve`: serve a trained round's keyword retrieval over HTTP (src/server/app.ts).
 *
 *   cogr serve [--db <dir>] [--round best|latest|<n>] [--port 8080] [--host 127.0.0.1]
 *              [--generator embedded|openai|none] [--base-url <url> --model <m> --api-key <k>]
 *              [--token <T>] [--watch <seconds>] [--dataset <name|path>]
 *              [--budget-ms 250] [--max-k 1000] [--max-query-length 512] [--body-limit 65536]
 *
 * The published generation files are read into memory (the LevelDB is never opened, so
 * serve runs beside a writer); `--watch` polls for a newer generation and `POST
 * /v1/admin/reload` loads it on demand. The embedded query generator runs in
 * `--keyword-workers` worker threads. Binds to loopback unless `--host` says otherwise.
 * The bearer token (flag or COGR_TOKEN) guards the admin endpoint.
 *
 * `--writable` (with a token): the catalog's write routes (src/server/catalogRoutes.ts); a
 * writer thread holds the database's lock for the server's life and commits each write as
 * a new item generation, which this server swaps in before it answers.
 *
 * `--backend opensearch --url U[,U2,…] --index ALIAS [--backend-timeout-ms 5000]`: the
 * query keywords are still planned from the stored run, GET /v1/search's matched set and
 * ranking come from the alias `cogr export opensearch` published (src/opensearch/backend.ts).
 */
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { stderrLogger, type Logger } from '../../index/core/log.ts';
import { llmOptionsFromEnv } from '../../generators/llm.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { checkPublishedRunData, readRunAt } from '../run/state.ts';
import { buildSearchServer } from '../server/app.ts';
import { KeywordWorkerPool } from '../server/keywordPool.ts';
import { storeDriftProvider } from '../server/drift.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { LiveSnapshot } from '../server/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { RANKERS } from '../../generators/planner/rankers.ts';
import { KEYWORD_SOURCES, keywordSourceFactory } from '../server/keywordSources.ts';
import {
  parseChoice,
  parseIntFlag,
  parseServerFlags,
  withEmbeddingsOptions,
  withLlmOptions,
  withServerOptions,
  type EmbeddingsFlags,
  type LlmFlags,
  type ServerFlags,
} from './options.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { Corpus } from '../../index/core/types.ts';
import { embedCorpus, embeddingsSetupOf, encodedItems, runEmbeddingsSetup, syncEndpoint, type RunEncoder } from '../embeddings/dense.ts';
import { storedRunEmbeddings } from '../embeddings/venv.ts';
import type { KeywordPoolOptions } from '../server/keywordPool.ts';
import { checkIndexName, OpenSearchNodes, parseNodeUrls } from '../opensearch/client.ts';
import { openSearchBackend } from '../opensearch/backend.ts';
import { ITEM_GENERATORS } from '../catalog/itemKeywords.ts';
import { CatalogThread } from '../server/catalogThread.ts';

/**
 * With `--embeddings`: the items' vectors (cached) for the keyword workers, when they are the
 * run's relevance features (none for a judge only), and a query embedder (the same endpoint;
 * the last 10,000 query texts kept in memory). A run fitted with embeddings needs them, and
 * from the same model.
 */
export async function servingDense(
  flags: EmbeddingsFlags,
  encoder: RunEncoder | null,
  corpus: Corpus | undefined,
  log: Logger,
): Promise<KeywordPoolOptions['dense'] | undefined> {
  const runModel = encoder?.embeddingsModel ?? null;
  const given = await embeddingsSetupOf({ ...flags, embeddings: storedRunEmbeddings(flags.embeddings, runModel) }, log);
  if (encoder === null || runModel === null) {
    if (given !== null)
      log.warn('--embeddings: the stored run was fitted without embeddings; the vectors are not used', {
        model: await given.client.modelName(),
      });
    return undefined;
  }
  const setup = await runEmbeddingsSetup(given, runModel);
  const model = runModel;
  if (!corpus && encoder.embeddingsFeatures)
    throw cogrError('INVALID_ARGUMENT', "--embeddings needs the dataset's items (serve the stored run's dataset or give --dataset)");
  const v = await embedCorpus({ items: encodedItems(encoder, corpus?.items ?? []), queries: [] }, setup, log);
  // A judge only embeds no item: the dimension (which the workers hold every vector to) from one vector of the model's name.
  const dim = v.dim > 0 ? v.dim : (await setup.client.embedBatch([runModel]))[0].length;
  const ids = [...v.items.keys()];
  const data = new Float32Array(ids.length * dim);
  ids.forEach((id, i) => data.set(v.items.get(id)!, i * dim));
  const memo = new Map<string, Float32Array>();
  const embed = async (text: string): Promise<Float32Array> => {
    const hit = memo.get(text);
    if (hit) return hit;
    const [vec] = await setup.client.embedBatch([text], dim);
    if (memo.size >= 10_000) memo.delete(memo.keys().next().value as string);
    memo.set(text, vec);
    return vec;
  };
  log.info(
    encoder.embeddingsFeatures
      ? 'dense relevance features: query vectors from the embeddings endpoint'
      : "the encoder judges the planned keywords only: query and keyword vectors from the embeddings endpoint, no item's",
    { model, endpoint: setup.client.baseURL, items: ids.length },
  );
  return { vectors: { model, dim, ids, data, endpoint: syncEndpoint(setup, model) }, embed };
}

interface ServeFlags extends ServerFlags, LlmFlags, EmbeddingsFlags {
  generator: string;
  dataset?: string;
  budgetMs?: string;
  maxK?: string;
  maxQueryLength?: string;
  keywordWorkers?: string;
  rank?: string;
  backend?: string;
  url?: string;
  index?: string;
  backendTimeoutMs?: string;
  writable?: boolean;
  itemGenerator: string;
}

export async function runServe(flags: ServeFlags, log: Logger = stderrLogger): Promise<void> {
  const server = parseServerFlags(flags, 64 * 1024 * 1024);
  const limits: Record<string, number> = {};
  const set = (k: string, v: number | undefined) => {
    if (v !== undefined) limits[k] = v;
  };
  set('keywordBudgetMs', parseIntFlag('--budget-ms', flags.budgetMs, 1, 600_000));
  set('maxK', parseIntFlag('--max-k', flags.maxK, 1, 1_000_000));
  set('maxQueryLength', parseIntFlag('--max-query-length', flags.maxQueryLength, 1, 100_000));
  set('bodyLimit', server.bodyLimit);
  const workers = parseIntFlag('--keyword-workers', flags.keywordWorkers, 1, 64);
  const backendKind = parseChoice('--backend', flags.backend ?? 'memory', ['memory', 'opensearch'] as const);
  if (backendKind === 'memory' && (flags.url !== undefined || flags.index !== undefined))
    throw cogrError('INVALID_ARGUMENT', `${flags.url !== undefined ? '--url' : '--index'}: only with --backend opensearch`);
  const backend =
    backendKind === 'opensearch'
      ? await openSearchBackend(
          new OpenSearchNodes(parseNodeUrls('--url', flags.url), {
            timeoutMs: parseIntFlag('--backend-timeout-ms', flags.backendTimeoutMs, 10, 600_000) ?? 5_000,
          }),
          checkIndexName('--index', flags.index),
          log,
          flags.writable ? { dbPath: server.dbPath } : {},
        )
      : null;
  if (flags.writable && !server.token)
    throw cogrError('INVALID_ARGUMENT', '--writable: catalog writes need the admin token; give --token (or COGR_TOKEN)');
  if (flags.writable && flags.embeddings !== undefined)
    throw cogrError(
      'INVALID_ARGUMENT',
      "--writable with --embeddings: catalog writes do not embed new items' texts yet; serve without --embeddings to write",
    );
  const itemGenerator = parseChoice('--item-generator', flags.itemGenerator, ITEM_GENERATORS);
  // Titles and item fields come from the dataset: --dataset, else the stored run's (in its recorded format).
  const run = flags.dataset ? null : await readRunAt(server.dbPath);
  const corpus = flags.dataset
    ? (await loadDataset(flags.dataset, { logger: log })).corpus
    : run
      ? (await loadRunCorpus(run.config, log)).corpus
      : undefined;
  // The run's generations with another dataset's titles and planner texts would be served without a word.
  if (run && corpus) checkPublishedRunData(server.dbPath, run, corpus);
  const dense = await servingDense(flags, run?.config ?? null, corpus, log);
  let keywordPool: KeywordWorkerPool | null = null;
  const pool = () =>
    (keywordPool ??= new KeywordWorkerPool({
      logger: log,
      ...(workers !== undefined ? { size: workers } : {}),
      ...(dense ? { dense } : {}),
    }));
  const loader = storeSnapshotLoader({
    dbPath: server.dbPath,
    round: server.round,
    rank: flags.rank === undefined ? 'auto' : parseChoice('--rank', flags.rank, ['auto', ...RANKERS] as const),
    ...(corpus ? { corpus } : {}),
    keywordSource: keywordSourceFactory(
      parseChoice('--generator', flags.generator, KEYWORD_SOURCES),
      () => llmOptionsFromEnv(flags),
      log,
      pool,
    ),
    log,
  });
  const live = new LiveSnapshot(loader, log);
  // --writable: the writer thread takes the database's lock (DB_LOCKED names it when another
  // process holds it) and puts right what a killed writer left, before the first load.
  const catalog = flags.writable
    ? await CatalogThread.start(
        {
          dbPath: server.dbPath,
          round: server.round,
          ...(flags.dataset ? { dataset: flags.dataset } : {}),
          itemGenerator,
          llm: llmOptionsFromEnv(flags),
        },
        log,
      )
    : null;
  try {
    await live.reload();
  } catch (e) {
    await (keywordPool as KeywordWorkerPool | null)?.close();
    await catalog?.close();
    throw e;
  }
  if (backend && backend.generation() !== live.get().item.generation)
    log.warn(
      'the OpenSearch alias serves another item generation than the stored run chooses: query keywords are planned on the stored one',
      {
        backend: backend.generation(),
        planner: live.get().item.generation,
      },
    );
  const app = buildSearchServer({
    live,
    ...(backend ? { backend } : {}),
    log,
    limits,
    connections: server.connections,
    drift: storeDriftProvider(server.dbPath),
    ...(server.token ? { token: server.token } : {}),
    ...(catalog ? { catalog } : {}),
  });
  if (catalog) log.info('catalog writes: this server holds the database for writes', { db: server.dbPath, served: catalog.served });
  if (server.watch) live.watch(server.watch);
  await listenUntilSignal(app, server.host, server.port, 'cogr serve', log, () => {
    live.stopWatch();
    void (keywordPool as KeywordWorkerPool | null)?.close();
    void catalog?.close();
  });
}

export function register(program: Command): void {
  const d = DEFAULTS.serve;
  withEmbeddingsOptions(
    withLlmOptions(
      withServerOptions(program.command('serve'), d, 'round to serve', 'the admin endpoints', 'best').option(
        '--generator <kind>',
        "query keywords from: embedded (the round's saved query planner), openai (an endpoint), none (raw query only)",
        'embedded',
      ),
    ),
    "a run fitted with --embeddings: the same model's endpoint, for the queries' vectors",
  )
    .option(
      '--dataset <name|path>',
      "dataset of the index: item titles and structured fields for field predicates (default: the stored run's)",
    )
    .option('--budget-ms <ms>', `time budget for generating a query's keywords (default ${d.keywordBudgetMs})`)
    .option('--max-k <n>', `largest k a request may ask for (default ${d.maxK})`)
    .option('--max-query-length <n>', `longest query text in characters (default ${d.maxQueryLength})`)
    .option(
      '--rank <ranker>',
      "how /v1/search orders the served set: auto (the stored run's choice at SFT; keywords without one) | model | text | mix | keywords (model, text and mix need the embedded generator)",
      'auto',
    )
    .option(
      '--backend <kind>',
      'who answers /v1/search (GET and Boolean programs): memory (the generation in this process) | opensearch (an alias `cogr export opensearch` wrote)',
      'memory',
    )
    .option('--url <urls>', '--backend opensearch: node URLs, comma-separated (every one used, a dead one skipped)')
    .option('--index <alias>', '--backend opensearch: the alias to search')
    .option('--backend-timeout-ms <ms>', '--backend opensearch: deadline of one request on one node (default 5000)')
    .option('--keyword-workers <n>', 'worker threads generating query keywords with the query planner (default: cores − 1, 1 to 4)')
    .option(
      '--writable',
      'serve catalog writes (PUT/DELETE /v1/items/{id}, POST /v1/items/batch, hand-set keywords; admin token): this server holds the database for writes',
    )
    .option(
      '--item-generator <kind>',
      "--writable: keywords of new and changed items from auto (the round's item policy; an LLM endpoint, --base-url/--model, when the round's items were imported from one) | embedded | openai",
      'auto',
    )
    .action(async (flags: ServeFlags) => runServe(flags));
}
