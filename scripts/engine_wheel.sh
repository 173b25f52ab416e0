#!/usr/bin/env bash
# Builds llama-cpp-python for the portable instruction set below and installs that wheel into $VENV.
#
# Why a wheel folder of our own: pip's wheel cache keys a build by the source archive, not by CMAKE_ARGS, so a
# natively built wheel already in ~/.cache/pip would come back whatever flags we pass. Our folder is keyed by
# (version, flags, Python tag, compiler) and the build itself runs with --no-cache-dir.
#
# The instruction set: x86-64-v3 (AVX, AVX2, FMA, F16C, BMI2), which every machine of this kind executes; no
# AVX-512, no AVX-VNNI, no AMX (benchmarks/README.md, "Engine instruction set", measures AVX-512 against it).
# Override with RUBRICLAB_ENGINE_CMAKE_ARGS (the wheel gets its own key; the smoke check still runs).
# Only the libraries the Python package loads are compiled (scripts/engine_library_only.cmake: 83 build steps, not 140).
# --build-only: compile the wheel into its folder and stop (scripts/install.sh runs that in the background while pip
# installs everything else, then runs this script again to install it).
set -euo pipefail
BUILD_ONLY=0; [ "${1:-}" = "--build-only" ] && BUILD_ONLY=1
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
read -r -a PIP <<< "${PIP_CMD:-$VENV/bin/python -m pip --disable-pip-version-check -q}"
read -r -a LOCKED <<< "${PIP_INSTALL_ARGS:-}"  # install.sh: -c requirements.lock (the engine's own deps at their pins)
VERSION=$(sed -n 's/^ *"llama-cpp-python==\([0-9.]*\)",*$/\1/p' pyproject.toml | head -n1)
[ -n "$VERSION" ] || { echo "engine: pyproject.toml must pin llama-cpp-python==X.Y.Z" >&2; exit 2; }
PORTABLE="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
FLAGS=${RUBRICLAB_ENGINE_CMAKE_ARGS:-$PORTABLE}
LIBRARY_ONLY="$(pwd)/scripts/engine_library_only.cmake"
PYTAG=$("$VENV/bin/python" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}-" + sysconfig.get_platform())')
CC_ID=$( (${CC:-cc} --version 2>/dev/null || echo unknown) | head -n1)
# the key holds the include file's content, not its path: one wheel for every clone of the project
KEY=$(printf '%s\n' "$VERSION" "$FLAGS" "$(sha256sum < "$LIBRARY_ONLY")" "$PYTAG" "$CC_ID" | sha256sum | cut -c1-16)
HOUSE=${RUBRICLAB_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/rubriclab/wheels}/llama-cpp-python-$VERSION-$KEY
MARK="$VENV/.rubriclab-engine"
if [ -f "$MARK" ] && [ "$(cat "$MARK")" = "$KEY" ] && "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  exit 0  # this venv already holds the wheel built with these flags
fi
WHEEL=$(ls "$HOUSE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$WHEEL" ]; then
  echo "engine: compiling llama-cpp-python $VERSION for the portable instruction set (about 5 minutes on 2 cores)"
  # a folder of this process's own: two installs at once (two clones, CI beside a developer) each build into theirs
  # and the first to finish publishes it; the other's is dropped (same key, same wheel)
  TMP="$HOUSE.tmp.$$"
  rm -rf "$TMP"; mkdir -p "$TMP"
  trap 'rm -rf "$TMP"' EXIT
  CMAKE_ARGS="$FLAGS -DCMAKE_PROJECT_INCLUDE=$LIBRARY_ONLY" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "${PIP[@]}" wheel --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$TMP" "llama-cpp-python==$VERSION"
  printf '%s\n' "$FLAGS" > "$TMP/CMAKE_ARGS"
  ls "$HOUSE"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1 || rm -rf "$HOUSE"  # a folder left without its wheel
  mv -T "$TMP" "$HOUSE" 2>/dev/null || rm -rf "$TMP"  # published by another install meanwhile: use that one
  WHEEL=$(ls "$HOUSE"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
fi
if [ "$BUILD_ONLY" = 1 ]; then
  echo "engine: wheel ready: $WHEEL"
  exit 0
fi
# --no-deps: its dependencies come with the project; --force-reinstall: replace a wheel built with other flags
"${PIP[@]}" install --no-deps --force-reinstall --no-cache-dir "$WHEEL"
"${PIP[@]}" install "${LOCKED[@]}" "numpy>=1.26,<3" "typing-extensions>=4.5" "diskcache>=5.6.1" "jinja2>=2.11.3"
echo "$KEY" > "$MARK"
echo "engine: llama-cpp-python $VERSION installed from $WHEEL"
