#!/usr/bin/env bash
# One alternating CoGR round with a real LLM trained by TRL (LoRA), rewards from cogr reward-server.
#
#   bash trainers/trl/round.sh --dataset med [--work DIR] [--device cpu|cuda] [--base DIR]
#        [--sft-max-epochs 2] [--sft-max-steps 0] [--sft-eval-steps 20] [--sft-patience 1] [--sft-lr 3e-4] [--query-steps 40] [--item-steps 20]
#        [--grpo-lr 5e-5] [--generations 8] [--prompts-per-step 1] [--items 32] [--lora-r 16]
#        [--gen-tokens 64] [--gen-batch 16] [--threads 1] [--demo-flags "..."] [--free] [--open-vocabulary]
#        [--vocabulary-mode fallback|filter|force]
#        [--queries 0] [--judged 0] [--sft-limit 0] [--pseudo-queries 0] [--query-sft joint|own]
#        [--query-targets planner|oracle] [--embeddings URL|auto|static|none]
#
# The query side's keywords (eval-sft, grpo-query, query) are kept to the vocabulary: every
# query keyword scored or imported is a phrase of sft-data/vocabulary.json (the keywords of
# r1-query's frozen item generation that the planner may plan: carried by minCarriers+ items,
# no titles; written by `cogr sft --export`). --vocabulary-mode filter leaves the other
# keywords out of each answer before it is scored or imported; force samples under
# keyword_grammar.py's trie, so the model writes phrases only; fallback (the default) filters,
# and samples an imported answer that the filter left empty again under the trie (GRPO's
# rollouts are filtered: an empty one keeps its reward). --open-vocabulary turns them off (any
# keyword the list grammar allows); the item side is never constrained.
#
# --sft-max-steps n: SFT stops after n steps at most (a time budget; 0: the dev loss and
# --sft-max-epochs decide). --sft-patience n: SFT stops once the dev loss, evaluated every
# --sft-eval-steps, has not fallen for n evaluations in a row. --queries n / --judged n / --sft-limit n: keywords for n sampled core training queries / n
# sampled judged items, SFT on n examples of each kind (0: all; smaller for smoke runs and tests).
# --pseudo-queries n: SFT also on up to n item titles as queries, with the run's SFT planner's
# keywords for them (`cogr sft --export --pseudo-queries`; sft-data/pseudo.jsonl).
# --query-sft: joint (the default): one model, SFT on both sides' targets, is the query side's
# start and, after the query half-round, the item side's; own: the query side gets a model of its
# own, SFT on the query targets alone (core training and pseudo-queries; the dev queries' loss
# decides when to stop: stage sft-query → ckpt-sft-query/), and the item half-round starts from
# the joint SFT model — two generators, as in the paper.
# --query-targets: the judged queries' SFT targets (`cogr sft --query-targets`): planner (the
# default: the SFT planner's keywords, planned as held out) or oracle (the greedy oracle's
# keywords of each query's judgements, among those the planner may plan for it; the
# planner's where none reaches a relevant item). Pseudo-queries keep the planner's. A work
# folder exported with other targets is refused (its checkpoints learned them).
# --embeddings URL|auto|static|none: the run's encoder (the planner's --keyword-cosine rule, and
# with --demo-flags "--embeddings-features yes" relevance features), and every cogr command of the
# round that loads its planner (demo, sft --export, reward-server, import-generation) is given the
# same endpoint; auto: each starts the shipped server for itself (installed on first use), the
# vectors cached in the round's database; static: each starts the built-in encoder (no install).
# Default none (unlike cogr demo's auto): the run without an encoder, as the stored LLM results.
# --base: the model to start from (default the SmolLM2-135M checkpoint setup.sh converts;
# any causal LM checkpoint folder works, e.g. a bigger one with --device cuda). --threads: torch
# threads (default $COGR_TRL_THREADS or 1). --demo-flags: extra `cogr demo` run flags (--beta 2).
#
# Stages (each writes its output under --work, default $COGR_HOME/trl/<dataset>, and is
# skipped when that output is there; outputs are written through a rename, so a stage killed
# midway runs again; a GRPO stage resumes from its last checkpoint, every 10 steps):
#   demo        cogr demo --rounds 0 --refit no: the stored run (split, SFT item index, planner)
#               with the planner's, BM25's and BM25 + RM3's held-out F1 on the same split → demo.json
#   prompts     the run's compact LLM prompts: core training queries, keyword queries, items
#   sft-export  cogr sft --db <run> --export: the run's own SFT targets (judged items, core
#               training queries; dev queries for the dev loss; --pseudo-queries) and r1-query's
#               vocabulary                                                           → sft-data/
#   sft         SFTTrainer with LoRA until the dev loss stops falling                → ckpt-sft/
#   sft-query   (--query-sft own) the same on the query targets alone                → ckpt-sft-query/
#   eval-sft    keywords for the core training and held-out queries, imported (held-out
#               ones matched against r1-query's frozen item index: --against)        → import-sft-query.json
#   grpo-query  GRPOTrainer (LoRA) over the core training queries, rewards from
#               cogr reward-server --half r1-query                                   → ckpt-query/
#   query       keywords again, imported as half-round r1-query                      → import-query.json
#   grpo-item   GRPOTrainer over sampled judged items, rewards from --half r1-item    → ckpt-item/
#   item        keywords for every judged item, imported as half-round r1-item       → import-item.json
#   eval-item   the LLM's query keywords against that item generation                → import-query-after-item.json
#   report      table.md and report.html (reward per GRPO step, held-out F1 per stage)
# Every stage's wall time and peak memory go to stages.jsonl. Everything is offline and on
# loopback; progress (with rate and ETA) on stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dataset="" work="" device="${COGR_TRL_DEVICE:-cpu}" base="" sft_epochs=2 sft_eval=20 sft_lr=3e-4 query_steps=40 item_steps=20
grpo_lr=5e-5 generations=8 per_step=1 items=32 lora_r=16 gen_tokens=64 gen_batch=16 threads="${COGR_TRL_THREADS:-1}" demo_flags="" free=() open_vocab=0 vocab_mode=fallback queries=0 judged=0 sft_limit=0 sft_steps=0 pseudo=0 sft_patience=1 query_sft=joint query_targets=planner emb=(--embeddings none)
invocation="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    --sft-max-epochs) sft_epochs="$2"; shift 2 ;;
    --sft-eval-steps) sft_eval="$2"; shift 2 ;;
    --sft-max-steps) sft_steps="$2"; shift 2 ;;
    --sft-patience) sft_patience="$2"; shift 2 ;;
    --sft-lr) sft_lr="$2"; shift 2 ;;
    --query-steps) query_steps="$2"; shift 2 ;;
    --item-steps) item_steps="$2"; shift 2 ;;
    --grpo-lr) grpo_lr="$2"; shift 2 ;;
    --generations) generations="$2"; shift 2 ;;
    --prompts-per-step) per_step="$2"; shift 2 ;;
    --items) items="$2"; shift 2 ;;
    --lora-r) lora_r="$2"; shift 2 ;;
    --gen-tokens) gen_tokens="$2"; shift 2 ;;
    --gen-batch) gen_batch="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --demo-flags) demo_flags="$2"; shift 2 ;;
    --free) free=(--free); shift ;;
    --open-vocabulary) open_vocab=1; shift ;;
    --vocabulary-mode) vocab_mode="$2"; shift 2 ;;
    --queries) queries="$2"; shift 2 ;;
    --judged) judged="$2"; shift 2 ;;
    --sft-limit) sft_limit="$2"; shift 2 ;;
    --query-sft) query_sft="$2"; shift 2 ;;
    --query-targets) query_targets="$2"; shift 2 ;;
    --pseudo-queries) pseudo="$2"; shift 2 ;;
    --embeddings) emb=(--embeddings "$2"); shift 2 ;;
    *) echo "error[INVALID_ARGUMENT]: round.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$dataset" ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --dataset required" >&2; exit 2; }
