"""cogr's TRL trainer: SFT and GRPO on SmolLM2-135M-Instruct, rewards from `cogr reward-server`.

    python cogr_trl.py base     --out DIR                      # GGUF -> plain fp32 checkpoint (cached)
    python cogr_trl.py sft      --model DIR --data DIR --out DIR [--max-epochs 8] [--patience 1]
    python cogr_trl.py grpo     --model DIR --prompts P.jsonl --reward-url URL --out DIR [--steps 60]
    python cogr_trl.py generate --model DIR --prompts P.jsonl --out completions.jsonl [--batch 16]

Training updates LoRA adapters (peft; --lora-r 0: every weight), merged into the saved
checkpoint, so `generate` and the next stage load a plain model. `sft` trains on
`cogr sft --db <run> --export DIR` (the run's own SFT targets: DIR/item.jsonl, DIR/query.jsonl)
while the loss on DIR/dev/ (the run's dev queries, never trained on) falls, evaluated every
--eval-steps, and keeps the checkpoint with the lowest. `sft` and `grpo` save checkpoints
and resume from the last one when run again (a killed stage loses at most --eval-steps /
--save-steps steps; a resumed sft may be given fewer --max-epochs to end sooner).
--device cuda trains and generates on a GPU (a bigger --model works the same way).

`grpo` and `generate` sample under the keyword-list grammar (keyword_grammar.py: a JSON
keyword list of at most --max-keywords strings of at most --max-keyword-length characters,
no keyword twice, closed before the token budget); --free turns it off. --vocabulary FILE
(`cogr sft --export`'s vocabulary.json: the frozen item generation's keywords that the planner
may plan) keeps the keywords to the file's phrases, in one of two ways (--vocabulary-mode):
`filter` (the default) samples under the list grammar alone and leaves out of each answer the
keywords that are no phrase — before the answer is scored in `grpo` and before it is written
in `generate` — so a keyword the model did not mean is never forced on it; `force` constrains
the sampling itself through a trie in the grammar, so every keyword written is a phrase;
`fallback` filters, and in `generate` samples an answer the filter left empty again under the
trie (in `grpo` it filters: an empty rollout keeps its reward, the signal to learn from).

Everything runs offline (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE are
set before transformers is imported) on the CPU with a bounded number of torch threads
(--threads, default $COGR_TRL_THREADS or 2). Progress goes to stderr, one line per step.
Errors are one line `error[CODE]: ...` on stderr and exit status 2 (bad input) or 1.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

for _k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_k] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import keyword_grammar  # noqa: E402  (no torch at import: its tables are built on first use)


class CogrError(Exception):
    def __init__(self, code: str, message: str, status: int = 2):
        super().__init__(message)
        self.code = code
        self.status = status


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def set_threads(n: int) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(n)
    hf_logging.disable_progress_bar()  # progress is ours: one line per step


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise CogrError("DATA_MISSING", f"{path}: no such file")
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                v = json.loads(line)
            except json.JSONDecodeError as e:
                raise CogrError("DATA_FORMAT", f"{path}:{n}: not JSON ({e.msg})")
            if not isinstance(v, dict):
                raise CogrError("DATA_FORMAT", f"{path}:{n}: expected an object")
            v["_line"] = n
            out.append(v)
    return out


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------- base checkpoint


def gguf_path() -> Path:
    cache = Path(os.environ.get("COGR_MODEL_CACHE") or Path.home() / ".cache" / "cogr" / "models")
    p = cache / GGUF_NAME
    if not p.is_file():
        raise CogrError("DATA_MISSING", f"{p}: the GGUF model is not there; run `npx cogr llm install` first")
    return p


def cmd_base(a: argparse.Namespace) -> None:
    """The GGUF (dequantised by transformers) copied into a plain model and saved once."""
    out = Path(a.out)
    if (out / "cogr-base.json").is_file():
        log(f"base checkpoint: ready at {out}")
        return
    src = gguf_path()
    manifest = src.with_name(src.name + ".json")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if manifest.is_file():
        want = json.loads(manifest.read_text()).get("sha256", "")
        if want and want != digest:
            raise CogrError("DATA_FORMAT", f"{src}: sha256 {digest} differs from its manifest's {want}; run `npx cogr llm install` again")
    set_threads(a.threads)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    log(f"base checkpoint: loading {src} (dequantised to fp32)")
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    q = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(str(src.parent), gguf_file=src.name)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(q.state_dict(), strict=False)
    # A tied lm_head is absent from the state dict of some loaders; anything else missing is an error.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise CogrError("DATA_FORMAT", f"{src}: weights do not fit the model config (missing {missing[:5]}, unexpected {unexpected[:5]})", 1)
    if plain.config.tie_word_embeddings:
        plain.tie_weights()
    if tok.chat_template is None:
        raise CogrError("DATA_FORMAT", f"{src}: the GGUF has no chat template", 1)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "cogr-base.json").write_text(json.dumps({"gguf": str(src), "sha256": digest}) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    log(f"base checkpoint: wrote {out} in {time.time() - t0:.1f} s")


# ---------------------------------------------------------------- shared model helpers


def load_model(path: str, device: str = "cpu"):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = Path(path)
    if not (p / "config.json").is_file():
        raise CogrError("DATA_MISSING", f"{p}: no checkpoint there (config.json missing)")
    if device == "cuda" and not torch.cuda.is_available():
        raise CogrError("INVALID_ARGUMENT", "--device cuda: torch sees no CUDA device on this machine")
    tok = AutoTokenizer.from_pretrained(str(p))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(p), dtype=torch.float32)
    return model.to(device), tok


def last_checkpoint(work: Path) -> int:
    """The step of the newest checkpoint a killed stage left in its work folder (0: none)."""
    return max((int(p.name.split("-")[1]) for p in work.glob("checkpoint-*") if p.name.split("-")[1].isdigit()), default=0)


def lora_config(a: argparse.Namespace):
    """LoRA on every attention and MLP projection (None with --lora-r 0: full updates)."""
    if a.lora_r <= 0:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=a.lora_r,
        lora_alpha=a.lora_alpha,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )


def context_of(model, a: argparse.Namespace) -> int:
    return int(a.context or model.config.max_position_embeddings)


def check_lengths(tok, rows: list[dict], budget: int, context: int, what: str) -> None:
    """A prompt whose tokens plus the completion budget exceed the context is an error naming it."""
    for r in rows:
        text = tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
        n = len(tok(text, add_special_tokens=False)["input_ids"])
        if n + budget > context:
            raise CogrError(
                "PROMPT_TOO_LONG",
                f"{what}:{r.get('_line', '?')}: prompt {r.get('id', r.get('label', '?'))} has {n} tokens + {budget} completion tokens > context {context}",
            )


class StepLog:
    """Trainer callback: every logged step as one JSONL line and one progress line on stderr."""

    def __init__(self, path: Path, total: int, name: str, start: int = 0):
        self.path = path
        self.total = total
        self.name = name
        self.start = start
        self.t0 = time.time()
        path.parent.mkdir(parents=True, exist_ok=True)
        if start == 0 or not path.exists():
            path.write_text("")
        else:
            # Resuming from the checkpoint of step `start`: the steps logged after it are run again.
            keep_log_lines(path, lambda r: int(r.get("step", 0)) <= start)

    def callback(self):
        from transformers import TrainerCallback

        outer = self

        class _CB(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                if not logs or "loss" not in logs and "reward" not in logs and "eval_loss" not in logs:
                    return
                rec = {"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
                with outer.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(rec) + "\n")
                el = time.time() - outer.t0
                done = max(state.global_step - outer.start, 1)
                total = state.max_steps or outer.total
                extra = f" reward {logs['reward']:.4f} ± {logs.get('reward_std', 0):.4f}" if "reward" in logs else ""
                extra += f" dev loss {logs['eval_loss']:.4f}" if "eval_loss" in logs else ""
                log(
                    f"{outer.name}: step {state.global_step}/{total} loss {logs.get('loss', float('nan')):.4f}{extra}"
                    f" ({el / done:.1f} s/step, {el:.0f} s, ETA {max(total - state.global_step, 0) * el / done:.0f} s)"
                )

        return _CB()


def train_args_common(a: argparse.Namespace, out: Path) -> dict:
    return dict(
        output_dir=str(out),
        max_steps=a.steps,
        per_device_train_batch_size=a.batch,
        gradient_accumulation_steps=1,
        learning_rate=a.lr,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=a.device == "cpu",
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        seed=a.seed,
        data_seed=a.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def save_final(trainer, tok, out: Path, meta: dict) -> None:
    """The trained model as a plain checkpoint: LoRA adapters merged into the weights."""
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model = trainer.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.to("cpu").save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "cogr-done.json").write_text(json.dumps(meta) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


# ---------------------------------------------------------------- SFT


def sft_rows(path: Path, name: str) -> list[dict]:
    rows = read_jsonl(path) if path.is_file() else []
    for r in rows:
        if not isinstance(r.get("prompt"), list) or not isinstance(r.get("completion"), list):
            raise CogrError("DATA_FORMAT", f"{path}:{r['_line']}: expected prompt and completion message lists")
    return rows


def cmd_sft(a: argparse.Namespace) -> None:
    set_threads(a.threads)
    from datasets import Dataset
    from transformers import EarlyStoppingCallback
    from trl import SFTConfig, SFTTrainer

    data = Path(a.data)
    queries = sft_rows(data / "query.jsonl", "query")
    items = sft_rows(data / "item.jsonl", "item")
    # Pseudo-queries (`cogr sft --export --pseudo-queries n`: item titles with the planner's keywords): more
    # query answers than the core training queries, each seen once an epoch (not repeated as those are).
    pseudo = sft_rows(data / "pseudo.jsonl", "query")
    if not queries and not items:
        raise CogrError("DATA_FORMAT", f"{data}: no SFT examples (item.jsonl and query.jsonl are empty or missing)")
    rng = random.Random(a.seed)
    dev_items = sft_rows(data / "dev" / "item.jsonl", "item")
    rng.shuffle(dev_items)
    # The dev loss is computed at every evaluation: every dev query, and --dev-items of the dev items.
    dev = sft_rows(data / "dev" / "query.jsonl", "query") + dev_items[: a.dev_items]
    def tenth(rows: list) -> tuple[list, list]:
        # A seeded tenth of the rows as the dev set, the rest to train on.
        rng.shuffle(rows)
        k = max(1, len(rows) // 10)
        return rows[:k], rows[k:]

    if not dev and items:
        # No dev split in the run: a tenth of the items decides when to stop.
        dev, items = tenth(items)
    elif not dev and pseudo:
        # Query targets alone (round.sh --query-sft own) and no dev queries: a tenth of the pseudo-queries.
        dev, pseudo = tenth(pseudo)
    if not dev:
        raise CogrError("DATA_FORMAT", f"{data}: no dev examples to decide when to stop (dev/query.jsonl, dev/item.jsonl, or items or pseudo-queries to take a tenth of)")
    if a.limit > 0:
        # A seeded few of each (tests, smoke runs).
        rng.shuffle(queries)
        rng.shuffle(items)
        rng.shuffle(pseudo)
        queries, items, dev, pseudo = queries[: a.limit], items[: a.limit], dev[: a.limit], pseudo[: a.limit]
    # Queries repeated so that they are about --query-share of the examples (the items, many more, would drown them).
    rep = max(1, round(a.query_share * len(items) / max(1, (1 - a.query_share) * len(queries)))) if queries else 0
    rows = queries * rep + items + pseudo
    rng.shuffle(rows)
    model, tok = load_model(a.model, a.device)
    check_lengths(tok, rows + dev, 0, context_of(model, a), str(data))
    as_ds = lambda rs: Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rs])
    out = Path(a.out).resolve()  # absolute: the trainer's state records checkpoint paths, and a resume may run elsewhere
    work = out.with_name(out.name + ".work")
    last = last_checkpoint(work)
    steps_per_epoch = -(-len(rows) // a.batch)
    steps = StepLog(Path(a.log), steps_per_epoch * a.max_epochs, "sft", start=last)
    args = train_args_common(a, work)
    by_steps = 0 < a.eval_steps < steps_per_epoch * a.max_epochs  # else once an epoch (a smoke run's few steps)
    every = dict(eval_strategy="steps", eval_steps=a.eval_steps, save_strategy="steps", save_steps=a.eval_steps) if by_steps else dict(eval_strategy="epoch", save_strategy="epoch")
    args.update(
        max_steps=a.max_steps if a.max_steps > 0 else -1,
        num_train_epochs=a.max_epochs,
        train_sampling_strategy="group_by_length",
        **every,
        save_total_limit=a.patience + 1,
        load_best_model_at_end=True,
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        per_device_eval_batch_size=a.batch,
        lr_scheduler_type="constant",
        warmup_steps=0,
    )
    cfg = SFTConfig(**args, max_length=a.max_length)
    trainer = SFTTrainer(
        model=model,
        args=cfg,
        train_dataset=as_ds(rows),
        eval_dataset=as_ds(dev),
        processing_class=tok,
        peft_config=lora_config(a),
        callbacks=[steps.callback(), EarlyStoppingCallback(early_stopping_patience=a.patience)],
    )
    log(
        f"sft: up to {a.max_epochs} epochs × {steps_per_epoch} steps of {a.batch} ({len(queries)} query examples × {rep}, {len(items)} item examples, {len(pseudo)} pseudo-queries),"
        f" stopping when the loss on {len(dev)} dev examples has not fallen for {a.patience} evaluation(s) (every {str(a.eval_steps) + ' steps' if a.eval_steps > 0 else 'epoch'}); {'LoRA r=' + str(a.lora_r) if a.lora_r > 0 else 'full updates'}, {a.device}"
    )
    if last:
        log(f"sft: resuming after step {last} ({work})")
    trainer.train(resume_from_checkpoint=True if last else None)
    hist = [{"step": h["step"], "epoch": h["epoch"], "eval_loss": h["eval_loss"]} for h in trainer.state.log_history if "eval_loss" in h]
    best = min(hist, key=lambda h: h["eval_loss"]) if hist else None
    save_final(trainer, tok, out, {"stage": "sft", "from": str(a.model), "epochs": hist, "best": best, "examples": len(rows), "queries": len(queries), "items": len(items), "dev": len(dev), "lora_r": a.lora_r})
    shutil.rmtree(work, ignore_errors=True)
    by_step = ", ".join(f"step {h['step']} (epoch {h['epoch']:.2f}): {h['eval_loss']:.4f}" for h in hist)
    log(f"sft: dev loss {by_step}; kept step {best['step'] if best else '?'}; saved {out}")


# ---------------------------------------------------------------- constrained decoding


def load_vocabulary(a: argparse.Namespace):
    """--vocabulary's phrases (keyword_grammar.Vocabulary), or None without it."""
    vocab = None
    if a.vocabulary:
        path = Path(a.vocabulary)
        if not path.is_file():
            raise CogrError("DATA_MISSING", f"{path}: no such vocabulary file (cogr sft --db <run> --export <dir> writes <dir>/vocabulary.json)")
        try:
            vocab = keyword_grammar.Vocabulary.load(path, a.max_keyword_length)
        except (ValueError, KeyError, TypeError) as e:
            raise CogrError("DATA_FORMAT", f"{path}: {e}")
        if len(vocab) == 0:
            raise CogrError("DATA_FORMAT", f"{path}: no phrase the keyword grammar can write")
        log(f"vocabulary ({a.vocabulary_mode}): {len(vocab)} phrases from {path}" + (f" ({vocab.dropped} left out: not writable under the grammar)" if vocab.dropped else ""))
    return vocab


