/**
 * The opposite (query) side's index as the item policy sees it: keyword document
 * frequencies on the frozen query generation's view (the inOpp and oppDf features).
 */
import type { KeywordView } from '../../index/view/view.ts';

export class OppositeIndex {
  readonly view: KeywordView;
  private readonly logN: number;

  constructor(view: KeywordView) {
    this.view = view;
    this.logN = Math.log1p(Math.max(1, view.data.numEntities));
  }

  /** Number of entities posted under a normalised keyword (0 when absent). */
  keywordDf(k: string): number {
    const o = this.view.ordinalOfKeyword(k);
    return o < 0 ? 0 : this.view.keywordDf(o);
  }
  /** log(1 + df) / log(1 + N), in [0, 1]. */
  scaledDf(k: string): number {
    return Math.log1p(this.keywordDf(k)) / this.logN;
  }
}
