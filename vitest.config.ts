import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * The fast tier, `npm test`: every test that needs only `npm ci`. The tests that need a
 * real part installed outside npm (the model, the embeddings venv, OpenSearch, the TRL
 * venv, Chromium) are named `*.real.test.ts` and run in the real tier
 * (`npm run test:real`, vitest.real.config.ts). So that no fast test can come to depend
 * on one by accident, the caches those parts are found in point under a device file, where
 * nothing exists and nothing can be created (not even by root), and pip and the Hugging
 * Face libraries are kept off the network: a fast test that reached for a real part would
 * fail at once on every machine, not only on a fresh one, and never download it. For the
 * same reason the runs the tests make have no encoder unless a test gives one
 * (COGR_EMBEDDINGS=none: `cogr evolve` and `cogr demo` would otherwise install MiniLM).
 */
const ABSENT = '/dev/null/cogr-fast-tier';

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
      COGR_EMBEDDINGS: 'none',
      PIP_NO_INDEX: '1',
      HF_HUB_OFFLINE: '1',
      TRANSFORMERS_OFFLINE: '1',
    },
  },
});
