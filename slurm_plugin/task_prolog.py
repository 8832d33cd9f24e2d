"""Slurm TaskProlog entry point: ``rankmap-task-prolog``.

Runs once per task as the user, before the task; every ``export NAME=value`` line it
prints lands in the task's environment, ``print TEXT`` in the task's output.  It only
reads the job directory the prolog wrote, so a plain ``mpirun ./app`` picks the
placement up:

* ``OMPI_MCA_rmaps_rank_file_path`` (what Open MPI 4.1's mpirun reads) and
  ``OMPI_MCA_rmaps_rankfile_path``, ``RANKMAP_HOSTFILE``,
  ``RANKMAP_MACHINEFILE``, ``RANKMAP_RANKFILE``, ``RANKMAP_REPORT``;
* with ``[render] export_slurm_hostfile = true``, ``SLURM_HOSTFILE`` and
  ``SLURM_DISTRIBUTION=arbitrary`` for ``srun`` (not together with mpirun, whose own
  srun call would inherit them).

Only the standard library and the config reader are imported: this runs per task.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def exports(env: dict[str, str]) -> list[str]:
    from .config import load_config

    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        return []
    cfg = load_config(env=env)
    lines: list[str] = []
    for base in (cfg.get("general", "output_dir"), cfg.get("prolog", "fallback_dir")):
        job_dir = Path(base) / f"job.{job_id}"
        record_path = job_dir / "report.json"
        if not record_path.is_file():
            continue
        try:
            record = json.loads(record_path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        lines.append(f"export RANKMAP_REPORT={job_dir / 'report.txt'}")
        if record.get("applied"):
            files = {"rankfile": "RANKMAP_RANKFILE", "hostfile": "RANKMAP_HOSTFILE",
                     "machinefile": "RANKMAP_MACHINEFILE"}
            for name, var in files.items():
                if (job_dir / name).is_file():
                    lines.append(f"export {var}={job_dir / name}")
            if (job_dir / "rankfile").is_file():
                # Open MPI 4.1 reads rmaps_rank_file_path (alias orte_rankfile); the
                # spelling without the underscore is exported too for the tools and
                # documentation that use it, and is ignored by mpirun
                for var in ("OMPI_MCA_rmaps_rank_file_path", "OMPI_MCA_rmaps_rankfile_path"):
                    lines.append(f"export {var}={job_dir / 'rankfile'}")
            if cfg.get("render", "export_slurm_hostfile") and \
                    (job_dir / "slurm_hostfile").is_file():
                lines.append(f"export SLURM_HOSTFILE={job_dir / 'slurm_hostfile'}")
                lines.append("export SLURM_DISTRIBUTION=arbitrary")
        if "SLURM_STEP_ID" not in env:  # the batch step: tell the user once
            state = "applied" if record.get("applied") else \
                f"NOT applied ({record.get('fallback_reason')})"
            lines.append(f"print rankmap: placement {state}; report: {job_dir / 'report.txt'}")
        break
    return lines


def main() -> int:
    try:
        for line in exports(dict(os.environ)):
            print(line)
    except Exception as exc:  # never break the user's task
        print(f"print rankmap: task prolog error ignored: {exc!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
