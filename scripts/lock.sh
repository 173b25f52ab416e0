#!/usr/bin/env bash
# Writes requirements.lock: the exact version of every package in .venv (`make lock`). scripts/install.sh installs
# with it as pip constraints, so a fresh machine gets the environment the committed dvc.lock was written with: a
# parquet file names its writers (pandas 3.1.2 and 3.1.1 wrote other bytes, so another outputs/data hash, from the
# same rows), and an unpinned range takes whatever was released since. Re-run it after changing pyproject.toml's
# dependencies, then `dvc repro` and commit both.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
OUT=${1:-requirements.lock}  # another path: compare without touching the committed lock
{
  echo "# exact versions for scripts/install.sh (pip constraints); written by \`make lock\` from $("$VENV/bin/python" --version)"
  # the engine is built here from its pinned source (scripts/engine_wheel.sh); torch's local label (+cpu) names the
  # build on this machine's disk, which pip finds by the version alone
  "$VENV/bin/python" -m pip --disable-pip-version-check freeze --all --exclude-editable \
    | grep -v -i -E '^(llama[-_.]cpp[-_.]python|rubriclab|pip)( @|==)' | sed -E 's/^(torch==[^+]+)\+.*/\1/' | LC_ALL=C sort -f
} > "$OUT"
echo "lock: $(grep -c '==' "$OUT") packages in $OUT"
