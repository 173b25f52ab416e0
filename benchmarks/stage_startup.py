"""Stage processes' fixed costs: start-up without litellm where no model is called, and exit without module teardown.

`rubriclab.llm` loads its litellm-backed names (Gateway, CallRequest, embed_texts, ...) on first use, so the report
and recorded-verdicts stages and `rubriclab calls` start without litellm and the openai SDK's types. Both arms run
in one process tree, alternating per repeat (this machine's speed drifts): ``lazy`` imports the module as the stage
does; ``eager`` imports litellm first, as importing `rubriclab.llm` did before (issue 25). Each number is a fresh
interpreter's wall time for ``import <module>`` (median of ``--repeats``).

Exit: a fresh interpreter imports what a model-calling stage imports (``rubriclab.stages.audit``, litellm, mlflow)
and ends by ``sys.exit(0)`` (``plain``: the interpreter tears every module down) or by
``rubriclab.stages.exit_stage(0)`` (``exit_stage``: atexit handlers and a garbage collection, then ``os._exit``);
the difference of the two walls is what each stage process saves.

    python benchmarks/stage_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# the two stages, and what `rubriclab calls` imports (rubriclab.cli itself imports nothing heavy until a verb runs)
MODULES = ("rubriclab.stages.report", "rubriclab.stages.recorded", "rubriclab.llm")
CHECK = "import sys; assert ('litellm' in sys.modules) == {eager}, 'litellm imported: ' + str('litellm' in sys.modules)"


EXIT_IMPORTS = "import rubriclab.stages, rubriclab.stages.audit, litellm, mlflow\n"


def _seconds(code: str) -> float:
    """Wall time of a fresh interpreter running ``code``."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t


def wall(module: str, eager: bool) -> float:
    return _seconds(("import litellm\n" if eager else "") + f"import {module}\n" + CHECK.format(eager=eager))


def exit_wall(fast: bool) -> float:
    return _seconds(EXIT_IMPORTS + ("rubriclab.stages.exit_stage(0)" if fast else "import sys; sys.exit(0)"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    wall("rubriclab", False)  # warm the page cache and .pyc files for both arms
    wall("litellm", True)
    print(f"fresh interpreter, `import <module>`; median of {args.repeats} alternating runs per arm; "
          f"{os.cpu_count()} cores")
    print(f"{'module':28s} {'eager s':>8s} {'lazy s':>8s} {'ratio':>7s}")
    for module in MODULES:
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeats):
            for eager in (True, False):
                times[eager].append(wall(module, eager))
        e, lz = statistics.median(times[True]), statistics.median(times[False])
        print(f"{module:28s} {e:8.2f} {lz:8.2f} {e / lz:6.2f}x")
    walls: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeats):
        for fast in (False, True):
            walls[fast].append(exit_wall(fast))
    plain, fast = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"\nimport rubriclab.stages.audit, litellm, mlflow, then exit; median of {args.repeats} alternating runs")
    print(f"{'plain sys.exit s':>18s} {'exit_stage s':>13s} {'saved s':>8s}")
    print(f"{plain:18.2f} {fast:13.2f} {plain - fast:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
