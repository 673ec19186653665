/**
 * Every command in the documentation runs as written: each shell code block of README.md and
 * docs/*.md is split into commands, and
 *   - every `cogr …` (`npx cogr`, `node bin/cogr.mjs`) names commands and subcommands that exist,
 *     flags those commands have (commander's own definitions, every module loaded), values for
 *     the flags that take one, and no more positional arguments than the command takes, nor fewer
 *     than it needs;
 *   - every `npm run <script>` names a script of package.json;
 *   - every `bash <file>`, `npx tsx <file>` and `node <file>` names a file of the repository.
 * The checker itself is tested on made-up blocks, so that it can fail.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command, Option } from 'commander';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli.ts';
import { packageRoot } from '../../index/core/paths.ts';

const ROOT = packageRoot();
const SHELLS = new Set(['bash', 'sh', 'shell', 'console']);

interface Block {
  file: string;
  line: number;
  text: string;
}

/** The fenced shell code blocks of a markdown text. */
export function shellBlocks(md: string, file: string): Block[] {
  const out: Block[] = [];
  const lines = md.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s*```(\w*)\s*$/.exec(lines[i]);
    if (!m) continue;
    const start = i;
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j])) j++;
    if (SHELLS.has(m[1])) out.push({ file, line: start + 2, text: lines.slice(i + 1, j).join('\n') });
    i = j;
  }
  return out;
}

/** Shell words of a block, commands split at newlines, `;`, `&&`, `||`, `|` and `&`; comments and redirections dropped. */
export function shellCommands(text: string): string[][] {
  const src = text.replace(/\\\n/g, ' ');
  const commands: string[][] = [];
  let cur: string[] = [];
  let word = '';
  let inWord = false;
  const endWord = () => {
    if (inWord) cur.push(word);
    word = '';
    inWord = false;
  };
  const endCommand = () => {
    endWord();
    // Redirections: `> f`, `2> f`, `>f`.
    const words: string[] = [];
    for (let k = 0; k < cur.length; k++) {
      if (/^\d*>>?$/.test(cur[k])) k++;
      else if (!/^\d*>>?./.test(cur[k])) words.push(cur[k]);
    }
    if (words.length > 0) commands.push(words);
    cur = [];
  };
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === "'" || c === '"') {
      const close = src.indexOf(c, i + 1);
      word += src.slice(i + 1, close < 0 ? src.length : close);
      inWord = true;
      i = close < 0 ? src.length : close;
    } else if (c === '#' && !inWord) {
      while (i < src.length && src[i] !== '\n') i++;
      endCommand();
    } else if (c === '\n' || c === ';') endCommand();
    else if (c === '&' || c === '|') {
      if (src[i + 1] === c) i++;
      endCommand();
    } else if (c === ' ' || c === '\t') endWord();
    else {
      word += c;
      inWord = true;
    }
  }
  endCommand();
  return commands;
}

/** The arguments after `cogr` when a command runs cogr, else null. Leading VAR=value words are skipped. */
export function cogrArgs(words: readonly string[]): string[] | null {
  let i = 0;
  while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i])) i++;
  const w = words.slice(i);
  if (w[0] === 'npx' && w[1] === 'cogr') return w.slice(2);
  if (w[0] === 'cogr') return w.slice(1);
  if (w[0] === 'node' && w[1] === 'bin/cogr.mjs') return w.slice(2);
  return null;
}

const takesValue = (o: Option) => o.required || o.optional;
const BUILT_IN = new Set(['--help', '-h']);

/** What is wrong with `cogr <args>`, or null. */
export function checkCogr(program: Command, args: readonly string[]): string | null {
  let cmd = program;
  let i = 0;
  const path = ['cogr'];
  // Subcommands first (`cogr help <command>` is commander's own).
  while (i < args.length && !args[i].startsWith('-')) {
    const sub = (cmd.commands as Command[]).find((c) => c.name() === args[i] || c.aliases().includes(args[i]));
    if (!sub) break;
    cmd = sub;
    path.push(args[i]);
    i++;
  }
  const positionals: string[] = [];
  const options = cmd.options as Option[];
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === '--') {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (a.startsWith('-') && a.length > 1) {
      const [flag] = a.split('=');
      if (BUILT_IN.has(flag) || (cmd === program && (flag === '-V' || flag === '--version'))) continue;
      const o = options.find((x) => x.long === flag || x.short === flag || (x.negate && x.long === flag));
      if (!o) return `${path.join(' ')}: no option ${flag}`;
      if (takesValue(o) && !a.includes('=')) {
        if (o.required && (i + 1 >= args.length || args[i + 1].startsWith('--'))) return `${path.join(' ')}: ${flag} needs a value`;
        if (o.required) i++;
      }
      continue;
    }
    positionals.push(a);
  }
  const subs = cmd.commands as Command[];
  if (subs.length > 0 && positionals.length > 0) return `${path.join(' ')}: no subcommand ${positionals[0]}`;
  const declared = cmd.registeredArguments;
  const variadic = declared.at(-1)?.variadic ?? false;
  if (!variadic && positionals.length > declared.length)
    return `${path.join(' ')}: ${positionals.length} argument(s) (${positionals.join(' ')}) where it takes ${declared.length}`;
  const needed = declared.filter((d) => d.required).length;
  if (positionals.length < needed) return `${path.join(' ')}: ${positionals.length} argument(s) where it needs ${needed}`;
  return null;
}

interface Finding {
  where: string;
  command: string;
  problem: string | null;
}

/** Every checked command of some blocks, with what is wrong with it (null: fine). */
function checkBlocks(program: Command, blocks: readonly Block[], scripts: Record<string, string>): Finding[] {
  const out: Finding[] = [];
  for (const b of blocks) {
    for (const words of shellCommands(b.text)) {
      const where = `${b.file} (block at line ${b.line})`;
      const command = words.join(' ');
      const args = cogrArgs(words);
      if (args) out.push({ where, command, problem: checkCogr(program, args) });
      else if (words[0] === 'npm' && words[1] === 'run')
        out.push({ where, command, problem: words[2] in scripts ? null : `npm run ${words[2]}: no such script in package.json` });
      else if (words[0] === 'npm' && words[1] === 'test')
        out.push({ where, command, problem: 'test' in scripts ? null : 'npm test: no test script' });
      else if (
        words[0] === 'bash' ||
        (words[0] === 'npx' && words[1] === 'tsx') ||
        (words[0] === 'node' && words[1] && !words[1].startsWith('-'))
      ) {
        const file = words[0] === 'npx' ? words[2] : words[1];
        out.push({ where, command, problem: existsSync(join(ROOT, file)) ? null : `${file}: no such file in the repository` });
      }
    }
  }
  return out;
}

function docBlocks(): Block[] {
  const files = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  return files.flatMap((f) => shellBlocks(readFileSync(join(ROOT, f), 'utf8'), f));
}

let program: Command;
let scripts: Record<string, string>;
beforeAll(async () => {
  program = await buildProgram();
  scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
});

describe('the commands in README.md and docs/', () => {
  it('every cogr command and flag exists, every npm script and script file too', () => {
    const findings = checkBlocks(program, docBlocks(), scripts);
    const bad = findings.filter((f) => f.problem !== null).map((f) => `${f.where}: ${f.command}\n    ${f.problem}`);
    expect(bad).toEqual([]);
  });

  it('the README shows the two commands and the commands to run next, and they are found', () => {
    const readme = shellBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'), 'README.md');
    const commands = readme.flatMap((b) => shellCommands(b.text));
    const cogr = commands.map(cogrArgs).filter((a): a is string[] => a !== null);
    expect(cogr).toContainEqual(['demo']);
    expect(commands).toContainEqual(['npm', 'ci']);
    expect(commands).toContainEqual(['npm', 'test']);
    expect(commands).toContainEqual(['npm', 'run', 'test:real']);
    // The commands a user runs next: at least these many cogr invocations, each checked above.
    expect(cogr.length).toBeGreaterThanOrEqual(8);
  });
});

describe('the checker', () => {
  const check = (md: string) =>
    checkBlocks(program, shellBlocks(md, 'made-up.md'), scripts)
      .map((f) => f.problem)
      .filter((p) => p !== null);

  it('finds commands in blocks: continuation lines, &&, pipes, comments, quotes, redirections, variables', () => {
    const md = [
      '```bash',
      'npm ci && npx cogr demo --json > out.json   # a comment with cogr nosuch',
      'COGR_HOME=/tmp/x npx cogr serve --port 8080 &',
      "curl 'http://127.0.0.1:8080/v1/search?q=a+b&k=5' | head -1",
      'npx cogr export opensearch --url http://a:9200 \\',
      '    --index med --shards 2',
      '```',
      '```text',
      'npx cogr nosuch --whatever',
      '```',
    ].join('\n');
    const cmds = shellBlocks(md, 'm').flatMap((b) => shellCommands(b.text));
    expect(cmds).toEqual([
      ['npm', 'ci'],
      ['npx', 'cogr', 'demo', '--json'],
      ['COGR_HOME=/tmp/x', 'npx', 'cogr', 'serve', '--port', '8080'],
      ['curl', 'http://127.0.0.1:8080/v1/search?q=a+b&k=5'],
      ['head', '-1'],
      ['npx', 'cogr', 'export', 'opensearch', '--url', 'http://a:9200', '--index', 'med', '--shards', '2'],
    ]);
    expect(check(md)).toEqual([]);
  });

  it('reports an unknown command, subcommand or flag, a missing value, wrong argument counts, scripts and files', () => {
    const md = [
      '```bash',
      'npx cogr nosuch',
      'npx cogr evolve --dataset med --no-such-flag',
      'npx cogr index frobnicate',
      'npx cogr evolve --dataset',
      'npx cogr datasets add mine',
      'npx cogr datasets add mine ./a ./b',
      'npx cogr serve --embeddings-model x --rank',
      'npm run no-such-script',
      'bash scripts/no-such.sh install',
      'npx tsx scripts/no-such.ts',
      '```',
    ].join('\n');
    expect(check(md)).toEqual([
      'cogr: no subcommand nosuch',
      'cogr evolve: no option --no-such-flag',
      'cogr index: no subcommand frobnicate',
      'cogr evolve: --dataset needs a value',
      'cogr datasets add: 1 argument(s) where it needs 2',
      'cogr datasets add: 3 argument(s) (mine ./a ./b) where it takes 2',
      'cogr serve: --rank needs a value',
      'npm run no-such-script: no such script in package.json',
      'scripts/no-such.sh: no such file in the repository',
      'scripts/no-such.ts: no such file in the repository',
    ]);
  });
});
