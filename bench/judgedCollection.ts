/**
 * A seeded synthetic judged text collection for `npm run bench -- evolve`:
 * - a background vocabulary of `backgroundWords` pseudo-words with Zipf frequencies
 *   (exponent 1), shared by every item;
 * - `topics` topics, each with its own vocabulary of `topicWords` pseudo-words (Zipf
 *   within the topic); topics = ⌈items / (3 · relevant)⌉ unless given, so that a topic
 *   holds about three times the relevant items a query asks for;
 * - items of a title (3–6 words, mostly its topic's) and a description (`descriptionWords`
 *   words: 30% its topic's, 70% the background);
 * - queries drawn from a topic: 2–4 distinct words of its vocabulary (Zipf);
 * - relevant = `relevant` items of the query's topic (or all of them when the topic is
 *   smaller): those sharing the most query words, ties broken by a seeded order.
 * Pseudo-words are syllable strings with a letter-only suffix per index, so every word is
 * distinct, ASCII letters only, and at least 5 letters long (no analyser stop word).
 */
import { createRng, randInt, type Rng } from '../index/core/random.ts';
import type { Corpus, Item, Query } from '../index/core/types.ts';

export interface JudgedCollectionOptions {
  items: number;
  queries: number;
  /** Relevant items per query (capped by the topic's size). */
  relevant: number;
  seed?: number;
  topics?: number;
  topicWords?: number;
  backgroundWords?: number;
  descriptionWords?: number;
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'to', 'vi', 'ze', 'po', 'da', 'fe', 'gu', 'ha', 'ji', 'bo'];
const LETTERS = 'bcdfghjklmnpqrtvwxz';

/** A distinct pseudo-word for (namespace, index): letters only. */
export function pseudoWord(ns: number, i: number): string {
  let s = SYLLABLES[ns % SYLLABLES.length] + SYLLABLES[(ns >> 4) % SYLLABLES.length];
  let x = i;
  do {
    s += SYLLABLES[x % SYLLABLES.length];
    x = Math.floor(x / SYLLABLES.length);
  } while (x > 0);
  // A namespace tag (its ordinal in base 19) keeps topic words apart from the background.
  let t = ns;
  let tag = '';
  do {
    tag += LETTERS[t % LETTERS.length];
    t = Math.floor(t / LETTERS.length);
  } while (t > 0);
  return s + 'x' + tag;
}

/** A sampler of indices 0..n−1 with P(i) ∝ 1 / (i + 1). */
function zipfSampler(n: number): (rng: Rng) => number {
  const cum = new Float64Array(n);
  let s = 0;
  for (let i = 0; i < n; i++) cum[i] = s += 1 / (i + 1);
  return (rng) => {
    const r = rng() * s;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (cum[m] < r) lo = m + 1;
      else hi = m;
    }
    return lo;
  };
}

export function judgedCollection(opts: JudgedCollectionOptions): Corpus {
  const { items: nItems, queries: nQueries, relevant: nRel } = opts;
  if (!(nItems >= 1 && nQueries >= 1 && nRel >= 1)) throw new Error('judgedCollection: items, queries and relevant must be ≥ 1');
  const rng = createRng(opts.seed ?? 1);
  const T = opts.topics ?? Math.max(1, Math.ceil(nItems / (3 * nRel)));
  const topicWords = opts.topicWords ?? 60;
  const bgWords = opts.backgroundWords ?? 5000;
  const descWords = opts.descriptionWords ?? 40;
  const background = Array.from({ length: bgWords }, (_, i) => pseudoWord(0, i));
  const vocab = Array.from({ length: T }, (_, t) => Array.from({ length: topicWords }, (_, i) => pseudoWord(t + 1, i)));
  const bgZipf = zipfSampler(bgWords);
  const topicZipf = zipfSampler(topicWords);
  const width = String(nItems - 1).length;
  const items: Item[] = [];
  const topicOf = new Int32Array(nItems);
  const wordsOf: Set<string>[] = [];
  const byTopic: number[][] = Array.from({ length: T }, () => []);
  for (let i = 0; i < nItems; i++) {
    const t = i % T;
    topicOf[i] = t;
    byTopic[t].push(i);
    const title: string[] = [];
    const tl = 3 + randInt(rng, 4);
    for (let k = 0; k < tl; k++) title.push(rng() < 0.8 ? vocab[t][topicZipf(rng)] : background[bgZipf(rng)]);
    const desc: string[] = [];
    for (let k = 0; k < descWords; k++) desc.push(rng() < 0.3 ? vocab[t][topicZipf(rng)] : background[bgZipf(rng)]);
    const titleText = title.join(' ');
    items.push({ id: `i${String(i).padStart(width, '0')}`, title: titleText, text: `${titleText} ${desc.join(' ')}` });
    wordsOf.push(new Set([...title, ...desc]));
  }
  const qWidth = String(nQueries - 1).length;
  const queries: Query[] = [];
  const relevant = new Map<string, Set<string>>();
  const qrels = new Map<string, Map<string, number>>();
  for (let j = 0; j < nQueries; j++) {
    const t = randInt(rng, T);
    const n = 2 + randInt(rng, 3);
    const ws: string[] = [];
    for (let guard = 0; ws.length < n && guard < 100; guard++) {
      const w = vocab[t][topicZipf(rng)];
      if (!ws.includes(w)) ws.push(w);
    }
    const id = `q${String(j).padStart(qWidth, '0')}`;
    queries.push({ id, text: ws.join(' ') });
    const pool = byTopic[t].map((i) => ({ i, shared: ws.reduce((a, w) => a + (wordsOf[i].has(w) ? 1 : 0), 0), r: rng() }));
    pool.sort((a, b) => b.shared - a.shared || a.r - b.r);
    const rel = new Set(pool.slice(0, nRel).map((x) => items[x.i].id));
    relevant.set(id, rel);
    qrels.set(id, new Map([...rel].map((r) => [r, 1])));
  }
  return { name: `synthetic-${nItems}x${nQueries}x${nRel}`, items, queries, qrels, relevant };
}
