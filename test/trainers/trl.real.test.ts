/**
 * The TRL trainer (trainers/trl/cogr_trl.py, in the venv trainers/trl/setup.sh builds)
 * against a live `cogr reward-server --half r1-query` on a stored MED run (`cogr demo --rounds 0`): one
 * GRPO step of SmolLM2-135M over one core training query, 2 completions. Asserted: the
 * step finished and saved its checkpoint; every reward the trainer received is what the
 * reward server returns for that completion now (`POST /v1/reward/query`); the mean
 * reward the trainer logged for the step is their mean. Faults: a reward server that is
 * not there and one that fails mid-step (a fake answering 503) stop the trainer with
 * error[REWARD_UNAVAILABLE] naming the reason, never a reward of 0; a prompt longer than
 * the context is error[PROMPT_TOO_LONG] naming it. The keyword grammar (keyword_grammar.py):
 * its unit tests, its bounds equal to DEFAULTS.llm's, and three answers of the real
 * checkpoint under it that all parse and none cut off; under the run's vocabulary (`cogr sft
 * --export`'s vocabulary.json) every keyword of three answers is one of its phrases, forced
 * (the trie) or filtered (the default). round.sh on a tiny MED round (--query-sft own, --query-targets oracle) whose
 * reward server is killed during the GRPO step: the step fails with REWARD_UNAVAILABLE and
 * its reason, a re-run resumes at that stage and ends with the table; and a tiny round with --embeddings auto
 * (its run fitted with all-MiniLM-L6-v2, the shipped numpy server started by each cogr command) that ends with
 * the table and leaves no embeddings server behind. No timing is asserted. Without the venv
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
import { DEFAULTS } from '../../index/core/defaults.ts';
import { KEYWORD_MAX_WORDS } from '../../index/text/normalize.ts';
import { parseCompletions, writePrompts } from '../../src/trainers/trl.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'cogr.mjs');
const SCRIPT = join(ROOT, 'trainers', 'trl', 'cogr_trl.py');
const ROUND = join(ROOT, 'trainers', 'trl', 'round.sh');
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

const OFFLINE = { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_DATASETS_OFFLINE: '1' };

/** A child (offline) whose stderr is collected; onErr sees it as it grows; resolves when it exits. */
function child(cmd: string, args: string[], onErr?: (all: string) => void, env: NodeJS.ProcessEnv = {}): Promise<Done> {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { env: { ...process.env, ...OFFLINE, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    c.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      onErr?.(stderr);
    });
    c.once('exit', (code) => resolve({ code, stderr }));
  });
}

/** The venv's python on the trainer script, offline, one torch thread. */
function trainer(args: string[]): Promise<Done> {
  return child(PY, [SCRIPT, '--threads', '1', ...args]);
}

/** round.sh as small as a test can run it: two of everything, one step of each stage, on MED; `work` its folder. */
function tinyRound(work: string): string[] {
  return [
    ROUND,
    '--dataset',
    'med',
    '--work',
    work,
    '--sft-limit',
    '2',
    '--sft-max-epochs',
    '1',
    '--query-steps',
    '1',
    '--item-steps',
    '1',
    '--items',
    '2',
    '--queries',
    '2',
    '--judged',
    '2',
    '--generations',
    '2',
    '--gen-tokens',
    '48',
    '--threads',
    '1',
  ];
}

/** Three MED queries of round.sh's prompts (the first and the last two: core training and held out) written to `name` in `dir`. */
function threePrompts(dir: string, name: string): string {
  const rows = readFileSync(join(dir, 'prompts', 'query-all.jsonl'), 'utf8')
    .trim()
    .split('\n');
  const three = join(dir, name);
  writeFileSync(three, [rows[0], rows[rows.length - 2], rows[rows.length - 1]].join('\n') + '\n');
  return three;
}

/** Greedy answers of the base checkpoint to `prompts` (at most 64 new tokens, one batch) written to `out`; `extra` flags after. */
function generateThree(prompts: string, out: string, ...extra: string[]): Promise<Done> {
  return trainer(['generate', '--model', BASE, '--prompts', prompts, '--out', out, '--max-new-tokens', '64', '--batch', '3', ...extra]);
}

