/**
 * Where the package's own files are (data/, generators/prompts/, package.json): the
 * folder holding package.json above this module, whether the code runs from the
 * TypeScript sources or from the compiled dist/ (one level deeper). And `writeAtomic`, a
 * file written whole or not at all (through a rename).
 */
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | null = null;

export function packageRoot(): string {
  if (root === null) {
    let dir = dirname(fileURLToPath(import.meta.url));
    for (let up = 0; up < 4 && !existsSync(join(dir, 'package.json')); up++) dir = dirname(dir);
    root = dir;
  }
  return root;
}

/** Writes `text` to `path` through `path.partial` and a rename: a reader sees the old file or the whole new one. */
export function writeAtomic(path: string, text: string): void {
  writeFileSync(path + '.partial', text);
  renameSync(path + '.partial', path);
}
