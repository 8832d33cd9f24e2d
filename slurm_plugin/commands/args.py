"""What the ``rankmap`` subcommands share: the user-facing error, argparse types and
option parsers, the progress lines.

:class:`CliError` is printed as one line with exit status 2 by
:func:`slurm_plugin.commands.cli.main` (like every
:class:`~mapper.errors.RankmapError`).
"""

from __future__ import annotations

import argparse
import sys
import time

from mapper.errors import RankmapError
from mapper.model.machine import Hierarchy
from mapper.solve.algorithm_names import PRESETS


class CliError(RankmapError, ValueError):
    """A user-facing error: printed without a traceback, exit status 2."""


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (``--cpus-per-task 0`` is refused by name)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (``--time-limit 0`` is refused by name)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def add_algorithm_arguments(p: argparse.ArgumentParser, algorithm_help: str) -> None:
    """``--algorithm NAME`` or ``--preset fast|eco|strong`` (one of them)."""
    chosen = p.add_mutually_exclusive_group()
    chosen.add_argument("--algorithm", default=None, help=algorithm_help)
    chosen.add_argument("--preset", choices=PRESETS, default=None,
                        help="fast (topdown+n10), eco (better partitions) or strong (more "
                             "starts, moves beyond 2-swaps, iterated local search); README: "
                             "Presets")


def parse_hierarchy_options(hierarchy: str, distances: str) -> Hierarchy:
    """The machine of ``--hierarchy`` and ``--distances``; errors name the options."""
    return Hierarchy.parse(hierarchy, distances, names=("--hierarchy", "--distances"))


def terminal_progress():
    """Phase lines with elapsed time on stderr, when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None
    start = time.perf_counter()

    def show(phase: str) -> None:
        print(f"[{time.perf_counter() - start:7.2f} s] {phase}", file=sys.stderr, flush=True)
    return show
