/**
 * Files that prove their integrity: written whole (a temporary file renamed into place,
 * so a reader sees the old file or the new one, never half of one, also after a kill -9)
 * and checked against a SHA-256 digest when read.
 *
 * A sealed JSON document is one header line and the JSON body:
 *
 *   cogr-sealed-json v1 sha256=<64 hex digits of the body's SHA-256>\n<JSON body>
 *
 * Any change to the body or the header (a flipped byte, a truncation) fails the check,
 * and the reader gets CogrError('DB_CORRUPT') naming what it was reading and the file.
 * Binary files are checked against a digest kept elsewhere (a generation's manifest,
 * published.ts) with `sha256Hex`.
 *
 * Durability: the files are not fsynced (as LevelDB's own non-sync writes): a process
 * killed at any moment leaves every file complete, a power loss may lose the newest.
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { cogrError, systemError } from '../core/errors.ts';

const SEAL_PREFIX = 'cogr-sealed-json v1 sha256=';
const HEADER_LENGTH = SEAL_PREFIX.length + 64 + 1;

/** Lower-case hex SHA-256 of some bytes (several parts are hashed as one stream). */
export function sha256Hex(...parts: readonly Uint8Array[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
}

/** The temporary name a file is written under before it is renamed into place (readers skip these). */
export function isTemporaryName(name: string): boolean {
  return name.startsWith('.tmp-');
}

/** Bytes per read or write call on big files (one call moves at most 2 GiB). */
export const IO_CHUNK = 1 << 30;

/**
 * Write `parts` to `path` through a temporary file in the same folder and a rename. The
 * parts are written one after another (never joined: a generation file of millions of
 * entities is larger than one Buffer may be).
 */
export async function writeFileAtomic(path: string, parts: readonly Uint8Array[]): Promise<void> {
  const tmp = join(dirname(path), `.tmp-${basename(path)}-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    const fh = await open(tmp, 'w');
    try {
      for (const p of parts) {
        for (let at = 0; at < p.byteLength;) {
          const { bytesWritten } = await fh.write(p, at, Math.min(IO_CHUNK, p.byteLength - at));
          at += bytesWritten;
        }
      }
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => {});
    // A full disk or a folder that cannot be written is named with the file (DISK_FULL, READ_ONLY, IO_ERROR).
    throw systemError(e, path, `writing ${path}`) ?? e;
  }
}

/** The bytes of a sealed JSON document. */
export function sealJson(value: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(value), 'utf8');
  return Buffer.concat([Buffer.from(`${SEAL_PREFIX}${sha256Hex(body)}\n`, 'utf8'), body]);
}

/** Write a sealed JSON document atomically. */
export async function writeSealedJson(path: string, value: unknown): Promise<void> {
  await writeFileAtomic(path, [sealJson(value)]);
}

/**
 * Check and parse the bytes of a sealed JSON document. `what` names the document in the
 * error ("item generation 3", "the run state").
 */
export function openSealedJson(bytes: Uint8Array, what: string, file: string): unknown {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const header = buf.subarray(0, HEADER_LENGTH).toString('latin1');
  const m = /^cogr-sealed-json v1 sha256=([0-9a-f]{64})\n$/.exec(header);
  if (!m) throw corrupt(what, file, 'it has no valid seal header (not written by this cogr, damaged or truncated)');
  const body = buf.subarray(HEADER_LENGTH);
  const digest = sha256Hex(body);
  if (digest !== m[1])
    throw corrupt(what, file, `its content does not match its SHA-256 (sealed ${m[1].slice(0, 12)}…, found ${digest.slice(0, 12)}…)`);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw corrupt(what, file, `its sealed body is not JSON (${(e as Error).message})`);
  }
}

/** Read, check and parse a sealed JSON document; undefined when the file does not exist. */
export async function readSealedJson(path: string, what: string): Promise<unknown> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT') return undefined;
    throw cogrError('DB_CORRUPT', `${what}: file ${path} cannot be read (${(e as Error).message})`, { file: path }, e);
  }
  return openSealedJson(bytes, what, path);
}

/** The DB_CORRUPT error of a file that fails its check. */
export function corrupt(what: string, file: string, why: string) {
  return cogrError(
    'DB_CORRUPT',
    `${what}: file ${file} is damaged: ${why}; \`cogr verify\` checks every file, \`cogr verify --repair\` rewrites them from the database`,
    {
      file,
    },
  );
}
