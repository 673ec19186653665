"""SQLite FTS5 peer for `npm run bench -- index` (Debian's python3 sqlite3 module).

One FTS5 table, two columns: `kw` holds the entity's keyword tokens (one token per
keyword, so a term query is a whole-keyword match, exactly the CoGR rule) and `words`
the words of its bag with multiplicity (what BM25 ranks on). detail=column: no
positions are needed (no phrase queries), which keeps the index smaller and faster.
  whole set: SELECT rowid … MATCH '{kw}: (k1 OR k2 …)'
  top 10:    … MATCH '({kw}: (k1 OR …)) AND ({words}: (w1 OR …))'
             ORDER BY bm25(t, 0.0, 1.0) LIMIT 10
The AND does not change the matched set (an entity sharing a keyword holds all of its
words), and the column weights make bm25() rank by the words only (FTS5's BM25:
k1 = 1.2, b = 0.75, its own idf). The database is in memory (':memory:').
Usage: python3 fts5_peer.py <folder>   (see _common.py for the files)
"""
import sqlite3
import sys
import time

from _common import check_sets, docs, emit, latency, load, rss_mb


def main(folder):
    config, probes = load(folder)
    budget_ns = int(config["budget_s"] * 1e9)
    rss0 = rss_mb()
    t0 = time.perf_counter_ns()
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(kw, words, tokenize='ascii', detail=column)")
    built = 0
    complete = True
    db.execute("BEGIN")
    batch = []
    for rowid, kws, words in docs(folder):
        batch.append((rowid, kws, words))
        if len(batch) == 4096:
            db.executemany("INSERT INTO t(rowid, kw, words) VALUES (?, ?, ?)", batch)
            built += len(batch)
            batch = []
            if time.perf_counter_ns() - t0 > budget_ns:
                complete = False
                break
    if complete and batch:
        db.executemany("INSERT INTO t(rowid, kw, words) VALUES (?, ?, ?)", batch)
        built += len(batch)
    db.execute("COMMIT")
    if complete:
        db.execute("INSERT INTO t(t) VALUES ('optimize')")
    build_s = (time.perf_counter_ns() - t0) / 1e9
    rss1 = rss_mb()
    out = {
        "system": "sqlite-fts5",
        "version": sqlite3.sqlite_version,
        "built": built,
        "complete": complete,
        "build_s": build_s,
        "rss_mb": rss1 - rss0,
    }
    if complete:
        match_q = ["{kw}: (" + " OR ".join(k) + ")" for k, _ in probes]
        top_q = ["({kw}: (" + " OR ".join(k) + ")) AND ({words}: (" + " OR ".join(w) + "))" for k, w in probes]
        k = int(config["k"])
        cur = db.cursor()

        def match(p):
            return [r[0] for r in cur.execute("SELECT rowid FROM t WHERE t MATCH ?", (match_q[p],))]

        def topk(p):
            return cur.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, 0.0, 1.0) LIMIT ?", (top_q[p], k)).fetchall()

        out["sets"] = check_sets(match, len(probes), int(config["check"]))
        out["match"] = latency(match, len(probes), config["time_ms"])
        out["topk"] = latency(topk, len(probes), config["time_ms"])
    emit(out)


if __name__ == "__main__":
    main(sys.argv[1])