def grammar_for(tok, model, a: argparse.Namespace, vocab, forced: bool | None = None):
    """The keyword-list grammar (keyword_grammar.py) for this tokenizer, or None with --free; its trie is the
    vocabulary with --vocabulary-mode force (or when `forced` says so: the fallback pass)."""
    if a.free:
        return None
    trie = vocab if (a.vocabulary_mode == "force" if forced is None else forced) else None
    return keyword_grammar.KeywordGrammar(tok, model.config.vocab_size, a.max_keywords, a.max_keyword_length, trie)


def phrase_filter(a: argparse.Namespace, vocab):
    """With --vocabulary-mode filter or fallback, the vocabulary the answers are filtered by (keyword_grammar.keep_phrases); else None."""
    return vocab if vocab is not None and a.vocabulary_mode in ("filter", "fallback") else None


def filter_summary(keep, kept: dict) -> str:
    """The vocabulary filter's count for a progress line ('' without the filter)."""
    if keep is None:
        return ""
    return f"; vocabulary filter: {kept['dropped']} of {kept['keywords']} keywords left out (no phrase of the {len(keep)}, or repeated)"


def grammar_summary(g) -> str:
    if g is None:
        return "free decoding"
    st = g.stats
    vocab = f"phrases of a {len(g.vocab)}-phrase vocabulary ({st['off_vocabulary']} cut off it by a forced closing), " if g.vocab is not None else ""
    return f"keyword grammar (≤ {g.k} keywords of ≤ {g.length} characters; {vocab}{st['forced']} forced closings, {st['fallbacks']} fallbacks, {st['seconds']:.1f} s masking)"


