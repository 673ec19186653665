// diagnostic (not committed): F1 of an LLM keywords file on the dev, core and held-out queries of a round's run
import { readFileSync } from 'node:fs';
import { openDb } from '../index/store/db.ts';
import { loadRunCorpus } from '../src/run/corpus.ts';
import { openRun } from '../src/run/context.ts';
import { readStoredRun } from '../src/run/state.ts';
import { evaluateQueries } from '../src/evolve/evaluate.ts';
const [home, ...files] = process.argv.slice(2);
const db = await openDb(home + '/db');
const stored = await readStoredRun(db);
const { corpus } = await loadRunCorpus(stored.config);
const run = await openRun(db, corpus, stored);
const view = await run.store.openView('item', 0);
for (const f of files) {
  const kw = new Map(readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).map((x) => [x.id, x.keywords]));
  const out: string[] = [];
  for (const [name, qs] of [['dev', run.devQueries], ['core', run.coreQueries], ['eval', run.evalQueries]] as const) {
    const ev = evaluateQueries(view, qs, (q) => kw.get(q.id) ?? [], corpus, run.config.beta);
    out.push(`${name} F1=${ev.metrics.f1.toFixed(4)} kw=${ev.metrics.meanKeywords.toFixed(2)}`);
  }
  console.log(f.split('/').pop(), out.join('  '));
}
await db.close();
