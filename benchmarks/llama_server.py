"""Embedded judge vs llama.cpp's own server on the same GGUF: tokens per second through the gateway.

Both arms send the same batch through ``rubriclab.llm.Gateway`` (fresh call store each time, so every call
reaches the model; one call at a time, since both run one llama.cpp context on the same 2 cores):

- embedded: ``local/smollm2-135m`` (llama-cpp-python in this process, prefix-ordered as the pipeline runs it);
- server: ``python -m llama_cpp.server`` on the same GGUF file, same context size and threads, reached as an
  OpenAI-compatible endpoint (``openai/<alias>`` with ``api_base``) — how a user would serve the model instead.

The batch: the direct pairwise judge prompt on N demo pairs, a 3-seat panel at T=0.7 plus the same prompts at
T=0 (``max_tokens`` 48). Throughput = (prompt + completion tokens) / wall seconds, from each arm's own usage
counts. Arms alternate; the best of ``--repeats`` per arm is kept. Replies are compared item by item.

    pip install 'rubriclab[bench]'          # llama-cpp-python's server extra
    python benchmarks/llama_server.py [--pairs 6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embedded_judge import judge_messages  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from rubriclab.llm import CHAT_MODELS, CallRequest, Gateway, RoleSpec, local_provider, locate_model_file, open_store  # noqa: E402
from rubriclab.llm._local import N_CTX  # noqa: E402

GOAL = 0.9


def build_batch(model: str, n_pairs: int, **role: object) -> list[CallRequest]:
    hot = RoleSpec(name="judge", model=model, temperature=0.7, max_tokens=48, concurrency=1, structured=False,
                   parse_retries=0, **role)  # a reply cut off at the limit is counted, not re-asked (same work per arm)
    cold = hot.with_(temperature=0.0)
    msgs = judge_messages(n_pairs)
    # equal prompts back to back in both arms (what the gateway does for the embedded model), so the server's
    # own prefix reuse gets the same chance
    return [CallRequest(role=r, messages=m, sample_index=seat) for m in msgs
            for r, seat in ((hot, 0), (hot, 1), (hot, 2), (cold, 0))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(gguf: Path, port: int, log: Path) -> subprocess.Popen:
    try:
        import sse_starlette  # noqa: F401
        import starlette_context  # noqa: F401
    except ImportError:
        sys.exit("llama_cpp.server requires optional dependencies. Install with: pip install 'rubriclab[bench]'")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
           "--n_ctx", str(N_CTX), "--n_threads", str(os.cpu_count() or 2), "--host", "127.0.0.1",
           "--port", str(port), "--seed", "0"]
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"llama_cpp.server exited with {proc.returncode}; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    sys.exit(f"llama_cpp.server did not answer within 120 s; see {log}")


def run_arm(reqs: list[CallRequest], folder: Path) -> tuple[float, int, int, list[str | None]]:
    gateway = Gateway(open_store(folder / f"calls-{time.time_ns()}.sqlite"), stage="bench", progress=False)
    t0 = time.perf_counter()
    results = gateway.run(reqs)
    wall = time.perf_counter() - t0
    failed = [r.error for r in results if r.error]  # transport failures; a reply cut off at the limit still counts
    if failed:
        sys.exit(f"{len(failed)} calls failed, e.g. {failed[0]}")
    prompt = sum(r.prompt_tokens or 0 for r in results)
    completion = sum(r.completion_tokens or 0 for r in results)
    return wall, prompt, completion, [r.text for r in results]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    gguf = locate_model_file(*CHAT_MODELS["smollm2-135m"])
    port = _free_port()
    embedded = build_batch("local/smollm2-135m", args.pairs)
    served = build_batch("openai/smollm2", args.pairs, api_base=f"http://127.0.0.1:{port}/v1",
                         extra={"api_key": "none"})
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(gguf, port, Path(tmp) / "server.log")
        try:
            local_provider().chat_model("smollm2-135m")  # load once, outside the timings
            best: dict[str, tuple[float, int, int, list[str | None]]] = {}
            for _ in range(args.repeats):  # arms alternate: both see the same machine load
                for name, reqs in (("embedded", embedded), ("server", served)):
                    if name == "embedded":
                        local_provider().chat_model("smollm2-135m").reset()  # no state from the last repeat
                    got = run_arm(reqs, Path(tmp))
                    if name not in best or got[0] < best[name][0]:
                        best[name] = got
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"batch: {len(embedded)} calls ({args.pairs} pairs x (3 seats at T=0.7 + 1 at T=0)); best of "
          f"{args.repeats} per arm; {gguf.name}, n_ctx {N_CTX}, {os.cpu_count()} threads")
    print("| arm | wall s | prompt tokens | completion tokens | tokens/s | completion tokens/s |")
    print("|---|---|---|---|---|---|")
    for name, (wall, prompt, completion, _) in best.items():
        print(f"| {name} | {wall:.1f} | {prompt} | {completion} | {(prompt + completion) / wall:.1f} | "
              f"{completion / wall:.1f} |")
    e, s = best["embedded"], best["server"]
    ratio = ((e[1] + e[2]) / e[0]) / ((s[1] + s[2]) / s[0])
    differ = [i for i, (a, b) in enumerate(zip(e[3], s[3])) if a != b]
    differ_t0 = sum(embedded[i].role.temperature == 0 for i in differ)
    print(f"embedded / server tokens/s: {ratio:.2f}x (goal >= {GOAL}x: {'PASS' if ratio >= GOAL else 'MISS'}); "
          f"replies that differ between the arms: {len(differ)} of {len(embedded)} ({differ_t0} of them at T=0)")
    sys.exit(0 if ratio >= GOAL else 1)


if __name__ == "__main__":
    main()
