/**
 * The run store's files for readers: beside the generation files (index/store/published.ts),
 * the writer keeps in `<db>/published/`
 *
 *   run.json                 the run state (version, config, split, steps, imports, data), sealed,
 *                            rewritten (atomically) whenever the run state changes
 *   policy-<key>.json        each policy-store value (`policy-query-000001.json`, the list
 *                            of saved rounds `policy-query-rounds.json`), sealed
 *
 * so that `cogr serve`, `cogr reward-server` and `cogr drift` read a stored run and its
 * policies without opening the LevelDB. Every file is checked when read (a mismatch is
 * DB_CORRUPT naming the file); a file of another format version is refused.
 */
import { join } from 'node:path';
import type { CogrDb } from '../../index/store/db.ts';
import { cogrError } from '../../index/core/errors.ts';
import { publishedDir, PUBLISHED_FORMAT_VERSION } from '../../index/store/published.ts';
import { readSealedJson, writeSealedJson } from '../../index/store/sealed.ts';
import { mkdir } from 'node:fs/promises';
import type { KeyValueStore } from '../../generators/types.ts';
import type { RunConfig } from './config.ts';
import type { DataFingerprint } from './fingerprint.ts';
import type { ImportRecord, RunSplit, StepRecord } from './records.ts';

const RUN_FILE = 'run.json';

/** What run.json holds. */
export interface PublishedRun {
  format: 'cogr-run';
  version: number;
  /** The run-state version of the database it was published from. */
  runStateVersion: number | null;
  config: RunConfig | null;
  split: RunSplit | null;
  steps: StepRecord[];
  imports: ImportRecord[];
  /** The fingerprint of the run's data (fingerprint.ts); absent in runs written before it. */
  data?: DataFingerprint;
}

/** Write run.json from the run state's values (RunState calls this after every change). */
export async function publishRunState(db: CogrDb, values: Omit<PublishedRun, 'format' | 'version'>): Promise<void> {
  const dir = publishedDir(db.path);
  await mkdir(dir, { recursive: true });
  await writeSealedJson(join(dir, RUN_FILE), { format: 'cogr-run', version: PUBLISHED_FORMAT_VERSION, ...values } satisfies PublishedRun);
}

function checkVersion(raw: unknown, what: string, format: string, file: string): Record<string, unknown> {
  const doc = raw as Record<string, unknown> | null;
  if (!doc || typeof doc !== 'object' || doc.format !== format)
    throw cogrError('DB_CORRUPT', `${what}: file ${file} is not a ${format} document`, { file });
  if (doc.version !== PUBLISHED_FORMAT_VERSION) {
    throw cogrError(
      'DB_VERSION',
      `${what}: file ${file} has format version ${JSON.stringify(doc.version)}, this cogr reads version ${PUBLISHED_FORMAT_VERSION}; rewrite it with \`cogr verify --repair\``,
      {
        file,
      },
    );
  }
  return doc;
}

/** The run published in a database folder; null when none is published. */
export async function readPublishedRun(dbPath: string): Promise<PublishedRun | null> {
  const file = join(publishedDir(dbPath), RUN_FILE);
  const raw = await readSealedJson(file, 'the co-evolution run state');
  if (raw === undefined) return null;
  return checkVersion(raw, 'the co-evolution run state', 'cogr-run', file) as unknown as PublishedRun;
}

/** The file of a policy-store key. */
export function policyFile(dbPath: string, key: string): string {
  return join(
    publishedDir(dbPath),
    `policy-${key.replace(/[^A-Za-z0-9_-]/g, (c) => (c === ':' ? '-' : `%${c.charCodeAt(0).toString(16)}`))}.json`,
  );
}

/** Publish one policy-store value. */
export async function publishPolicyValue(dbPath: string, key: string, value: unknown): Promise<void> {
  await mkdir(publishedDir(dbPath), { recursive: true });
  await writeSealedJson(policyFile(dbPath, key), { format: 'cogr-policy-value', version: PUBLISHED_FORMAT_VERSION, key, value });
}

/** One published policy value by its file (`cogr verify`): its key and value, checked. */
export async function readPolicyFileAt(file: string): Promise<{ key: string; value: unknown }> {
  const raw = await readSealedJson(file, `the policy file ${file}`);
  if (raw === undefined) throw cogrError('NOT_FOUND', `${file} does not exist`, { file });
  const doc = checkVersion(raw, `the policy file ${file}`, 'cogr-policy-value', file);
  if (typeof doc.key !== 'string') throw cogrError('DB_CORRUPT', `the policy file ${file} names no key`, { file });
  return { key: doc.key, value: doc.value };
}

/**
 * The policies published in a database folder as a read-only KeyValueStore (what
 * `loadPolicy` and the round's query generator read). `put` is refused: readers never write.
 */
export function publishedPolicyStore(dbPath: string): KeyValueStore {
  return {
    async get(key: string): Promise<unknown> {
      const file = policyFile(dbPath, key);
      const raw = await readSealedJson(file, `the policy value ${JSON.stringify(key)}`);
      if (raw === undefined) return undefined;
      const doc = checkVersion(raw, `the policy value ${JSON.stringify(key)}`, 'cogr-policy-value', file);
      if (doc.key !== key)
        throw cogrError('DB_CORRUPT', `the policy value ${JSON.stringify(key)}: file ${file} holds ${JSON.stringify(doc.key)}`, { file });
      return doc.value;
    },
    async put(): Promise<void> {
      throw cogrError('INTERNAL', 'the published policies are read-only (a reader never writes)');
    },
  };
}
