/**
 * The `cogr` command. Each sub-command lives in its own module under src/commands/
 * and exports `register(program)`; this file wires them up and turns errors into
 * one clear line on stderr and a non-zero exit code.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command, CommanderError } from 'commander';
import { isCogrError } from '../index/errors.ts';

export type Register = (program: Command) => void;

export async function buildProgram(): Promise<Command> {
  const program = new Command();
  program
    .name('cogr')
    .description('Keyword co-evolution retrieval: keyword generators, keyword index, rewards and GRPO rounds.')
    .showHelpAfterError()
    .exitOverride();
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'commands');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .sort();
  for (const f of files) {
    const mod = (await import(pathToFileURL(join(dir, f)).href)) as { register?: Register };
    if (typeof mod.register === 'function') mod.register(program);
  }
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = await buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    if (isCogrError(e)) {
      process.stderr.write(`error[${e.code}]: ${e.message}\n`);
      process.exitCode = e.code === 'INVALID_ARGUMENT' ? 2 : 1;
      return;
    }
    const err = e as Error;
    process.stderr.write(`error: ${err?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  }
}
