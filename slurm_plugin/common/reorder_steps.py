"""Which reorder file a job step reads: the TaskProlog's side of the rank reordering
(standard library only; it runs once per task).

The worker writes one reorder file per distribution a launcher may use
(:mod:`slurm_plugin.outputs.reorder_files`); the TaskProlog, which sees the step's own
``SLURM_DISTRIBUTION``, exports the matching one as ``RANKMAP_REORDER``
(:func:`reorder_exports`) and the group graph as ``RANKMAP_DIST_GRAPH``.  The rule is in
:mod:`slurm_plugin.outputs.reorder_files`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from .job_conventions import GROUP_GRAPH_FILE, REORDER_FILE_BY_METHOD
from .job_conventions import REORDER_FILES as NAMED_REORDER_FILES

#: the variable librankmap and rankmap_mpi read (slurm_plugin/userlib/librankmap/rankmap.h)
ENV = "RANKMAP_REORDER"
#: the group graph's variable (rankmap_dist_graph, rankmap_mpi.dist_graph_comm)
DIST_GRAPH_ENV = "RANKMAP_DIST_GRAPH"

#: (node method, socket method) → reorder file name, one per placement a launcher makes
REORDER_FILES = REORDER_FILE_BY_METHOD
#: every file the worker writes (FILE_NAMES roles = file names)
ALL_FILES = NAMED_REORDER_FILES
#: the file for tasks that do not say how they were placed: mpirun's default mapping
MPIRUN_FILE = REORDER_FILES[("block", "cyclic")]


#: SLURM_STEP_ID of the steps that run the user's script: the batch step and salloc's
#: interactive step (SLURM_BATCH_SCRIPT, SLURM_INTERACTIVE_STEP), which Slurm 26.05
#: prints as signed integers and older releases do not set at all (unsigned forms too)
SCRIPT_STEP_IDS = frozenset({"", "-5", "-6", "4294967291", "4294967290", "batch",
                             "interactive"})


def is_script_step(env: Mapping[str, str]) -> bool:
    """True in the task that runs the job's script (where mpirun runs), not in an
    ``srun`` step.  Standard library only."""
    return env.get("SLURM_STEP_ID", "").strip() in SCRIPT_STEP_IDS


def step_reorder_file(env: Mapping[str, str], n: int | None) -> str | None:
    """The reorder file (name) for a task with environment ``env`` of a job of ``n``
    ranks, or None when none fits; see the module docstring for the rule."""
    step_tasks = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS")
    if is_script_step(env) or n is None or step_tasks != str(n):
        return MPIRUN_FILE
    method = distribution_methods(env.get("SLURM_DISTRIBUTION"))
    return REORDER_FILES.get(method) if method else None


def reorder_exports(job_dir: Path, env: Mapping[str, str], n: object) -> list[str]:
    """The TaskProlog's lines for this task: ``export RANKMAP_REORDER=…``, or ``unset
    RANKMAP_REORDER`` when no file fits or it is missing (a step's tasks inherit the
    batch script's value, which is mpirun's file: wrong for, e.g., ``arbitrary``); then
    ``export RANKMAP_DIST_GRAPH=…`` when the group graph file is there (numbered by new
    rank, it fits every step).  Call it only when rankmap's placement was applied.
    Standard library only."""
    name = step_reorder_file(env, n if isinstance(n, int) and not isinstance(n, bool)
                             else None)
    if name is None or not (job_dir / name).is_file():
        lines = [f"unset {ENV}"]
    else:
        lines = [f"export {ENV}={job_dir / name}"]
    if (job_dir / GROUP_GRAPH_FILE).is_file():
        lines.append(f"export {DIST_GRAPH_ENV}={job_dir / GROUP_GRAPH_FILE}")
    return lines


_DIST = re.compile(r"^\s*(?P<nodes>[^:,\s]*)(?::(?P<sockets>[^:,\s]*))?", re.I)


def distribution_methods(text: str | None) -> tuple[str, str] | None:
    """(node method, socket method) of a ``SLURM_DISTRIBUTION`` value as Slurm places
    the ranks — ``None``/empty/``*`` → Slurm's ``block:cyclic``; ``fcyclic`` and ``*``
    sockets → ``cyclic``; None for ``plane``, ``arbitrary`` and what is not Slurm's
    syntax.  Agrees with :func:`slurm_plugin.machine.distribution.parse_distribution` (which
    imports numpy; this runs once per task)."""
    m = _DIST.match(text or "")
    if not m:
        return None
    nodes = (m.group("nodes") or "*").lower()
    nodes = "block" if nodes == "*" else nodes
    sockets = socket_method((m.group("sockets") or "*").lower())
    if nodes not in ("block", "cyclic") or sockets not in ("block", "cyclic"):
        return None
    return nodes, sockets


def socket_method(sockets: str) -> str:
    # fcyclic spreads one task's CPUs over sockets; the socket each task starts on, the
    # one a slot names, is cyclic's (slurm_plugin.machine.distribution)
    return "cyclic" if sockets in ("*", "fcyclic") else sockets
