"""Slurm TaskProlog entry point: ``rankmap-task-prolog``.

Runs once per task as the user, before the task; every ``export NAME=value`` line it
prints lands in the task's environment, ``print TEXT`` in the task's output.  It only
reads the job directory the prolog wrote (mode 0700, owned by the user; files 0600), so
a plain ``mpirun ./app`` picks the placement up:

* ``OMPI_MCA_rmaps_rank_file_path`` (what Open MPI 4.1's mpirun reads) and
  ``OMPI_MCA_rmaps_rankfile_path`` in the batch step (where mpirun runs; its daemons'
  step inherits them from mpirun, or not when the script unset them), ``RANKMAP_HOSTFILE``,
  ``RANKMAP_MACHINEFILE``, ``RANKMAP_RANKFILE``, ``RANKMAP_REPORT``, for
  ``--rankmap=summa`` jobs ``RANKMAP_ARRANGEMENT`` and for ``--comm-profile=mesh:NAME``
  jobs ``RANKMAP_PARTITION`` (the mesh partition: line v, the rank owning vertex v)
  (names.EXPORTS), each only when the report says the computation was applied;
* with ``[render] export_slurm_hostfile = true``, ``SLURM_HOSTFILE`` and
  ``SLURM_DISTRIBUTION=arbitrary`` for ``srun`` (not together with mpirun, whose own
  srun call would inherit them).

Only the standard library and the config reader are imported: this runs per task.  With
an unreadable configuration it looks where the prolog then reported: the default
directories.  Whatever it prints from the report is escaped (one line per message).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def exports(env: dict[str, str]) -> list[str]:
    from .config import DEFAULTS, ConfigError, load_config
    from .names import EXPORTS, FILE_NAMES, JOB_DIR_PREFIX, OMPI_RANKFILE_VARS, valid_job_id
    from .reorder_job import is_script_step, reorder_exports  # standard library only
    from .safe_text import safe_text

    job_id = env.get("SLURM_JOB_ID", "")
    if not valid_job_id(job_id):
        return []
    try:
        cfg = load_config(env=env)
        bases = (cfg.get("general", "output_dir"), cfg.get("prolog", "fallback_dir"))
        export_slurm_hostfile = cfg.get("render", "export_slurm_hostfile")
    except ConfigError:  # the prolog then reported into the default directories
        bases = (DEFAULTS["general"]["output_dir"][0], DEFAULTS["prolog"]["fallback_dir"][0])
        export_slurm_hostfile = False
    lines: list[str] = []
    for base in bases:
        job_dir = Path(base) / f"{JOB_DIR_PREFIX}{job_id}"
        record_path = job_dir / FILE_NAMES["record"]
        if not record_path.is_file():
            continue
        try:
            record = json.loads(record_path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        lines.append(f"export RANKMAP_REPORT={job_dir / FILE_NAMES['report']}")
        if record.get("applied"):
            for name, var in EXPORTS.items():
                if (job_dir / FILE_NAMES[name]).is_file():
                    lines.append(f"export {var}={job_dir / FILE_NAMES[name]}")
            # the batch step only: mpirun runs there and its daemons' step inherits its
            # environment, so a script that unsets them to let mpirun place the ranks
            # (RANKMAP_REORDER renumbering them) leaves no rankfile anywhere in the job
            if (job_dir / FILE_NAMES["rankfile"]).is_file() and is_script_step(env):
                for var in OMPI_RANKFILE_VARS:
                    lines.append(f"export {var}={job_dir / FILE_NAMES['rankfile']}")
            lines += reorder_exports(job_dir, env, record.get("n"))
            if export_slurm_hostfile and \
                    (job_dir / "slurm_hostfile").is_file():
                lines.append(f"export SLURM_HOSTFILE={job_dir / 'slurm_hostfile'}")
                lines.append("export SLURM_DISTRIBUTION=arbitrary")
        if is_script_step(env):  # the batch step: tell the user once
            if record.get("summary"):  # the report's own sentence: applied, kept, or why not
                state = safe_text(record["summary"], 2000)
            elif record.get("applied"):
                state = "placement applied"
            else:
                state = f"placement NOT applied ({safe_text(record.get('fallback_reason'), 2000)})"
            lines.append(f"print rankmap: {state}; report: {job_dir / 'report.txt'}")
        break
    return lines


def _escape(text: str) -> str:
    from .safe_text import safe_text

    return safe_text(text, 500)


def main() -> int:
    try:
        for line in exports(dict(os.environ)):
            print(line)
    except Exception as exc:  # never break the user's task
        print(f"print rankmap: task prolog error ignored: {_escape(repr(exc))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
