/**
 * Workload data the benchmarks share: the shipped NFCorpus files read once (documents,
 * title queries, graded judgements) and the tinybench result helpers. Each benchmark
 * derives its own keywords from these records (see its header).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Bench } from 'tinybench';
import { packageRoot } from '../index/core/paths.ts';

export interface NfRecord {
  id: string;
  /** Everything after the first tab of the line. */
  text: string;
}

function lines(file: string): string[] {
  return readFileSync(join(packageRoot(), 'data', 'nfcorpus', file), 'utf8')
    .split('\n')
    .filter((l) => l.includes('\t'));
}

function records(file: string): NfRecord[] {
  return lines(file).map((l) => {
    const t = l.indexOf('\t');
    return { id: l.slice(0, t), text: l.slice(t + 1) };
  });
}

/** NFCorpus documents (d-collection.docs: `id<TAB>text`, title merged into the text). */
export function nfcorpusDocs(): NfRecord[] {
  return records('d-collection.docs');
}

/** NFCorpus title queries (q-titles.queries), in file order. */
export function nfcorpusTitleQueries(): NfRecord[] {
  return records('q-titles.queries');
}

/** NFCorpus judgements (s-3.qrel) with grade > 0: query id → relevant document ids. */
export function nfcorpusRelevant(): Map<string, Set<string>> {
  const relevant = new Map<string, Set<string>>();
  for (const l of lines('s-3.qrel')) {
    const [qid, , docid, grade] = l.trim().split(/\s+/);
    if (Number(grade) <= 0) continue;
    const set = relevant.get(qid) ?? new Set<string>();
    set.add(docid);
    relevant.set(qid, set);
  }
  return relevant;
}

/** Mean latency (ms) of a completed tinybench task. */
export function meanMs(bench: Bench, name: string): number {
  const t = bench.tasks.find((x) => x.name === name);
  const r = t?.result as { state?: string; latency?: { mean: number }; error?: unknown } | undefined;
  if (!r || !r.latency) throw new Error(`benchmark task ${name} did not complete: ${String(r?.error ?? r?.state)}`);
  return r.latency.mean;
}

export function median(xs: readonly number[]): number {
  const a = [...xs].sort((x, y) => x - y);
  const m = a.length >> 1;
  return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
}

/** Peak resident memory of a process (its VmHWM), in MB; null without a pid. */
export function peakRssMb(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? round(Number(m[1]) / 1024, 0) : null;
}

export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
