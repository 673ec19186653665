// Minimal typings for the wink packages index/analyzer.ts uses (they ship none).
declare module 'wink-porter2-stemmer' {
  /** Porter2 (Snowball English) stem of one lower-case word. */
  const stem: (word: string) => string;
  export default stem;
}

declare module 'wink-nlp-utils' {
  const nlp: {
    tokens: { removeWords(tokens: string[]): string[] };
    string: { tokenize0(s: string): string[]; lowerCase(s: string): string };
  };
  export default nlp;
}
