/**
 * The TRL trainer (trainers/trl/cogr_trl.py, in the venv trainers/trl/setup.sh builds)
 * against a live `cogr reward-server` on a stored MED run (`cogr demo --rounds 0`): one
 * GRPO step of SmolLM2-135M over one core training query, 2 completions. Asserted: the
 * step finished and saved its checkpoint; every reward the trainer received is what the
 * reward server returns for that completion now (`POST /v1/reward/query`); the mean
 * reward the trainer logged for the step is their mean. Faults: a reward server that is
 * not there and one that fails mid-step (a fake answering 503) stop the trainer with
 * error[REWARD_UNAVAILABLE] naming the reason, never a reward of 0; a prompt longer than
 * the context is error[PROMPT_TOO_LONG] naming it. No timing is asserted. Without the venv
 * the test FAILS naming what to run; it is skipped only when COGR_SKIP_TRL=1 is set.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writePrompts } from '../../src/trainers/trl.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'cogr.mjs');
const SCRIPT = join(ROOT, 'trainers', 'trl', 'cogr_trl.py');
const VENV = process.env.COGR_TRL_VENV ?? join(homedir(), '.cache', 'cogr', 'venvs', 'trl');
const PY = join(VENV, 'bin', 'python');
const BASE = process.env.COGR_TRL_BASE ?? join(homedir(), '.cache', 'cogr', 'checkpoints', 'SmolLM2-135M-Instruct');
const run = promisify(execFile);
const skip = process.env.COGR_SKIP_TRL === '1';
const HOUR = 3_600_000;

interface Done {
  code: number | null;
  stderr: string;
}

/** The venv's python on the trainer script, offline, one torch thread; resolves when it exits. */
function trainer(args: string[]): Promise<Done> {
  return new Promise((resolve) => {
    const env = { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_DATASETS_OFFLINE: '1' };
    const c = spawn(PY, [SCRIPT, '--threads', '1', ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    c.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    c.once('exit', (code) => resolve({ code, stderr }));
  });
}

async function post(url: string, body: unknown): Promise<Record<string, unknown>> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, unknown>;
}

describe.skipIf(skip)('the TRL trainer against a live cogr reward-server', () => {
  let dir = '';
  let server: ChildProcess | undefined;
  let base = '';
  let prompts = '';

  beforeAll(async () => {
    if (!existsSync(PY) || !existsSync(join(BASE, 'cogr-base.json'))) {
      throw new Error(
        `no trainer venv at ${VENV} or no base checkpoint at ${BASE}: run npx cogr llm install && bash trainers/trl/setup.sh (npm test does; set COGR_SKIP_TRL=1 to skip this test on purpose)`,
      );
    }
    dir = mkdtempSync(join(tmpdir(), 'cogr-trl-'));
    const env = { ...process.env, COGR_HOME: join(dir, 'home') };
    await run(process.execPath, [BIN, 'demo', '--dataset', 'med', '--rounds', '0', '--json'], { env, timeout: HOUR, maxBuffer: 64 << 20 });
    await writePrompts(join(dir, 'home', 'db'), join(dir, 'prompts'), 4, 1);
    // One core training query is the whole GRPO data set.
    prompts = join(dir, 'one-query.jsonl');
    writeFileSync(prompts, readFileSync(join(dir, 'prompts', 'query-core.jsonl'), 'utf8').split('\n')[0] + '\n');
    server = spawn(process.execPath, [BIN, 'reward-server', '--port', '0', '--round', 'latest'], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    base = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`cogr reward-server did not start in 10 min: ${stderr}`)), 600_000);
      server!.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
        const m = /listening address=(http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
        if (m) {
          clearTimeout(t);
          resolve(m[1]);
        }
      });
      server!.once('exit', (code) => reject(new Error(`cogr reward-server exited with ${code}: ${stderr}`)));
    });
  }, 2 * HOUR);

  afterAll(() => {
    server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'runs a GRPO step whose rewards are the reward server\u2019s for its completions',
    async () => {
      const out = join(dir, 'ckpt');
      const rewards = join(dir, 'rewards.jsonl');
      const log = join(dir, 'steps.jsonl');
      const r = await trainer([
        'grpo',
        '--model',
        BASE,
        '--prompts',
        prompts,
        '--reward-url',
        base,
        '--out',
        out,
        '--log',
        log,
        '--rewards-log',
        rewards,
        '--steps',
        '1',
        '--batch',
        '2',
        '--generations',
        '2',
        '--max-completion',
        '32',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(existsSync(join(out, 'cogr-done.json'))).toBe(true);
      expect(existsSync(join(out, 'config.json'))).toBe(true);
      const got = readFileSync(rewards, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { label: string; completion: string; reward: number });
      expect(got).toHaveLength(2);
      for (const g of got) {
        expect(g.label).toMatch(/^query:/);
        const ans = await post(`${base}/v1/reward/query`, { id: g.label.slice('query:'.length), completion: g.completion });
        expect(ans.reward).toBeCloseTo(g.reward, 9);
      }
      const steps = readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { step: number; reward?: number; loss?: number });
      const step1 = steps.find((s) => s.step === 1 && s.reward !== undefined);
      expect(step1, JSON.stringify(steps)).toBeDefined();
      expect(step1!.reward).toBeCloseTo((got[0].reward + got[1].reward) / 2, 5);
      expect(Number.isFinite(step1!.loss)).toBe(true);
    },
    2 * HOUR,
  );

  it(
    'stops with the reason when the reward server is not there',
    async () => {
      // A port that was just free: nothing listens on it.
      const probe = createServer();
      await new Promise<void>((res) => probe.listen(0, '127.0.0.1', res));
      const port = (probe.address() as { port: number }).port;
      await new Promise<void>((res) => probe.close(() => res()));
      const r = await trainer([
        'grpo',
        '--model',
        BASE,
        '--prompts',
        prompts,
        '--reward-url',
        `http://127.0.0.1:${port}`,
        '--out',
        join(dir, 'down'),
        '--log',
        join(dir, 'down.jsonl'),
        '--rewards-log',
        join(dir, 'down-rewards.jsonl'),
        '--steps',
        '1',
        '--batch',
        '2',
        '--generations',
        '2',
        '--max-completion',
        '16',
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(`error\\[REWARD_UNAVAILABLE\\]: reward server http://127\\.0\\.0\\.1:${port}/health unreachable`),
      );
      expect(existsSync(join(dir, 'down', 'cogr-done.json'))).toBe(false);
    },
    HOUR,
  );

  it(
    'fails the step, naming the answer, when the reward server fails mid-step (never a reward of 0)',
    async () => {
      // A fake whose /health answers and whose /get_reward fails, as a server that broke after the trainer started.
      let asked = 0;
      const fake: Server = createServer((req, res) => {
        if (req.url === '/health') return void res.end('{"status":"ok"}');
        asked++;
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"OVERLOADED","message":"going away"}}');
      });
      await new Promise<void>((res) => fake.listen(0, '127.0.0.1', res));
      const port = (fake.address() as { port: number }).port;
      try {
        const rewards = join(dir, 'mid-rewards.jsonl');
        const r = await trainer([
          'grpo',
          '--model',
          BASE,
          '--prompts',
          prompts,
          '--reward-url',
          `http://127.0.0.1:${port}`,
          '--out',
          join(dir, 'mid'),
          '--log',
          join(dir, 'mid.jsonl'),
          '--rewards-log',
          rewards,
          '--steps',
          '1',
          '--batch',
          '2',
          '--generations',
          '2',
          '--max-completion',
          '16',
        ]);
        expect(r.code).toBe(1);
        expect(asked).toBeGreaterThanOrEqual(1);
        expect(r.stderr).toContain(`error[REWARD_UNAVAILABLE]: reward server http://127.0.0.1:${port}/get_reward answered 503`);
        expect(r.stderr).toContain('going away');
        expect(readFileSync(rewards, 'utf8')).toBe('');
        expect(existsSync(join(dir, 'mid', 'cogr-done.json'))).toBe(false);
      } finally {
        await new Promise<void>((res) => fake.close(() => res()));
      }
    },
    HOUR,
  );

  it(
    'names a prompt longer than the context',
    async () => {
      const first = JSON.parse(readFileSync(prompts, 'utf8')) as { id: string };
      const r = await trainer([
        'generate',
        '--model',
        BASE,
        '--prompts',
        prompts,
        '--out',
        join(dir, 'long.jsonl'),
        '--context',
        '64',
        '--max-new-tokens',
        '16',
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(
          `error\\[PROMPT_TOO_LONG\\]: .*one-query\\.jsonl:1: prompt ${first.id} has \\d+ tokens \\+ 16 completion tokens > context 64`,
        ),
      );
      expect(existsSync(join(dir, 'long.jsonl'))).toBe(false);
    },
    HOUR,
  );
});
