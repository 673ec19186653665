/**
 * `npm run bench -- static [--json] [--texts 64] [--queries 100] [--iterations 5] [--out FILE]`
 *
 * The built-in encoder (src/embeddings/static.ts, `--embeddings static`) against the model it
 * is distilled from, all-MiniLM-L6-v2 on the shipped server's numpy backend (the baseline: the
 * venv `cogr embeddings install` makes, one thread), in the same process:
 *   speed   tinybench timing the same texts both ways: the first --texts NFCorpus documents
 *           (long: most reach the model's 256 tokens) and as many keywords (their first two
 *           words); the static encoder in this thread, and through its HTTP server (what a
 *           command with `--embeddings static` asks); ratios static / MiniLM
 *   memory  peak resident memory of each server process (VmHWM)
 *   agreement  pairs of an NFCorpus title query (the first --queries) and a phrase of a
 *           document judged relevant to it (two adjacent content words): two phrases sharing a
 *           word with the query and two not, seeded, as the planner's candidates are; Pearson's r between the two encoders' cosines, and at
 *           each static threshold (0.25 to 0.45) the share of pairs kept and, of those, the
 *           share MiniLM puts at 0.3 or more (what the keyword audit counts as related)
 * --out writes the JSON (bench/results/static.json).
 */
import { Bench } from 'tinybench';
import { createRng } from '../index/core/random.ts';
import { EmbeddingsClient } from '../src/embeddings/client.ts';
import { StaticEncoder } from '../src/embeddings/static.ts';
import { startEmbeddingsServer, startStaticEmbeddingsServer, type RunningEmbeddingsServer } from '../src/embeddings/venv.ts';
import { renderTable } from '../src/table.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs, nfcorpusDocs, nfcorpusRelevant, nfcorpusTitleQueries, peakRssMb, round } from './fixtures.ts';
import { emitResult, stamped } from './writeJson.ts';

const dot = (a: Float32Array, b: Float32Array) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};

