/** The document-frequency counter of one commit. */
import { keywordWords } from '../text/normalize.ts';

/**
 * Net change of each word's document frequency over a commit: \`add(keys, ±1)\` counts
 * the distinct words of one entity's posted keys once. Words are numbered once per
 * commit and each key's word numbers cached, so the per-entity work is array updates.
 */
export class WordCounter {
  private readonly ids = new Map<string, number>();
  private readonly names: string[] = [];
  private readonly keyWords = new Map<string, Int32Array>();
  private delta = new Int32Array(1024);
  private stamp = new Int32Array(1024);
  private epoch = 0;

  add(keys: Iterable<string>, sign: number): void {
    const ep = ++this.epoch;
    for (const k of keys) {
      let ws = this.keyWords.get(k);
      if (ws === undefined) {
        const words = keywordWords(k);
        ws = new Int32Array(words.length);
        for (let i = 0; i < words.length; i++) ws[i] = this.idOf(words[i]);
        // Keys repeat across entities (self keys mostly do not): a bounded cache.
        if (this.keyWords.size < 1_000_000) this.keyWords.set(k, ws);
      }
      for (let i = 0; i < ws.length; i++) {
        const w = ws[i];
        if (this.stamp[w] !== ep) {
          this.stamp[w] = ep;
          this.delta[w] += sign;
        }
      }
    }
  }

  /** [word, net change] for every word whose document frequency changes. */
  changes(): [string, number][] {
    const out: [string, number][] = [];
    for (let w = 0; w < this.names.length; w++) if (this.delta[w] !== 0) out.push([this.names[w], this.delta[w]]);
    return out;
  }

  private idOf(word: string): number {
    let id = this.ids.get(word);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(word);
      this.ids.set(word, id);
      if (id === this.delta.length) {
        const d = new Int32Array(id * 2);
        d.set(this.delta);
        this.delta = d;
        const st = new Int32Array(id * 2);
        st.set(this.stamp);
        this.stamp = st;
      }
    }
    return id;
  }
}
