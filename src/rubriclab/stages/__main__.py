"""``python -m rubriclab.stages NAME [ARGS...]``: run stage NAME (``rubriclab.stages.NAME``) in a process forked by the
warm stage server (``rubriclab.stage_server``), or the usual way when there is none yet or it is turned off
(``RUBRICLAB_STAGE_SERVER=0``). scripts/stage and DVC's stage commands call this."""

from __future__ import annotations

import importlib.util
import re
import sys

from rubriclab.stage_server import run


def main(argv: list[str]) -> int:
    if not argv or not re.fullmatch(r"[a-z][a-z_]*", argv[0]) or \
            importlib.util.find_spec(f"rubriclab.stages.{argv[0]}") is None:
        got = f": no stage module rubriclab.stages.{argv[0]}" if argv else ""
        print(f"usage: python -m rubriclab.stages NAME [ARGS...]{got}", file=sys.stderr)
        return 2
    run(f"rubriclab.stages.{argv[0]}", argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
