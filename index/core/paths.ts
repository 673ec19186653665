/**
 * Where the package's own files are (data/, generators/prompts/, package.json): the
 * folder holding package.json above this module, whether the code runs from the
 * TypeScript sources or from the compiled dist/ (one level deeper).
 */
import { existsSync } from 'node:fs';
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
