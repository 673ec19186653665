#!/usr/bin/env bash
# Creates the Python venv the TRL trainer runs in (idempotent, cached outside git).
#
#   bash trainers/trl/setup.sh          # venv at ${COGR_TRL_VENV:-~/.cache/cogr/venvs/trl}
#
# The venv is keyed by the sha256 of requirements.txt: when the marker inside the
# venv names the same hash, nothing is done (a second run costs well under a second).
# A half-built venv (killed install) has no marker and is rebuilt from scratch.
# Only PyPI is reached, by pip; nothing here fetches from a model hub.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
req="$here/requirements.txt"
venv="${COGR_TRL_VENV:-$HOME/.cache/cogr/venvs/trl}"
python="${COGR_TRL_PYTHON:-python3.11}"
marker="$venv/.cogr-requirements.sha256"

if ! command -v "$python" >/dev/null 2>&1; then
  echo "trainers/trl/setup.sh: $python not found (set COGR_TRL_PYTHON to a Python 3.11 or 3.12 interpreter)" >&2
  exit 1
fi

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -f "$marker" && "$(cat "$marker")" == "$want" && -x "$venv/bin/python" ]]; then
  echo "trl venv: ready at $venv (requirements ${want:0:12})" >&2
else
  echo "trl venv: building at $venv from $req (torch from PyPI is the CUDA build: ~6 GB, ~6 min once)" >&2
  rm -rf "$venv.partial"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv.partial"
  # --no-deps: requirements.txt pins every package the trainer needs, transitive ones included.
  "$venv.partial/bin/python" -m pip install --progress-bar off --no-deps -r "$req" >&2
  "$venv.partial/bin/python" -m pip check >&2
  echo "$want" >"$venv.partial/.cogr-requirements.sha256"
  rm -rf "$venv"
  mv "$venv.partial" "$venv"
  echo "trl venv: ready at $venv" >&2
fi

# The base checkpoint: SmolLM2-135M-Instruct from the GGUF `cogr llm install` put in the
# download cache, dequantised and saved once as a plain fp32 checkpoint (TRL refuses the
# GGUF-loaded object). Cached outside git; skipped when present.
ckpt="${COGR_TRL_BASE:-$HOME/.cache/cogr/checkpoints/SmolLM2-135M-Instruct}"
"$venv/bin/python" "$here/cogr_trl.py" base --out "$ckpt"
