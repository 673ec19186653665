/**
 * `cogr verify`: check every published file and the LevelDB against each other, and
 * say what is intact.
 *
 * The published files (index/store/published.ts, published.ts here) carry SHA-256 digests; the
 * LevelDB has no checksums a reader can ask for, but it holds a second copy of the same
 * content, so each committed generation, the run state and every policy value are read
 * from both and compared:
 *
 *   ok           the files pass their check and the database holds the same content
 *   damaged      a file fails its check (flipped bytes, truncated, missing)
 *   differs      the files pass their check but the database reads otherwise: the
 *                database is damaged (its copy is not trusted over intact files)
 *   unpublished  the database holds it, no file does (a writer killed before writing them)
 *   lost         a file holds it, the database does not (it lost committed data, e.g. a
 *                damaged write-ahead log)
 *   missing      a step of the stored run uses a generation that neither the database
 *                nor the files hold (deleted with `index delete --force`): the run's result
 *                cannot be served; nothing can repair it (rerun with --fresh)
 *
 * The database counts only when LevelDB can open it and every cell reads: a folder with
 * table or log files but no CURRENT (or without the MANIFEST it names), or a table that
 * cannot be read, is never intact (index/store/db.ts checkDbFiles; the files alone are then
 * checked and reported).
 *
 * `--repair` (with the database lock, so never beside a writer) makes the files agree
 * with the database where that is safe: damaged and unpublished files are written again
 * from the database, files of what the database lost are removed (the run redoes those
 * steps when resumed), leftover temporary files go. It never overwrites intact files
 * with a database copy that differs from them.
 */
