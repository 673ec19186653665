/**
 * `cogr verify [--db <dir>] [--repair] [--json]`: check every published generation file,
 * the run state and the policies against their digests and against the LevelDB, and
 * print what is intact (src/run/verify.ts). Exits 0 when everything checked is intact,
 * 1 with error[DB_CORRUPT] otherwise. `--repair` takes the database lock (refused beside
 * a writer) and rewrites what can be rewritten from the database.
 */
import type { Command } from 'commander';
import { cogrError } from '../../index/core/errors.ts';
import { verifyProject, type VerifyReport } from '../run/verify.ts';
import { renderTable } from '../table.ts';
import { dbPath, withDbOption } from './options.ts';

function databaseLine(r: VerifyReport): string {
  if (r.database === 'checked') return `database ${r.db}: read in full and compared with the files`;
  if (r.database === 'locked') return `database ${r.db}: in use by another process (a writer), not read; only the files were checked`;
  if (r.database === 'missing') return `database ${r.db}: not found; only the files were checked`;
  return `database ${r.db}: cannot be read (${r.database.error}); only the files were checked`;
}

export function register(program: Command): void {
  withDbOption(program.command('verify'))
    .description('check every generation file, the run state and the policies against their SHA-256 and the database; print what is intact')
    .option('--repair', 'rewrite damaged or missing files from the database and remove files of what it lost (takes the database lock)')
    .option('--json', 'print one JSON object')
    .action(async (o: { db?: string; repair?: boolean; json?: boolean }) => {
      const report = await verifyProject(dbPath(o.db), { repair: o.repair ?? false });
      if (o.json) process.stdout.write(JSON.stringify(report) + '\n');
      else {
        process.stdout.write(databaseLine(report) + '\n');
        if (report.lines.length === 0) process.stdout.write('nothing is published or stored yet\n');
        else
          process.stdout.write(
            renderTable(
              ['checked', 'status', 'detail'],
              report.lines.map((l) => [
                l.what,
                l.repaired ? `${l.status}, repaired` : l.status,
                l.repaired ? `${l.detail}; ${l.repaired}` : l.detail,
              ]),
            ),
          );
        if (report.leftovers.length)
          process.stdout.write(
            `${report.leftovers.length} leftover(s) of an interrupted writer (harmless; --repair removes them):\n${report.leftovers.map((l) => `  ${l}\n`).join('')}`,
          );
        const bad = report.lines.filter((l) => l.status !== 'ok' && !l.repaired).length;
        process.stdout.write(
          report.intact
            ? `intact: ${report.lines.length} checked\n`
            : bad === 0 && typeof report.database !== 'string'
              ? 'not intact: the database cannot be read\n'
              : `${bad} of ${report.lines.length} not intact\n`,
        );
      }
      if (!report.intact) {
        const bad = report.lines.filter((l) => l.status !== 'ok' && !l.repaired);
        // A database that cannot be opened for a reason other than its content (a read-only
        // folder, a full disk) is said to be so, not corrupt.
        const dbCode = typeof report.database === 'string' ? undefined : report.database.code;
        const code = dbCode === 'READ_ONLY' || dbCode === 'DISK_FULL' || dbCode === 'IO_ERROR' ? dbCode : 'DB_CORRUPT';
        throw cogrError(
          code,
          [
            ...(typeof report.database === 'string' ? [] : [databaseLine(report)]),
            ...(bad.length
              ? [`${bad.length} of ${report.lines.length} checked not intact (${bad.map((l) => `${l.what}: ${l.status}`).join('; ')})`]
              : []),
            ...(bad.some((l) => l.status === 'damaged' || l.status === 'unpublished' || l.status === 'lost') && !o.repair
              ? ['`cogr verify --repair` rewrites them from the database']
              : []),
            ...(bad.some((l) => l.status === 'differs')
              ? [
                  'the database itself is damaged where it differs from intact files: rebuild the run (`cogr demo --fresh`, `cogr evolve --fresh`)',
                ]
              : []),
            ...(bad.some((l) => l.status === 'missing')
              ? [
                  'a step uses a generation that was deleted: its result cannot be served; rebuild the run (`cogr demo --fresh`, `cogr evolve --fresh`)',
                ]
              : []),
          ].join('; '),
          { path: report.db },
        );
      }
    });
}
