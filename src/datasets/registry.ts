/**
 * Dataset names. Shipped datasets (med, cisi, nfcorpus) live in the package's data/
 * folder, resolved from this module's URL (never from the working directory).
 * Registered datasets are kept in $COGR_HOME/datasets.json:
 *   {"version": 1, "datasets": {"<name>": {"path": "/abs/folder", "format": "beir"}}}
 * (`format` optional: detected from the files when absent).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { z } from 'zod';
import { cogrError, schemaError, systemError } from '../../index/core/errors.ts';
import { packageRoot } from '../../index/core/paths.ts';
import { cogrHome, homePath } from '../home.ts';
import { DATASET_FORMATS, type DatasetFormat } from './common.ts';

export const SHIPPED_DATASETS: Readonly<Record<string, { folder: string; format: DatasetFormat }>> = Object.freeze({
  med: { folder: 'med', format: 'smart' },
  cisi: { folder: 'cisi', format: 'smart' },
  nfcorpus: { folder: 'nfcorpus', format: 'trec' },
});

export interface DatasetEntry {
  name: string;
  path: string;
  format?: DatasetFormat;
  shipped: boolean;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/i;

const registrySchema = z.object({
  version: z.literal(1),
  datasets: z.record(z.string(), z.object({ path: z.string().min(1), format: z.enum(DATASET_FORMATS).optional() })),
});
type RegistryFile = z.infer<typeof registrySchema>;

/** The package's data/ folder. */
export function dataRoot(): string {
  return join(packageRoot(), 'data');
}

/** Where the registry lives; `create` makes $COGR_HOME (only writers need it). */
function registryPath(create = false): string {
  return create ? homePath('datasets.json') : join(cogrHome(), 'datasets.json');
}

function readRegistry(): RegistryFile {
  const file = registryPath();
  if (!existsSync(file)) return { version: 1, datasets: {} };
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw cogrError('DATA_FORMAT', `${file}:1: not valid JSON (${(e as Error).message})`, { file });
  }
  const r = registrySchema.safeParse(raw);
  if (!r.success) throw schemaError('DATA_FORMAT', r.error, { what: file, details: { file } });
  return r.data;
}

/** Shipped datasets first, then registered ones in name order. */
export function listDatasets(): DatasetEntry[] {
  const out: DatasetEntry[] = Object.entries(SHIPPED_DATASETS).map(([name, s]) => ({
    name,
    path: resolve(dataRoot(), s.folder),
    format: s.format,
    shipped: true,
  }));
  const reg = readRegistry();
  for (const name of Object.keys(reg.datasets).sort()) {
    const d = reg.datasets[name];
    out.push({ name, path: d.path, ...(d.format ? { format: d.format } : {}), shipped: false });
  }
  return out;
}

/**
 * Check a name and a folder for registration (nothing is written). A name registered
 * already is refused unless `replace` (registering the same folder and format again
 * changes nothing and is accepted): a run made on the old folder would otherwise meet
 * other data under its dataset's name.
 */
export function checkRegistration(name: string, path: string, opts: { format?: DatasetFormat; replace?: boolean } = {}): string {
  if (!NAME.test(name)) {
    throw cogrError('INVALID_ARGUMENT', `name: ${JSON.stringify(name)} must be 1-64 letters, digits, ".", "_" or "-"`);
  }
  if (name in SHIPPED_DATASETS) throw cogrError('INVALID_ARGUMENT', `name: ${JSON.stringify(name)} is a shipped dataset`);
  const abs = resolve(path);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) throw cogrError('DATA_MISSING', `${abs}: not a folder`, { path: abs });
  const old = readRegistry().datasets[name];
  if (old && !opts.replace && (old.path !== abs || old.format !== opts.format)) {
    throw cogrError(
      'INVALID_ARGUMENT',
      `name: ${JSON.stringify(name)} is registered already (-> ${old.path}${old.format ? `, ${old.format}` : ''}); \`cogr datasets add --replace\` points it at ${abs} (a run made on the old folder then refuses to resume on other data), or choose another name`,
      { name, registered: old.path },
    );
  }
  return abs;
}

