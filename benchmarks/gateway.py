"""Gateway throughput vs bare litellm, side by side in one run, against the fake server.

The server runs in a separate process with a fixed latency. For each concurrency C the same
workload runs through (a) a bare ``litellm.acompletion`` + ``asyncio.gather`` loop bounded by a
semaphore, (b) the gateway of this working tree with its store, limits and retries on (fresh store:
no cache hits), (c) the same gateway without send turns (``send_turns=None``: every call builds its
request in litellm at once, as before ``llm._pacing``; the freeze on), (d) the same gateway with the
collector as Python runs it (``freeze_old_objects=False``, as before ``llm._heap``; the turns on), (f) the same
gateway with its network calls made by ``--provider-processes`` worker processes (``procs``: ``llm._processes``,
started by the arm's warm-up and kept; its CPU figure adds theirs) and (g) the
gateway as it was at ``--before-ref`` (default 47f14d1: one claim, one record and one release per call, three store transactions; its
``llm/_gateway.py``, ``_store.py`` and ``_pgstore.py`` over this tree's other modules); plus a sequential
``litellm.completion`` loop. The gateways run in worker processes of their own (started once, warmed up;
(b), (c), (d) and (f) share one), the arms of a repeat in rotating order, and each figure is the median over
repeats. Ratios are to the ideal C/latency and to bare litellm. ``--latency-jitter J`` makes the server
answer in uniform(latency - J, latency + J) instead. Then, untimed, each gateway's store transactions per call at the largest C (SQLite
statements traced); each gateway's own cost, with ``litellm.acompletion`` stubbed by a sleep of the
latency and a canned reply (rate / ideal and CPU per call: what the gateway adds to litellm); and the
C=64 batch repeated on the same store: provider calls made (goal 0).

    python benchmarks/gateway.py [--latency 0.2] [--latency-jitter 0] [--calls-per-slot 10] [--repeats 3]
                                 [--turns 2] [--before-ref REF | --no-before] [--model openai/fake-bench]
                                 [--provider-processes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-fake-benchmark")

import litellm  # noqa: E402

MODEL = "openai/fake-bench"
ROOT = Path(__file__).resolve().parent.parent
BEFORE_REF = "47f14d1"  # the gateway before batched claims and writes (issue 25)
OVERLAID = ("llm/_gateway.py", "llm/_store.py", "llm/_pgstore.py")
SIBLINGS = ("unpaced", "unfrozen", "procs")  # the `after` gateway with one option changed, in its worker process


def label(arm: str) -> str:
    """An arm's name in the printed figures (the working tree's gateway is `gw`)."""
    return "gw" if arm == "after" else arm


def start_server(latency: float, jitter: float = 0.0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "rubriclab.testing", "--port", "0", "--latency", str(latency),
                             "--latency-jitter", str(jitter)], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"fake server did not start: {url!r}")
    return proc, url


def server_requests(url: str) -> int:
    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/stats") as resp:
        return json.load(resp)["requests"]


def messages(i: int, tag: str) -> list[dict]:
    return [{"role": "user", "content": f"[{tag}] compare the two answers for pair {i}"}]


async def bare(url: str, n: int, c: int, tag: str, model: str = MODEL) -> float:
    sem = asyncio.Semaphore(c)

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(model=model, messages=messages(i, tag), api_base=url, max_tokens=16,
                                      temperature=0.0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.perf_counter() - t0)


def sequential(url: str, n: int, tag: str, model: str = MODEL) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        litellm.completion(model=model, messages=messages(i, tag), api_base=url, max_tokens=16, temperature=0.0)
    return n / (time.perf_counter() - t0)


class FullCollections:
    """The oldest generation's collections while a block runs (``gc.callbacks``): how many, and their ms."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._start = 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append(1000 * (time.perf_counter() - self._start))

    def take(self) -> list[float]:
        out, self.pauses = self.pauses, []
        return out