function pearson(x: readonly number[], y: readonly number[]): number {
  const n = x.length;
  const mx = x.reduce((s, v) => s + v, 0) / n;
  const my = y.reduce((s, v) => s + v, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) ** 2;
    syy += (y[i] - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}

const STOP = new Set([
  'with',
  'from',
  'that',
  'this',
  'among',
  'after',
  'into',
  'between',
  'were',
  'have',
  'been',
  'which',
  'their',
  'these',
  'than',
  'also',
  'more',
]);

/** A document's phrases: adjacent pairs of its content words (letters, 4 or more, a few stop words aside). */
function phrases(text: string): string[] {
  const w = text
    .toLowerCase()
    .split(/[^a-z-]+/)
    .filter((x) => x.length >= 4 && !STOP.has(x));
  const out: string[] = [];
  for (let i = 0; i + 1 < w.length; i++) out.push(`${w[i]} ${w[i + 1]}`);
  return out;
}

/** Up to `n` seeded picks of a list. */
function pick<T>(xs: readonly T[], n: number, rng: () => number): T[] {
  const out: T[] = [];
  for (let i = 0; i < n && xs.length > 0; i++) out.push(xs[Math.floor(rng() * xs.length)]);
  return out;
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const n = Math.min(256, a.number('--texts', 64, { min: 1, integer: true }));
  const nq = a.number('--queries', 100, { min: 1, integer: true });
  const iterations = a.number('--iterations', 5, { min: 1, integer: true });
  const out = a.string('--out', '') || undefined;
  const all = nfcorpusDocs();
  const docs = all.slice(0, n).map((d) => d.text);
  const keywords = docs.map((t) => t.split(' ').slice(0, 2).join(' '));
  const encoder = StaticEncoder.load();
  const servers: RunningEmbeddingsServer[] = [];
  try {
    const minilm = await startEmbeddingsServer({ port: 0, threads: 1, startTimeoutMs: 600_000 });
    servers.push(minilm);
    const stat = await startStaticEmbeddingsServer();
    servers.push(stat);
    const teacher = new EmbeddingsClient({ baseURL: minilm.url, timeoutMs: 600_000 });
    const served = new EmbeddingsClient({ baseURL: stat.url, timeoutMs: 600_000 });

    // Agreement: query–phrase pairs, both encoders.
    const byId = new Map(all.map((d) => [d.id, d.text]));
    const relevant = nfcorpusRelevant();
    const rng = createRng(1);
    const pairs: { q: string; k: string }[] = [];
    for (const q of nfcorpusTitleQueries().slice(0, nq)) {
      const rel = [...(relevant.get(q.id) ?? [])].filter((id) => byId.has(id));
      if (rel.length === 0) continue;
      // As the planner's candidates are: phrases of the query's relevant items, those sharing a word with the query and the others.
      const words = new Set(
        q.text
          .toLowerCase()
          .split(/[^a-z-]+/)
          .filter((x) => x.length >= 4),
      );
      const own = phrases(byId.get(rel[Math.floor(rng() * rel.length)])!);
      const sharing = own.filter((p) => p.split(' ').some((x) => words.has(x)));
      const notSharing = own.filter((p) => !p.split(' ').some((x) => words.has(x)));
      for (const k of [...pick(sharing, 2, rng), ...pick(notSharing, 2, rng)]) pairs.push({ q: q.text, k });
    }
    const texts = [...new Set(pairs.flatMap((p) => [p.q, p.k]))];
    const tv = new Map(texts.map((t, i) => [t, i]));
    const teacherVecs: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += 128) teacherVecs.push(...(await teacher.embedBatch(texts.slice(i, i + 128))));
    const staticVecs = texts.map((t) => encoder.encode(t));
    const cosT = pairs.map((p) => dot(teacherVecs[tv.get(p.q)!], teacherVecs[tv.get(p.k)!]));
    const cosS = pairs.map((p) => dot(staticVecs[tv.get(p.q)!], staticVecs[tv.get(p.k)!]));
    const thresholds = [0.25, 0.3, 0.35, 0.4, 0.45].map((t) => {
      const kept = cosS.map((c, i) => (c >= t ? i : -1)).filter((i) => i >= 0);
      return {
        static_at_least: t,
        kept: round(kept.length / pairs.length, 3),
        minilm_related_among_kept: kept.length ? round(kept.filter((i) => cosT[i] >= 0.3).length / kept.length, 3) : null,
      };
    });

    // Speed.
    const bench = new Bench({ time: 0, iterations, warmup: true, warmupIterations: 1 });
    bench.add('minilm documents', async () => void (await teacher.embedBatch(docs)));
    bench.add('minilm keywords', async () => void (await teacher.embedBatch(keywords)));
    bench.add('static documents', () => void docs.map((t) => encoder.encode(t)));
    bench.add('static keywords', () => void keywords.map((t) => encoder.encode(t)));
    bench.add('static server documents', async () => void (await served.embedBatch(docs)));
    bench.add('static server keywords', async () => void (await served.embedBatch(keywords)));
    process.stderr.write(
      `bench static: ${n} documents and ${n} keywords per request, ${iterations} requests each; ${pairs.length} pairs\n`,
    );
    await bench.run();
    const ms = (name: string) => round(meanMs(bench, name), 3);
    const result = stamped({
      bench: 'static',
      command: `npm run bench -- static --texts ${n} --queries ${nq} --iterations ${iterations}`,
      texts: n,
      iterations,
      documents_ms: { minilm: ms('minilm documents'), static: ms('static documents'), static_server: ms('static server documents') },
      keywords_ms: { minilm: ms('minilm keywords'), static: ms('static keywords'), static_server: ms('static server keywords') },
      ratio_static_over_minilm: {
        documents: round(ms('static documents') / ms('minilm documents'), 5),
        keywords: round(ms('static keywords') / ms('minilm keywords'), 5),
        documents_through_server: round(ms('static server documents') / ms('minilm documents'), 4),
      },
      peak_rss_mb: { minilm: peakRssMb(minilm.child.pid), static_server: peakRssMb(stat.child.pid) },
      agreement: {
        pairs: pairs.length,
        queries: new Set(pairs.map((p) => p.q)).size,
        minilm_related: round(cosT.filter((c) => c >= 0.3).length / pairs.length, 3),
        pearson_r: round(pearson(cosT, cosS), 3),
        thresholds,
      },
    });
    await emitResult(
      result,
      out,
      json,
      () =>
        renderTable(
          ['encoder', `${n} documents (ms)`, `${n} keywords (ms)`, 'peak RSS (MB)'],
          [
            [
              'all-MiniLM-L6-v2 (numpy server)',
              String(result.documents_ms.minilm),
              String(result.keywords_ms.minilm),
              String(result.peak_rss_mb.minilm),
            ],
            ['static, in this thread', String(result.documents_ms.static), String(result.keywords_ms.static), ''],
            [
              'static, its server',
              String(result.documents_ms.static_server),
              String(result.keywords_ms.static_server),
              String(result.peak_rss_mb.static_server),
            ],
          ],
        ) +
        `\nagreement over ${pairs.length} query–phrase pairs: Pearson r ${result.agreement.pearson_r}; ${thresholds
          .map((t) => `static ≥ ${t.static_at_least}: ${t.kept} kept, ${t.minilm_related_among_kept} of them MiniLM ≥ 0.3`)
          .join('; ')}\n`,
    );
  } finally {
    await Promise.all(servers.map((s) => s.close()));
  }
}
