/**
 * All state (databases, policies, caches, reports) lives under one folder:
 * $COGR_HOME, default `.cogr/` in the working directory. Every command resolves its
 * paths through here.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export function cogrHome(env: NodeJS.ProcessEnv = process.env): string {
  const h = env.COGR_HOME && env.COGR_HOME.trim().length > 0 ? env.COGR_HOME : '.cogr';
  return resolve(h);
}

/** A path under $COGR_HOME, creating the parent folder. */
export function homePath(...parts: string[]): string {
  const home = cogrHome();
  mkdirSync(home, { recursive: true });
  return join(home, ...parts);
}
