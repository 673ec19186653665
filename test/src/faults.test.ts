/**
 * Fault injection on a real project home (`cogr demo` on a small synthetic dataset, real
 * processes, real LevelDB, real HTTP):
 *
 * - seeded single-byte flips in random files under the project home: every `index search`
 *   of a fixed probe set prints exactly what it printed before the flip, or exits non-zero
 *   with error[DB_CORRUPT]; never another answer with exit 0. Flips aimed at the files
 *   the probes read are always caught.
 * - a lost write-ahead log: readers still answer from the published files, `cogr verify`
 *   says what the database lost, a writer refuses to go on.
 * - readers beside a training `demo`: `index search`, `drift`, `reward-server` and `serve`
 *   run while it trains with no DB_LOCKED, and `serve` answers from each generation the
 *   demo commits; `demo --fresh` in the meantime is refused, and the training run ends
 *   with the same JSON as it gives alone.
 * (A training run killed at random moments is test/src/evolve.test.ts and test/index/kill.test.ts.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRng } from '../../index/core/random.ts';
import { cogr } from './_cli.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

const BIN = join(__dirname, '../../bin/cogr.mjs');
const tmp = mkdtempSync(join(tmpdir(), 'cogr-faults-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const dataset = writeSynthDataset(join(tmp, 'synth'), { topics: 8, itemsPerTopic: 30, queriesPerTopic: 6 });
const DEMO = [
  'demo',
  '--dataset',
  dataset,
  '--rounds',
  '5',
  '--group-size',
  '4',
  '--query-epochs',
  '4',
  '--item-epochs',
  '2',
  '--sft-epochs',
  '2',
  '--workers',
  '1',
  '--quiet',
  '--json',
];

interface Done {
  code: number | null;
  out: string;
  err: string;
}
function start(home: string, args: string[]): ChildProcess & { done: Promise<Done>; stderrText: () => string } {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, COGR_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += String(d)));
  child.stderr!.on('data', (d) => (err += String(d)));
  const done = new Promise<Done>((resolve) => child.on('close', (code) => resolve({ code, out, err })));
  return Object.assign(child, { done, stderrText: () => err });
}
const run = (home: string, args: string[]) => start(home, args).done;

/** A demo's JSON without what depends on the clock or the folder. */
function timeless(json: string): unknown {
  const o = JSON.parse(json) as { steps: Record<string, unknown>[] } & Record<string, unknown>;
  const { seconds: _s, db: _d, report: _r, ...rest } = o;
  return {
    ...rest,
    steps: o.steps.map(({ finishedAt: _f, train, refit, ...s }) => ({
      ...s,
      train: train ? { ...(train as object), seconds: 0 } : null,
      ...(refit ? { refit: { ...(refit as object), seconds: 0 } } : {}),
    })),
  };
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else if (statSync(p).size > 0) out.push(p);
  }
  return out.sort();
}

const homeA = join(tmp, 'alone');
let alone = '';
beforeAll(async () => {
  const r = await run(homeA, DEMO);
  expect(r.code, r.err).toBe(0);
  alone = r.out;
}, 120_000);

