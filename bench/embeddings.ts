/**
 * `npm run bench -- embeddings [--json] [--texts 64] [--iterations 5] [--threads 1] [--out FILE]`
 *
 * The shipped embeddings server's numpy backend (src/embeddings/minilm.py, the default venv)
 * against the sentence-transformers backend (torch) as the baseline: both servers started on
 * loopback from their venvs (`cogr embeddings install` and `cogr embeddings install --backend
 * sentence-transformers`), with the same --threads, and tinybench timing one request of the
 * same texts to each, the two tasks in the same process one after the other: the first
 * --texts NFCorpus documents (long: most reach the model's 256 tokens) and as many keywords
 * (their first two words: a few tokens). Reported: the mean per request and the ratio
 * numpy / sentence-transformers (above 1: numpy is slower), the servers' peak resident memory
 * (VmHWM of each process), the largest difference of a coordinate between the two backends'
 * vectors, and each venv's size on disk. --out writes the JSON (bench/results/embeddings.json).
 */
import { execFileSync } from 'node:child_process';
import { Bench } from 'tinybench';
import { EmbeddingsClient } from '../src/embeddings/client.ts';
import { embeddingsVenv, startEmbeddingsServer, type EmbeddingsBackend, type RunningEmbeddingsServer } from '../src/embeddings/venv.ts';
import { renderTable } from '../src/table.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs, nfcorpusDocs, peakRssMb, round } from './fixtures.ts';
import { emitResult, stamped } from './writeJson.ts';

const BACKENDS: EmbeddingsBackend[] = ['numpy', 'sentence-transformers'];

function diskMb(dir: string): number {
  return round(Number(execFileSync('du', ['-sk', dir], { encoding: 'utf8' }).split('\t')[0]) / 1024, 0);
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const n = Math.min(256, a.number('--texts', 64, { min: 1, integer: true }));
  const iterations = a.number('--iterations', 5, { min: 1, integer: true });
  const threads = a.number('--threads', 1, { min: 1, integer: true });
  const out = a.string('--out', '') || undefined;
  const docs = nfcorpusDocs()
    .slice(0, n)
    .map((d) => d.text);
  const keywords = docs.map((t) => t.split(' ').slice(0, 2).join(' '));
  const servers = new Map<EmbeddingsBackend, RunningEmbeddingsServer>();
  try {
    for (const backend of BACKENDS)
      servers.set(backend, await startEmbeddingsServer({ backend, port: 0, threads, startTimeoutMs: 600_000 }));
    const clients = new Map(BACKENDS.map((b) => [b, new EmbeddingsClient({ baseURL: servers.get(b)!.url, timeoutMs: 600_000 })]));
    const vectors = new Map<EmbeddingsBackend, Float32Array[]>();
    for (const b of BACKENDS) vectors.set(b, await clients.get(b)!.embedBatch([...docs, ...keywords]));
    let maxDiff = 0;
    const [x, y] = BACKENDS.map((b) => vectors.get(b)!);
    for (let i = 0; i < x.length; i++) for (let d = 0; d < x[i].length; d++) maxDiff = Math.max(maxDiff, Math.abs(x[i][d] - y[i][d]));
    const bench = new Bench({ time: 0, iterations, warmup: true, warmupIterations: 1 });
    for (const b of BACKENDS) {
      bench.add(`${b} documents`, async () => void (await clients.get(b)!.embedBatch(docs)));
      bench.add(`${b} keywords`, async () => void (await clients.get(b)!.embedBatch(keywords)));
    }
    process.stderr.write(
      `bench embeddings: ${n} documents and ${n} keywords per request, ${iterations} requests each, ${threads} thread(s)\n`,
    );
    await bench.run();
    const ms = (name: string) => round(meanMs(bench, name), 1);
    const result = stamped({
      bench: 'embeddings',
      command: `npm run bench -- embeddings --texts ${n} --iterations ${iterations} --threads ${threads}`,
      texts: n,
      iterations,
      threads,
      documents_ms: Object.fromEntries(BACKENDS.map((b) => [b, ms(`${b} documents`)])),
      keywords_ms: Object.fromEntries(BACKENDS.map((b) => [b, ms(`${b} keywords`)])),
      ratio_numpy_over_sentence_transformers: {
        documents: round(ms('numpy documents') / ms('sentence-transformers documents'), 2),
        keywords: round(ms('numpy keywords') / ms('sentence-transformers keywords'), 2),
      },
      peak_rss_mb: Object.fromEntries(BACKENDS.map((b) => [b, peakRssMb(servers.get(b)!.child.pid)])),
      venv_mb: Object.fromEntries(BACKENDS.map((b) => [b, diskMb(embeddingsVenv(process.env, b))])),
      max_coordinate_difference: maxDiff,
    });
    await emitResult(
      result,
      out,
      json,
      () =>
        renderTable(
          ['backend', `${n} documents (ms)`, `${n} keywords (ms)`, 'peak RSS (MB)', 'venv (MB)'],
          BACKENDS.map((b) => [
            b,
            String(result.documents_ms[b]),
            String(result.keywords_ms[b]),
            String(result.peak_rss_mb[b]),
            String(result.venv_mb[b]),
          ]),
        ) +
        `\nnumpy / sentence-transformers: documents ${result.ratio_numpy_over_sentence_transformers.documents}×, keywords ${result.ratio_numpy_over_sentence_transformers.keywords}×; largest coordinate difference ${maxDiff.toExponential(2)}\n`,
    );
  } finally {
    await Promise.all([...servers.values()].map((s) => s.close()));
  }
}
