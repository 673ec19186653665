#!/usr/bin/env bash
# The static checks and the build of `npm test`, side by side (each is one process, mostly
# one thread, so on 2 cores this takes about as long as the type check alone): the type check
# (tsc, tests included), the format check (Prettier), knip (no production export used only by
# tests) and the build to dist/ (which the tests that spawn `cogr` run). Each prints its own
# findings; the script exits non-zero naming every check that failed.
set -u
cd "$(dirname "$0")/.."
names=(typecheck format:check knip build)
pids=()
for n in "${names[@]}"; do
  npm run -s "$n" &
  pids+=($!)
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "npm test: failed: ${failed[*]} (npm run <name> runs one alone)" >&2
  exit 1
fi
