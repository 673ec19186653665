// Minimal typings for wink-bm25-text-search, the BM25 baseline's engine (it ships none).
declare module 'wink-bm25-text-search' {
  interface WinkBm25Config {
    fldWeights: Record<string, number>;
    bm25Params?: { k1?: number; b?: number; k?: number };
    ovFldNames?: string[];
  }
  interface WinkBm25 {
    defineConfig(cfg: WinkBm25Config): boolean;
    definePrepTasks(tasks: Array<(input: any) => any>, field?: string): number;
    addDoc(doc: Record<string, string>, id: string | number): number;
    consolidate(fp?: number): boolean;
    search(
      text: string,
      limit?: number,
      filter?: (fieldValues: Record<string, unknown>, params: unknown) => boolean,
      params?: unknown,
    ): Array<[string, number]>;
    getTotalDocs(): number;
    reset(): boolean;
  }
  function bm25(): WinkBm25;
  export default bm25;
}
