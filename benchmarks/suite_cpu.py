"""Where `make test`'s CPU goes: the suite run as the Makefile runs it, every process's CPU polled from /proc beside it.

The suite is CPU-bound on this 2-core machine (/proc/stat: ~1.8 of 2 cores busy), so its wall time is its CPU time
over two: this script says whose. A poller thread reads ``/proc/<pid>/stat`` of every process every ``--interval``
seconds and keeps each process's last CPU (user + system) seen; a process alive when the run starts counts only what
it spent after (so the kernel's and the sandbox's own daemons show what they took during the run, not since boot).
A process shorter than the interval is missed; the total says how much was seen against /proc/stat's busy time.

Each process is filed by kind (xdist worker, stage server, a stage it forked, a fresh stage process, dvc, MLflow,
Chromium, PostgreSQL, the tests' own ``python -c`` helpers, ...) and by the test that started it (the
``PYTEST_CURRENT_TEST`` its environment inherited; blocks the README tests run get a clean environment and show as
``(no test)``). With ``--junit`` the tests' own durations are summed per file beside it.

    python benchmarks/suite_cpu.py [--interval 0.3] [--top 25] [-- PYTEST ARGS...]

Without pytest arguments it runs ``-n 2 --dist loadfile --no-loadscope-reorder`` (the Makefile's) over the suite.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HZ = os.sysconf("SC_CLK_TCK")
MAKEFILE_ARGS = ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]


def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]) - v[3] - v[4]  # all but idle and iowait


def _read(pid: str) -> tuple[tuple[int, int], dict] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
    fields = rest.split()
    key = (int(pid), int(fields[19]))  # pid and start time: a reused pid is another process
    info = {"pid": int(pid), "ppid": int(fields[1]), "comm": comm, "cpu": (int(fields[11]) + int(fields[12])) / HZ}
    return key, info


def _describe(pid: int) -> tuple[str, str]:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return "", ""
    test = next((e.split(b"=", 1)[1].decode(errors="replace") for e in env if e.startswith(b"PYTEST_CURRENT_TEST=")), "")
    return cmd, test


class Poller(threading.Thread):
    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval, self.stop, self.seen = interval, threading.Event(), {}
        self.first = True

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == me:
                    continue
                got = _read(pid)
                if got is None:
                    continue
                key, info = got
                ent = self.seen.get(key)
                if ent is None:
                    cmd, test = _describe(info["pid"])
                    ent = self.seen[key] = {**info, "cmd": cmd, "test": test,
                                            "base": info["cpu"] if self.first else 0.0}
                ent["cpu"] = max(ent["cpu"], info["cpu"])
            self.first = False
            self.stop.wait(self.interval)


def kind(p: dict, pids: dict[int, dict]) -> str:
    cmd, comm = p["cmd"], p["comm"]
    if not cmd:
        return f"{comm.split('/')[0]} (no readable command line: a kernel thread, the sandbox)"
    if "exec(eval(sys.stdin" in cmd:
        return "xdist worker"
    if "-m pytest" in cmd or "pytest/__main__" in cmd:
        return "pytest"
    if "stage_server" in cmd:
        parent = pids.get(p["ppid"])
        return "stage forked by the server" if parent and "stage_server" in parent["cmd"] else "stage server"
    if "rubriclab.stages" in cmd:
        return "stage, fresh process"
    if "rubriclab.llm._processes" in cmd:
        return "provider worker process"
    for name in ("mlflow", "dvc", "chrom", "postgres", "git", "mkdocs"):
        if name in cmd or name in comm:
            return {"chrom": "chromium"}.get(name, name)
    if "rubriclab" in cmd.split(" -c ")[0]:
        return "rubriclab CLI"
    if " -c " in cmd or cmd.rstrip().endswith(" -"):
        return "tests' python helpers (-c / stdin)"
    return comm


def junit_files(path: Path) -> collections.Counter:
    per = collections.Counter()
    for case in ET.parse(path).iter("testcase"):
        parts = (case.get("classname") or "?").split(".")
        per["/".join(parts[:3]) + ".py"] += float(case.get("time") or 0)
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=0.3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: the Makefile's)")
    args = ap.parse_args()
    junit = Path(tempfile.mkdtemp()) / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", *(args.pytest_args or MAKEFILE_ARGS), f"--junitxml={junit}"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    poller = Poller(args.interval)
    busy0, t0 = _busy_jiffies(), time.monotonic()
    poller.start()
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    wall, busy = time.monotonic() - t0, (_busy_jiffies() - busy0) / HZ
    poller.stop.set()
    poller.join()

    procs = list(poller.seen.values())
    pids = {p["pid"]: p for p in procs}
    for p in procs:
        p["spent"] = p["cpu"] - p["base"]
    seen = sum(p["spent"] for p in procs)
    print(f"\npytest exit {rc}; wall {wall:.1f} s; machine busy {busy:.0f} CPU-s ({busy / wall:.2f} of "
          f"{os.cpu_count()} cores); seen by the poller {seen:.0f} CPU-s in {len(procs)} processes "
          f"(every {args.interval:g} s: shorter ones are missed)")
    by_kind, n_kind = collections.Counter(), collections.Counter()
    by_test = collections.Counter()
    for p in procs:
        k = kind(p, pids)
        by_kind[k] += p["spent"]
        n_kind[k] += 1
        if k not in ("xdist worker", "pytest") and "no readable" not in k:
            by_test[p["test"].split("::")[0] or "(no test)"] += p["spent"]
    print(f"\n{'CPU-s':>8} {'share':>6} {'procs':>6}  kind")
    for k, v in by_kind.most_common(args.top):
        print(f"{v:8.1f} {v / seen:6.1%} {n_kind[k]:6d}  {k}")
    print(f"\n{'CPU-s':>8}  processes the tests started, by the test file that started them")
    for k, v in by_test.most_common(args.top):
        print(f"{v:8.1f}  {k}")
    if junit.is_file():
        per = junit_files(junit)
        total = sum(per.values())
        print(f"\n{'s':>8}  the tests' own durations (setup + call + teardown) by file: {total:.0f} s in all, "
              f"{total / wall:.2f} per wall second")
        for k, v in per.most_common(args.top):
            print(f"{v:8.1f}  {k}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
