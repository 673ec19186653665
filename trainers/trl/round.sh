#!/usr/bin/env bash
# One alternating CoGR round with a real LLM trained by TRL, rewards from cogr reward-server.
#
#   bash trainers/trl/round.sh --dataset med [--work DIR] [--sft-steps 8] [--query-steps 3]
#        [--item-steps 3] [--items 16] [--queries 0] [--generations 4] [--gen-tokens 128] [--repetition-penalty 1]
#        [--threads 1] [--free]
#
# --queries n: keywords for n (sampled) core training queries instead of all (0); the held-out
# queries always all get keywords. --free: sample without the keyword-list grammar.
#
# Stages (each writes its output under --work, default $COGR_HOME/trl/<dataset>, and is
# skipped when that output is there; a stage killed midway leaves no output and runs again
# from its start; outputs are written through a rename):
#   demo          cogr demo --rounds 0: the stored run (split, SFT item index, planner) and
#                 the planner's and BM25's held-out F1 on the same split     → demo.json
#   prompts       the run's LLM prompts: core training queries, every query, sampled items
#   sft-export    cogr sft --export (a scratch database: the run's policies stay as they are)
#   sft           SFTTrainer on the export (core training queries + items)  → ckpt-sft/
#   eval-sft      keywords for every query from the SFT model, imported     → import-sft-query.json
#   grpo-query    GRPOTrainer over core training queries, reward = query F1 against the frozen
#                 item index (cogr reward-server)                            → ckpt-query/
#   query         keywords for every query, cogr import-generation --side query → import-query.json
#   grpo-item     GRPOTrainer over the sampled items, reward = counterfactual item reward
#                 against the frozen query index (now the LLM's)              → ckpt-item/
#   item          keywords for the sampled items, import --side item         → import-item.json
#   eval-item     the LLM's query keywords against the new item index        → import-query-after-item.json
#   report        table.md and report.html (reward per GRPO step, held-out F1 per stage)
# Everything is offline and on loopback; progress on stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dataset="" work="" sft_steps=8 query_steps=3 item_steps=3 items=16 queries=0 generations=4 gen_tokens=128 rep=1 free=() threads="${COGR_TRL_THREADS:-1}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --sft-steps) sft_steps="$2"; shift 2 ;;
    --query-steps) query_steps="$2"; shift 2 ;;
    --item-steps) item_steps="$2"; shift 2 ;;
    --items) items="$2"; shift 2 ;;
    --queries) queries="$2"; shift 2 ;;
    --free) free=(--free); shift ;;
    --generations) generations="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --gen-tokens) gen_tokens="$2"; shift 2 ;;
    --repetition-penalty) rep="$2"; shift 2 ;;
    *) echo "error[INVALID_ARGUMENT]: round.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$dataset" ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --dataset required" >&2; exit 2; }
for n in "$sft_steps" "$query_steps" "$item_steps" "$items" "$generations" "$threads" "$gen_tokens"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error[INVALID_ARGUMENT]: round.sh: expected a positive integer, got '$n'" >&2; exit 2; }
done
[[ "$queries" =~ ^(0|[1-9][0-9]*)$ ]] || { echo "error[INVALID_ARGUMENT]: round.sh: --queries: expected an integer ≥ 0, got '$queries'" >&2; exit 2; }
work="${work:-${COGR_HOME:-.cogr}/trl/$dataset}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
export COGR_HOME="$work/home" COGR_TRL_THREADS="$threads"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
cogr=(node "$root/bin/cogr.mjs")
tools=(node "$root/dist/src/trainers/trl.js")
venv="${COGR_TRL_VENV:-$HOME/.cache/cogr/venvs/trl}"
py=("$venv/bin/python" "$here/cogr_trl.py" --threads "$threads")
base="${COGR_TRL_BASE:-$HOME/.cache/cogr/checkpoints/SmolLM2-135M-Instruct}"
db="$COGR_HOME/db"

[[ -x "$venv/bin/python" ]] || { echo "error[DATA_MISSING]: $venv: no trainer venv; run 'bash trainers/trl/setup.sh' first" >&2; exit 1; }
[[ -f "$base/cogr-base.json" ]] || { echo "error[DATA_MISSING]: $base: no base checkpoint; run 'npx cogr llm install && bash trainers/trl/setup.sh' first" >&2; exit 1; }

t_start=$(date +%s)
stage() { echo "round.sh [$dataset] stage $1 ($(( $(date +%s) - t_start )) s)" >&2; }
done_or() { # done_or <output> <stage name>: true (skip) when the output exists
  if [[ -e "$1" ]]; then echo "round.sh [$dataset] stage $2: done ($1), skipped" >&2; return 0; fi
  stage "$2"; return 1
}

