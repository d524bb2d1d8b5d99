"""Command line: a thin layer over the library API. Errors are one line, never a traceback.

`parser` holds the grammar, `run_command` the `run` command, `app_command` the `app` command, `llm_command` the
`llm` command, `commands` the others, `record` the JSON record.
"""

from __future__ import annotations

import sys

from ..errors import GpusimError, one_line
from .app_command import cmd_app
from .commands import (cmd_archs, cmd_bench, cmd_calibrate, cmd_occupancy, cmd_sweep, cmd_validate,
                       cmd_workload)
from .llm_command import cmd_llm
from .parser import build_parser
from .record import record_json
from .run_command import VIOLATION_EXIT, cmd_run

COMMANDS = {"bench": cmd_bench, "archs": cmd_archs, "occupancy": cmd_occupancy, "workload": cmd_workload,
            "run": cmd_run, "sweep": cmd_sweep, "calibrate": cmd_calibrate, "validate": cmd_validate,
            "app": cmd_app, "llm": cmd_llm}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except GpusimError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for SIGINT (with the metrics so far)
        print("interrupted", file=sys.stderr)
        return 130


__all__ = ["COMMANDS", "VIOLATION_EXIT", "build_parser", "main", "record_json"]
