import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * The fast tier, `npm test`: every test that needs only `npm ci`. The tests that need a
 * real part installed outside npm (the model, the embeddings venv, OpenSearch, the TRL
 * venv, Chromium) are named `*.real.test.ts` and run in the real tier
 * (`npm run test:real`, vitest.real.config.ts). So that no fast test can come to depend
 * on one by accident, the caches those parts are found in point at a folder that does
 * not exist here: a fast test that reached for one would fail on every machine, not only
 * on a fresh one.
 */
const ABSENT = '/nonexistent/cogr-fast-tier';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/**/*.real.test.ts', '**/node_modules/**'],
    pool: 'forks',
    // vitest's default is one worker fewer than the cores: one on a 2-core machine, where
    // much of a file's time is spent waiting on its child processes and workers.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    env: {
      COGR_MODEL_CACHE: `${ABSENT}/models`,
      COGR_EMBEDDINGS_VENV: `${ABSENT}/venvs/embeddings`,
      COGR_TRL_VENV: `${ABSENT}/venvs/trl`,
      COGR_TRL_BASE: `${ABSENT}/checkpoints/SmolLM2-135M-Instruct`,
      COGR_OPENSEARCH_CACHE: `${ABSENT}/opensearch`,
      COGR_VENV_ROOT: `${ABSENT}/venvs`,
    },
  },
});
