/**
 * `GET /v1/drift?from=&to=&limit=`: the same JSON report as `cogr drift --json -`. The
 * database is opened only for the request and closed again (the server never holds the
 * LevelDB lock), and held-out F1 per round comes from the stored co-evolution run.
 */
import { openDb } from '../../index/db.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import type { DriftReport } from '../drift/analyze.ts';
import { driftReportFromStore, parseDriftQuery } from '../drift/fromStore.ts';
import { storedF1Points } from '../run/state.ts';

export type DriftProvider = (query: Record<string, unknown>) => Promise<DriftReport>;

export function storeDriftProvider(dbPath: string): DriftProvider {
  return async (query) => {
    const opts = parseDriftQuery(query);
    const db = await openDb(dbPath, { createIfMissing: false });
    try {
      return await driftReportFromStore(new KeywordIndexStore(db), { ...opts, f1ByRound: await storedF1Points(db) });
    } finally {
      await db.close();
    }
  };
}