describe('single-byte flips under the project home', () => {
  // Keywords of the run's shared vocabulary (the sub-topic words several items carry) and titles' words.
  const PROBES = [
    ['--keywords', 't0w0|t1w1|study', '--query', 't0w0 results', '--k', '10'],
    ['--keywords', 't2w2', '--all'],
    ['--generation', '1', '--keywords', 't3w0|t3w1', '--query', 't3w1 patients'],
    ['--side', 'query', '--keywords', 't0w0|t4w0|t0w1', '--k', '5'],
  ];
  const search = async (home: string, probe: string[]) => {
    const r = await cogr('index', 'search', '--db', join(home, 'db'), '--json', ...probe);
    return { code: r.code, out: r.out, err: r.err };
  };
  const flip = (file: string, offset: number, mask: number) => {
    const b = readFileSync(file);
    b[offset] ^= mask;
    writeFileSync(file, b);
  };

  it('never changes an answer silently: the same output, or error[DB_CORRUPT] (60 seeded random flips, 16 aimed)', async () => {
    const home = join(tmp, 'flips');
    cpSync(homeA, home, { recursive: true });
    const before: { code: number; out: string; err: string }[] = [];
    // In process, one at a time (the captured stdout is the process's).
    for (const p of PROBES) before.push(await search(home, p));
    for (const b of before) expect(b.code, b.err).toBe(0);
    expect(before.filter((b) => JSON.parse(b.out).matched > 0).length).toBeGreaterThanOrEqual(3);
    const files = filesUnder(home);
    const latestItem = readdirSync(join(home, 'db', 'published'))
      .filter((f) => /^item-\d+\.(view|json)$/.test(f))
      .sort()
      .slice(-2);
    const aimed = latestItem.map((f) => join(home, 'db', 'published', f));
    const rng = createRng(20261201);
    let caught = 0;
    const trials: { file: string; offset: number; mask: number; aimed: boolean }[] = [];
    for (let i = 0; i < 60; i++) {
      const file = files[Math.floor(rng() * files.length)];
      trials.push({ file, offset: Math.floor(rng() * statSync(file).size), mask: 1 << Math.floor(rng() * 8), aimed: false });
    }
    for (let i = 0; i < 16; i++) {
      const file = aimed[i % aimed.length];
      trials.push({ file, offset: Math.floor(rng() * statSync(file).size), mask: 1 << Math.floor(rng() * 8), aimed: true });
    }
    for (const t of trials) {
      flip(t.file, t.offset, t.mask);
      try {
        for (let p = 0; p < PROBES.length; p++) {
          const r = await search(home, PROBES[p]);
          const where = `${relative(home, t.file)} byte ${t.offset} ^ ${t.mask}, probe ${p}`;
          if (r.code === 0) expect(r.out, where).toBe(before[p].out);
          else {
            expect(r.code, where).toBe(1);
            expect(r.err, where).toMatch(/^error\[DB_CORRUPT\]: (item|query) generation \d+: (file|manifest) .* /);
            caught++;
          }
          // Probe 0 reads the newest item generation: an aimed flip is always caught there.
          if (t.aimed && p === 0) expect(r.code, where).toBe(1);
        }
      } finally {
        flip(t.file, t.offset, t.mask);
      }
    }
    expect(caught).toBeGreaterThanOrEqual(16);
    // The same in real processes, for a flip in the newest item generation's view file.
    flip(aimed[0], 100, 0x10);
    const real = await run(home, ['index', 'search', '--db', join(home, 'db'), '--json', ...PROBES[0]]);
    expect(real.code).toBe(1);
    expect(real.err).toMatch(/^error\[DB_CORRUPT\]: item generation \d+: file .*item-\d+\.(view|json) is damaged/);
    flip(aimed[0], 100, 0x10);
    expect((await run(home, ['index', 'search', '--db', join(home, 'db'), '--json', ...PROBES[0]])).out).toBe(before[0].out);
  }, 120_000);

  it('a lost write-ahead log: readers answer from the files, verify says what was lost, a writer refuses', async () => {
    const home = join(tmp, 'wal');
    cpSync(homeA, home, { recursive: true });
    const before = await search(home, PROBES[0]);
    const logs = readdirSync(join(home, 'db')).filter((f) => f.endsWith('.log'));
    expect(logs.length).toBeGreaterThan(0);
    for (const f of logs) unlinkSync(join(home, 'db', f));
    expect(await search(home, PROBES[0])).toEqual(before);
    const v = await cogr('verify', '--db', join(home, 'db'), '--json');
    expect(v.code).toBe(1);
    expect(JSON.parse(v.out).lines.some((l: { status: string }) => l.status === 'lost')).toBe(true);
    const publishedBefore = filesUnder(join(home, 'db', 'published')).map((f) => [relative(home, f), readFileSync(f).toString('base64')]);
    const w = await run(home, DEMO);
    expect(w.code).toBe(1);
    expect(w.err).toMatch(/^error\[DB_CORRUPT\]: .*the database .* lost committed data .*`cogr verify --repair`/);
    // The refused writer wrote nothing readers hold.
    expect(filesUnder(join(home, 'db', 'published')).map((f) => [relative(home, f), readFileSync(f).toString('base64')])).toEqual(
      publishedBefore,
    );
    expect(await search(home, PROBES[0])).toEqual(before);
  }, 60_000);
});