for n in "$sft_epochs" "$sft_eval" "$sft_patience" "$query_steps" "$item_steps" "$generations" "$per_step" "$items" "$threads" "$gen_tokens" "$gen_batch"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error[INVALID_ARGUMENT]: round.sh: expected a positive integer, got '$n'" >&2; exit 2; }
done
for n in "$queries" "$judged" "$sft_limit" "$sft_steps" "$pseudo"; do
  [[ "$n" =~ ^(0|[1-9][0-9]*)$ ]] || { echo "error[INVALID_ARGUMENT]: round.sh: expected an integer ≥ 0, got '$n'" >&2; exit 2; }
done
[[ "$lora_r" =~ ^(0|[1-9][0-9]*)$ ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --lora-r: expected an integer ≥ 0, got '$lora_r'" >&2; exit 2; }
[[ "$vocab_mode" == fallback || "$vocab_mode" == filter || "$vocab_mode" == force ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --vocabulary-mode: expected fallback, filter or force, got '$vocab_mode'" >&2; exit 2; }
[[ "$query_targets" == planner || "$query_targets" == oracle ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --query-targets: expected planner or oracle, got '$query_targets'" >&2; exit 2; }
[[ "$query_sft" == joint || "$query_sft" == own ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --query-sft: expected joint or own, got '$query_sft'" >&2; exit 2; }
[[ "$device" == cpu || "$device" == cuda ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --device: expected cpu or cuda, got '$device'" >&2; exit 2; }
work="${work:-${COGR_HOME:-.cogr}/trl/$dataset}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
# Every invocation's options, in order (a resumed round may be given others): bench llm reports them.
printf '%s\n' "$invocation" >>"$work/invocations.txt"
export COGR_HOME="$work/home" COGR_TRL_THREADS="$threads"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
cogr=(node "$root/bin/cogr.mjs")
tools=(node "$root/dist/src/trainers/trl.js")
venv="${COGR_TRL_VENV:-$HOME/.cache/cogr/venvs/trl}"
py=("$venv/bin/python" "$here/cogr_trl.py" --threads "$threads")
base="${base:-${COGR_TRL_BASE:-$HOME/.cache/cogr/checkpoints/SmolLM2-135M-Instruct}}"
db="$COGR_HOME/db"
train=(--device "$device" --lora-r "$lora_r")

[[ -x "$venv/bin/python" ]] || { echo "error[DATA_MISSING]: $venv: no trainer venv; run 'bash trainers/trl/setup.sh' first" >&2; exit 1; }
[[ -f "$base/config.json" ]] || { echo "error[DATA_MISSING]: $base: no base checkpoint; run 'npx cogr llm install && bash trainers/trl/setup.sh' first" >&2; exit 1; }

t_start=$(date +%s)
stage() { echo "round.sh [$dataset] stage $1 ($(( $(date +%s) - t_start )) s)" >&2; }
done_or() { # done_or <output> <stage name>: true (skip) when the output exists
  if [[ -e "$1" ]]; then echo "round.sh [$dataset] stage $2: done ($1), skipped" >&2; return 0; fi
  stage "$2"; return 1
}
running="" running_t0=0 # the stage timed() runs: a run stopped in it records its seconds on exit (on_exit)
timed() { # timed <stage> <command...>: runs it, appends {stage, seconds, max_rss_mb} to stages.jsonl
  local name="$1"; shift
  running="$name" running_t0=$(date +%s)
  /usr/bin/time -f '%e %M' -o "$work/.time" "$@"
  running=""
  read -r secs kb <"$work/.time"
  printf '{"stage":"%s","seconds":%s,"max_rss_mb":%s}\n' "$name" "$secs" "$(( kb / 1024 ))" >>"$work/stages.jsonl"
}

# ---- the reward server of one half-round (a server left by a killed run is stopped first)
rs_pid_file="$work/reward-server.pid"
stop_server() {
  if [[ -f "$rs_pid_file" ]]; then
    local pid; pid="$(cat "$rs_pid_file")"
    if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -f "$rs_pid_file"
  fi
}
# A run stopped (killed, or a stage failed) inside a timed stage records the seconds it spent there,
# {stage, seconds, stopped: true}: bench llm sums a stage's records, so a resumed stage counts all its time.
on_exit() {
  if [[ -n "$running" ]]; then
    printf '{"stage":"%s","seconds":%s,"stopped":true}\n' "$running" "$(( $(date +%s) - running_t0 ))" >>"$work/stages.jsonl"
  fi
  stop_server
}
trap on_exit EXIT
start_server() { # start_server <half-round>: prints the base URL
  stop_server
  local log="$work/reward-server.log"
  rm -f "$log"
  "${cogr[@]}" reward-server --db "$db" --half "$1" --port 0 "${emb[@]}" >"$log" 2>&1 &
  echo $! >"$rs_pid_file"
  local url=""
  for _ in $(seq 1 240); do
    url="$(grep -so 'listening address=http://[0-9.:]*' "$log" | head -1 | sed 's/.*address=//')" || true
    [[ -n "$url" ]] && break
    kill -0 "$(cat "$rs_pid_file")" 2>/dev/null || { echo "error[REWARD_UNAVAILABLE]: cogr reward-server exited: $(tail -3 "$log")" >&2; exit 1; }
    sleep 0.5
  done
  [[ -n "$url" ]] || { echo "error[REWARD_UNAVAILABLE]: cogr reward-server did not listen within 120 s (see $log)" >&2; exit 1; }
  echo "$url"
}

import_gen() { # import_gen <side> <keywords.jsonl> <out.json> [--half name | --against name]
  local side="$1" from="$2" out="$3"; shift 3
  "${cogr[@]}" import-generation --db "$db" --side "$side" --from "$from" --json "${emb[@]}" "$@" >"$out.partial"
  mv "$out.partial" "$out"
}

grammar=() # the keyword-list grammar's bounds, the same as the prompts' (prompts/split.json)
query_grammar=() # the same for the query side, with the vocabulary constraint unless --free or --open-vocabulary
set_grammar() {
  grammar=(--max-keywords "$(node -p "require('$work/prompts/split.json').maxKeywords")"
    --max-keyword-length "$(node -p "require('$work/prompts/split.json').maxKeywordLength")" "${free[@]}")
  query_grammar=("${grammar[@]}")
  if [[ ${#free[@]} -eq 0 && "$open_vocab" -eq 0 ]]; then query_grammar+=(--vocabulary "$work/sft-data/vocabulary.json" --vocabulary-mode "$vocab_mode"); fi
}

keywords_for() { # keywords_for <stage> <model> <prompts> <name> <grammar flags...>: completions (greedy), then keywords (cogr's parser)
  local stage="$1" model="$2" prompts="$3" name="$4"; shift 4
  [[ -f "$work/$name.completions.jsonl" ]] ||
    timed "$stage" "${py[@]}" generate --device "$device" --model "$model" --prompts "$prompts" --out "$work/$name.completions.jsonl" \
      --max-new-tokens "$gen_tokens" --batch "$gen_batch" --temperature 0 "$@"
  "${tools[@]}" parse --from "$work/$name.completions.jsonl" --out "$work/$name.keywords.jsonl"
}

grpo() { # grpo <name> <half-round> <model> <prompts> <steps> <out> <grammar flags...>
  local url name="$1" half="$2" model="$3" prompts="$4" n="$5" out="$6"; shift 6
  url="$(start_server "$half")"
  timed "grpo-$name" "${py[@]}" grpo "${train[@]}" --name "$name" --model "$model" --prompts "$prompts" --reward-url "$url" \
    --out "$out" --log "$work/grpo-$name.log.jsonl" --rewards-log "$work/grpo-$name.rewards.jsonl" --lr "$grpo_lr" \
    --steps "$n" --batch "$(( per_step * generations ))" --generations "$generations" --max-completion "$gen_tokens" "$@"
  stop_server
}

done_or "$work/demo.json" demo || {
  # shellcheck disable=SC2086 # --demo-flags is a list of flags
  timed demo "${cogr[@]}" demo --dataset "$dataset" --rounds 0 --refit no "${emb[@]}" $demo_flags --json >"$work/demo.json.partial"
  mv "$work/demo.json.partial" "$work/demo.json"
}
done_or "$work/prompts/split.json" prompts || "${tools[@]}" prompts --db "$db" --out "$work/prompts" --items "$items" --queries "$queries" --judged "$judged"
set_grammar
# A work folder exported before the vocabulary existed: exported again (the same targets, and vocabulary.json).
[[ -f "$work/sft-data/done.json" && ! -f "$work/sft-data/vocabulary.json" ]] && rm -f "$work/sft-data/done.json"
if [[ -f "$work/sft-data/done.json" ]]; then
  exported="$(node -p "(require('$work/sft-data/done.json').queryTargets || {kind: 'planner'}).kind")"
  [[ "$exported" == "$query_targets" ]] || { echo "error[INVALID_ARGUMENT]: round.sh: $work/sft-data was exported with --query-targets $exported, not $query_targets: use another --work" >&2; exit 2; }
fi
done_or "$work/sft-data/done.json" sft-export || {
  rm -rf "$work/sft-data"
  "${cogr[@]}" sft --db "$db" --export "$work/sft-data" --pseudo-queries "$pseudo" --query-targets "$query_targets" "${emb[@]}" --json >"$work/sft-data.json"
  mv "$work/sft-data.json" "$work/sft-data/done.json"
}
done_or "$work/ckpt-sft/cogr-done.json" sft ||
  timed sft "${py[@]}" sft "${train[@]}" --model "$base" --data "$work/sft-data" --out "$work/ckpt-sft" --log "$work/sft.log.jsonl" \
    --batch 8 --lr "$sft_lr" --max-epochs "$sft_epochs" --eval-steps "$sft_eval" --patience "$sft_patience" --limit "$sft_limit" --max-steps "$sft_steps"
query_start="$work/ckpt-sft" item_start="$work/ckpt-query" # where each half-round's GRPO starts
if [[ "$query_sft" == own ]]; then
  query_start="$work/ckpt-sft-query" item_start="$work/ckpt-sft"
  done_or "$work/ckpt-sft-query/cogr-done.json" sft-query || {
    # The query targets alone: core training queries, pseudo-queries, and the dev queries for the dev loss.
    rm -rf "$work/sft-data-query" && mkdir -p "$work/sft-data-query/dev"
    cp "$work/sft-data/query.jsonl" "$work/sft-data-query/"
    [[ -f "$work/sft-data/pseudo.jsonl" ]] && cp "$work/sft-data/pseudo.jsonl" "$work/sft-data-query/"
    [[ -f "$work/sft-data/dev/query.jsonl" ]] && cp "$work/sft-data/dev/query.jsonl" "$work/sft-data-query/dev/"
    timed sft-query "${py[@]}" sft "${train[@]}" --model "$base" --data "$work/sft-data-query" --out "$work/ckpt-sft-query" --log "$work/sft-query.log.jsonl" \
      --batch 8 --lr "$sft_lr" --max-epochs "$sft_epochs" --eval-steps "$sft_eval" --patience "$sft_patience" --limit "$sft_limit" --max-steps "$sft_steps"
  }
fi
done_or "$work/import-sft-query.json" eval-sft || {
  keywords_for eval-sft "$query_start" "$work/prompts/query-all.jsonl" sft-query "${query_grammar[@]}"
  # On the item index the query half-round trains against, whatever items were imported since.
  import_gen query "$work/sft-query.keywords.jsonl" "$work/import-sft-query.json" --against r1-query
}
done_or "$work/ckpt-query/cogr-done.json" grpo-query ||
  grpo query r1-query "$query_start" "$work/prompts/query-core.jsonl" "$query_steps" "$work/ckpt-query" "${query_grammar[@]}"
done_or "$work/import-query.json" query || {
  keywords_for query "$work/ckpt-query" "$work/prompts/query-all.jsonl" query "${query_grammar[@]}"
  import_gen query "$work/query.keywords.jsonl" "$work/import-query.json" --half r1-query
}
done_or "$work/ckpt-item/cogr-done.json" grpo-item ||
  grpo item r1-item "$item_start" "$work/prompts/item-sample.jsonl" "$item_steps" "$work/ckpt-item" "${grammar[@]}"
done_or "$work/import-item.json" item || {
  keywords_for item "$work/ckpt-item" "$work/prompts/item-judged.jsonl" item "${grammar[@]}"
  import_gen item "$work/item.keywords.jsonl" "$work/import-item.json" --half r1-item
}
# The same query keywords against the new item generation (the query file is the latest import: re-evaluated, not committed again).
done_or "$work/import-query-after-item.json" eval-item || import_gen query "$work/query.keywords.jsonl" "$work/import-query-after-item.json"
stage report
"${tools[@]}" report --dir "$work" --title "cogr + TRL on $dataset: one alternating round"
echo "round.sh [$dataset]: done in $(( $(date +%s) - t_start )) s; $work/table.md, $work/report.html" >&2