import { readdir, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { isCogrError, levelError } from '../../index/core/errors.ts';
import { PublishedIndex, publicInfo, publishedDir, unpublishGeneration, type GenerationInfo } from '../../index/store/published.ts';
import { isTemporaryName } from '../../index/store/sealed.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { SIDES, type IndexEntry } from '../../index/core/types.ts';
import { POLICY_SUBLEVEL } from './policies.ts';
import { policyFile, publishPolicyValue, readPolicyFileAt, readPublishedRun } from './published.ts';
import { RUN_SUBLEVEL, RunState, type StepRecord } from './state.ts';

export type CheckStatus = 'ok' | 'damaged' | 'differs' | 'unpublished' | 'lost' | 'missing';

export interface CheckLine {
  /** What was checked: "item generation 3", "run state", "policy query:000001". */
  what: string;
  status: CheckStatus;
  detail: string;
  /** What --repair did about it, when it did something. */
  repaired?: string;
}

export interface VerifyReport {
  db: string;
  /** Whether the LevelDB was read: it is skipped (files only) while a writer holds it. */
  database: 'checked' | 'locked' | 'missing' | { error: string; code?: string };
  lines: CheckLine[];
  /** Leftovers of killed writers: temporary files, cells of an unfinished staged commit (harmless; --repair removes them). */
  leftovers: string[];
  intact: boolean;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

interface FileState<T> {
  ok: boolean;
  value?: T;
  detail: string;
}

/** One line per run step whose item or query generation is not among `held` ("side:generation"). */
function stepLines(steps: readonly StepRecord[], held: ReadonlySet<string>): CheckLine[] {
  const out: CheckLine[] = [];
  for (const s of steps) {
    const gone = (['item', 'query'] as const).filter(
      (side) => !held.has(`${side}:${side === 'item' ? s.itemGeneration : s.queryGeneration}`),
    );
    if (gone.length === 0) continue;
    out.push({
      what: `step ${s.step}`,
      status: 'missing',
      detail: `uses ${gone.map((side) => `${side} generation ${side === 'item' ? s.itemGeneration : s.queryGeneration}`).join(' and ')}, which the database does not hold (deleted?): ${s.adopted ? "the run's result cannot be served or resumed from it; " : ''}rerun with --fresh`,
    });
  }
  return out;
}

export async function verifyProject(dbPath: string, opts: { repair?: boolean } = {}): Promise<VerifyReport> {
  const files = new PublishedIndex(dbPath);
  const dir = publishedDir(dbPath);
  const names = await readdir(dir).catch(() => [] as string[]);
  const leftovers = names.filter(isTemporaryName);

  // ---- the files, on their own -------------------------------------------------------
  const gens = new Map<string, FileState<{ info: GenerationInfo; entries: IndexEntry[] }>>();
  for (const side of SIDES) {
    const nums = names.length ? await files.numbers(side) : [];
    for (const g of nums) {
      try {
        const { manifest, view } = await files.load(side, g);
        gens.set(`${side}:${g}`, {
          ok: true,
          value: { info: publicInfo(manifest), entries: view.entries() },
          detail: `${manifest.files.map((f) => `${f.name} (${f.bytes} bytes)`).join(', ')} pass their SHA-256`,
        });
      } catch (e) {
        gens.set(`${side}:${g}`, { ok: false, detail: message(e) });
      }
    }
  }
  let run: FileState<unknown> | null = null;
  try {
    const doc = await readPublishedRun(dbPath);
    if (doc) run = { ok: true, value: doc, detail: 'run.json passes its SHA-256' };
  } catch (e) {
    run = { ok: false, detail: message(e) };
  }
  const policyFiles = new Map<string, FileState<unknown> & { file: string }>();
  for (const name of names) {
    if (!/^policy-.+\.json$/.test(name)) continue;
    const file = join(dir, name);
    try {
      const { key, value } = await readPolicyFileAt(file);
      policyFiles.set(key, { ok: true, value, detail: `${name} passes its SHA-256`, file });
    } catch (e) {
      // A damaged file cannot say its key: it is known by its name.
      policyFiles.set(`(file ${name})`, { ok: false, detail: message(e), file });
    }
  }

  // ---- against the database -----------------------------------------------------------
  const lines: CheckLine[] = [];
  let database: VerifyReport['database'] = 'checked';
  let db: CogrDb | null = null;
  try {
    db = await openDb(dbPath, { createIfMissing: false });
  } catch (e) {
    if (opts.repair) throw e;
    if (isCogrError(e, 'DB_LOCKED')) database = 'locked';
    else if (isCogrError(e, 'NOT_FOUND')) database = 'missing';
    else database = { error: message(e), ...(isCogrError(e) ? { code: e.code } : {}) };
  }
  try {
    if (db) {
      // Every cell once: LevelDB reports the blocks it cannot read.
      try {
        for await (const _ of db.level.iterator()) {
          /* read through */
        }
      } catch (e) {
        const named = levelError(e, dbPath);
        database = { error: `reading every cell failed: ${message(named ?? e)}`, code: named?.code ?? 'DB_CORRUPT' };
        // Nothing is compared with (or repaired from) a database that cannot be read.
        if (opts.repair) throw named ?? e;
        await db.close();
        db = null;
      }
    }
    const store = db ? new KeywordIndexStore(db) : null;
    const stored = new Set<string>();
    if (store && typeof database === 'string') {
      for (const side of SIDES) {
        for (const info of await store.listGenerations(side)) {
          const key = `${side}:${info.generation}`;
          stored.add(key);
          const what = `${side} generation ${info.generation}`;
          const file = gens.get(key);
          let entries: IndexEntry[] | null = null;
          let readError = '';
          try {
            entries = await store.entries(side, info.generation);
          } catch (e) {
            readError = message(e);
          }
          if (!file) {
            const line: CheckLine = { what, status: 'unpublished', detail: 'the database holds it, no file does' };
            if (opts.repair && entries) {
              await store.republish(side, info.generation);
              line.repaired = 'files written from the database';
            }
            lines.push(line);
          } else if (!file.ok) {
            const line: CheckLine = { what, status: 'damaged', detail: file.detail };
            if (opts.repair && entries) {
              await store.republish(side, info.generation);
              line.repaired = 'files written again from the database';
            }
            lines.push(line);
          } else if (!entries || !same(file.value!.entries, entries) || !same(file.value!.info, info)) {
            lines.push({
              what,
              status: 'differs',
              detail: `the files pass their check, the database reads otherwise${readError ? ` (${readError})` : ''}: the database is damaged`,
            });
          } else {
            lines.push({ what, status: 'ok', detail: `${file.detail}; the database holds the same ${entries.length} entities` });
          }
        }
      }
      for (const [key, file] of gens) {
        if (stored.has(key)) continue;
        const [side, g] = key.split(':');
        const line: CheckLine = {
          what: `${side} generation ${g}`,
          status: 'lost',
          detail: `${file.ok ? 'its files pass their check' : file.detail}; the database does not hold it (it lost committed data: a damaged write-ahead log?)`,
        };
        if (opts.repair) {
          await unpublishGeneration(dbPath, side as 'item' | 'query', Number(g));
          line.repaired = 'files removed (resuming the run redoes the steps the database lost)';
        }
        lines.push(line);
      }
      // The run state.
      const state = new RunState(db!);
      const sub = db!.sublevel(RUN_SUBLEVEL);
      const hasRun = (await sub.get('config')) !== undefined || (await sub.get('version')) !== undefined;
      if (hasRun || run) {
        const expected = hasRun
          ? {
              runStateVersion: (await sub.get('version')) ?? null,
              config: (await sub.get('config')) ?? null,
              split: (await sub.get('split')) ?? null,
              steps: (await sub.get('steps')) ?? [],
              imports: (await sub.get('imports')) ?? [],
              // Runs written before fingerprints have none, in the database and in run.json alike.
              ...((await sub.get('data')) !== undefined ? { data: await sub.get('data') } : {}),
            }
          : null;
        const line: CheckLine = !run
          ? { what: 'run state', status: 'unpublished', detail: 'the database holds a run, no run.json does' }
          : !run.ok
            ? { what: 'run state', status: 'damaged', detail: run.detail }
            : !expected
              ? { what: 'run state', status: 'lost', detail: 'run.json holds a run, the database does not' }
              : same(Object.fromEntries(Object.keys(expected).map((k) => [k, (run!.value as Record<string, unknown>)[k]])), expected)
                ? { what: 'run state', status: 'ok', detail: `${run.detail}; the database holds the same run` }
                : {
                    what: 'run state',
                    status: 'lost',
                    detail: 'run.json passes its check but holds more or other steps than the database (it lost committed data)',
                  };
        if (opts.repair && line.status !== 'ok') {
          if (hasRun) {
            await state.publish();
            line.repaired = 'run.json written again from the database';
          } else {
            await rm(join(dir, 'run.json'), { force: true });
            line.repaired = 'run.json removed';
          }
        }
        lines.push(line);
      }
      // The generations the run's steps use.
      if (hasRun) lines.push(...stepLines(((await sub.get('steps')) as StepRecord[] | undefined) ?? [], stored));
      // Policies.
      const pol = db!.sublevel(POLICY_SUBLEVEL);
      const seen = new Set<string>();
      for await (const [key, value] of pol.iterator()) {
        seen.add(key);
        const file = policyFiles.get(key) ?? policyFiles.get(`(file ${basename(policyFile(dbPath, key))})`);
        if (file) seen.add(policyFiles.get(key) ? key : `(file ${basename(policyFile(dbPath, key))})`);
        const what = `policy ${key}`;
        const line: CheckLine = !file
          ? { what, status: 'unpublished', detail: 'the database holds it, no file does' }
          : !file.ok
            ? { what, status: 'damaged', detail: file.detail }
            : same(file.value, value)
              ? { what, status: 'ok', detail: file.detail }
              : { what, status: 'differs', detail: 'the file passes its check, the database reads otherwise: the database is damaged' };
        if (opts.repair && (line.status === 'unpublished' || line.status === 'damaged')) {
          await publishPolicyValue(dbPath, key, value);
          line.repaired = 'file written again from the database';
        }
        lines.push(line);
      }
      for (const [key, file] of policyFiles) {
        if (seen.has(key)) continue;
        const line: CheckLine = {
          what: `policy ${key}`,
          status: 'lost',
          detail: `${file.ok ? 'its file passes its check' : file.detail}; the database does not hold it`,
        };
        if (opts.repair) {
          await rm(file.file, { force: true });
          line.repaired = 'file removed';
        }
        lines.push(line);
      }
      if (opts.repair) for (const f of leftovers) await rm(join(dir, f), { force: true });
      // Cells of a staged commit killed midway: never read, deleted by the next write.
      for (const u of await store.unfinishedStaged({ drop: opts.repair ?? false })) {
        leftovers.push(`${u.side} generation ${u.generation}: ${u.cells} cells of a staged commit that was interrupted (never read)`);
      }
    } else {
      // Files only (the database is in use by a writer, missing or unreadable).
      for (const [key, file] of gens) {
        const [side, g] = key.split(':');
        lines.push({ what: `${side} generation ${g}`, status: file.ok ? 'ok' : 'damaged', detail: file.detail });
      }
      if (run) lines.push({ what: 'run state', status: run.ok ? 'ok' : 'damaged', detail: run.detail });
      const steps = run?.ok ? (run.value as { steps?: StepRecord[] }).steps : undefined;
      if (steps) lines.push(...stepLines(steps, new Set(gens.keys())));
      for (const [key, file] of policyFiles) lines.push({ what: `policy ${key}`, status: file.ok ? 'ok' : 'damaged', detail: file.detail });
    }
  } finally {
    await db?.close();
  }
  // Intact: everything checked is (or is now) sound, and the database could be read.
  const intact = typeof database === 'string' && lines.every((l) => l.status === 'ok' || l.repaired !== undefined);
  return { db: files.dbPath, database, lines, leftovers: opts.repair ? [] : leftovers, intact };
}
