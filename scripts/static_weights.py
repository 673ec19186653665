"""Per-token weights for the built-in encoder, learned from MiniLM's own cosines (the distil script's step 3).

A static text vector is the weighted sum of its tokens' rows, normalised. model2vec weighs a row by
log(1 + token id), a stand-in for inverse frequency. Here each token's weight is that times exp(theta_t),
and theta is fitted so that the static cosines of pairs of texts follow MiniLM's cosines of the same pairs
(squared error, theta pulled towards 0, so a token seen in no pair keeps the Zipf weight).

The pairs are the ones the encoder is used for: a short phrase against a passage (the keyword rule: is a
keyword related to its query), a passage against a longer text (the relevance features). Phrases, passages
and texts are cut from the item texts of the collections given (never their queries or judgements): each
passage meets its own words and phrases (a query's own word must not pass just for being part of the query's
sum), phrases of another item, its own text and another item's.

Reads the collections' files directly (SMART .ALL files, NFCorpus's tab-separated docs); numpy only.
"""
from __future__ import annotations

import re
import sys
import time

import numpy as np

WORD = re.compile(r"[a-z][a-z\-]+")


def read_smart(path: str) -> list[str]:
    """Title and abstract of every record of a SMART collection file (.I, .T, .W, ...)."""
    texts, cur, field = [], [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(".I"):
                if cur:
                    texts.append(" ".join(cur))
                cur, field = [], None
            elif line.startswith(".") and len(line.strip()) == 2:
                field = line[1]
            elif field in ("T", "W"):
                cur.append(line.strip())
    if cur:
        texts.append(" ".join(cur))
    return [" ".join(t.split()) for t in texts if t.strip()]


def read_tsv(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t", 1)[1] for line in f if "\t" in line]


def read_collection(path: str) -> list[str]:
    return read_tsv(path) if path.endswith(".docs") else read_smart(path)


def build_pairs(texts: list[str], rng: np.random.Generator, n_items: int, stop: set[str]):
    """Texts to encode and the (a, b) index pairs among them."""
    pool: list[str] = []
    index: dict[str, int] = {}

    def add(t: str) -> int:
        if t not in index:
            index[t] = len(pool)
            pool.append(t)
        return index[t]

    chosen = rng.choice(len(texts), size=min(n_items, len(texts)), replace=False)
    docs, passages, phrases = [], [], []
    for i in chosen:
        words = texts[i].split()
        doc = " ".join(words[:64])
        s = int(rng.integers(0, max(1, len(words) - 8)))
        n = int(rng.choice([6, 10, 16, 28, 45]))
        passage = " ".join(words[s : s + n])
        content = [w for w in WORD.findall(passage.lower()) if w not in stop and len(w) > 2]
        own = []
        for _ in range(3):
            if not content:
                break
            j = int(rng.integers(0, len(content)))
            k = int(rng.choice([1, 1, 2]))
            own.append(" ".join(content[j : j + k]))
        docs.append(add(doc))
        passages.append((add(passage), [add(p) for p in own]))
        phrases.extend(add(p) for p in own)
    pairs = []
    for r, (p, own) in enumerate(passages):
        for o in own:
            pairs.append((o, p))
        for _ in range(3):
            pairs.append((phrases[int(rng.integers(0, len(phrases)))], p))
        pairs.append((p, docs[r]))
        pairs.append((p, docs[int(rng.integers(0, len(docs)))]))
        for o in own[:1]:
            pairs.append((o, docs[r]))
    return pool, np.array(pairs, dtype=np.int64)


class Student:
    """Static vectors of a fixed set of tokenised texts as a function of the per-token log-weights."""

    def __init__(self, rows: np.ndarray, base: np.ndarray, ids: list[list[int]]):
        self.rows, self.base = rows, base
        lens = np.array([len(x) for x in ids])
        if not (lens > 0).all():
            raise ValueError("a text without tokens")
        # One entry per distinct (text, token), with its count: a repeated token adds its row again.
        toks, texts, counts = [], [], []
        for i, x in enumerate(ids):
            u, c = np.unique(np.asarray(x, dtype=np.int64), return_counts=True)
            toks.append(u)
            texts.append(np.full(len(u), i))
            counts.append(c)
        self.tok = np.concatenate(toks)
        self.text = np.concatenate(texts)
        self.count = np.concatenate(counts).astype(np.float32)
        sizes = np.array([len(u) for u in toks])
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.r = rows[self.tok].astype(np.float32)  # entries × dims

    def _weights(self, theta: np.ndarray) -> np.ndarray:
        return (self.base[self.tok] * np.exp(theta[self.tok])).astype(np.float32) * self.count

    def vectors(self, theta: np.ndarray, w: np.ndarray | None = None):
        w = self._weights(theta) if w is None else w
        u = np.add.reduceat(self.r * w[:, None], self.starts, axis=0)
        norm = np.maximum(np.linalg.norm(u, axis=1), 1e-9)
        return u / norm[:, None], norm

    def cosines(self, theta: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        s, _ = self.vectors(theta)
        s = s.astype(np.float64)
        return (s[pairs[:, 0]] * s[pairs[:, 1]]).sum(1)

    def loss_grad(self, theta: np.ndarray, pairs: np.ndarray, target: np.ndarray, lam: float):
        w = self._weights(theta)
        s, norm = self.vectors(theta, w)
        a, b = pairs[:, 0], pairs[:, 1]
        s = s.astype(np.float64)
        cos = (s[a] * s[b]).sum(1)
        err = cos - target
        loss = float((err**2).mean()) + lam * float((theta**2).sum()) / len(pairs)
        e = (2.0 / len(pairs)) * err
        g = np.zeros_like(s)  # d loss / d u, per text
        np.add.at(g, a, e[:, None] * (s[b] - cos[:, None] * s[a]))
        np.add.at(g, b, e[:, None] * (s[a] - cos[:, None] * s[b]))
        g /= norm[:, None]
        per_occ = np.einsum("ij,ij->i", self.r, g[self.text].astype(np.float32)) * w
        grad = np.bincount(self.tok, weights=per_occ, minlength=len(theta))
        grad += 2 * lam * theta / len(pairs)
        return loss, grad


def fit(rows, base, tok_ids, pairs, target, val_pairs, val_target, steps=400, lr=0.05, lam=0.05, log=print):
    """Adam on theta; returns theta and the student (every text of `tok_ids`); logs the check pairs' loss and r."""
    student = Student(rows, base, tok_ids)
    theta = np.zeros(len(base))
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    b1, b2 = 0.9, 0.999
    t0 = time.time()
    for step in range(1, steps + 1):
        loss, grad = student.loss_grad(theta, pairs, target, lam)
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        theta -= lr * (m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + 1e-8)
        if step % 50 == 0 or step == 1:
            vc = student.cosines(theta, val_pairs)
            vl = float(((vc - val_target) ** 2).mean())
            r = float(np.corrcoef(vc, val_target)[0, 1])
            log(f"static weights: step {step}/{steps}, train loss {loss:.4f}, dev loss {vl:.4f}, dev r {r:.3f} ({step / (time.time() - t0):.1f} steps/s)")
    return theta, student


def agreement(cos_static: np.ndarray, cos_teacher: np.ndarray, cut: float = 0.3) -> dict:
    kept = cos_static >= cut
    return {
        "pairs": int(len(cos_static)),
        "pearson_r": round(float(np.corrcoef(cos_static, cos_teacher)[0, 1]), 3),
        "kept_at_cut": round(float(kept.mean()), 3),
        "teacher_related_among_kept": round(float((cos_teacher[kept] >= cut).mean()) if kept.any() else 0.0, 3),
        "teacher_related_found": round(float((kept & (cos_teacher >= cut)).sum() / max(1, (cos_teacher >= cut).sum())), 3),
    }


if __name__ == "__main__":
    print("run through scripts/distil-static-minilm.py", file=sys.stderr)
    sys.exit(2)
