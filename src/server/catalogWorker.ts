/**
 * The catalog writer thread of `cogr serve --writable` (catalogThread.ts starts it): it
 * opens the project database — and holds its lock for the server's life —, the served
 * dataset and the item generator, and applies the batches it is sent one after another
 * (src/catalog/writer.ts). Keyword generation, the LevelDB commit and the generation's
 * files all run here, off the serving thread's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { isCogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { Corpus } from '../../index/core/types.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { readRunAt } from '../run/state.ts';
import { llmCache } from '../run/policies.ts';
import { itemKeywordsFactory } from '../catalog/itemKeywords.ts';
import { CatalogWriter } from '../catalog/writer.ts';
import type { CatalogThreadConfig, FromCatalogWorker, ToCatalogWorker } from './catalogThread.ts';

const port = parentPort;
if (!port) throw new Error('catalogWorker.ts runs as a worker thread');
const config = (workerData as { cogrCatalog: CatalogThreadConfig }).cogrCatalog;
const post = (m: FromCatalogWorker) => port.postMessage(m);
const errorOf = (e: unknown) =>
  isCogrError(e)
    ? { code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) }
    : { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e) };
const log: Logger = {
  info: (msg, fields) => post({ t: 'log', level: 'info', msg, ...(fields ? { fields } : {}) }),
  warn: (msg, fields) => post({ t: 'log', level: 'warn', msg, ...(fields ? { fields } : {}) }),
  debug: (msg, fields) => post({ t: 'log', level: 'debug', msg, ...(fields ? { fields } : {}) }),
};

let db: CogrDb | null = null;
let writer: CatalogWriter | null = null;

async function start(): Promise<void> {
  // The dataset: --dataset, else the stored run's (the serving thread checked it against the run).
  let corpus: Corpus | null = null;
  if (config.dataset) corpus = (await loadDataset(config.dataset, { logger: log })).corpus;
  else {
    const run = await readRunAt(config.dbPath);
    if (run) corpus = (await loadRunCorpus(run.config, log)).corpus;
  }
  db = await openDb(config.dbPath, { logger: log, createIfMissing: false });
  const d = db;
  writer = await CatalogWriter.open(d, {
    round: config.round,
    corpus,
    itemKeywords: itemKeywordsFactory(config.itemGenerator, () => config.llm, { cache: llmCache(d), logger: log }),
    log,
    ...(config.keep !== undefined ? { keep: config.keep } : {}),
  });
  post({ t: 'ready', served: writer.served });
}

port.on('message', (m: ToCatalogWorker) => {
  if (m.t === 'apply') {
    if (!writer) {
      post({ t: 'failed', id: m.id, error: { code: 'INTERNAL', message: 'the catalog writer is not open' } });
      return;
    }
    writer.apply(m.ops, m.source).then(
      (commit) => post({ t: 'done', id: m.id, commit }),
      (e: unknown) => post({ t: 'failed', id: m.id, error: errorOf(e) }),
    );
    return;
  }
  if (m.t === 'close') {
    void (async () => {
      try {
        await writer?.drain();
        await db?.close();
      } finally {
        post({ t: 'closed' });
      }
    })();
  }
});

start().catch(async (e: unknown) => {
  await db?.close().catch(() => {});
  post({ t: 'fatal', error: errorOf(e) });
});
