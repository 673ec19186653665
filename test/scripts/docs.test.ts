/**
 * The generated documentation (scripts/docs.ts, `npm run docs`): the committed README.md,
 * docs/*.md, docs/http-api.md, docs/cli.md and docs/results/f1.svg are byte for byte what the
 * script makes from the stored JSON; and the script's parts do what they say — markers are
 * filled and checked, a changed figure is caught, a stored file of the wrong shape is refused
 * naming the field, and the command printed beside a run re-creates its options.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../index/core/paths.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { parseRunConfig } from '../../src/run/config.ts';
import { BLOCKS, fillBlocks, generateDocs, staleFiles } from '../../scripts/docs.ts';
import { demoCommand, evolveCommand, readSources, runFlags } from '../../scripts/docs/sources.ts';
import { shape } from '../../scripts/docs/reference.ts';

const ROOT = packageRoot();
let generated: Map<string, string>;
const temp = mkdtempSync(join(tmpdir(), 'cogr-docs-'));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

beforeAll(async () => {
  generated = await generateDocs(ROOT);
});

/** A copy of what the generator reads (README, docs, stored results, expected quality) under a new root. */
function copyRoot(name: string): string {
  const root = join(temp, name);
  for (const p of ['README.md', 'docs', 'bench/results', 'data/expected-quality.json', 'package.json']) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    cpSync(join(ROOT, p), join(root, p), { recursive: true });
  }
  return root;
}

/** The flag a stored run's command carries for its cut: none for the default (auto); runs stored before the option had none (--cut no). */
const cutFlag = (config: Record<string, unknown>) => ((config.cut ?? 'no') === 'auto' ? '' : ` --cut ${String(config.cut ?? 'no')}`);

describe('the committed documentation', () => {
  it('is what npm run docs makes from the stored data', () => {
    const stale = staleFiles(ROOT, generated).map((f) => {
      const want = generated.get(f)!.split('\n');
      let have: string[] = [];
      try {
        have = readFileSync(join(ROOT, f), 'utf8').split('\n');
      } catch {
        return `${f}: missing`;
      }
      const i = want.findIndex((l, k) => l !== have[k]);
      return `${f}: line ${i + 1} differs (run npm run docs):\n  committed: ${have[i]}\n  generated: ${want[i]}`;
    });
    expect(stale).toEqual([]);
  });

  it('covers every page with a block and the whole generated pages', () => {
    expect([...generated.keys()]).toEqual(expect.arrayContaining(['README.md', 'docs/http-api.md', 'docs/cli.md', 'docs/results/f1.svg']));
    for (const name of Object.keys(BLOCKS)) {
      const holders = [...generated].filter(([, text]) => text.includes(`<!-- docs:${name}:start -->`)).map(([f]) => f);
      expect(holders, name).toHaveLength(1);
    }
  });

  it('the README is at most 250 lines and its results table names the command of every stored run', () => {
    const readme = generated.get('README.md')!;
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
    for (const r of readSources(ROOT).runs) expect(readme).toContain(`\`${evolveCommand(r.json, r.file)}\``);
  });
});

