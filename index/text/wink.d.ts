// Minimal typings for the wink packages index/text/analyzer.ts uses (they ship none).
declare module 'wink-porter2-stemmer' {
  /** Porter2 (Snowball English) stem of one lower-case word. */
  const stem: (word: string) => string;
  export default stem;
}

declare module 'wink-nlp-utils/src/tokens-remove-words.js' {
  /** The tokens that are not in wink-nlp-utils' English stop-word list, in order. */
  const removeWords: (tokens: string[]) => string[];
  export default removeWords;
}
