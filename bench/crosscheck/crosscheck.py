"""The Python side of `npm run bench -- crosscheck` (bench/crosscheck.ts runs it inside a
network namespace without interfaces, so any attempt to reach the network fails).

Input folder (written by the bench), one sub-folder per dataset:
  docs.jsonl     {"id", "contents", "cogr_tokens"}  the text cogr's BM25 indexes, and
                 cogr's Lucene-analysis tokens of it
  queries.tsv    qid TAB text (judged queries)
  qrels.txt      TREC qrels (cogr datasets export-qrels)
  runs/*.run     cogr's TREC run files
  config.json    {"k1", "b", "fb_terms", "fb_docs", "original_query_weight", "depth"}
Output: one JSON object on stdout:
  per dataset: pytrec_eval's per-query measures of every cogr run; Lucene's BM25 and
  BM25 + RM3 runs (Anserini's SimpleSearcher over an index built here with Lucene's
  IndexWriter and Anserini's DefaultEnglishAnalyzer), with pytrec_eval's measures; the
  analyzer comparison (cogr's tokens against Lucene's, document by document); the
  document lengths Lucene's norms keep (SmallFloat, one byte).

Pyserini's Python package is never imported (its import fetches a list of prebuilt
indexes from the internet); Anserini's fat jar inside the wheel is put on the class path
before jnius starts Java.
"""
import glob
import json
import os
import shutil
import sys
import tempfile
import time

import pytrec_eval


def log(msg):
    print(f"crosscheck.py: {msg}", file=sys.stderr, flush=True)


def anserini_jar():
    import importlib.util

    spec = importlib.util.find_spec("pyserini")  # locates the wheel without importing it
    root = os.path.dirname(spec.origin)
    jars = sorted(glob.glob(os.path.join(root, "resources", "jars", "anserini-*-fatjar.jar")))
    if not jars:
        raise SystemExit(f"no Anserini fat jar under {root}/resources/jars")
    return jars[-1]


JAR = anserini_jar()
import jnius_config  # noqa: E402

jnius_config.add_options("-Xmx2g", "--add-modules=jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED")
jnius_config.set_classpath(JAR)
from jnius import autoclass  # noqa: E402

DefaultEnglishAnalyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer")
AnalyzerUtils = autoclass("io.anserini.analysis.AnalyzerUtils")
SimpleSearcher = autoclass("io.anserini.search.SimpleSearcher")
FSDirectory = autoclass("org.apache.lucene.store.FSDirectory")
Paths = autoclass("java.nio.file.Paths")
IndexWriter = autoclass("org.apache.lucene.index.IndexWriter")
IndexWriterConfig = autoclass("org.apache.lucene.index.IndexWriterConfig")
OpenMode = autoclass("org.apache.lucene.index.IndexWriterConfig$OpenMode")
Document = autoclass("org.apache.lucene.document.Document")
StringField = autoclass("org.apache.lucene.document.StringField")
StoredField = autoclass("org.apache.lucene.document.StoredField")
Field = autoclass("org.apache.lucene.document.Field")
FieldStore = autoclass("org.apache.lucene.document.Field$Store")
FieldType = autoclass("org.apache.lucene.document.FieldType")
IndexOptions = autoclass("org.apache.lucene.index.IndexOptions")
BinaryDocValuesField = autoclass("org.apache.lucene.document.BinaryDocValuesField")
BytesRef = autoclass("org.apache.lucene.util.BytesRef")
BM25Similarity = autoclass("org.apache.lucene.search.similarities.BM25Similarity")
SmallFloat = autoclass("org.apache.lucene.util.SmallFloat")
LuceneVersion = autoclass("org.apache.lucene.util.Version")
StringReader = autoclass("java.io.StringReader")

MEASURES = {
    "set_P", "set_recall", "set_F", "recip_rank", "map",
    "P.1,3,10,100,1000", "recall.1,3,10,100,1000", "ndcg_cut.1,3,10,100,1000",
    "map_cut.1,3,10,100,1000", "success.1,3,10,100,1000",
}


def read_run(path):
    run = {}
    with open(path) as f:
        for line in f:
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {})[d] = float(s)
    return run


def read_qrels(path):
    qrels = {}
    with open(path) as f:
        for line in f:
            q, _, d, g = line.split()
            qrels.setdefault(q, {})[d] = int(g)
    return qrels


def evaluate(qrels, run):
    return pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)