/** The keyword list of every answer in a completions file (the object or the bare array). */
function answerKeywords(file: string): string[][] {
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => {
      const v = JSON.parse((JSON.parse(l) as { completion: string }).completion) as { keywords?: string[] } | string[];
      return Array.isArray(v) ? v : v.keywords!;
    });
}

/** One GRPO step of the trainer (batch 2, 2 generations) against a reward server, writing under `name` in `dir`. */
function grpoStep(
  dir: string,
  prompts: string,
  rewardUrl: string,
  name: string,
  maxCompletion: number,
  rewardsLog?: string,
): Promise<Done> {
  return trainer([
    'grpo',
    '--model',
    BASE,
    '--prompts',
    prompts,
    '--reward-url',
    rewardUrl,
    '--out',
    join(dir, name),
    '--log',
    join(dir, `${name}.jsonl`),
    '--rewards-log',
    rewardsLog ?? join(dir, `${name}-rewards.jsonl`),
    '--steps',
    '1',
    '--batch',
    '2',
    '--generations',
    '2',
    '--max-completion',
    String(maxCompletion),
  ]);
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
    server = spawn(process.execPath, [BIN, 'reward-server', '--port', '0', '--half', 'r1-query'], {
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
      const log = join(dir, 'ckpt.jsonl');
      const r = await grpoStep(dir, prompts, base, 'ckpt', 32, rewards);
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
      const r = await grpoStep(dir, prompts, `http://127.0.0.1:${port}`, 'down', 16);
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
        const r = await grpoStep(dir, prompts, `http://127.0.0.1:${port}`, 'mid', 16, rewards);
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
    'the keyword grammar and the resumed logs: their unit tests pass in the venv, and the grammar\u2019s bounds are the LLM schema\u2019s',
    async () => {
      for (const file of ['test_keyword_grammar.py', 'test_resume_logs.py']) {
        const unit = await child(PY, ['-m', 'unittest', '-v', join(ROOT, 'trainers', 'trl', file)]);
        expect(unit.code, `${file}: ${unit.stderr}`).toBe(0);
        expect(unit.stderr).toMatch(/Ran [1-9]\d* tests/);
      }
      const { stdout } = await run(
        PY,
        ['-c', 'import keyword_grammar as g; print(g.MAX_KEYWORDS, g.MAX_KEYWORD_LENGTH, g.KEYWORD_MAX_WORDS)'],
        { cwd: join(ROOT, 'trainers', 'trl'), timeout: 120_000 },
      );
      expect(stdout.trim()).toBe(`${DEFAULTS.llm.maxKeywords} ${DEFAULTS.llm.maxKeywordLength} ${KEYWORD_MAX_WORDS}`);
    },
    HOUR,
  );

  it(
    'constrained generation on the real checkpoint: every answer parses and closes before the token budget',
    async () => {
      // Three MED queries (two held out, one core training), the prompts round.sh uses.
      const three = threePrompts(dir, 'three.jsonl');
      const out = join(dir, 'three.completions.jsonl');
      const r = await generateThree(three, out);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/generate: 3 answers in \d+ s, 0 cut off at 64 tokens; keyword grammar/);
      const parsed = parseCompletions(out, join(dir, 'three.keywords.jsonl'));
      expect(parsed).toEqual({ lines: 3, invalid: 0, truncated: 0 });
      for (const l of readFileSync(out, 'utf8').trim().split('\n')) {
        const c = JSON.parse(l) as { completion: string };
        const v = JSON.parse(c.completion) as { keywords?: string[] } | string[];
        const kws = Array.isArray(v) ? v : v.keywords!;
        expect(kws.length).toBeGreaterThanOrEqual(1);
        expect(kws.length).toBeLessThanOrEqual(DEFAULTS.llm.maxKeywords);
        // The grammar forbids closing a keyword already written, except in the closing it forces
        // when the token budget runs out (keyword_grammar.py: the answer must end): only the last
        // keyword may repeat an earlier one, and the parsed sets drop it.
        const head = kws.slice(0, -1).map((k) => k.toLowerCase().trim());
        expect(new Set(head).size, JSON.stringify(kws)).toBe(head.length);
      }
      for (const l of readFileSync(join(dir, 'three.keywords.jsonl'), 'utf8').trim().split('\n')) {
        const { keywords } = JSON.parse(l) as { keywords: string[] };
        expect(keywords.length).toBeGreaterThanOrEqual(1);
        expect(new Set(keywords).size, JSON.stringify(keywords)).toBe(keywords.length);
      }
    },
    HOUR,
  );

  it(
    "under the run's vocabulary (cogr sft --export's vocabulary.json) every query keyword of the real checkpoint is one of its phrases",
    async () => {
      const exported = join(dir, 'sft-data');
      await run(process.execPath, [BIN, 'sft', '--db', join(dir, 'home', 'db'), '--export', exported, '--json'], {
        env: { ...process.env, COGR_HOME: join(dir, 'home') },
        timeout: HOUR,
        maxBuffer: 64 << 20,
      });
      const vocab = JSON.parse(readFileSync(join(exported, 'vocabulary.json'), 'utf8')) as {
        minCarriers: number;
        phrases: { phrase: string; carriers: number }[];
      };
      expect(vocab.phrases.length).toBeGreaterThan(100);
      expect(vocab.phrases.every((p) => p.carriers >= vocab.minCarriers)).toBe(true);
      const phrases = new Set(vocab.phrases.map((p) => p.phrase.toLowerCase()));
      const three = threePrompts(dir, 'three-v.jsonl');
      const out = join(dir, 'three-v.completions.jsonl');
      const r = await generateThree(three, out, '--vocabulary', join(exported, 'vocabulary.json'), '--vocabulary-mode', 'force');
      expect(r.code, r.stderr).toBe(0);
      const cut = /phrases of a \d+-phrase vocabulary \((\d+) cut off it by a forced closing\)/.exec(r.stderr);
      expect(cut, r.stderr).not.toBeNull();
      expect(parseCompletions(out, join(dir, 'three-v.keywords.jsonl'))).toEqual({ lines: 3, invalid: 0, truncated: 0 });
      let off = 0;
      for (const answer of answerKeywords(out)) {
        const kws = answer.map((k) => k.toLowerCase());
        expect(kws.length).toBeGreaterThanOrEqual(1);
        // Only a keyword the forced closing cut at the token budget may be off the vocabulary, and it is the last.
        kws.forEach((k, i) => {
          if (!phrases.has(k)) {
            off++;
            expect(i, JSON.stringify(kws)).toBe(kws.length - 1);
          }
        });
      }
      expect(off).toBeLessThanOrEqual(Number(cut![1]));
      // The filter (the default mode): sampled under the list grammar alone, the off-vocabulary keywords left out of each answer.
      const outF = join(dir, 'three-f.completions.jsonl');
      const f = await generateThree(three, outF, '--vocabulary', join(exported, 'vocabulary.json'));
      expect(f.code, f.stderr).toBe(0);
      const left = /vocabulary filter: (\d+) of (\d+) keywords left out/.exec(f.stderr);
      expect(left, f.stderr).not.toBeNull();
      // Compared as keyword_grammar.normalize does: lower case, edge punctuation off every word.
      const norm = (k: string) =>
        k
          .toLowerCase()
          .split(/\s+/)
          .map((w) => w.replace(/^[\p{P}\p{S}]+|[\p{P}\p{S}]+$/gu, ''))
          .filter(Boolean)
          .join(' ');
      let kept = 0;
      for (const answer of answerKeywords(outF)) {
        for (const k of answer) expect(phrases.has(norm(k)), k).toBe(true);
        kept += answer.length;
      }
      expect(kept + Number(left![1])).toBe(Number(left![2]));
      // The fallback: filtered, and an answer the filter leaves empty sampled again under the trie. A
      // vocabulary no medical answer holds empties the filtered answers, so the fallback pass must write them.
      const odd = ['maple syrup', 'quartz clock', 'volcanic ash', 'zebra mussel'];
      const oddFile = join(dir, 'odd-vocabulary.json');
      writeFileSync(oddFile, JSON.stringify(odd));
      const outB = join(dir, 'three-b.completions.jsonl');
      const b = await generateThree(three, outB, '--vocabulary', oddFile, '--vocabulary-mode', 'fallback');
      expect(b.code, b.stderr).toBe(0);
      const fell = /vocabulary fallback: (\d+) of 3 answers left empty by the filter/.exec(b.stderr);
      expect(fell, b.stderr).not.toBeNull();
      expect(Number(fell![1])).toBeGreaterThanOrEqual(1);
      const rows = readFileSync(outB, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { completion: string; fallback?: boolean });
      expect(rows.filter((r) => r.fallback).length).toBe(Number(fell![1]));
      // What made them, beside them: bench llm reads the mode and the counts from it.
      const meta = JSON.parse(readFileSync(join(dir, 'three-b.completions.meta.json'), 'utf8')) as Record<string, unknown>;
      expect(meta).toMatchObject({ answers: 3, vocabularyMode: 'fallback', vocabulary: odd.length, fallbacks: Number(fell![1]) });
      expect((meta.filter as { emptied: number }).emptied).toBe(Number(fell![1]));
      for (const [i, answer] of answerKeywords(outB).entries()) {
        expect(answer.length, JSON.stringify(rows[i])).toBeGreaterThanOrEqual(1);
        // Every keyword one of the four phrases, but a last one a forced closing cut at the token budget.
        answer.slice(0, rows[i]!.fallback ? -1 : undefined).forEach((k) => expect(odd, k).toContain(norm(k)));
        if (rows[i]!.fallback) expect(odd).toContain(norm(answer[0]!));
      }
    },
    HOUR,
  );

  it(
    'round.sh: a reward server killed mid-GRPO fails the step with the reason; a re-run resumes at that stage and finishes',
    async () => {
      const work = join(dir, 'round');
      const args = [...tinyRound(work), '--pseudo-queries', '3', '--query-sft', 'own', '--query-targets', 'oracle'];
      let killed = false;
      const first = await child('bash', args, (err) => {
        // The GRPO step announces itself right before sampling; the reward is asked for after it.
        if (!killed && /grpo query: 1 steps × 1 prompt\(s\)/.test(err)) {
          killed = true;
          process.kill(Number(readFileSync(join(work, 'reward-server.pid'), 'utf8').trim()), 'SIGKILL');
        }
      });
      expect(killed, first.stderr).toBe(true);
      expect(first.code).not.toBe(0);
      expect(first.stderr).toMatch(/error\[REWARD_UNAVAILABLE\]: reward server http:\/\/127\.0\.0\.1:\d+\/get_reward unreachable: \S/);
      expect(existsSync(join(work, 'ckpt-query', 'cogr-done.json'))).toBe(false);
      expect(existsSync(join(work, 'ckpt-sft', 'cogr-done.json'))).toBe(true);
      // The stopped stage records the seconds it ran (bench llm sums a stage's records).
      const stages = () =>
        readFileSync(join(work, 'stages.jsonl'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { stage: string; seconds: number; max_rss_mb?: number; stopped?: boolean });
      const stopped = stages().filter((s) => s.stage === 'grpo-query');
      expect(stopped).toEqual([{ stage: 'grpo-query', seconds: expect.any(Number), stopped: true }]);
      expect(stopped[0].seconds).toBeGreaterThanOrEqual(0);
      // --pseudo-queries: exported (item titles with the planner's keywords) and trained on, within --sft-limit.
      const pseudo = readFileSync(join(work, 'sft-data', 'pseudo.jsonl'), 'utf8')
        .trim()
        .split('\n');
      expect(pseudo.length).toBeGreaterThan(0);
      expect(pseudo.length).toBeLessThanOrEqual(3);
      expect(first.stderr).toMatch(/item examples, [12] pseudo-queries\)/);
      const second = await child('bash', args);
      expect(second.code, second.stderr).toBe(0);
      const grpo = stages().filter((s) => s.stage === 'grpo-query');
      expect(grpo).toHaveLength(2);
      expect(grpo[0].stopped).toBe(true);
      expect(grpo[1]).toEqual({ stage: 'grpo-query', seconds: expect.any(Number), max_rss_mb: expect.any(Number) });
      for (const done of ['demo', 'prompts', 'sft-export', 'sft', 'sft-query', 'eval-sft'])
        expect(second.stderr).toContain(`stage ${done}: done`);
      expect(second.stderr).toMatch(/stage grpo-query \(/);
      expect(existsSync(join(work, 'ckpt-item', 'cogr-done.json'))).toBe(true);
      // --query-sft own: two generators. The query side's SFT saw query targets only; the query half-round
      // starts from it, the item half-round from the joint SFT model.
      const done = (ckpt: string) => JSON.parse(readFileSync(join(work, ckpt, 'cogr-done.json'), 'utf8')) as Record<string, unknown>;
      expect(done('ckpt-sft-query')).toMatchObject({ stage: 'sft', items: 0 });
      expect(done('ckpt-sft-query').queries).toBeGreaterThan(0);
      expect(done('ckpt-sft').items).toBeGreaterThan(0);
      expect(done('ckpt-query').from).toBe(join(work, 'ckpt-sft-query'));
      expect(done('ckpt-item').from).toBe(join(work, 'ckpt-sft'));
      const table = readFileSync(join(work, 'table.md'), 'utf8');
      expect(table).toMatch(/\| query \| 1 \| -?\d\.\d{4} \|/);
      expect(table).toMatch(/\| item \| 1 \| -?\d\.\d{4} \|/);
      expect(table).toContain('| LLM after the item half-round |');
      // --query-targets oracle: the export says whose targets it holds, and a resumed round with other targets is refused.
      const exported = JSON.parse(readFileSync(join(work, 'sft-data', 'done.json'), 'utf8')) as {
        queryTargets: { kind: string; oracle: number };
      };
      expect(exported.queryTargets.kind).toBe('oracle');
      expect(exported.queryTargets.oracle).toBeGreaterThan(0);
      const other = await child('bash', [...args.slice(0, -1), 'planner']);
      expect(other.code).toBe(2);
      expect(other.stderr).toContain(
        `round.sh: ${work}/sft-data was exported with --query-targets oracle, not planner: use another --work`,
      );
      // No reward server is left running.
      expect(existsSync(join(work, 'reward-server.pid'))).toBe(false);
    },
    2 * HOUR,
  );

  it(
    'round.sh --embeddings auto: a round on a run fitted with all-MiniLM-L6-v2, every cogr command of it given the endpoint, no server left behind',
    async () => {
      const work = join(dir, 'round-dense');
      const r = await child('bash', [...tinyRound(work), '--query-sft', 'own', '--query-targets', 'oracle', '--embeddings', 'auto']);
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
      const demo = JSON.parse(readFileSync(join(work, 'demo.json'), 'utf8')) as {
        config: { embeddingsModel: string; keywordCosine: number };
      };
      expect(demo.config.embeddingsModel).toBe('all-MiniLM-L6-v2');
      expect(demo.config.keywordCosine).toBe(0.3);
      // demo, sft --export and the imports each started the shipped server for themselves; so did each reward server.
      expect(r.stderr.match(/--embeddings auto: all-MiniLM-L6-v2 served for this command/g)?.length ?? 0).toBeGreaterThanOrEqual(3);
      expect(readFileSync(join(work, 'table.md'), 'utf8')).toContain('| LLM after the item half-round |');
      // Every server started with --parent-pid still has that parent: none outlived its command.
      await new Promise((res) => setTimeout(res, 3000));
      const { stdout } = await promisify(execFile)('ps', ['-eo', 'pid,ppid,args'], { encoding: 'utf8' });
      const orphans = stdout
        .split('\n')
        .map((l) => /^\s*(\d+)\s+(\d+)\s+.*server\.py.*--parent-pid (\d+)/.exec(l))
        .filter((m): m is RegExpExecArray => m !== null && m[2] !== m[3]);
      expect(orphans.map((m) => m[0])).toEqual([]);
    },
    2 * HOUR,
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
        '17',
        '--max-new-tokens',
        '16',
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(
          `error\\[PROMPT_TOO_LONG\\]: .*one-query\\.jsonl:1: prompt ${first.id} has \\d+ tokens \\+ 16 completion tokens > context 17`,
        ),
      );
      expect(existsSync(join(dir, 'long.jsonl'))).toBe(false);
    },
    HOUR,
  );
});
