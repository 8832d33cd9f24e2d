"""``rankmap-hydra-srun``: the ``srun`` Hydra starts its proxies with, in rankmap's order.

Hydra (MPICH's ``mpiexec``, Intel MPI's ``mpirun``) under Slurm starts one proxy per
host-file line with ``srun --nodelist HOSTS -N K -n K ... hydra_pmi_proxy`` (Intel:
``hydra_bstrap_proxy``) and takes each proxy's id, which decides the ranks it runs,
from ``SLURM_NODEID``: Slurm's node-table order, whatever order the host file gives.
So a host file alone lands the ranks in Slurm's block order, and a host listed twice
(a placement that interleaves hosts) is refused.  The TaskProlog points Hydra's
launcher at this instead (``HYDRA_LAUNCHER_EXEC`` for MPICH,
``I_MPI_HYDRA_BOOTSTRAP_EXEC`` for Intel MPI), which runs the real ``srun`` with

* the ``--nodelist`` turned into a host file of one line per proxy, in Hydra's order,
  repeats kept (``SLURM_HOSTFILE`` with ``--distribution=arbitrary``; ``-N`` dropped),
* every proxy started with ``SLURM_NODEID`` set to its task id, so proxy i is the one on
  line i of the host file.

A launch without ``--nodelist`` (Hydra took the hosts from Slurm) runs ``srun``
unchanged.  The host file lives in a fresh temporary directory, removed when ``srun``
ends.  Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

from ..common.processes import run_relaying_signals

PROXIES = ("hydra_pmi_proxy", "hydra_bstrap_proxy")
NODE_ID_SHIM = 'SLURM_NODEID=$SLURM_PROCID; export SLURM_NODEID; exec "$0" "$@"'


def rewrite(args: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """srun's arguments for Hydra's, and the proxies' hosts in order (None: Hydra gave
    no node list, nothing to change)."""
    out: list[str] = []
    nodes: list[str] | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        name, _, inline = arg.partition("=")
        if name in ("--nodelist", "-w"):
            value = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
            nodes = [h for h in value.split(",") if h]
            i += 1 if inline else 2
            continue
        if name in ("-N", "--nodes"):
            i += 1 if inline else 2
            continue
        if os.path.basename(arg) in PROXIES:
            out += ["/bin/sh", "-c", NODE_ID_SHIM, *args[i:]]
            break
        out.append(arg)
        i += 1
    if nodes is None:
        return list(args), None
    return out, nodes


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    srun = os.environ.get("RANKMAP_REAL_SRUN") or shutil.which("srun") or "srun"
    new_args, nodes = rewrite(args)
    if nodes is None:
        os.execvp(srun, [srun, *args])
    folder = tempfile.mkdtemp(prefix="rankmap-hydra-")
    try:
        hostfile = os.path.join(folder, "hosts")
        with open(hostfile, "w") as f:
            f.write("".join(f"{h}\n" for h in nodes))
        return run_relaying_signals([srun, "--distribution=arbitrary", *new_args],
                                    env={**os.environ, "SLURM_HOSTFILE": hostfile})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
