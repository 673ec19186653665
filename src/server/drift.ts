/**
 * `GET /v1/drift?from=&to=&limit=`: the same JSON report as `cogr drift --json -`, read
 * from the published generation files (index/store/published.ts) and the published run state
 * (held-out F1 per round), never from the LevelDB: any number of requests run beside a
 * writer. Generations are immutable, so a report is kept per (options, published
 * generations, committed steps): repeated and concurrent requests share one computation.
 */
import { PublishedIndex } from '../../index/store/published.ts';
import type { DriftReport } from '../drift/analyze.ts';
import { driftReportFromStore, parseDriftQuery } from '../drift/fromStore.ts';
import { f1Points, readRunAt } from '../run/state.ts';
import { LruCache } from './queryKeywords.ts';

export type DriftProvider = (query: Record<string, unknown>) => Promise<DriftReport>;

export function storeDriftProvider(dbPath: string): DriftProvider {
  const files = new PublishedIndex(dbPath);
  const reports = new LruCache<Promise<DriftReport>>(16);
  return async (query) => {
    const opts = parseDriftQuery(query);
    const run = await readRunAt(dbPath);
    const key = JSON.stringify([
      opts,
      await files.numbers('item'),
      await files.numbers('query'),
      run?.steps.map((s) => s.finishedAt) ?? [],
    ]);
    let report = reports.get(key);
    if (!report) {
      report = driftReportFromStore(files, { ...opts, f1ByRound: f1Points(run?.steps ?? []) });
      reports.set(key, report);
      report.catch(() => {
        if (reports.get(key) === report) reports.delete(key);
      });
    }
    return report;
  };
}