# -- the gateway arms, each in a worker process ------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (/proc)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a worker that ended (the gateway starts another): its CPU is not counted
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def worker() -> None:
    """Serve gateway runs: one JSON command a line on stdin, one JSON result a line on stdout."""
    import rubriclab
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
    from rubriclab.llm._budget import price_of  # what the budget checks: None where litellm's cost map has no price
    from rubriclab.llm._processes import ProviderProcesses
    from rubriclab.testing import count_write_transactions  # the working tree's, in the `before` arm too

    print(json.dumps({"rubriclab": rubriclab.__file__}), flush=True)
    pauses = FullCollections()
    shared: dict[int, object] = {}  # provider processes by count: started by the arm's warm-up, kept for its batches
    real = litellm.acompletion
    canned = litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": "A"},
                                             "finish_reason": "stop"}],
                                   usage={"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21})

    async def stub(**kw: object) -> litellm.ModelResponse:  # the provider without litellm: sleep, then a reply
        if callable(kw.get("logger_fn")):
            kw["logger_fn"](kw)  # as litellm does when it sends the request: the gateway's next send turn
        await asyncio.sleep(cmd["stub"])
        return canned

    for line in sys.stdin:
        cmd = json.loads(line)
        litellm.acompletion = stub if cmd.get("stub") else real
        role = RoleSpec(name="judge", model=cmd.get("model", MODEL), api_base=cmd["url"], max_tokens=16, concurrency=cmd["c"],
                        timeout=60)
        reqs = [CallRequest(role=role, messages=messages(i, cmd["tag"])) for i in range(cmd["n"])]
        options = {name: cmd[key] for key, name in (("turns", "send_turns"), ("freeze", "freeze_old_objects"))
                   if key in cmd}  # the `before` gateway has no such arguments
        procs = cmd.get("procs", 1)
        if procs > 1:
            options["provider_processes"] = procs
        gw = Gateway(open_store(cmd["store"]), stage="bench", progress=False, **options)
        if procs > 1:
            if procs not in shared:
                shared[procs] = ProviderProcesses(procs, gw.send_turns)
            gw.processes = shared[procs]
        txns = count_write_transactions(gw.store) if cmd.get("count") else None
        pauses.take()
        pids = gw.processes.pids if procs > 1 else []  # none before the warm-up
        w0 = cpu_seconds(pids)
        c0, t0 = time.process_time(), time.perf_counter()
        results = gw.run(reqs)
        wall, own_cpu = time.perf_counter() - t0, time.process_time() - c0
        workers_cpu = cpu_seconds(pids) - w0
        cpu = own_cpu + workers_cpu  # the provider processes' CPU too
        gc2 = pauses.take()  # the batch's, not the store's close
        bad = [r.error for r in results if not r.ok][:3]
        gw.store.close()
        pacer = getattr(gw, "pacer", None)
        print(json.dumps({"rate": cmd["n"] / wall, "cpu_ms": 1000 * cpu / cmd["n"], "bad": bad, "gc2": gc2,
                          "cpu_split_ms": [1000 * own_cpu / cmd["n"], 1000 * workers_cpu / cmd["n"]],
                          "txns": txns[0] if txns else None, "signals": pacer.signals if pacer else None,
                          "priced": price_of(role.model, 1, 1) is not None}),
              flush=True)


class Arm:
    """A gateway in a worker process, importing rubriclab from ``src``."""

    def __init__(self, name: str, src: Path, **options: object) -> None:
        self.name = name
        self.options = options  # sent with every command (e.g. turns, model)
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        hello = json.loads(self.proc.stdout.readline())
        if not hello["rubriclab"].startswith(str(src)):
            raise SystemExit(f"arm {name}: imported rubriclab from {hello['rubriclab']}, not {src}")

    def run(self, url: str, n: int, c: int, tag: str, store: Path, count: bool = False,
            stub: float | None = None) -> dict:
        self.proc.stdin.write(json.dumps({"url": url, "n": n, "c": c, "tag": tag, "store": str(store),
                                          "count": count, "stub": stub, **self.options}) + "\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        if out["bad"]:
            raise SystemExit(f"arm {self.name}: failed calls {out['bad']}")
        return out

    def sibling(self, name: str, **options: object) -> Arm:
        """Another arm served by this arm's worker process, with other options."""
        twin = copy.copy(self)
        twin.name, twin.options = name, options
        return twin

    def close(self) -> None:
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def before_tree(ref: str, tmp: Path) -> Path:
    """This tree's ``src`` with the gateway and store files as they were at ``ref``."""
    src = tmp / "before-src"
    shutil.copytree(ROOT / "src" / "rubriclab", src / "rubriclab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel in OVERLAID:
        text = subprocess.run(["git", "show", f"{ref}:src/rubriclab/{rel}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        (src / "rubriclab" / rel).write_text(text)
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--latency-jitter", type=float, default=0.0, help="server answers in latency ± this (uniform)")
    ap.add_argument("--turns", type=int, default=None, help="the gateway's send turns (default: its own default)")
    ap.add_argument("--calls-per-slot", type=int, default=10, help="workload = max(20, C × this)")
    ap.add_argument("--repeats", type=int, default=3, help="rotating repeats; the median is reported")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--before-ref", default=BEFORE_REF, help="git ref of the 'before' gateway")
    ap.add_argument("--no-before", action="store_true", help="leave out the 'before' arm")
    ap.add_argument("--model", default=MODEL, help="the model name every arm sends to the fake server (default: one "
                    "litellm has no price for, so each call walks its failing cost lookup)")
    ap.add_argument("--provider-processes", type=int, default=2, help="the `procs` arm: the gateway with "
                    "llm.provider_processes at this (0: leave the arm out)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker()
        return
    conc = [int(c) for c in args.concurrency.split(",")]
    proc, url = start_server(args.latency, args.latency_jitter)
    tmp = Path(tempfile.mkdtemp(prefix="rubriclab-bench-"))
    arms: dict[str, Arm] = {}
    try:
        turns = {"turns": args.turns} if args.turns is not None else {}
        model = {"model": args.model}
        arms["after"] = Arm("after", ROOT / "src", **turns, **model)
        arms["unpaced"] = arms["after"].sibling("unpaced", turns=None, **model)
        arms["unfrozen"] = arms["after"].sibling("unfrozen", freeze=False, **turns, **model)
        if args.provider_processes > 1:
            arms["procs"] = arms["after"].sibling("procs", procs=args.provider_processes, **turns, **model)
        if not args.no_before:
            arms["before"] = Arm(f"before ({args.before_ref})", before_tree(args.before_ref, tmp), **model)
        asyncio.run(bare(url, 8, 8, "warmup", args.model))  # import/connection warm-up, not measured
        for name, arm in arms.items():
            warm = arm.run(url, 64, 8, f"warmup-{name}", tmp / f"warmup-{name}.sqlite")
        priced = warm["priced"]  # litellm walks its failing cost lookup on every call of a model it cannot price
        signals: list[int] = []  # per repeat at the largest C
        pauses = FullCollections()  # bare litellm's, in this process
        gc2: dict[str, list[list[float]]] = {}  # per arm, per repeat at the largest C: full-collection pauses
        n_seq = 20
        seq = statistics.median(sequential(url, n_seq, f"seq{r}", args.model) for r in range(args.repeats))
        names = ["bare", *arms]
        rows = []
        procs_split: dict[int, list[float]] = {}
        for c in conc:
            n = max(20, c * args.calls_per_slot)
            rates: dict[str, list[float]] = {k: [] for k in names}
            cpu: dict[str, list[float]] = {k: [] for k in names}
            procs_cpu: list[list[float]] = []  # the procs arm's (gateway's process, its workers) per repeat
            for r in range(args.repeats):
                for k in names[r % len(names):] + names[: r % len(names)]:  # rotate the order per repeat
                    if k == "bare":
                        pauses.take()
                        c0 = time.process_time()
                        rates[k].append(asyncio.run(bare(url, n, c, f"bare{c}-{r}", args.model)))
                        cpu[k].append(1000 * (time.process_time() - c0) / n)
                        out = {"gc2": pauses.take()}
                    else:
                        out = arms[k].run(url, n, c, f"{k}{c}-{r}", tmp / f"{k}{c}-{r}.sqlite")
                        if k == "after" and c == conc[-1]:
                            signals.append(out["signals"])
                        rates[k].append(out["rate"])
                        cpu[k].append(out["cpu_ms"])
                        if k == "procs":
                            procs_cpu.append(out["cpu_split_ms"])
                    if c == conc[-1]:
                        gc2.setdefault(k, []).append(out["gc2"])
            rows.append((c, n, {k: statistics.median(v) for k, v in rates.items()},
                         {k: statistics.median(v) for k, v in cpu.items()}, rates))
            if procs_cpu:
                procs_split[c] = [statistics.median(x[i] for x in procs_cpu) for i in (0, 1)]

        # untimed: store transactions per call at the largest C (statements traced), then the repeated batch
        c = conc[-1]
        n = max(20, c * args.calls_per_slot)
        txns = {k: arm.run(url, n, c, f"count-{k}", tmp / f"count-{k}.sqlite", count=True)["txns"]
                for k, arm in arms.items() if k not in SIBLINGS}
        # the gateway's own cost: litellm.acompletion stubbed (a sleep of the latency, a canned reply)
        n_stub = 50 * c
        gateways = [k for k in arms if k not in SIBLINGS]  # the siblings have the same store and bookkeeping
        own: dict[str, list[dict]] = {k: [] for k in gateways}
        for r in range(2):
            for k in (gateways if r % 2 == 0 else gateways[::-1]):
                own[k].append(arms[k].run(url, n_stub, c, f"stub{k}{r}", tmp / f"stub-{k}{r}.sqlite",
                                          stub=args.latency))
        before = server_requests(url)
        arms["after"].run(url, n, c, f"after{c}-0", tmp / f"after{c}-0.sqlite")
        repeat_calls = server_requests(url) - before
    finally:
        for arm in arms.values():
            arm.close()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)

    jitter = f" ± {args.latency_jitter * 1000:.0f} (uniform)" if args.latency_jitter else ""
    print(f"fake server: separate process, latency {args.latency * 1000:.0f}{jitter} ms; {os.cpu_count()} CPU cores; "
          f"load average {os.getloadavg()[0]:.1f}; litellm {importlib.metadata.version('litellm')}; "
          f"median of {args.repeats} rotating repeats")
    print(f"model {args.model}: " + ("priced by litellm's cost map" if priced
                                      else "not in litellm's cost map (each call's cost lookup fails)"))
    print(f"sequential litellm.completion: {seq:7.1f} calls/s ({seq * args.latency:.2f} of ideal 1/latency)")
    has_before = "before" in arms
    others = [*(k for k in SIBLINGS if k in arms), *(["before"] if has_before else [])]
    head = f"{'C':>3} {'calls':>6} {'ideal/s':>8} {'bare/s':>8} {'gw/s':>8}" + "".join(
        f" {k + '/s':>{len(k) + 2}}" for k in others)
    head += f" {'bare/ideal':>10} {'gw/ideal':>9} {'gw/bare':>8}" + "".join(
        f" {'gw/' + k:>{len(k) + 3}} {k + '/bare':>{len(k) + 5}}" for k in others)
    head += f" {'gw/seq':>7}  CPU ms/call bare, gw" + (", before" if has_before else "")
    print(head)
    for c, n, m, cpu, _ in rows:
        ideal = c / args.latency
        b, g = m["bare"], m["after"]
        line = f"{c:>3} {n:>6} {ideal:>8.1f} {b:>8.1f} {g:>8.1f}" + "".join(
            f" {m[k]:>{len(k) + 2}.1f}" for k in others)
        line += f" {b / ideal:>10.2f} {g / ideal:>9.2f} {g / b:>8.2f}" + "".join(
            f" {g / m[k]:>{len(k) + 3}.2f} {m[k] / b:>{len(k) + 5}.2f}" for k in others)
        line += f" {g / seq:>7.1f}  {cpu['bare']:.2f}, {cpu['after']:.2f}" + (f", {cpu['before']:.2f}"
                                                                              if has_before else "")
        print(line)
    for c, (own_ms, workers_ms) in procs_split.items():
        print(f"procs arm, C={c}: CPU ms/call in the gateway's process {own_ms:.2f}, in its provider processes "
              f"{workers_ms:.2f} (median over repeats; benchmarks/process_handoff.py times the hand-off between them)")
    c, n = rows[-1][0], rows[-1][1]
    print(f"store write transactions for {n} calls at C={c}: " + "; ".join(
        f"{label(k)} {t} ({t / n:.2f} per call)" for k, t in txns.items()))
    print(f"litellm stubbed (sleep {args.latency * 1000:.0f} ms, canned reply), {n_stub} calls at C={c}, median of 2: "
          + "; ".join(f"{label(k)} {statistics.median(o['rate'] for o in v) * args.latency / c:.2f}"
                      f" of ideal, {statistics.median(o['cpu_ms'] for o in v):.2f} ms CPU/call"
                      for k, v in own.items()))
    print(f"repeated C={c} batch of {n} calls: {repeat_calls} provider calls (goal 0)")
    print(f"full collections (oldest generation) per C={c} batch, median count and median total over repeats, "
          "longest single pause of all repeats: " + "; ".join(
              f"{label(k)} {statistics.median(len(p) for p in v):g}, "
              f"{statistics.median(sum(p) for p in v):.0f} ms (longest {max(max(p, default=0) for p in v):.0f} ms)"
              for k, v in gc2.items()))
    last = rows[-1]
    print(f"send turns signalled by litellm at C={c} (one per call when it sends the request): "
          + ", ".join(f"{v} of {n}" for v in signals))
    print(f"per-repeat C={c} " + "; ".join(
        f"{label(k)}/bare: " + ", ".join(f"{g / b:.2f}" for g, b in zip(last[4][k], last[4]["bare"]))
        for k in ["after", *others]))
    ratio, ideal_share = last[2]["after"] / last[2]["bare"], last[2]["after"] * args.latency / c
    print(f"goals at C={c}: gw/bare ≥ 1.0 → {ratio:.2f}; gw/seq ≥ 15 → {last[2]['after'] / seq:.1f}; gw/ideal "
          f"(in this process; the ≥ 0.8 goal is held to the procs arm) {ideal_share:.2f} through litellm on {n} calls "
          f"(bare/ideal {last[2]['bare'] * args.latency / c:.2f})")
    if "procs" in arms:
        p = last[2]["procs"]
        print(f"with llm.provider_processes: {args.provider_processes} (the procs arm; CPU: the gateway's process and "
              f"its provider processes): procs/bare {p / last[2]['bare']:.2f}; procs/ideal ≥ 0.8 → "
              f"{p * args.latency / c:.2f}; "
              f"CPU {last[3]['procs']:.2f} ms/call; per repeat procs/ideal "
              + ", ".join(f"{x * args.latency / c:.2f}" for x in last[4]["procs"]))
    else:
        print("the procs arm left out (--provider-processes < 2): the ≥ 0.8-of-ideal goal is not checked")
    # the ideal-rate goal: in this process the gateway is bound by litellm's ~3 ms of CPU per call on one core (0.55-0.80
    # of ideal on 640 calls, 0.78-0.89 on 3,200, varying with the machine's draw; runs Q and R in benchmarks/README.md),
    # so it is held to the
    # procs arm, which makes the calls in provider processes, and to the gateway's own ceiling (litellm stubbed)
    own_share = statistics.median(o["rate"] for o in own["after"]) * args.latency / c
    procs_share = last[2]["procs"] * args.latency / c if "procs" in arms else None
    missed = [text for ok, text in (
        (ratio >= 1.0, f"gw/bare {ratio:.2f} < 1.0"),
        (own_share >= 0.8, f"gw/ideal with litellm stubbed {own_share:.2f} < 0.8"),
        (procs_share is None or procs_share >= 0.8, f"procs/ideal {procs_share or 0:.2f} < 0.8"),
        (repeat_calls == 0, f"{repeat_calls} provider calls on the repeated batch (goal 0)")) if not ok]
    if missed:
        raise SystemExit("goal missed: " + "; ".join(missed))


if __name__ == "__main__":
    main()
