"""The embedded engine's build: which instruction set llama.cpp was compiled for, and a smoke check that
generates one token in a child process, so an engine that faults (SIGILL on AMX tiles a VM reports but
does not run) is one clear line instead of a dead process.

``python -m rubriclab.llm._engine --smoke`` is the install's last step; ``rubriclab doctor`` runs the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# x86-64-v3: what scripts/engine_wheel.sh compiles for. Every machine of this kind executes these; AVX-512,
# AVX-VNNI and AMX are left out on purpose (README, "The embedded engine").
PORTABLE_ISA = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"})
# Instruction-set names llama.cpp's CPU backend reports; other entries (OPENMP, LLAMAFILE, REPACK) are not ISAs.
KNOWN_ISA = PORTABLE_ISA | frozenset({
    "AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8",
    "NEON", "ARM_FMA", "FP16_VA", "MATMUL_INT8", "SVE", "DOTPROD", "SME", "SME2", "RISCV_V", "VSX", "WASM_SIMD",
})
REBUILD_HINT = "rebuild the engine: rm -f .venv/.rubriclab-engine && bash scripts/install.sh"
SMOKE_TIMEOUT_S = 300

# The child: load the GGUF and generate one token, nothing else imported (a fault must be the engine's). With "-"
# for the path it first makes the embedded model's F16 copy (llama.cpp's own conversion code, which may fault too).
_SMOKE_CHILD = """
import sys
import llama_cpp
from llama_cpp import Llama
print("SYSTEM_INFO " + llama_cpp.llama_print_system_info().decode("utf-8", "replace"), flush=True)
path = sys.argv[1]
if path == "-":
    from rubriclab.llm._weights import chat_weights
    path = str(chat_weights("smollm2-135m"))
llm = Llama(model_path=path, n_ctx=256, n_threads=2, verbose=False, seed=0)
out = llm.create_completion("The capital of France is", max_tokens=1, temperature=0.0)
print(repr(out["choices"][0]["text"]))
"""


@dataclass(frozen=True)
class EngineBuild:
    """What llama.cpp reports about its build: the instruction sets compiled in and its other features."""

    isa: tuple[str, ...]
    other: tuple[str, ...]
    raw: str

    @property
    def outside_portable(self) -> tuple[str, ...]:
        """Instruction sets compiled in that some machine of this kind may fault on."""
        return tuple(f for f in self.isa if f not in PORTABLE_ISA)

    def describe(self) -> str:
        return " ".join(self.isa) or "none reported"


@dataclass(frozen=True)
class SmokeResult:
    ok: bool
    line: str
    returncode: int | None = None
    signal_name: str | None = None
    reply: str | None = None
    stderr_tail: list[str] = field(default_factory=list)


def parse_system_info(text: str) -> EngineBuild:
    """Parse ``llama_print_system_info()`` (``CPU : SSE3 = 1 | AVX2 = 1 | ... |``) into an :class:`EngineBuild`."""
    isa, other = [], []
    for part in text.replace("\n", "|").split("|"):
        if ":" in part:  # "CPU : SSE3 = 1" -> the backend's name prefixes its first feature
            part = part.split(":", 1)[1]
        name, _, value = (s.strip() for s in part.partition("="))
        if not name or value in ("", "0"):
            continue
        (isa if name in KNOWN_ISA else other).append(name)
    return EngineBuild(tuple(isa), tuple(other), text.strip())


def engine_build() -> EngineBuild:
    """The installed engine's build, read from the library itself (not from the CPU's flags)."""
    import llama_cpp

    return parse_system_info(llama_cpp.llama_print_system_info().decode("utf-8", "replace"))


def _child_build(stdout: str) -> str:
    """The instruction sets the child's library reported before it failed (else this process's library's)."""
    for line in stdout.splitlines():
        if line.startswith("SYSTEM_INFO "):
            return parse_system_info(line[len("SYSTEM_INFO "):]).describe()
    try:
        return engine_build().describe()
    except Exception as exc:  # noqa: BLE001 - the library may be what is broken
        return f"unknown ({type(exc).__name__}: {exc})"


def signal_name(returncode: int) -> str:
    try:
        sig = signal.Signals(-returncode)
        return f"{sig.name} ({signal.strsignal(sig) or sig.name})"
    except ValueError:
        return f"signal {-returncode}"


def smoke_check(model_path: str | Path | None = None, python: str | None = None,
                timeout_s: float = SMOKE_TIMEOUT_S, child_code: str = _SMOKE_CHILD) -> SmokeResult:
    """Generate one token from the embedded model (default: its F16 run weights, made in the child) in a child
    process; a death by signal is reported in one line naming the signal, the instruction sets the library was
    built with, and how to rebuild."""
    if model_path is None:
        model_path = "-"
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    try:
        proc = subprocess.run([python or sys.executable, "-c", child_code, str(model_path)], capture_output=True,
                              text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return SmokeResult(False, f"engine smoke check: no token after {timeout_s:.0f} s; {REBUILD_HINT}")
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-5:]
    if proc.returncode == 0:
        reply = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        return SmokeResult(True, f"engine smoke check: ok (one token: {reply})", 0, reply=reply)
    built = _child_build(proc.stdout)
    if proc.returncode < 0:
        name = signal_name(proc.returncode)
        line = (f"engine smoke check: the embedded model died by {name} generating one token; llama.cpp was built "
                f"for {built}; {REBUILD_HINT}")
        return SmokeResult(False, line, proc.returncode, name.split()[0], stderr_tail=tail)
    last = tail[-1] if tail else "no output"
    line = f"engine smoke check: exit {proc.returncode} generating one token ({last}); llama.cpp was built for {built}"
    return SmokeResult(False, line, proc.returncode, stderr_tail=tail)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rubriclab.llm._engine",
                                 description="The embedded engine's instruction set and a one-token smoke check.")
    ap.add_argument("--smoke", action="store_true", help="generate one token in a child process")
    ap.add_argument("--allow-nonportable", action="store_true",
                    help="do not fail when the library was built with an instruction set outside the portable one")
    args = ap.parse_args(argv)
    build = engine_build()
    print(f"engine: llama.cpp built for {build.describe()} (other: {' '.join(build.other) or 'none'})")
    rc = 0
    if build.outside_portable:
        print(f"engine: WARNING: built with {' '.join(build.outside_portable)}, outside the portable set "
              f"{' '.join(sorted(PORTABLE_ISA))}; {REBUILD_HINT}", file=sys.stderr)
        rc = 0 if args.allow_nonportable else 1
    if args.smoke:
        result = smoke_check()
        print(result.line, file=sys.stdout if result.ok else sys.stderr)
        rc = rc or (0 if result.ok else 1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
