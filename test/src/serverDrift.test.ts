import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { driftReportFromStore } from '../../src/drift/fromStore.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { buildSearchServer } from '../../src/server/app.ts';
import { storeDriftProvider } from '../../src/server/drift.ts';
import { LiveSnapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';
import { storedF1Points } from './_oracles.ts';

let dir = '';
let dbPath = '';
let app: FastifyInstance;
let base = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-srv-drift-'));
  dbPath = join(dir, 'db');
  const db = await openDb(dbPath);
  await runCoevolution(db, synthCorpus(), { ...LOOP_TEST_CONFIG, rounds: 1 });
  await db.close();
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round: 'latest' }));
  await live.reload();
  app = buildSearchServer({ live, drift: storeDriftProvider(dbPath) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address() as { port: number };
  base = `http://127.0.0.1:${addr.port}`;
}, 120_000);

afterAll(async () => {
  await app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('GET /v1/drift', () => {
  it('returns the same report as the library, with the run’s held-out F1 per round', async () => {
    const res = await fetch(`${base}/v1/drift?from=0&to=latest`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { f1: unknown[] };
    const db = await openDb(dbPath, { createIfMissing: false });
    try {
      const expected = await driftReportFromStore(new KeywordIndexStore(db), { from: 0, to: null, f1ByRound: await storedF1Points(db) });
      expect(body).toEqual(JSON.parse(JSON.stringify(expected)));
      expect(body.f1.length).toBe(4); // sft (both sides), r1-query, r1-item
    } finally {
      await db.close();
    }
  });

  it('answers 400 naming the parameter for a bad range', async () => {
    const res = await fetch(`${base}/v1/drift?from=abc`);
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toMatch(/from/);
  });

  it('is listed in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toContain('/v1/drift');
  });
});
