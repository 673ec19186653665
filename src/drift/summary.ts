/** The compact plain-text summary of a drift report that `cogr drift` prints. */
import { columnsFrom, renderTable } from '../table.ts';
import { roundRows, type DriftReport, type KeywordUse } from './analyze.ts';

/** Right-aligned numbers after the first column, no rule under the header. */
function table(header: string[], rows: string[][]): string {
  return renderTable(header, rows, { right: columnsFrom(1, header.length), rule: false });
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

function top(list: KeywordUse[], n = 5): string {
  return list
    .slice(0, n)
    .map((u) => `${u.keyword} (${u.entities})`)
    .join(', ');
}

export function formatDriftSummary(r: DriftReport): string {
  const rows: string[][] = [];
  for (const side of ['item', 'query'] as const) {
    for (const g of r.sides[side].generations) {
      rows.push([
        side,
        String(g.generation),
        String(g.entities),
        String(g.distinctKeywords),
        g.keywordsPerEntity.mean.toFixed(2),
        String(g.keywordsPerEntity.median),
        pct(g.lengthShares.one),
        pct(g.lengthShares.two),
        pct(g.lengthShares.threePlus),
        g.entropyBits.toFixed(2),
        g.gini.toFixed(3),
        g.churn ? pct(g.churn.churn) : '-',
      ]);
    }
  }
  let out = table(['side', 'gen', 'entities', 'distinct', 'kw/ent', 'median', '1w', '2w', '3+w', 'H bits', 'Gini', 'churn'], rows);
  // A run with a final refit has a column for it (its round is past the last half-round).
  const { rows: perRound, refit } = roundRows(r);
  if (perRound.length > 0) {
    const f = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(3));
    const arows = perRound.map(({ round, alignment: a, f1 }) => [
      String(round),
      a ? pct(a.queryCoverage) : '-',
      a ? pct(a.itemCoverage) : '-',
      a ? a.jaccard.toFixed(3) : '-',
      f(f1.query),
      f(f1.item),
      ...(refit ? [f(f1.refit)] : []),
    ]);
    out += '\n' + table(['round', 'q-in-item', 'i-in-query', 'Jaccard', 'F1 q-step', 'F1 i-step', ...(refit ? ['F1 refit'] : [])], arows);
  }
  for (const side of ['item', 'query'] as const) {
    const d = r.sides[side].diff;
    if (!d) continue;
    out += `\n${side} ${d.from} -> ${d.to}: kept ${d.kept}, +${d.addedTotal} added${d.added.length ? `: ${top(d.added)}` : ''}`;
    out += `\n${' '.repeat(side.length)} ${' '.repeat(`${d.from} -> ${d.to}`.length)}  -${d.droppedTotal} dropped${d.dropped.length ? `: ${top(d.dropped)}` : ''}`;
  }
  return out + '\n';
}
