import { defineConfig } from 'vitest/config';

/**
 * The real tier, `npm run test:real`: the tests named `*.real.test.ts`, which need the real
 * model (`cogr llm install`), the embeddings venv (`cogr embeddings install`), OpenSearch
 * (`bash scripts/opensearch.sh install`), the TRL venv (`bash trainers/trl/setup.sh`) and
 * Chromium (Debian's `chromium`, which .ci/run installs). `npm run test:real` installs the
 * first four with the project's scripts before vitest runs; each test fails naming what to
 * install when its part is missing.
 */
export default defineConfig({
  test: {
    include: ['test/**/*.real.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // The runs the tests make have no encoder unless a test gives one (or, for the default, unsets this).
    env: { COGR_EMBEDDINGS: 'none' },
  },
});
