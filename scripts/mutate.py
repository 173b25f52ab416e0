"""Mutation testing over the method cores, one module at a time against its own tests (issue 24).

    python scripts/mutate.py                          # every module in MODULES, in order
    python scripts/mutate.py drift/_gate.py stats     # a subset (keys of MODULES)
    python scripts/mutate.py --budget 600 stats       # stop a module after 10 minutes: partial figures
    python scripts/mutate.py --baseline drift/_gate.py  # without tests/test_mutants_*.py
    python scripts/mutate.py --show drift/_gate.py    # also print each survivor's diff
    python scripts/mutate.py --resume drift/_gate.py  # keep mutmut's previous results and continue

`make mutate` runs this under ``nice``; ``make mutate MODULES="drift/_gate.py"`` passes a subset and
``MUTATE_ARGS="--budget 600"`` options.

Each module gets its own mutmut working directory, ``mutants/<slug>/``: ``src``, ``tests`` and ``params.yaml``
(which tests read) are symlinks to the project's, and ``pyproject.toml`` is the project's with a
``[tool.mutmut]`` table appended that mutates only that module (``only_mutate``), runs only its test files
(``pytest_add_cli_args_test_selection``) and forks each mutant from a fork server (forking from the process
that ran the tests deadlocked on locks their threads held). mutmut writes its copy of the tree under
``mutants/<slug>/mutants/``. One child process (``--max-children 1``) under ``nice``: it fits a 2-core machine
shared with other work. Only the FOCUS functions are mutated unless ``--all-functions``. By default a module
starts from scratch (its directory is removed), since mutmut does not re-test survivors when only the tests
changed; ``--resume`` keeps it.

The per-module killed/survived/timeout counts are printed at the end and written to
``mutants/<slug>/summary.json`` (with the survivors' names). docs/mutation.md records the figures and says,
for each survivor, whether it is an equivalent mutant or a missing test. To see one mutant fail a test:
``cd mutants/<slug>/mutants && PYTHONPATH=$PWD/src MUTANT_UNDER_TEST=<mutant name> python -m pytest <test>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = "src/rubriclab"
# what a module's working directory links to: the code, the tests, and the files tests read from the root
LINKS = ["src", "tests", "params.yaml"]
MUTMUT = str(Path(sys.executable).with_name("mutmut"))  # the console script (`python -m mutmut` re-imports itself)

# module (a file or a folder under src/rubriclab) -> its own test files (globs under tests/). The one place
# that says which tests may kill which mutants; tests/test_mutants_<area>.py hold the tests added for survivors.
MODULES: dict[str, list[str]] = {
    "drift/_search.py": ["test_drift_search.py", "test_drift_fidelity.py", "test_mutants_drift.py"],
    "drift/_select.py": ["test_drift_search.py", "test_drift_fidelity.py", "test_mutants_drift.py"],
    "drift/_gate.py": ["test_drift_gate.py", "test_gate_power.py", "test_mutants_drift.py"],
    "repair/_accept.py": ["test_repair_refine.py", "test_mutants_repair.py"],
    "repair/_refinement.py": ["test_repair_refine.py", "test_repair_fidelity.py", "test_mutants_repair.py"],
    # the exact sign-test power and MDE (stats._inference) are tested beside the gate that uses them
    "stats": ["test_stats_*.py", "test_gate_power.py", "test_mutants_stats.py"],
    "probe/_classify.py": ["test_probe_classify.py", "test_probe_grouping.py"],
    "align/_labels.py": ["test_align_labels.py"],
}

# extra pytest arguments of a module's run. The gate's CLI tests (MLflow tracking, `rubriclab drift-check`
# end to end: 28 s of its 60 s of tests) go through the same compare_verdicts as the others; left out, a
# surviving mutant costs half as long.
PYTEST_ARGS: dict[str, list[str]] = {
    "drift/_gate.py": ["-k", "not cli"],
}

# The functions a default run mutates: the decision logic of each module (a full run of every function is
# ~8,000 mutants, hours on 2 cores; ``--all-functions`` does it). Names are ``file.function`` globs under
# src/rubriclab/<module>; mutmut names a mutant ``rubriclab.<file>.x_<function>__mutmut_<n>``.
FOCUS: dict[str, list[str]] = {
    "drift/_search.py": ["drift._search.refill_pool", "drift._search._live", "drift._search.final_pool"],
    "drift/_select.py": ["drift._select.infeasible_because", "drift._select.select",
                         "drift._select.adjust_across_methods", "drift._select._vs_seed"],
    "drift/_gate.py": ["drift._gate._flags"],
    "repair/_accept.py": ["repair._accept.*"],
    "repair/_refinement.py": ["repair._refinement.parse_delta", "repair._refinement.delta_label",
                              "repair._refinement._attack_check", "repair._refinement._subsets",
                              "repair._refinement.operating_point"],
    "stats": ["stats._inference.bh_adjust", "stats._inference.exact_k_min", "stats._inference.sign_test*",
              "stats._inference.mde_sign_test", "stats._inference.mde_drop", "stats._majority.*"],
    "probe/_classify.py": ["probe._classify._subsample", "probe._classify._overlap", "probe._classify._auc"],
    "align/_labels.py": ["align._labels.preference_rows", "align._labels._rubric_agreement"],
}

# mutmut's exit-code classes (mutmut.stats.status_by_exit_code), folded into the columns we report
COLUMNS = ["killed", "survived", "timeout", "no tests", "suspicious", "other", "not checked"]


def slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", "_").strip("_")


def test_files(module: str, baseline: bool = False) -> list[str]:
    files: list[str] = []
    for pattern in MODULES[module]:
        if baseline and pattern.startswith("test_mutants_"):
            continue
        files += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob(pattern))
    return files


def mutmut_table(module: str, tests: list[str]) -> str:
    target = f"{SRC}/{module}" if module.endswith(".py") else f"{SRC}/{module}/*"
    lines = [
        "",
        "# appended by scripts/mutate.py: mutate one module, run only its own tests",
        "[tool.mutmut]",
        'source_paths = ["src"]',
        f"only_mutate = [{json.dumps(target)}]",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        f"pytest_add_cli_args = {json.dumps(['-p', 'no:cacheprovider', *PYTEST_ARGS.get(module, [])])}",
        "use_git_change_detection = false",
        f"also_copy = {json.dumps(LINKS[2:])}",
        # forking straight from a process that ran the tests deadlocked (locks held by the threads they left):
        # a fork server that only imports and collects is fork-safe; a hung mutant is stopped on the wall clock
        'process_isolation = "forkserver"',
        "timeout_multiplier = 5.0",
        "",
    ]
    return "\n".join(lines)


def prepare(module: str, resume: bool, baseline: bool) -> tuple[Path, list[str]]:
    work = ROOT / "mutants" / slug(module)
    if work.exists() and not resume:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKS:
        link = work / name
        if not link.is_symlink():
            link.symlink_to(ROOT / name, target_is_directory=(ROOT / name).is_dir())
    tests = test_files(module, baseline)
    if not tests:
        raise SystemExit(f"{module}: none of {MODULES[module]} exists under tests/")
    text = (ROOT / "pyproject.toml").read_text()
    if "[tool.mutmut]" in text:
        raise SystemExit("pyproject.toml already has a [tool.mutmut] table; scripts/mutate.py writes its own")
    (work / "pyproject.toml").write_text(text + mutmut_table(module, tests))
    return work, tests


def patterns(module: str, all_functions: bool) -> list[str]:
    """mutmut mutant-name globs for the focus functions ([] = every mutant of the module)."""
    if all_functions:
        return []
    out = []
    for name in FOCUS[module]:
        file, _, func = name.rpartition(".")
        out.append(f"rubriclab.{file}.x_{func}__mutmut_*")
    return out


def counts(work: Path, globs: list[str]) -> tuple[Counter, list[str]]:
    from fnmatch import fnmatchcase

    from mutmut.stats import status_by_exit_code

    tally: Counter = Counter()
    survivors: list[str] = []
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        for name, code in sorted(data["exit_code_by_key"].items()):
            if globs and not any(fnmatchcase(name, g) for g in globs):
                continue
            status = status_by_exit_code[code]
            tally[status if status in COLUMNS else "other"] += 1
            if status == "survived":
                survivors.append(name)
    return tally, survivors


def run_module(module: str, *, resume: bool, show: bool, all_functions: bool, budget: float | None,
               baseline: bool) -> dict:
    work, tests = prepare(module, resume, baseline)
    globs = patterns(module, all_functions)
    what = "every function" if all_functions else ", ".join(FOCUS[module])
    print(f"\n=== {module}: mutating {what} in {SRC}/{module} against {' '.join(tests)}", flush=True)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    start = time.monotonic()
    # its own session, so that the budget stops mutmut, its fork server and the mutant under test together
    proc = subprocess.Popen([MUTMUT, "run", "--max-children", "1", *globs], cwd=work, env=env,
                            start_new_session=True)
    try:
        returncode: int | str = proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:  # mutmut saves each verdict as it comes: the rest stay "not checked"
        print(f"\n{module}: budget of {budget:g}s spent, stopping mutmut", flush=True)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        returncode = "budget"
    seconds = round(time.monotonic() - start)
    tally, survivors = counts(work, globs)
    summary = {"module": module, "focus": globs or "all", "tests": tests, "returncode": returncode,
               "seconds": seconds,
               "total": sum(tally.values()), **{c: tally[c] for c in COLUMNS}, "survivors": survivors}
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if show:
        for name in survivors:
            subprocess.run([MUTMUT, "show", name], cwd=work, env=env)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"subset of: {' '.join(MODULES)}")
    ap.add_argument("--resume", action="store_true", help="keep mutmut's previous results for these modules")
    ap.add_argument("--show", action="store_true", help="print each survivor's diff")
    ap.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="stop each module's mutmut run after this long (unchecked mutants are counted as such)")
    ap.add_argument("--baseline", action="store_true",
                    help="leave out tests/test_mutants_*.py: what the module's own tests let survive")
    ap.add_argument("--all-functions", action="store_true",
                    help="mutate every function of each module, not only FOCUS (hours for the whole set)")
    args = ap.parse_args(argv)
    wanted = [m.removeprefix(f"{SRC}/").rstrip("/") for m in args.modules] or list(MODULES)
    unknown = [m for m in wanted if m not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {unknown}; choose from {list(MODULES)}")
    rows = [run_module(m, resume=args.resume, show=args.show, all_functions=args.all_functions,
                       budget=args.budget, baseline=args.baseline) for m in wanted]
    print(f"\n{'module':24} {'total':>6} {'killed':>7} {'survived':>9} {'timeout':>8} {'no tests':>9} "
          f"{'other':>6} {'secs':>6}")
    for r in rows:
        other = r["suspicious"] + r["other"] + r["not checked"]
        print(f"{r['module']:24} {r['total']:6d} {r['killed']:7d} {r['survived']:9d} {r['timeout']:8d} "
              f"{r['no tests']:9d} {other:6d} {r['seconds']:6d}")
        for name in r["survivors"]:
            print(f"    survived: {name}")
    return 1 if any(r["returncode"] not in (0, "budget") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