def build_index(folder, docs, k1, b):
    analyzer = DefaultEnglishAnalyzer.newDefaultInstance()
    config = IndexWriterConfig(analyzer)
    config.setOpenMode(OpenMode.CREATE)
    config.setSimilarity(BM25Similarity(k1, b))
    writer = IndexWriter(FSDirectory.open(Paths.get(folder)), config)
    # As Anserini's DefaultLuceneDocumentGenerator with -storeDocvectors: the id stored and
    # as binary doc values (Anserini breaks score ties by it), the contents with term vectors (RM3 reads them).
    contents_type = FieldType()
    contents_type.setStored(False)
    contents_type.setTokenized(True)
    contents_type.setIndexOptions(IndexOptions.DOCS_AND_FREQS_AND_POSITIONS)
    contents_type.setStoreTermVectors(True)
    contents_type.freeze()
    for d in docs:
        doc = Document()
        doc.add(StringField("id", d["id"], FieldStore.YES))
        doc.add(BinaryDocValuesField("id", BytesRef(d["id"].encode("utf-8"))))
        # (the constructor named: pyjnius does not pick the CharSequence one for a str by itself)
        doc.add(Field("contents", d["contents"], contents_type, signature="(Ljava/lang/String;Ljava/lang/CharSequence;Lorg/apache/lucene/index/IndexableFieldType;)V"))
        doc.add(StoredField("raw", d["contents"]))
        writer.addDocument(doc)
    writer.commit()
    writer.close()
    return analyzer


def search_all(searcher, queries, depth):
    run = {}
    for qid, text in queries:
        hits = searcher.search(text, depth)
        run[qid] = {h.docid: float(h.score) for h in hits}
    return run


def compare_tokens(analyzer, docs, queries):
    docs_same = 0
    tokens_cogr = tokens_lucene = 0
    diffs = {}
    for d in docs:
        lucene = list(AnalyzerUtils.analyze(analyzer, d["contents"]))
        mine = d["cogr_tokens"]
        tokens_cogr += len(mine)
        tokens_lucene += len(lucene)
        if lucene == mine:
            docs_same += 1
            continue
        # What differs, as multisets: tokens only one side has.
        from collections import Counter

        a, b = Counter(mine), Counter(lucene)
        for t, n in (a - b).items():
            diffs.setdefault(f"cogr:{t}", 0)
            diffs[f"cogr:{t}"] += n
        for t, n in (b - a).items():
            diffs.setdefault(f"lucene:{t}", 0)
            diffs[f"lucene:{t}"] += n
    queries_same = 0
    for _, text, toks in queries:
        if list(AnalyzerUtils.analyze(analyzer, text)) == toks:
            queries_same += 1
    top = sorted(diffs.items(), key=lambda x: -x[1])[:30]
    return {
        "docs": len(docs), "docs_identical": docs_same, "tokens_cogr": tokens_cogr, "tokens_lucene": tokens_lucene,
        "differing_tokens": sum(diffs.values()), "top_differences": top,
        "queries": len(queries), "queries_identical": queries_same,
    }


def main():
    root = sys.argv[1]
    out = {"jar": os.path.basename(JAR), "lucene": LuceneVersion.LATEST.toString(), "java": autoclass("java.lang.System").getProperty("java.version"), "datasets": {}}
    for ds in sorted(os.listdir(root)):
        folder = os.path.join(root, ds)
        if not os.path.isdir(folder):
            continue
        t0 = time.time()
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        docs = [json.loads(line) for line in open(os.path.join(folder, "docs.jsonl"))]
        queries = []
        for line in open(os.path.join(folder, "queries.tsv")):
            qid, text, toks = line.rstrip("\n").split("\t")
            queries.append((qid, text, json.loads(toks)))
        qrels = read_qrels(os.path.join(folder, "qrels.txt"))
        res = {"cogr": {}}
        for path in sorted(glob.glob(os.path.join(folder, "runs", "*.run"))):
            name = os.path.basename(path)[:-4]
            res["cogr"][name] = evaluate(qrels, read_run(path))
        log(f"{ds}: pytrec_eval on {len(res['cogr'])} cogr runs")
        tmp = tempfile.mkdtemp(prefix="cogr-crosscheck-index-")
        try:
            analyzer = build_index(tmp, docs, cfg["k1"], cfg["b"])
            log(f"{ds}: indexed {len(docs)} documents with Lucene ({time.time() - t0:.1f}s)")
            res["analysis"] = compare_tokens(analyzer, docs, queries)
            searcher = SimpleSearcher(tmp)
            searcher.set_bm25(cfg["k1"], cfg["b"])
            qs = [(q, t) for q, t, _ in queries]
            bm25 = search_all(searcher, qs, cfg["depth"])
            searcher.set_rm3(cfg["fb_terms"], cfg["fb_docs"], cfg["original_query_weight"])
            rm3 = search_all(searcher, qs, cfg["depth"])
            searcher.close()
            log(f"{ds}: searched {len(qs)} queries with BM25 and BM25 + RM3 ({time.time() - t0:.1f}s)")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        res["lucene_runs"] = {"bm25": bm25, "rm3": rm3}
        res["lucene"] = {"bm25": evaluate(qrels, bm25), "rm3": evaluate(qrels, rm3)}
        # Lucene keeps a document's length in one byte (SmallFloat.intToByte4): the lengths it scores with.
        lengths = sorted({len(d["cogr_tokens"]) for d in docs} | {0})
        res["norm_lengths"] = {str(n): SmallFloat.byte4ToInt(SmallFloat.intToByte4(n)) for n in lengths}
        res["seconds"] = time.time() - t0
        out["datasets"][ds] = res
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