describe('the generator', () => {
  it('a figure changed by hand in a committed table is caught, and npm run docs restores it', async () => {
    const root = copyRoot('changed');
    for (const [f, text] of generated) writeFileSync(join(root, f), text);
    expect(staleFiles(root, await generateDocs(root))).toEqual([]);
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const m = /\*\*(\d\.\d{3})\*\*/.exec(readme)!; // the first bold F1 of the results table
    expect(m).not.toBeNull();
    writeFileSync(join(root, 'README.md'), readme.replace(m[0], `**${(Number(m[1]) + 0.001).toFixed(3)}**`));
    const again = await generateDocs(root);
    expect(staleFiles(root, again)).toEqual(['README.md']);
    expect(again.get('README.md')).toBe(readme);
  });

  it('fills blocks between their markers and refuses unpaired, nested or unknown ones', () => {
    const made = (n: string) => `<${n}>`;
    const text = 'a\n<!-- docs:x:start -->\nold\n<!-- docs:x:end -->\nb <!-- docs:y:start -->old<!-- docs:y:end -->\n';
    expect(fillBlocks(text, made, 'f.md')).toEqual({
      text: 'a\n<!-- docs:x:start -->\n<x>\n<!-- docs:x:end -->\nb <!-- docs:y:start -->\n<y>\n<!-- docs:y:end -->\n',
      names: ['x', 'y'],
    });
    expect(() => fillBlocks('<!-- docs:x:start -->', made, 'f.md')).toThrow('f.md: docs:x:start without its end');
    expect(() => fillBlocks('<!-- docs:x:end -->', made, 'f.md')).toThrow('f.md: docs:x:end without its start');
    expect(() => fillBlocks('<!-- docs:x:start --><!-- docs:y:start -->', made, 'f.md')).toThrow('docs:y:start inside docs:x');
  });

  it('refuses a page whose marker names no block, and a block placed twice', async () => {
    const root = copyRoot('unknown');
    writeFileSync(join(root, 'docs', 'extra.md'), '<!-- docs:no-such:start --><!-- docs:no-such:end -->\n');
    await expect(generateDocs(root)).rejects.toThrow('no generated block is called "no-such"');
    writeFileSync(join(root, 'docs', 'extra.md'), '<!-- docs:demo:start --><!-- docs:demo:end -->\n');
    await expect(generateDocs(root)).rejects.toThrow('block docs:demo is placed 2 times');
  });

  it('refuses a stored run of the wrong shape, naming the file and the field', () => {
    const root = copyRoot('shape');
    const file = readSources(ROOT).runs[0].file;
    const j = JSON.parse(readFileSync(join(ROOT, file), 'utf8'));
    delete j.final_vs_bm25.f1.se;
    writeFileSync(join(root, file), JSON.stringify(j));
    expect(() => readSources(root)).toThrow(`${file}: final_vs_bm25.f1.se: Invalid input: expected number, received undefined`);
    writeFileSync(join(root, file), '{"dataset": ');
    expect(() => readSources(root)).toThrow(`${file}: not JSON`);
  });

  it('prints the command that re-creates a stored run config: its flags where it differs from the defaults', () => {
    const base = { dataset: 'cisi', folds: 5 };
    // The commands' default encoder is all-MiniLM-L6-v2 as the keywords' judge (--embeddings auto).
    const config = parseRunConfig({ ...base, embeddingsModel: 'all-MiniLM-L6-v2' }) as unknown as Record<string, unknown>;
    expect(evolveCommand({ ...base, config }, 'docs/results/cisi.json')).toBe(
      'npx cogr evolve --dataset cisi --folds 5 --json > docs/results/cisi.json',
    );
    const other = parseRunConfig({ ...config, rounds: 3, refit: false, servedSet: 'auto', relatedness: 0.5 }) as unknown as Record<
      string,
      unknown
    >;
    expect(evolveCommand({ ...base, config: other }, 'f.json')).toBe(
      'npx cogr evolve --dataset cisi --folds 5 --rounds 3 --refit no --served-set auto --relatedness 0.5 --json > f.json',
    );
    expect(runFlags({ ...config, embeddingsModel: 'm' }, base)).toEqual(['--embeddings <an endpoint serving m>']);
    expect(runFlags({ ...config, embeddingsModel: 'all-MiniLM-L6-v2-static' }, base)).toEqual(['--embeddings static']);
    expect(runFlags({ ...config, embeddingsFeatures: true }, base)).toEqual(['--embeddings-features yes']);
    // without an encoder: none, and its features flag (which would do nothing) is left out
    expect(runFlags({ ...config, embeddingsModel: null, embeddingsFeatures: true }, base)).toEqual(['--embeddings none']);
    // A field no flag sets cannot be re-measured by any command.
    expect(() => runFlags({ ...config, itemRankDepth: 7 }, base)).toThrow('config.itemRankDepth is 7');
    const demo = parseRunConfig({ ...DEFAULTS.demo, embeddingsModel: 'all-MiniLM-L6-v2' }) as unknown as Record<string, unknown>;
    expect(demoCommand({ dataset: DEFAULTS.demo.dataset, config: demo }, 'd.json')).toBe('npx cogr demo --json > d.json');
    const med = parseRunConfig({ ...DEFAULTS.demo, dataset: 'med', rounds: 1 }) as unknown as Record<string, unknown>;
    expect(demoCommand({ dataset: 'med', config: med }, 'd.json')).toBe(
      'npx cogr demo --dataset med --rounds 1 --embeddings none --json > d.json',
    );
  });

  it("sets each collection's runs with other seeds beside its stored run, seed by seed, with the command of each", () => {
    const s = readSources(ROOT);
    expect(s.seeds.length).toBeGreaterThan(0);
    const block = BLOCKS.seeds(s, ROOT);
    for (const r of s.seeds) {
      const seed = Number(r.json.config.seed);
      expect(seed).not.toBe(1);
      expect(block).toContain(
        `\`npx cogr evolve --dataset ${r.json.dataset} --folds ${r.json.folds} --seed ${seed}${cutFlag(r.json.config)} --embeddings none --json > ${r.file}\``,
      );
      const run = s.noEncoderRuns.find((x) => x.json.dataset === r.json.dataset)!;
      expect(block).toContain(`${run.file}\``);
      // the row carries this run's own result and paired gain
      const f3 = (x: number) => x.toFixed(3);
      expect(block).toMatch(new RegExp(`\\| ${seed} \\| ${f3(r.json.final!.f1).replace('.', '\\.')}<br>`));
    }
    // without runs of other seeds, it says so
    expect(BLOCKS.seeds({ ...s, seeds: [] }, ROOT)).toContain('No stored run with another seed');
  });

  it("sets each collection's run with an encoder's features beside the run without an encoder, each with its command", () => {
    const s = readSources(ROOT);
    expect(s.dense.length).toBeGreaterThan(0);
    const block = BLOCKS.dense(s, ROOT);
    const f3 = (x: number) => x.toFixed(3);
    for (const r of s.dense) {
      expect(r.json.config.embeddingsModel).toBeTruthy();
      expect(block).toContain(
        `\`npx cogr evolve --dataset ${r.json.dataset} --folds ${r.json.folds}${cutFlag(r.json.config)} --embeddings-features yes --json > ${r.file}\``,
      );
      // the row carries this run's own result, the run without an encoder beside it, and its own paired gain over BM25
      const run = s.noEncoderRuns.find((x) => x.json.dataset === r.json.dataset)!;
      expect(block).toContain(`${f3(r.json.final!.f1)}<br>`);
      expect(block).toContain(`| ${f3(run.json.final!.f1)} |`);
      const g = r.json.final_vs_bm25!.f1;
      expect(block).toContain(`${g.gain >= 0 ? '+' : '−'}${f3(Math.abs(g.gain))} ± ${f3(g.se)}`);
    }
    // the served keywords of a demo with embeddings, audited, beside the demo without, each with its command
    expect(s.denseAudits.length).toBeGreaterThan(0);
    for (const a of s.denseAudits) {
      expect(block).toContain(
        `\`COGR_HOME=.cogr-dense-${a.name} npx cogr demo --dataset ${a.name} --embeddings-features yes && COGR_HOME=.cogr-dense-${a.name} npx cogr audit --embeddings http://127.0.0.1:8001/v1 --json --examples 0 > ${a.file}\``,
      );
      const b = s.noEncoderAudits.find((x) => x.name === a.name)!.json.query.related!.share;
      expect(block).toContain(`| ${Math.round(100 * a.json.query.related!.share)} % / ${Math.round(100 * b)} % |`);
    }
    expect(BLOCKS.dense({ ...s, dense: [] }, ROOT)).toContain('No stored run with embeddings');
  });

  it("sets each collection's run with MiniLM as the judge (the default) beside the built-in judge and no encoder, each with its command", () => {
    const s = readSources(ROOT);
    expect(s.runs.length).toBeGreaterThan(0);
    expect(s.staticJudgeRuns.length).toBeGreaterThan(0);
    expect(s.noEncoderRuns.length).toBeGreaterThan(0);
    const block = BLOCKS.judge(s, ROOT);
    const f3 = (x: number) => x.toFixed(3);
    const pm = (g: { gain: number; se: number }) => `${g.gain >= 0 ? '+' : '−'}${f3(Math.abs(g.gain))} ± ${f3(g.se)}`;
    for (const r of s.runs) {
      expect(r.json.config).toMatchObject({ embeddingsModel: 'all-MiniLM-L6-v2', embeddingsFeatures: false });
      expect(block).toContain(`${f3(r.json.final!.f1)} (${r.json.perFold.map((f) => f3(f.final!.f1)).join(' · ')})`);
      expect(block).toContain(pm(r.json.final_vs_bm25!.f1));
    }
    for (const [runs, flag] of [
      [s.staticJudgeRuns, '--embeddings static'],
      [s.noEncoderRuns, '--embeddings none'],
    ] as const) {
      for (const r of runs) {
        expect(block).toContain(
          `\`npx cogr evolve --dataset ${r.json.dataset} --folds ${r.json.folds}${cutFlag(r.json.config)} ${flag} --json > ${r.file}\``,
        );
        expect(block).toContain(f3(r.json.final!.f1));
      }
    }
    for (const r of s.staticJudgeRuns) expect(block).toContain(pm(r.json.final_vs_bm25!.f1));
    // the served keywords' relatedness: MiniLM judge / built-in judge / without, per collection
    for (const a of s.audits) {
      const share = (as: typeof s.audits) => `${Math.round(100 * as.find((x) => x.name === a.name)!.json.query.related!.share)} %`;
      expect(block).toContain(`| ${share(s.audits)} / ${share(s.staticJudgeAudits)} / ${share(s.noEncoderAudits)} |`);
      expect(block).toContain(`npx cogr audit --url http://127.0.0.1:8106 --dataset ${a.name} --embeddings http://127.0.0.1:8001/v1`);
      expect(block).toContain(`npx cogr demo --dataset ${a.name} --embeddings none && COGR_HOME=.cogr-none-${a.name} npx cogr audit`);
    }
    expect(BLOCKS.judge({ ...s, runs: [] }, ROOT)).toContain('No stored run in docs/results/');
  });

  it('writes a JSON schema as a compact type', () => {
    const s = {
      type: 'object',
      required: ['a', 'c'],
      properties: {
        a: { type: 'string' },
        b: { type: 'array', items: { anyOf: [{ type: 'integer' }, { type: 'null' }] } },
        c: { $ref: '#/components/schemas/Node' },
        d: { type: ['number', 'null'] },
        e: { enum: ['x', 'y'] },
      },
    };
    expect(shape(s, {})).toBe('{\n  a: string,\n  b?: (integer | null)[],\n  c: Node,\n  d?: number | null,\n  e?: "x" | "y"\n}');
  });
});
