/**
 * Vocabulary look-up for `GET /v1/keywords?prefix=`: a flexsearch index (forward
 * tokenizer, exact encoder) over the keyword vocabulary of one view, so a prefix finds
 * keywords whose words start with it ("canc" → "cancer", "breast cancer"). Keywords
 * that start with the whole prefix come first, then by how many entities carry them.
 * Keywords are shown and searched in their surface form (the form entities use most);
 * the entity count is that of the keyword's match key.
 */
import { Index } from 'flexsearch';
import { normalizeSelf } from '../../index/text/normalize.ts';
import type { KeywordView } from '../../index/view/view.ts';

export interface VocabHit {
  keyword: string;
  /** Number of entities posted under the keyword (self keywords included). */
  entities: number;
}

export class VocabularyIndex {
  private constructor(
    private readonly view: KeywordView,
    private readonly index: Index,
  ) {}

  /**
   * Build the look-up of a view's vocabulary, yielding to the event loop every `chunk`
   * keywords: built when a snapshot is loaded, beside the requests still being served.
   */
  static async build(view: KeywordView, chunk = 250): Promise<VocabularyIndex> {
    const index = new Index({ tokenize: 'forward', encoder: 'Exact' });
    for (let i = 0; i < view.numKeywords; i++) {
      index.add(i, view.surface(i));
      if ((i + 1) % chunk === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return new VocabularyIndex(view, index);
  }

  lookup(prefix: string, limit: number): VocabHit[] {
    const p = normalizeSelf(prefix);
    if (p.length === 0) return [];
    const ids = this.index.search(p, { limit: Math.max(limit * 20, 200) }) as number[];
    const words = p.split(' ');
    const hits: (VocabHit & { starts: boolean })[] = [];
    for (const id of ids) {
      const keyword = this.view.surface(id);
      const kwWords = keyword.split(' ');
      // Every prefix word must begin some word of the keyword (flexsearch may be looser).
      if (!words.every((w) => kwWords.some((x) => x.startsWith(w)))) continue;
      hits.push({ keyword, entities: this.view.keywordDf(id), starts: keyword.startsWith(p) });
    }
    hits.sort(
      (a, b) =>
        Number(b.starts) - Number(a.starts) || b.entities - a.entities || (a.keyword < b.keyword ? -1 : a.keyword > b.keyword ? 1 : 0),
    );
    return hits.slice(0, limit).map(({ keyword, entities }) => ({ keyword, entities }));
  }
}
