#!/usr/bin/env bash
# `make repro` from an empty call store, twice, side by side in one session on this machine:
#   llm.prefix_order: false  — calls run in the order the stages build them (as before issue 14)
#   llm.prefix_order: true   — calls to the embedded model sharing a prompt prefix run back to back (the default)
# Each arm: a fresh clone's venv, its call store and converted-model folder deleted, `dvc repro -f` (every stage
# runs, every call reaches the model). Then the two stores are compared call by call (benchmarks/compare_stores.py).
#
#   bash benchmarks/repro_side_by_side.sh [WORKDIR]      # about 50 minutes on 2 cores
# The clone is WORKDIR (default: a new temporary folder); logs, stores and ledgers go to WORKDIR-results.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d)/rubriclab}
[ -d "$WORK/.git" ] || git clone -q "$ROOT" "$WORK"
OUT="$WORK-results"
mkdir -p "$OUT"
cd "$WORK"
bash scripts/install.sh >/dev/null
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 RUBRICLAB_PYTHON="$WORK/.venv/bin/python"
declare -A WALL
ARMS=${ARMS:-false true}  # ARMS=true: only the default arm (e.g. to re-measure it after a change)
for arm in $ARMS; do
  sed -i "s/^  prefix_order: [a-z]*/  prefix_order: $arm/" params.yaml
  grep -q "^  prefix_order: $arm" params.yaml
  rm -rf .rubriclab/calls.sqlite* .rubriclab/models
  start=$(date +%s.%N)
  .venv/bin/dvc repro -f > "$OUT/repro-prefix_order-$arm.log" 2>&1
  WALL[$arm]=$(python3 -c "print(f'{$(date +%s.%N) - $start:.0f}')")
  .venv/bin/python -c "import sqlite3; sqlite3.connect('.rubriclab/calls.sqlite').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
  cp .rubriclab/calls.sqlite "$OUT/calls-prefix_order-$arm.sqlite"
  .venv/bin/rubriclab calls > "$OUT/ledger-prefix_order-$arm.txt"
  echo "prefix_order=$arm: dvc repro -f from an empty call store: ${WALL[$arm]} s"
done
git checkout -q params.yaml
[ "$ARMS" = "false true" ] || { echo "logs, stores and ledgers: $OUT"; exit 0; }
.venv/bin/python benchmarks/compare_stores.py "$OUT/calls-prefix_order-false.sqlite" "$OUT/calls-prefix_order-true.sqlite"
python3 -c "print(f'end to end: {${WALL[false]}} s -> {${WALL[true]}} s = {${WALL[false]} / ${WALL[true]}:.2f}x (goal >= 1.5x)')"
echo "logs, stores and ledgers: $OUT"
