"""Xapian peer for `npm run bench -- index` (Debian's python3-xapian, Glass backend).

Each entity is one document: its keyword tokens as boolean terms (wdf 0: they match
but neither weigh nor count towards the document length) and the words of its bag as
terms with wdf = term frequency (so the document length is our BM25 document length).
  whole set: Query(OP_OR, keyword terms) with BoolWeight, get_mset(0, doccount)
  top 10:    Query(OP_AND_MAYBE, OP_SCALE_WEIGHT(Query(OP_OR, keyword terms), 0),
                   Query(OP_OR, word terms)) with BM25Weight(k1 = 1.2, k2 = 0, k3 = 1,
                   b = 0.75, min_normlen = 0.5), get_mset(0, 10)
The left side decides the matched set (whole keywords, the CoGR rule); the right side
only weighs, so the ranking is Xapian's BM25 over the words; Xapian's matcher prunes
with its own max-weight bounds. The database is a Glass database in a temporary folder
(commit included in the build time); memory is the RSS growth, disk the folder size.
Usage: python3 xapian_peer.py <folder>   (see _common.py for the files)
"""
import os
import shutil
import sys
import tempfile
import time

import xapian

from _common import check_sets, dir_mb, docs, emit, latency, load, rss_mb


def main(folder):
    config, probes = load(folder)
    budget_ns = int(config["budget_s"] * 1e9)
    path = tempfile.mkdtemp(prefix="cogr-bench-xapian-")
    try:
        rss0 = rss_mb()
        t0 = time.perf_counter_ns()
        wdb = xapian.WritableDatabase(path, xapian.DB_CREATE_OR_OVERWRITE)
        built = 0
        complete = True
        for rowid, kws, words in docs(folder):
            doc = xapian.Document()
            for t in kws.split():
                doc.add_boolean_term(t)
            tf = {}
            for w in words.split():
                tf[w] = tf.get(w, 0) + 1
            for w, f in tf.items():
                doc.add_term(w, f)
            wdb.add_document(doc)  # docids are 1, 2, … = rowid
            built += 1
            if (built & 4095) == 0 and time.perf_counter_ns() - t0 > budget_ns:
                complete = False
                break
        wdb.commit()
        wdb.close()
        build_s = (time.perf_counter_ns() - t0) / 1e9
        db = xapian.Database(path)
        rss1 = rss_mb()
        out = {
            "system": "xapian",
            "version": xapian.version_string(),
            "built": built,
            "complete": complete,
            "build_s": build_s,
            "rss_mb": rss1 - rss0,
            "disk_mb": dir_mb(path),
        }
        if complete:
            n = db.get_doccount()
            k = int(config["k"])
            match_q = [xapian.Query(xapian.Query.OP_OR, kw) for kw, _ in probes]
            top_q = [
                xapian.Query(
                    xapian.Query.OP_AND_MAYBE,
                    xapian.Query(xapian.Query.OP_SCALE_WEIGHT, xapian.Query(xapian.Query.OP_OR, kw), 0.0),
                    xapian.Query(xapian.Query.OP_OR, w),
                )
                for kw, w in probes
            ]
            bool_enq = xapian.Enquire(db)
            bool_enq.set_weighting_scheme(xapian.BoolWeight())
            bool_enq.set_docid_order(xapian.Enquire.ASCENDING)
            bm25_enq = xapian.Enquire(db)
            bm25_enq.set_weighting_scheme(xapian.BM25Weight(1.2, 0.0, 1.0, 0.75, 0.5))

            def match(p):
                bool_enq.set_query(match_q[p])
                return [m.docid for m in bool_enq.get_mset(0, n)]

            def topk(p):
                bm25_enq.set_query(top_q[p])
                return [m.docid for m in bm25_enq.get_mset(0, k)]

            out["sets"] = check_sets(match, len(probes), int(config["check"]))
            out["match"] = latency(match, len(probes), config["time_ms"])
            out["topk"] = latency(topk, len(probes), config["time_ms"])
        emit(out)
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
