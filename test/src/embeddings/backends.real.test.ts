/**
 * The shipped embeddings server's two backends compute one model: all-MiniLM-L6-v2's vectors
 * from the numpy forward pass (src/embeddings/minilm.py, the default venv) and from
 * sentence-transformers on torch (`cogr embeddings install --backend sentence-transformers`;
 * npm run test:real installs both) agree coordinate by coordinate within 1e-5, and so do the
 * cosines the keyword audit and the planner's keyword rule read (a keyword against its query),
 * for short keywords, sentences, an empty text and a text longer than the model's 256 tokens
 * (cut by both at the same place); numpy with 2 threads, so a request is split into batches encoded at once. Without either venv the test FAILS naming what to run;
 * skipped only when COGR_SKIP_REAL_EMBEDDINGS=1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddingsClient } from '../../../src/embeddings/client.ts';
import { startEmbeddingsServer, type RunningEmbeddingsServer } from '../../../src/embeddings/venv.ts';
import { cosine } from '../_oracles.ts';

const skip = process.env.COGR_SKIP_REAL_EMBEDDINGS === '1';

const LONG = Array.from({ length: 400 }, (_, i) => ['lens', 'protein', 'crystallin', 'cataract', 'retina'][i % 5]).join(' ');
const TEXTS = [
  'the crystalline lens in vertebrates, including humans.',
  'lenses',
  'vertebral',
  'are dental x-rays safe ?',
  'dental',
  'butyryl',
  'x-ray',
  'Heart attacks are prevented by aspirin.',
  'information retrieval evaluation with relevance judgements',
  '',
  LONG,
  `${LONG} and at the very end a word the model never sees: zebra`,
];

describe.skipIf(skip)('the embeddings backends: numpy against sentence-transformers', () => {
  const servers: RunningEmbeddingsServer[] = [];
  let numpy: Float32Array[] = [];
  let torch: Float32Array[] = [];

  beforeAll(async () => {
    for (const backend of ['numpy', 'sentence-transformers'] as const) {
      // numpy on 2 threads: a request split into batches encoded at once (minilm.py's workers).
      const srv = await startEmbeddingsServer({ backend, port: 0, threads: backend === 'numpy' ? 2 : 1, startTimeoutMs: 600_000 }).catch(
        (e: Error) => {
          throw new Error(
            `${e.message} (run: npx cogr embeddings install${backend === 'numpy' ? '' : ' --backend sentence-transformers'})`,
          );
        },
      );
      servers.push(srv);
      const c = new EmbeddingsClient({ baseURL: srv.url, timeoutMs: 600_000 });
      const vectors = await c.embedBatch(TEXTS);
      if (backend === 'numpy') numpy = vectors;
      else torch = vectors;
    }
  }, 1_200_000);

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
  }, 60_000);

  it('gives every text the same unit vector within 1e-5 per coordinate', () => {
    expect(numpy).toHaveLength(TEXTS.length);
    expect(torch).toHaveLength(TEXTS.length);
    for (let i = 0; i < TEXTS.length; i++) {
      expect(numpy[i]).toHaveLength(384);
      const worst = Math.max(...Array.from(numpy[i], (x, d) => Math.abs(x - torch[i][d])));
      expect(worst, `text ${i}: ${TEXTS[i].slice(0, 40)}`).toBeLessThan(1e-5);
      expect(Math.hypot(...Array.from(numpy[i]))).toBeCloseTo(1, 5);
    }
  });

  it('gives a keyword the same cosine to its query, and cuts long texts at the same token', () => {
    for (const [q, k] of [
      [0, 1],
      [0, 2],
      [3, 4],
      [3, 5],
      [3, 6],
    ]) {
      expect(Math.abs(cosine(numpy[q], numpy[k]) - cosine(torch[q], torch[k]))).toBeLessThan(1e-5);
    }
    // Both cut at 256 tokens: the word after the cut changes neither's vector.
    expect(cosine(numpy[10], numpy[11])).toBeGreaterThan(0.99999);
    expect(cosine(torch[10], torch[11])).toBeGreaterThan(0.99999);
    // And the model tells related from unrelated: "lenses" nearer the lens query than "butyryl" is to the x-ray one.
    expect(cosine(numpy[0], numpy[1])).toBeGreaterThan(cosine(numpy[3], numpy[5]));
  });
});
