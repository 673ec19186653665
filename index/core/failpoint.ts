/**
 * Failpoints: named boundaries between the steps of a multi-step write (a database commit,
 * then its files, then a record), where a test makes the process die at once, as SQLite and
 * tantivy test their crash recovery, instead of racing a kill against a clock. With
 * `COGR_FAILPOINT=<name>` in the environment the process sends itself SIGKILL on reaching
 * that boundary: nothing after it runs, nothing is flushed, no handler sees it. Unset (always,
 * outside such tests) a failpoint is one comparison.
 *
 * The boundaries (test/src/failpoints.test.ts kills at each):
 *   store.commit:before-publish      the generation's LevelDB batch is written, its files are not
 *   store.publish:before-manifest    its data file is written, its sealed manifest is not
 *   import-generation:before-record  the generation is committed and published, the run's import record is not
 *   run-state:before-publish         a run-state value is in the database, run.json is not rewritten
 */
export function failpoint(name: string): void {
  if (process.env.COGR_FAILPOINT === name) process.kill(process.pid, 'SIGKILL');
}
