/**
 * Shared fixture of the catalog tests: a served run of the small synthetic dataset (60
 * items, 20 queries) made once per test file by `cogr demo` (SFT and its refit, seconds),
 * copied into a fresh folder for each test that writes, and `cogr` children (the compiled
 * CLI: `npm run build` first) with helpers to start `cogr serve` and wait for its address.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { withDb } from '../../index/store/db.ts';
import type { Corpus } from '../../index/core/types.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

/** A co-evolution run of `corpus` (the loop tests' small configuration, `rounds` rounds) made in this process at `path`. */
export async function inProcessRun(path: string, corpus: Corpus, rounds: number): Promise<string> {
  await withDb(path, (db) => runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, rounds }));
  return path;
}

/** The arguments of a `cogr demo` small enough for a test (SFT and its refit). */
export const demoArgs = (dataset: string, db: string) =>
  ['demo', '--dataset', dataset, '--db', db, '--rounds', '0', '--sft-epochs', '1', '--workers', '1', '--quiet'] as const;

export const CLI = join(__dirname, '../../bin/cogr.mjs');

export interface CatalogRun {
  dir: string;
  /** The dataset folder the run was made on. */
  dataset: string;
  /** A new copy of the run's database. */
  copy(): string;
  /** Run `cogr` to completion. */
  cogr(...args: string[]): { status: number | null; stdout: string; stderr: string };
  /** The same without blocking this process (a server it talks to answers meanwhile). */
  cogrAsync(...args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }>;
  cleanup(): void;
}

export function catalogRun(prefix: string): CatalogRun {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const env = { ...process.env, COGR_HOME: join(dir, 'home') };
  const cogr = (...args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env, timeout: 300_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const dataset = writeSynthDataset(join(dir, 'ds'));
  const template = join(dir, 'template');
  const r = cogr(...demoArgs(dataset, template));
  expect(r.status, r.stderr).toBe(0);
  let n = 0;
  const cogrAsync = (...args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
      child.once('exit', (status) => {
        clearTimeout(timer);
        resolve({ status, stdout, stderr });
      });
    });
  return {
    dir,
    dataset,
    cogrAsync,
    copy() {
      const db = join(dir, `db-${++n}`);
      cpSync(template, db, { recursive: true });
      return db;
    },
    cogr,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface ServeChild {
  base: string;
  child: ChildProcess;
  stderr(): string;
  /** SIGTERM, and wait for the exit. */
  stop(): Promise<void>;
}

/** Start `cogr serve` on a free port; resolves with its address once it listens, rejects (with its stderr) when it exits first. */
export function startServe(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServeChild> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--keyword-workers', '1', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env,
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise<ServeChild>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cogr serve did not listen within 120 s: ${err}`)), 120_000);
    child.stderr!.on('data', () => {
      const m = /listening address=(http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        base: m[1],
        child,
        stderr: () => err,
        stop: async () => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          await new Promise((r) => child.once('exit', r));
        },
      });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`cogr serve exited ${code}: ${err}`));
    });
  });
}

export async function json(url: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const r = await fetch(url, init);
  const text = await r.text();
  return { status: r.status, body: text.length ? JSON.parse(text) : null };
}

/** A JSON request with the bearer token. */
export function send(method: string, body?: unknown, token = 'tok'): RequestInit {
  return {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  };
}
