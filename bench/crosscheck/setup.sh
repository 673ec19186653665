#!/bin/sh
# Create (once) the crosscheck bench's venv under ~/.cache/cogr/venvs/crosscheck, with the
# pinned requirements.txt beside this script. Python >= 3.12 (pyserini 2.4.0) is looked
# for as $COGR_PYTHON, python3.12, python3.13, then pyenv's 3.12/3.13. Prints the venv's
# python on stdout; progress on stderr. Re-running with the same requirements does nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv="${COGR_VENV_ROOT:-$HOME/.cache/cogr/venvs}/crosscheck"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
py="${COGR_PYTHON:-}"
if [ -z "$py" ]; then
  for c in python3.12 python3.13; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then py=$(command -v "$c"); break; fi
  done
fi
if [ -z "$py" ]; then
  for c in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 "$HOME"/.pyenv/versions/3.13*/bin/python3.13; do
    if [ -x "$c" ]; then py="$c"; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "crosscheck setup: no Python >= 3.12 found (pyserini 2.4.0 needs it); set COGR_PYTHON" >&2
  exit 3
fi
echo "crosscheck setup: creating $venv with $py" >&2
# The stamp is written last: an install cut short is redone from scratch next time.
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check --no-deps -r "$req" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