function writeRegistry(reg: RegistryFile): void {
  let file = join(cogrHome(), 'datasets.json');
  try {
    file = registryPath(true);
    writeFileSync(`${file}.tmp`, JSON.stringify(reg, null, 2) + '\n');
    renameSync(`${file}.tmp`, file);
  } catch (e) {
    // A full disk or a read-only home is named with the file, never a bare ENOSPC / EROFS.
    throw systemError(e, `${file}.tmp`, 'writing the dataset registry') ?? e;
  }
}

/** Record a dataset under a name in $COGR_HOME/datasets.json (an earlier entry of the name only with `replace`). */
export function registerDataset(name: string, path: string, format?: DatasetFormat, opts: { replace?: boolean } = {}): DatasetEntry {
  const abs = checkRegistration(name, path, { ...(format ? { format } : {}), ...(opts.replace ? { replace: true } : {}) });
  const reg = readRegistry();
  reg.datasets[name] = format ? { path: abs, format } : { path: abs };
  writeRegistry(reg);
  return { name, path: abs, ...(format ? { format } : {}), shipped: false };
}

/** Forget a registered dataset (its folder is left alone); NOT_FOUND when no such name is registered. */
export function unregisterDataset(name: string): DatasetEntry {
  if (name in SHIPPED_DATASETS)
    throw cogrError('INVALID_ARGUMENT', `name: ${JSON.stringify(name)} is a shipped dataset and cannot be removed`);
  const reg = readRegistry();
  const d = reg.datasets[name];
  if (!d) {
    const names = Object.keys(reg.datasets).sort();
    throw cogrError(
      'NOT_FOUND',
      `name: no registered dataset ${JSON.stringify(name)} (registered: ${names.length ? names.join(', ') : 'none'})`,
      { name },
    );
  }
  delete reg.datasets[name];
  writeRegistry(reg);
  return { name, path: d.path, ...(d.format ? { format: d.format } : {}), shipped: false };
}

/**
 * What makes two spellings of a dataset the same run: a shipped or registered name is its
 * own identity; a folder is known by the name it is registered (or shipped) under, else by
 * its resolved absolute path. `folder` is a file-name-safe form of it (a name, or the
 * folder's last segment and a hash of its absolute path, so that two folders that end the
 * same never collide).
 */
export function datasetIdentity(nameOrPath: string): { id: string; folder: string; entry: DatasetEntry } {
  const entry = resolveDataset(nameOrPath);
  const known = listDatasets();
  const named = known.find((d) => d.name === nameOrPath) ?? known.find((d) => resolve(d.path) === entry.path);
  if (named) return { id: named.name, folder: named.name, entry: named };
  const hash = createHash('sha256').update(entry.path).digest('hex').slice(0, 8);
  return { id: entry.path, folder: `${basename(entry.path).replace(/[^A-Za-z0-9._-]+/g, '_') || 'dataset'}-${hash}`, entry };
}

/**
 * A shipped name, a registered name, or the path of a folder (in that order). A name
 * that is none of these is DATA_MISSING with the known names listed.
 */
export function resolveDataset(nameOrPath: string): DatasetEntry {
  const known = listDatasets();
  const hit = known.find((d) => d.name === nameOrPath);
  if (hit) return hit;
  const abs = resolve(nameOrPath);
  if (existsSync(abs) && statSync(abs).isDirectory()) return { name: basename(abs), path: abs, shipped: false };
  throw cogrError(
    'DATA_MISSING',
    `dataset ${JSON.stringify(nameOrPath)}: not a known name (${known.map((d) => d.name).join(', ')}) and no folder at ${abs}`,
    { dataset: nameOrPath },
  );
}
