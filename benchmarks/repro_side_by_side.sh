#!/usr/bin/env bash
# `make repro` from an empty call store, twice, side by side in one session on this machine:
#   llm.prefix_order: false  — calls run in the order the stages build them (as before issue 14)
#   llm.prefix_order: true   — calls to the embedded model sharing a prompt prefix run back to back (the default)
# Each arm: a fresh clone's venv, its call store and converted-model folder deleted, `dvc repro -f` (every stage
# runs, every call reaches the model). Then the two stores are compared call by call (benchmarks/compare_stores.py).
#
#   bash benchmarks/repro_side_by_side.sh [WORKDIR]      # about 40 minutes on 2 cores
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d)/rubriclab}
[ -d "$WORK/.git" ] || git clone -q "$ROOT" "$WORK"
cd "$WORK"
bash scripts/install.sh >/dev/null
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 RUBRICLAB_PYTHON="$WORK/.venv/bin/python"
declare -A WALL
for arm in false true; do
  sed -i "s/^  prefix_order: [a-z]*/  prefix_order: $arm/" params.yaml
  grep -q "^  prefix_order: $arm" params.yaml
  rm -rf .rubriclab/calls.sqlite* .rubriclab/models
  start=$(date +%s.%N)
  .venv/bin/dvc repro -f > "$WORK/repro-prefix_order-$arm.log" 2>&1
  WALL[$arm]=$(python3 -c "print(f'{$(date +%s.%N) - $start:.0f}')")
  cp .rubriclab/calls.sqlite "$WORK/calls-prefix_order-$arm.sqlite"
  .venv/bin/rubriclab calls > "$WORK/ledger-prefix_order-$arm.txt"
  echo "prefix_order=$arm: dvc repro -f from an empty call store: ${WALL[$arm]} s"
done
git checkout -q params.yaml
.venv/bin/python benchmarks/compare_stores.py "$WORK/calls-prefix_order-false.sqlite" "$WORK/calls-prefix_order-true.sqlite"
python3 -c "print(f'end to end: {${WALL[false]}} s -> {${WALL[true]}} s = {${WALL[false]} / ${WALL[true]}:.2f}x (goal >= 1.5x)')"
echo "logs, stores and ledgers: $WORK"
