"""The ``rankmap`` command: solver, planning, profiles and site configuration.

Every subcommand registers itself from the module that owns it; this file only builds
the parser and turns user-facing errors into one line on stderr (exit status 2).
"""

from __future__ import annotations

import argparse
import sys

from mapper.errors import RankmapError

from ..common.safe_text import escape_controls
from .config_cli import add_config_commands
from .hwinfo_cli import add_hwinfo_command
from .map_cli import add_map_commands
from .mesh_cli import add_evaluate_partition_command, add_partition_command
from .plan_cli import add_plan_command
from .profile_cli import add_profile_commands
from .record_cli import add_record_command
from .report_cli import add_report_command
from .simulate_cli import add_simulate_command
from .summa_cli import add_summa_command

#: what the CLI reports as one line (exit 2); anything else is a bug and keeps its
#: traceback (exit 1)
USER_ERRORS: tuple[type[Exception], ...] = (RankmapError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rankmap", description="Topology-aware MPI rank placement for Slurm.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_map_commands(sub)
    add_plan_command(sub)
    add_simulate_command(sub)
    add_profile_commands(sub)
    add_record_command(sub)
    add_config_commands(sub)
    add_report_command(sub)
    add_summa_command(sub)
    add_hwinfo_command(sub)
    add_partition_command(sub)
    add_evaluate_partition_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        # messages quote file contents and names: no terminal escape reaches the screen
        text = "\n".join(escape_controls(line) for line in str(exc).split("\n"))
        print(f"rankmap: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rankmap: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
