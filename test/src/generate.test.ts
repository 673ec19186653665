import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { runGenerate } from '../../src/commands/generate.ts';

const ROOT = resolve(import.meta.dirname, '../..');
let dir = '';

function cogr(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [join(ROOT, 'bin/cogr.mjs'), ...args],
      { cwd: dir, env: { ...process.env, COGR_HOME: join(dir, 'home'), ...env } },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-gen-cli-'));
  // A small JSONL dataset: 4 topics × 10 items, 4 queries per topic.
  const topics = [
    ['crystalline', 'lens', 'vertebrates', 'eye'],
    ['renal', 'failure', 'kidney', 'children'],
    ['heart', 'attack', 'aspirin', 'infarction'],
    ['bone', 'marrow', 'stem', 'cell'],
  ];
  const ds = join(dir, 'tiny');
  mkdirSync(ds);
  const items: string[] = [];
  const queries: string[] = [];
  const qrels: string[] = [];
  topics.forEach((w, t) => {
    for (let i = 0; i < 10; i++)
      items.push(
        JSON.stringify({
          id: `i${t}-${i}`,
          title: `${w[i % 4]} ${w[(i + 1) % 4]}`,
          text: `${w.join(' ')} study ${i} of ${w[(i + 2) % 4]} ${w[(i + 3) % 4]}`,
        }),
      );
    for (let q = 0; q < 4; q++) {
      queries.push(JSON.stringify({ id: `q${t}-${q}`, text: `${w[q]} ${w[(q + 1) % 4]}` }));
      for (let i = 0; i < 10; i++) qrels.push(JSON.stringify({ query_id: `q${t}-${q}`, item_id: `i${t}-${i}` }));
    }
  });
  writeFileSync(join(ds, 'items.jsonl'), items.join('\n') + '\n');
  writeFileSync(join(ds, 'queries.jsonl'), queries.join('\n') + '\n');
  writeFileSync(join(ds, 'qrels.jsonl'), qrels.join('\n') + '\n');
  writeFileSync(
    join(dir, 'q.jsonl'),
    '{"id": "q1", "text": "the crystalline lens in vertebrates"}\n{"id": 2, "text": "renal failure in children"}\n',
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('cogr sft and cogr generate', () => {
  it('sft saves the round-0 item policy, query planner and base item index; generate serves the planner as JSON', async () => {
    const sft = await cogr([
      'sft',
      '--dataset',
      join(dir, 'tiny'),
      '--format',
      'jsonl',
      '--epochs',
      '2',
      '--commit-index',
      '--export',
      join(dir, 'trl'),
      '--json',
    ]);
    expect(sft.code).toBe(0);
    const summary = JSON.parse(sft.stdout);
    expect(summary).toMatchObject({ items: 40, trainQueries: 13, evalQueries: 3, savedRound: 0, itemGeneration: expect.any(Number) });
    expect(
      readFileSync(join(dir, 'trl', 'query.jsonl'), 'utf8')
        .trim()
        .split('\n'),
    ).toHaveLength(summary.trainQueries);
    const gen = await cogr(['generate', '--side', 'query', '--from', 'q.jsonl', '--policy', '0', '--samples', '3', '--json']);
    expect(gen.code).toBe(0);
    const out = JSON.parse(gen.stdout) as Record<string, string[][]>;
    expect(Object.keys(out).sort()).toEqual(['2', 'q1']);
    expect(out.q1).toHaveLength(3);
    expect(out.q1.flat().length).toBeGreaterThan(0);
    const flags = {
      side: 'query',
      generator: 'embedded',
      from: join(dir, 'q.jsonl'),
      samples: '3',
      temperature: '0.7',
      seed: '1',
      db: join(dir, 'home', 'db'),
      cache: true,
    };
    expect(await runGenerate({ ...flags, policy: 'latest' })).toEqual(out); // same round, same seed
    const missing = await runGenerate({ ...flags, policy: '4' }).catch((e) => e);
    expect(isCogrError(missing, 'NOT_FOUND')).toBe(true);
    expect(missing.message).toMatch(/no query planner for round 4/);
  });

  it('loads --policy-file and reports bad flags and input lines clearly', async () => {
    writeFileSync(join(dir, 'p.json'), JSON.stringify(new EmbeddedPolicy('item').toJSON()));
    writeFileSync(join(dir, 'i.jsonl'), '{"id": "a", "title": "Lens proteins", "text": "Soluble lens proteins of the bovine eye."}\n');
    const base = { generator: 'embedded', from: join(dir, 'i.jsonl'), cache: true };
    const ok = await runGenerate({ ...base, side: 'item', policyFile: join(dir, 'p.json'), temperature: '0' });
    expect(ok.a[0]).toContain('lens proteins');
    const wrongSide = await runGenerate({ ...base, side: 'query', policyFile: join(dir, 'p.json') }).catch((e) => e);
    expect(wrongSide.message).toMatch(/--policy-file: the embedded query generator is a saved query planner/);
    writeFileSync(join(dir, 'bad.jsonl'), '{"id": "a"}\n');
    const bad = await runGenerate({ ...base, side: 'item', from: join(dir, 'bad.jsonl') }).catch((e) => e);
    expect(isCogrError(bad, 'DATA_FORMAT')).toBe(true);
    expect(bad.message).toMatch(/bad.jsonl:1: text: /);
    const side = await runGenerate({ ...base, side: 'both' }).catch((e) => e);
    expect(isCogrError(side, 'INVALID_ARGUMENT')).toBe(true);
    expect(side.message).toMatch(/--side: expected item or query/);
  });

  it('generate --generator openai talks to an OpenAI-compatible endpoint from the environment', async () => {
    let calls = 0;
    const prompts: string[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        calls++;
        const b = JSON.parse(body);
        prompts.push(b.messages.at(-1).content);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'x',
            object: 'chat.completion',
            created: 0,
            model: b.model,
            choices: [
              { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '{"keywords": ["Lens", "vertebrate eye"]}' } },
            ],
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (server.address() as { port: number }).port;
      const env = { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, COGR_MODEL: 'tiny', OPENAI_API_KEY: 'k' };
      const a = await cogr(['generate', '--side', 'query', '--generator', 'openai', '--from', 'q.jsonl', '--json'], env);
      expect(a.code).toBe(0);
      expect(JSON.parse(a.stdout)).toEqual({ q1: [['lens', 'vertebrate eye']], '2': [['lens', 'vertebrate eye']] });
      const b = await runGenerate({
        side: 'query',
        generator: 'openai',
        from: join(dir, 'q.jsonl'),
        baseUrl: env.OPENAI_BASE_URL,
        model: 'tiny',
        db: join(dir, 'home', 'db'),
        cache: true,
      });
      expect(b).toEqual(JSON.parse(a.stdout));
      expect(calls).toBe(2); // the second run is served from the cache in the project database
      expect(prompts[0]).not.toMatch(/Top search results/);
      // "+ search results": the stored planner's top items and its plan's keywords are in the prompt
      const c = await runGenerate({
        side: 'query',
        generator: 'openai',
        from: join(dir, 'q.jsonl'),
        baseUrl: env.OPENAI_BASE_URL,
        model: 'tiny',
        db: join(dir, 'home', 'db'),
        cache: false,
        searchContext: '3',
      });
      expect(c).toEqual(b);
      const withContext = prompts.slice(2);
      expect(withContext).toHaveLength(2);
      const q1 = withContext.find((p) => p.includes('crystalline lens'))!;
      const [, list] = /Top search results for this query:\n((?:\d+\. .*\n?){3})/.exec(q1)!;
      const titles = list
        .trim()
        .split('\n')
        .map((l) => l.replace(/^\d+\. /, ''));
      expect(titles).toHaveLength(3);
      // the tiny dataset's items of the lens topic have titles made of the topic's words
      for (const t of titles) expect(t.split(' ').every((w) => ['crystalline', 'lens', 'vertebrates', 'eye'].includes(w))).toBe(true);
      expect(q1).toMatch(/Index keywords that retrieve them: \S/);
      await expect(
        runGenerate({
          side: 'item',
          generator: 'openai',
          from: join(dir, 'q.jsonl'),
          baseUrl: env.OPENAI_BASE_URL,
          model: 'tiny',
          cache: false,
          searchContext: '3',
        }),
      ).rejects.toThrow(/--search-context applies to --generator openai --side query/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
  it('generate --generator openai: a failed input keeps the answered ones (printed, then one line naming it, exit 1); invalid_format shows as such', async () => {
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const text = String((JSON.parse(body) as { messages: { content: string }[] }).messages.at(-1)!.content);
        if (text.includes('renal')) {
          res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"overloaded"}}');
          return;
        }
        const message = text.includes('lens')
          ? { role: 'assistant', content: '{"keywords": ["Lens"]}' }
          : text.includes('heart')
            ? { role: 'assistant', content: null }
            : text.includes('skin')
              ? { role: 'assistant', content: '{"keywords": ["skin", "rash"]}' }
              : { role: 'assistant', content: 'I am sorry, I cannot help with that request today, it is long prose.' };
        res.writeHead(200, { 'content-type': 'application/json' });
        // "skin": a keyword list that ends where max_tokens cut the model off.
        res.end(
          JSON.stringify({
            id: 'x',
            object: 'chat.completion',
            created: 0,
            model: 'tiny',
            choices: [{ index: 0, finish_reason: text.includes('skin') ? 'length' : 'stop', message }],
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (server.address() as { port: number }).port;
      writeFileSync(
        join(dir, 'mixed.jsonl'),
        [
          '{"id": "a", "text": "the crystalline lens"}',
          '{"id": "b", "text": "heart attack"}',
          '{"id": "c", "text": "bone marrow"}',
          '{"id": "e", "text": "skin disease"}',
          '{"id": "d", "text": "renal failure"}',
        ].join('\n') + '\n',
      );
      const env = { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, COGR_MODEL: 'tiny' };
      const args = ['generate', '--side', 'query', '--generator', 'openai', '--from', 'mixed.jsonl', '--no-cache', '--concurrency', '1'];
      const r = await cogr([...args, '--json'], env);
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout)).toEqual({
        a: [['lens']],
        b: [{ format: 'invalid_format', anomaly: 'a null message content' }],
        c: [{ format: 'invalid_format', raw: 'I am sorry, I cannot help with that request today, it is long prose.' }],
        e: [{ format: 'ok', keywords: ['skin', 'rash'], truncated: true }],
      });
      const last = r.stderr.trim().split('\n').at(-1)!;
      expect(last).toMatch(
        /^error\[LLM_ERROR\]: 1 of 5 input\(s\) failed: "d"; the 4 answered are printed; "d": LLM endpoint http:\/\/127\.0\.0\.1:\d+\/v1 failed after 5 attempt\(s\): last status HTTP 503$/,
      );
      const text = await cogr(args, env);
      expect(text.code).toBe(1);
      expect(text.stdout).toBe(
        'a\tlens\nb\t(invalid_format: a null message content)\nc\t(invalid_format)\ne\tskin; rash (cut off at max_tokens)\n',
      );
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 60_000);

  it('generate --generator openai: --llm-timeout bounds each request; a hung request and a non-JSON answer are retried', async () => {
    let calls = 0;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        calls++;
        if (calls === 1) return; // hangs: only the time-out ends it
        if (calls === 2) {
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end('<html>502 from a proxy, sent as 200</html>');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'x',
            object: 'chat.completion',
            created: 0,
            model: 'tiny',
            choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '{"keywords": ["Lens"]}' } }],
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (server.address() as { port: number }).port;
      writeFileSync(join(dir, 'one.jsonl'), '{"id": "q1", "text": "the crystalline lens"}\n');
      const env = { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, COGR_MODEL: 'tiny', COGR_HOME: join(dir, 'home-timeout') };
      const a = await cogr(
        ['generate', '--side', 'query', '--generator', 'openai', '--from', 'one.jsonl', '--llm-timeout', '300', '--json'],
        env,
      );
      expect(a.stderr).toMatch(/^llm usage requests=3 .*failures=2 retries=2 /);
      expect(a.code).toBe(0);
      expect(JSON.parse(a.stdout)).toEqual({ q1: [['lens']] });
      expect(calls).toBe(3);
      const bad = await cogr(['generate', '--side', 'query', '--generator', 'openai', '--from', 'one.jsonl', '--llm-timeout', '1e3'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toBe('error[INVALID_ARGUMENT]: --llm-timeout: expected an integer in [1, 86400000] (milliseconds), got "1e3"\n');
      const badEnv = await cogr(['generate', '--side', 'query', '--generator', 'openai', '--from', 'one.jsonl'], {
        ...env,
        COGR_LLM_TIMEOUT_MS: '0x10',
      });
      expect(badEnv.stderr).toMatch(/^error\[INVALID_ARGUMENT\]: COGR_LLM_TIMEOUT_MS: expected an integer/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