# ---------------------------------------------------------------- GRPO


class RewardServerDown(CogrError):
    def __init__(self, message: str):
        super().__init__("REWARD_UNAVAILABLE", message, 1)


def post_json(url: str, body: dict, token: str | None, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json"})
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")[:500]
        raise RewardServerDown(f"reward server {url} answered {e.code}: {detail}")
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise RewardServerDown(f"reward server {url} unreachable: {reason}")
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise RewardServerDown(f"reward server {url} answered something that is not JSON: {raw[:200]!r}")


def completion_text(c) -> str:
    if isinstance(c, list):  # conversational: [{"role": "assistant", "content": ...}]
        return "".join(m.get("content", "") for m in c if isinstance(m, dict))
    return str(c)


def keep_log_lines(path: Path, keep) -> None:
    """A JSON-lines log with only the records `keep` accepts (a line that is not JSON, cut by a kill, is dropped), rewritten through a rename."""
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and keep(rec):
            kept.append(line)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text("".join(l + "\n" for l in kept), encoding="utf-8")
    tmp.replace(path)


def make_reward_func(url: str, token: str | None, timeout: float, log_path: Path, resume_after: int = 0, keep=None, stats=None):
    """TRL's reward function: the completions posted to the reward server's /get_reward; with
    `keep` (a Vocabulary) each answer's off-vocabulary keywords left out first (the answer is
    scored as filtered, and the rewards log holds it so), counted in `stats`. GRPO here calls it
    once per step (no gradient accumulation), so a stage resumed from the checkpoint of step
    `resume_after` keeps the log's calls up to it, drops the later ones (run again), and numbers
    on from there."""
    calls = {"n": resume_after}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if resume_after == 0 or not log_path.exists():
        log_path.write_text("")
    else:
        keep_log_lines(log_path, lambda r: int(r.get("call", 0)) <= resume_after)

    def cogr_reward(prompts, completions, label, **kw):
        texts = [completion_text(c) for c in completions]
        if keep is not None:
            filtered = [keyword_grammar.keep_phrases(t, keep) for t in texts]
            texts = [t for t, _, _ in filtered]
            if stats is not None:
                stats["keywords"] += sum(n for _, n, _ in filtered)
                stats["dropped"] += sum(d for _, _, d in filtered)
        ans = post_json(url, {"query": texts, "prompts": [""] * len(texts), "labels": list(label)}, token, timeout)
        rewards = ans.get("rewards")
        if not isinstance(rewards, list) or len(rewards) != len(texts) or not all(isinstance(r, (int, float)) for r in rewards):
            raise RewardServerDown(f"reward server {url}: expected {len(texts)} numeric rewards, got {str(rewards)[:200]}")
        calls["n"] += 1
        with log_path.open("a", encoding="utf-8") as f:
            for lab, t, r in zip(label, texts, rewards):
                f.write(json.dumps({"call": calls["n"], "label": lab, "completion": t, "reward": r}) + "\n")
        return [float(r) for r in rewards]

    return cogr_reward


def constrained_trainer_class():
    """GRPOTrainer whose rollouts are sampled under the keyword-list grammar.

    How it hooks in (TRL 1.16, trl/trainer/grpo_trainer.py `_generate_single_turn`, the
    plain-transformers path: no vLLM, no continuous batching): that method samples with
    `unwrapped_model.generate(**inputs, generation_config=self.generation_config)`, where
    `unwrapped_model` is `accelerator.unwrap_model(model)` — on one CPU process the very
    model object. For the duration of that call the model's `generate` is shadowed by an
    instance attribute that adds `logits_processor=[grammar processor]` (transformers
    merges custom processors before the sampling warpers, so temperature and top-p act on
    the masked logits); it is removed afterwards. The hook checks it was used: a TRL whose
    generation no longer goes through `model.generate` (or a vLLM / continuous-batching
    configuration) fails the step with an error instead of silently sampling unconstrained.

    Why it is sound: the grammar only decides which completions are sampled. TRL then scores
    the sampled tokens with the policy's own log-probs (a fresh forward pass of the
    unconstrained model, temperature-scaled), so the loss is the usual GRPO loss on these
    completions: raising log pi(token) for completions with a positive advantage and lowering
    it for negative ones. All of them are grammatical, so the gradient only reshapes
    probability among grammatical continuations; the one thing it leaves out is the
    grammar's renormaliser (log of the allowed mass at each step), a term that would push
    probability into the allowed set and that is irrelevant as long as generation keeps the
    mask. Top-p truncation already creates the same kind of sampler/scorer gap in TRL. The
    trained model is therefore always used with the grammar (round.sh's `generate`).
    """
    from trl import GRPOTrainer

    class ConstrainedGRPOTrainer(GRPOTrainer):
        def __init__(self, *args, keyword_grammar=None, **kw):
            super().__init__(*args, **kw)
            self.keyword_grammar = keyword_grammar

        def _generate_single_turn(self, prompt_ids, *args, **kw):
            g = self.keyword_grammar
            if g is None:
                return super()._generate_single_turn(prompt_ids, *args, **kw)
            if self.use_vllm or getattr(self, "use_transformers_continuous_batching", False):
                raise CogrError("INVALID_ARGUMENT", "the keyword grammar hooks transformers' generate: no vLLM or continuous batching", 1)
            model = self.accelerator.unwrap_model(self.model_wrapped)
            original = model.generate
            used = []

            def generate(*ga, **gk):
                from transformers import LogitsProcessorList

                cfg = gk.get("generation_config")
                budget = getattr(cfg, "max_new_tokens", None) or self.max_completion_length
                proc = g.processor(int(budget))
                used.append(proc)
                lp = LogitsProcessorList(gk.pop("logits_processor", None) or [])
                lp.append(proc)
                return original(*ga, logits_processor=lp, **gk)

            model.generate = generate
            try:
                out = super()._generate_single_turn(prompt_ids, *args, **kw)
            finally:
                del model.generate  # the class's method again
            if not used or used[0].calls == 0:
                raise CogrError("INTERNAL", "the keyword grammar was not applied to the GRPO rollouts (TRL no longer samples through model.generate?)", 1)
            return out

    return ConstrainedGRPOTrainer


def cmd_grpo(a: argparse.Namespace) -> None:
    set_threads(a.threads)
    from datasets import Dataset
    from trl import GRPOConfig

    prompts = read_jsonl(Path(a.prompts))
    for r in prompts:
        if not isinstance(r.get("prompt"), list) or not isinstance(r.get("label"), str):
            raise CogrError("DATA_FORMAT", f"{a.prompts}:{r['_line']}: expected a prompt message list and a label")
    if not prompts:
        raise CogrError("DATA_FORMAT", f"{a.prompts}: no prompts")
    url = a.reward_url.rstrip("/") + "/get_reward"
    # Fail before loading anything when the server is not there.
    health = a.reward_url.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(health, timeout=a.reward_timeout) as r:
            r.read()
    except (urllib.error.URLError, OSError) as e:
        raise RewardServerDown(f"reward server {health} unreachable: {getattr(e, 'reason', e)}")
    rng = random.Random(a.seed)
    rng.shuffle(prompts)
    per_step = a.batch // a.generations
    need = a.steps * per_step
    rows = (prompts * (need // len(prompts) + 1))[:need]
    model, tok = load_model(a.model, a.device)
    check_lengths(tok, rows, a.max_completion, context_of(model, a), a.prompts)
    ds = Dataset.from_list([{"prompt": r["prompt"], "label": r["label"]} for r in rows])
    out = Path(a.out).resolve()
    # Checkpoints of a stage in progress: a run killed midway resumes from the last one.
    work = out.with_name(out.name + ".work")
    last = last_checkpoint(work)
    steps = StepLog(Path(a.log), a.steps, f"grpo {a.name}", start=last)
    vocab = load_vocabulary(a)
    keep = phrase_filter(a, vocab)
    kept = {"keywords": 0, "dropped": 0}
    reward = make_reward_func(url, a.token, a.reward_timeout, Path(a.rewards_log), resume_after=last, keep=keep, stats=kept)
    args = train_args_common(a, work)
    args.update(save_strategy="steps", save_steps=a.save_steps, save_total_limit=1, lr_scheduler_type="constant", warmup_steps=0)
    cfg = GRPOConfig(
        **args,
        num_generations=a.generations,
        max_completion_length=a.max_completion,
        temperature=a.temperature,
        top_p=a.top_p,
        beta=a.beta,
        repetition_penalty=a.repetition_penalty,
        use_vllm=False,
        shuffle_dataset=False,
        log_completions=False,
    )
    g = grammar_for(tok, model, a, vocab)
    trainer = constrained_trainer_class()(
        model=model,
        reward_funcs=[reward],
        args=cfg,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[steps.callback()],
        keyword_grammar=g,
        peft_config=lora_config(a),
    )
    log(
        f"grpo {a.name}: {a.steps} steps × {per_step} prompt(s) × {a.generations} completions of ≤ {a.max_completion} tokens, rewards from {url};"
        f" {'LoRA r=' + str(a.lora_r) if a.lora_r > 0 else 'full updates'}, lr {a.lr}, {a.device}" + (f"; resuming after step {last}" if last else "")
    )
    trainer.train(resume_from_checkpoint=True if last else None)
    save_final(
        trainer,
        tok,
        out,
        {"stage": f"grpo-{a.name}", "from": str(a.model), "steps": a.steps, "lora_r": a.lora_r, "grammar": None if g is None else {"maxKeywords": g.k, "maxKeywordLength": g.length, "vocabulary": None if vocab is None else len(vocab), "vocabularyMode": None if vocab is None else a.vocabulary_mode}},
    )
    shutil.rmtree(work, ignore_errors=True)
    log(f"grpo {a.name}: saved {out}; rollouts with {grammar_summary(g)}{filter_summary(keep, kept)}")


# ---------------------------------------------------------------- generation


def meta_path(out: Path) -> Path:
    """generate's record beside its answers: x.completions.jsonl -> x.completions.meta.json."""
    name = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return out.with_name(name + ".meta.json")


def cmd_generate(a: argparse.Namespace) -> None:
    set_threads(a.threads)
    import torch

    rows = read_jsonl(Path(a.prompts))
    for r in rows:
        if not isinstance(r.get("prompt"), list) or not isinstance(r.get("id"), str):
            raise CogrError("DATA_FORMAT", f"{a.prompts}:{r['_line']}: expected an id and a prompt message list")
    model, tok = load_model(a.model, a.device)
    model.eval()
    tok.padding_side = "left"
    check_lengths(tok, rows, a.max_new_tokens, context_of(model, a), a.prompts)
    # Prompts of similar length share a batch (less padding); the output keeps the input order.
    texts_all = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: len(texts_all[i]))
    answers: dict[int, dict] = {}
    out = Path(a.out)
    tmp = out.with_name(out.name + ".partial")
    vocab = load_vocabulary(a)
    keep = phrase_filter(a, vocab)
    kept = {"keywords": 0, "dropped": 0}
    g = grammar_for(tok, model, a, vocab)
    torch.manual_seed(a.seed)
    t0 = time.time()
    empty: list[int] = []

    def decode(idx: list[int], grammar, what: str, fallback: bool = False) -> None:
        """Answers for the prompts `idx` (in batches) under `grammar` into `answers`: filtered when there is
        a filter (an answer it leaves empty noted in `empty`), or, for the fallback pass, marked as such."""
        done = 0
        t = time.time()
        for i in range(0, len(idx), a.batch):
            part = idx[i : i + a.batch]
            enc = tok([texts_all[j] for j in part], return_tensors="pt", padding=True, add_special_tokens=False).to(a.device)
            with torch.no_grad():
                gen = model.generate(
                    **enc,
                    max_new_tokens=a.max_new_tokens,
                    do_sample=a.temperature > 0,
                    temperature=a.temperature if a.temperature > 0 else None,
                    top_p=a.top_p if a.temperature > 0 else None,
                    repetition_penalty=a.repetition_penalty,
                    pad_token_id=tok.pad_token_id,
                    **({"logits_processor": [grammar.processor(a.max_new_tokens)]} if grammar is not None else {}),
                )
            for j, c in zip(part, gen[:, enc["input_ids"].shape[1] :]):
                ended = bool((c == tok.eos_token_id).any())
                text = tok.decode(c, skip_special_tokens=True)
                row = {"id": rows[j]["id"], "completion": text, "truncated": not ended}
                if fallback:
                    row["fallback"] = True
                elif keep is not None:
                    text, n, d = keyword_grammar.keep_phrases(text, keep)
                    kept["keywords"] += n
                    kept["dropped"] += d
                    row["completion"] = text
                    if n == d:
                        empty.append(j)
                answers[j] = row
            done += len(part)
            el = time.time() - t
            log(f"{what}: {done}/{len(idx)} prompts ({done / el:.2f}/s, ETA {(len(idx) - done) * el / done:.0f} s)")

    decode(order, g, "generate")
    done = len(rows)
    fb = ""
    n_empty = len(empty)
    if a.vocabulary_mode == "fallback" and vocab is not None and g is not None:
        # An answer the filter left empty is sampled again under the vocabulary's trie: every keyword then a phrase.
        forced = grammar_for(tok, model, a, vocab, forced=True)
        if empty:
            decode(sorted(empty, key=lambda i: len(texts_all[i])), forced, "generate (fallback)", fallback=True)
        fb = f"; vocabulary fallback: {n_empty} of {done} answers left empty by the filter, sampled again under the vocabulary's trie ({grammar_summary(forced)})"
    tmp.write_text("".join(json.dumps(answers[j]) + "\n" for j in range(len(rows))), encoding="utf-8")
    os.replace(tmp, out)
    cut = sum(1 for r in answers.values() if r["truncated"])
    # What made the answers, beside them: <out stem>.meta.json (bench llm reads the vocabulary mode from it).
    meta = {
        "model": str(a.model),
        "prompts": str(a.prompts),
        "answers": done,
        "cutOff": cut,
        "grammar": None if g is None else {"maxKeywords": g.k, "maxKeywordLength": g.length},
        "vocabulary": None if vocab is None else len(vocab),
        "vocabularyMode": None if vocab is None else a.vocabulary_mode,
        # The filter's counts: keywords written, left out, and answers it left with no phrase.
        "filter": None if keep is None else {**kept, "emptied": n_empty},
        "fallbacks": sum(1 for r in answers.values() if r.get("fallback")),
        "temperature": a.temperature,
        "seconds": round(time.time() - t0, 2),
    }
    write_atomic(meta_path(out), json.dumps(meta, indent=2) + "\n")
    log(f"generate: {done} answers in {time.time() - t0:.0f} s, {cut} cut off at {a.max_new_tokens} tokens; {grammar_summary(g)}{filter_summary(keep, kept)}{fb}")


# ---------------------------------------------------------------- CLI


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="cogr_trl.py")
    p.add_argument("--threads", type=int, default=int(os.environ.get("COGR_TRL_THREADS", "2")))
    sub = p.add_subparsers(dest="cmd", required=True)

    b = sub.add_parser("base")
    b.add_argument("--out", required=True)

    def device(s):
        s.add_argument("--device", choices=["cpu", "cuda"], default=os.environ.get("COGR_TRL_DEVICE", "cpu"), help="where to train and generate (default $COGR_TRL_DEVICE or cpu)")

    def training(s):
        s.add_argument("--model", required=True)
        s.add_argument("--out", required=True)
        s.add_argument("--log", required=True, help="per-step JSONL log")
        s.add_argument("--steps", type=int, default=4)
        s.add_argument("--batch", type=int, default=4)
        s.add_argument("--lr", type=float, default=1e-5)
        s.add_argument("--seed", type=int, default=1)
        s.add_argument("--context", type=int, default=0, help="context length (default: the model's)")
        s.add_argument("--lora-r", type=int, default=16, help="LoRA rank (0: update every weight)")
        s.add_argument("--lora-alpha", type=int, default=32)
        device(s)

    s = sub.add_parser("sft")
    training(s)
    s.add_argument("--data", required=True, help="folder of `cogr sft --db <run> --export` (item.jsonl, query.jsonl, dev/)")
    s.add_argument("--max-epochs", type=int, default=8, help="epochs at most; training stops when the dev loss has not fallen for --patience epochs")
    s.add_argument("--patience", type=int, default=1, help="evaluations without a lower dev loss before stopping")
    s.add_argument("--max-steps", type=int, default=0, help="stop after this many steps at most (0: --max-epochs decides); a time budget")
    s.add_argument("--eval-steps", type=int, default=0, help="evaluate the dev loss every this many steps (0: every epoch)")
    s.add_argument("--dev-items", type=int, default=24, help="dev items in the dev loss (every dev query is)")
    s.add_argument("--limit", type=int, default=0, help="at most this many query, item and dev examples each (0: all; for smoke runs)")
    s.add_argument("--query-share", type=float, default=0.3, help="share of query examples in an epoch (they are repeated to it)")
    s.add_argument("--max-length", type=int, default=1024)

    g = sub.add_parser("grpo")
    training(g)
    g.add_argument("--name", default="query")
    g.add_argument("--prompts", required=True, help="JSONL of {label, prompt}")
    g.add_argument("--reward-url", required=True)
    g.add_argument("--token")
    g.add_argument("--reward-timeout", type=float, default=60.0)
    g.add_argument("--rewards-log", required=True, help="JSONL of every (label, completion, reward) the trainer received")
    g.add_argument("--generations", type=int, default=4)
    g.add_argument("--max-completion", type=int, default=64)
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--beta", type=float, default=0.0)
    g.add_argument("--repetition-penalty", type=float, default=1.0, help="sampling's repetition penalty (1 = none)")
    g.add_argument("--save-steps", type=int, default=10, help="a checkpoint every this many steps (a killed stage resumes from it)")

    q = sub.add_parser("generate")
    device(q)
    q.add_argument("--model", required=True)
    q.add_argument("--prompts", required=True, help="JSONL of {id, prompt}")
    q.add_argument("--out", required=True)
    q.add_argument("--batch", type=int, default=8)
    q.add_argument("--max-new-tokens", type=int, default=96)
    q.add_argument("--temperature", type=float, default=0.7)
    q.add_argument("--top-p", type=float, default=0.8)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--context", type=int, default=0)
    q.add_argument("--repetition-penalty", type=float, default=1.0, help="sampling's repetition penalty (1 = none)")

    def grammar_flags(s):
        s.add_argument("--max-keywords", type=int, default=keyword_grammar.MAX_KEYWORDS, help="the grammar's K (cogr's DEFAULTS.llm.maxKeywords)")
        s.add_argument(
            "--max-keyword-length", type=int, default=keyword_grammar.MAX_KEYWORD_LENGTH, help="the grammar's L in characters (DEFAULTS.llm.maxKeywordLength)"
        )
        s.add_argument("--free", action="store_true", help="sample without the keyword-list grammar")
        s.add_argument("--vocabulary", help="every keyword a phrase of this file (cogr sft --export's vocabulary.json)")
        s.add_argument(
            "--vocabulary-mode",
            choices=("filter", "force", "fallback"),
            default="filter",
            help="filter: off-vocabulary keywords left out of each answer; force: sampled under the vocabulary's trie; "
            "fallback: filtered, and (generate) an answer left empty sampled again under the trie (default filter)",
        )

    grammar_flags(g)
    grammar_flags(q)

    a = p.parse_args(argv)
    if a.threads < 1:
        p.error("--threads: expected ≥ 1")
    if a.cmd in ("grpo", "generate") and (a.max_keywords < 1 or a.max_keyword_length < 1):
        p.error("--max-keywords and --max-keyword-length: expected ≥ 1")
    if a.cmd in ("grpo", "generate") and a.free and a.vocabulary and a.vocabulary_mode in ("force", "fallback"):
        p.error(f"--vocabulary-mode {a.vocabulary_mode} constrains the keyword grammar, which --free turns off")
    if a.cmd == "grpo" and a.batch % a.generations:
        p.error(f"--batch {a.batch} must be a multiple of --generations {a.generations}")
    try:
        {"base": cmd_base, "sft": cmd_sft, "grpo": cmd_grpo, "generate": cmd_generate}[a.cmd](a)
    except CogrError as e:
        log(f"error[{e.code}]: {e}")
        return e.status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