# ---- the reward server, one per GRPO stage (a server left by a killed run is stopped first)
rs_pid_file="$work/reward-server.pid"
stop_server() {
  if [[ -f "$rs_pid_file" ]]; then
    local pid; pid="$(cat "$rs_pid_file")"
    if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -f "$rs_pid_file"
  fi
}
trap stop_server EXIT
start_server() { # prints the base URL
  stop_server
  local log="$work/reward-server.log"
  # A fresh log: the address is read from it, and the previous stage's server wrote its own there
  # (the child truncating it after the fork raced the read below, which then found the old address).
  rm -f "$log"
  "${cogr[@]}" reward-server --db "$db" --round latest --port 0 >"$log" 2>&1 &
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

import_gen() { # import_gen <side> <keywords.jsonl> <out.json>
  "${cogr[@]}" import-generation --db "$db" --side "$1" --from "$2" --json >"$3.partial"
  mv "$3.partial" "$3"
}

grammar=() # the keyword-list grammar's bounds, the same as the prompts' (prompts/split.json)
set_grammar() {
  grammar=(--max-keywords "$(node -p "require('$work/prompts/split.json').maxKeywords")"
    --max-keyword-length "$(node -p "require('$work/prompts/split.json').maxKeywordLength")" "${free[@]}")
}

keywords_for() { # keywords_for <model> <prompts> <name>: completions, then keywords (cogr's parser)
  [[ -f "$work/$3.completions.jsonl" ]] || "${py[@]}" generate --model "$1" --prompts "$2" --out "$work/$3.completions.jsonl" --max-new-tokens "$gen_tokens" --repetition-penalty "$rep" "${grammar[@]}"
  "${tools[@]}" parse --from "$work/$3.completions.jsonl" --out "$work/$3.keywords.jsonl"
}

done_or "$work/demo.json" demo || { "${cogr[@]}" demo --dataset "$dataset" --rounds 0 --json >"$work/demo.json.partial"; mv "$work/demo.json.partial" "$work/demo.json"; }
done_or "$work/prompts/split.json" prompts || "${tools[@]}" prompts --db "$db" --out "$work/prompts" --items "$items" --queries "$queries"
set_grammar
done_or "$work/sft-data/done.json" sft-export || {
  rm -rf "$work/sft-data" "$work/sft-db"
  "${cogr[@]}" sft --dataset "$dataset" --db "$work/sft-db" --export "$work/sft-data" --json >"$work/sft-data.json"
  mv "$work/sft-data.json" "$work/sft-data/done.json"
}
done_or "$work/ckpt-sft/cogr-done.json" sft ||
  "${py[@]}" sft --model "$base" --data "$work/sft-data" --core "$work/prompts/core.txt" --out "$work/ckpt-sft" --log "$work/sft.log.jsonl" --steps "$sft_steps" --lr 5e-5
done_or "$work/import-sft-query.json" eval-sft || {
  keywords_for "$work/ckpt-sft" "$work/prompts/query-all.jsonl" sft-query
  import_gen query "$work/sft-query.keywords.jsonl" "$work/import-sft-query.json"
}
done_or "$work/ckpt-query/cogr-done.json" grpo-query || {
  url="$(start_server)"
  "${py[@]}" grpo --name query --model "$work/ckpt-sft" --prompts "$work/prompts/query-core.jsonl" --reward-url "$url" \
    --out "$work/ckpt-query" --log "$work/grpo-query.log.jsonl" --rewards-log "$work/grpo-query.rewards.jsonl" \
    --steps "$query_steps" --batch "$generations" --generations "$generations" --max-completion "$gen_tokens" --repetition-penalty "$rep" "${grammar[@]}"
  stop_server
}
done_or "$work/import-query.json" query || {
  keywords_for "$work/ckpt-query" "$work/prompts/query-all.jsonl" query
  import_gen query "$work/query.keywords.jsonl" "$work/import-query.json"
}
done_or "$work/ckpt-item/cogr-done.json" grpo-item || {
  url="$(start_server)"
  "${py[@]}" grpo --name item --model "$work/ckpt-query" --prompts "$work/prompts/item-sample.jsonl" --reward-url "$url" \
    --out "$work/ckpt-item" --log "$work/grpo-item.log.jsonl" --rewards-log "$work/grpo-item.rewards.jsonl" \
    --steps "$item_steps" --batch "$generations" --generations "$generations" --max-completion "$gen_tokens" --repetition-penalty "$rep" "${grammar[@]}"
  stop_server
}
done_or "$work/import-item.json" item || {
  keywords_for "$work/ckpt-item" "$work/prompts/item-sample.jsonl" item
  import_gen item "$work/item.keywords.jsonl" "$work/import-item.json"
}
done_or "$work/import-query-after-item.json" eval-item || import_gen query "$work/query.keywords.jsonl" "$work/import-query-after-item.json"
stage report
"${tools[@]}" report --dir "$work" --title "cogr + TRL on $dataset: one alternating round"
echo "round.sh [$dataset]: done in $(( $(date +%s) - t_start )) s; $work/table.md, $work/report.html" >&2
