/**
 * The thread behind `SyncEmbedder` (syncEmbedder.ts): answers each request on its port with
 * the texts' vectors from the endpoint (through the embeddings client, no cache), then raises
 * the shared flag the caller waits on.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { isCogrError } from '../../index/core/errors.ts';
import { EmbeddingsClient, embedTexts } from './client.ts';
import type { FromSyncEmbedder, SyncEmbedderOptions, ToSyncEmbedder } from './syncEmbedder.ts';

const { options, port, flag } = (workerData as { cogrSyncEmbedder: { options: SyncEmbedderOptions; port: MessagePort; flag: Int32Array } })
  .cogrSyncEmbedder;
const client = new EmbeddingsClient({ baseURL: options.baseURL, model: options.model, timeoutMs: options.timeoutMs });

function answer(m: FromSyncEmbedder): void {
  port.postMessage(m);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

// Whatever fails outside a request's own promise still answers the waiting caller (else it would wait out its deadline).
process.on('uncaughtException', (e) =>
  answer({ ok: false, code: 'EMBEDDINGS_ERROR', message: `the embeddings thread for ${options.baseURL} failed: ${e.message}` }),
);

port.on('message', (m: ToSyncEmbedder) => {
  embedTexts(m.texts, client, { db: null }).then(
    (r) => {
      const dim = r.dim;
      const data = new Float32Array(m.texts.length * dim);
      r.vectors.forEach((v, i) => data.set(v, i * dim));
      answer({ ok: true, dim, data });
    },
    (e: unknown) =>
      answer({
        ok: false,
        code: isCogrError(e) ? e.code : 'EMBEDDINGS_ERROR',
        message: e instanceof Error ? e.message : String(e),
      }),
  );
});