describe('readers beside a training demo', () => {
  it('run with no DB_LOCKED, serve answers from new generations in commit order and ends on the last, --fresh is refused, the run ends as it does alone', async () => {
    const home = join(tmp, 'busy');
    const writer = start(home, DEMO);
    // As soon as the writer holds its database: a second demo that would start over is refused.
    while (!existsSync(join(home, 'db', 'LOCK'))) {
      if (writer.exitCode !== null) throw new Error(`the demo ended early: ${writer.stderrText()}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const fresh = run(home, [...DEMO, '--fresh']);
    const published = join(home, 'db', 'published');
    while (!existsSync(join(published, 'item-00000000.json'))) {
      if (writer.exitCode !== null) throw new Error(`the demo ended before publishing: ${writer.stderrText()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const serve = start(home, ['serve', '--round', 'latest', '--port', '0', '--watch', '1']);
    let base = '';
    while (!base) {
      const m = /listening address=(http:\/\/[^ \n]+)/.exec(serve.stderrText());
      if (m) base = m[1];
      else if (serve.exitCode !== null) throw new Error(`serve failed: ${serve.stderrText()}`);
      else await new Promise((r) => setTimeout(r, 20));
    }
    // What was already published when serve came up (it watches from then on).
    const upAt = { item: -1, query: -1 };
    for (const f of readdirSync(published)) {
      const m = /^(item|query)-(\d+)\.json$/.exec(f);
      if (m) upAt[m[1] as 'item' | 'query'] = Math.max(upAt[m[1] as 'item' | 'query'], Number(m[2]));
    }
    const outputs: Done[] = [];
    const served = new Set<number>();
    const refused = await fresh;
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/^error\[DB_LOCKED\]: database .* is in use by another process/);
    const rewards = start(home, ['reward-server', '--port', '0']);
    let rounds = 0;
    while (writer.exitCode === null) {
      rounds++;
      const [search, drift] = await Promise.all([
        run(home, ['index', 'search', '--keywords', 't0w3|t1w4', '--json']),
        run(home, ['drift', '--json', '-']),
        fetch(`${base}/v1/search?q=${encodeURIComponent('t0w3 t0w0 study')}`).then(async (r) => {
          expect(r.status).toBe(200);
          served.add(((await r.json()) as { generation: number }).generation);
        }),
      ]);
      outputs.push(search, drift);
      expect(search.code, search.err).toBe(0);
      expect(drift.code, drift.err).toBe(0);
    }
    const trained = await writer.done;
    expect(trained.code, trained.err).toBe(0);
    // The reward server came up and answered beside the writer.
    while (!/listening address=/.test(rewards.stderrText()) && rewards.exitCode === null) await new Promise((r) => setTimeout(r, 20));
    const rbase = /listening address=(http:\/\/[^ \n]+)/.exec(rewards.stderrText())![1];
    expect((await fetch(`${rbase}/health`)).status).toBe(200);
    rewards.kill('SIGTERM');
    const steps = (JSON.parse(trained.out) as { steps: { itemGeneration: number; queryGeneration: number }[] }).steps;
    const finalItem = steps.at(-1)!.itemGeneration;
    // serve catches up with the last generation (waited for, not timed: its watch is slower on a busy machine)...
    while (((await (await fetch(`${base}/health`)).json()) as { generation: number }).generation !== finalItem)
      await new Promise((r) => setTimeout(r, 50));
    expect(((await (await fetch(`${base}/v1/search?q=t0w3`)).json()) as { generation: number }).generation).toBe(finalItem);
    serve.kill('SIGTERM');
    const serveLog = (await serve.done).err;
    // ...and has served generations committed after it came up, on both sides, in commit order, and
    // only committed ones (a poller may skip one that the next replaced before it looked).
    const swaps = [...serveLog.matchAll(/serving generation item=(\d+) query=(\d+|null)/g)].map((m) => ({
      item: Number(m[1]),
      query: m[2] === 'null' ? -1 : Number(m[2]),
    }));
    expect(swaps.length).toBeGreaterThan(1);
    const committedItems = new Set(steps.map((s) => s.itemGeneration));
    const committedQueries = new Set(steps.map((s) => s.queryGeneration));
    for (let i = 1; i < swaps.length; i++) {
      expect(swaps[i].item).toBeGreaterThanOrEqual(swaps[i - 1].item);
      expect(swaps[i].query).toBeGreaterThanOrEqual(swaps[i - 1].query);
    }
    for (const s of swaps.filter((x) => x.item > upAt.item)) expect(committedItems.has(s.item), `item generation ${s.item}`).toBe(true);
    for (const s of swaps.filter((x) => x.query > upAt.query))
      expect(committedQueries.has(s.query), `query generation ${s.query}`).toBe(true);
    expect(swaps.at(-1)!.item).toBe(finalItem);
    expect(rounds).toBeGreaterThan(0);
    // Nobody met the writer's lock.
    for (const o of [...outputs, await rewards.done, { err: serveLog }]) expect(o.err).not.toContain('DB_LOCKED');
    // The training run ended as it does alone.
    expect(timeless(trained.out)).toEqual(timeless(alone));
  }, 180_000);
});
