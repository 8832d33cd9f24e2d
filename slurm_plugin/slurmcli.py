"""Running Slurm's commands: the one place rankmap starts a Slurm process.

Prolog scripts get no PATH, so commands run with an explicit one, with a time-out, and
failures become :class:`SlurmQueryError` with the command and its stderr.
"""

from __future__ import annotations

import subprocess

from mapper.errors import RankmapError

SLURM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SlurmQueryError(RankmapError, RuntimeError):
    """A Slurm command failed, timed out or is missing."""


def run_slurm(args: list[str], timeout: float = 10.0, env: dict[str, str] | None = None) -> str:
    """Run a Slurm command and return its stdout."""
    full_env = {"PATH": SLURM_PATH, "LC_ALL": "C"}
    if env:
        full_env.update({k: v for k, v in env.items() if k in ("SLURM_CONF",)})
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              env=full_env, check=False)
    except FileNotFoundError:
        raise SlurmQueryError(f"{args[0]}: command not found (is slurm-client installed?)"
                              ) from None
    except subprocess.TimeoutExpired:
        raise SlurmQueryError(f"{' '.join(args)}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        raise SlurmQueryError(f"{' '.join(args)}: exit {proc.returncode}: "
                              f"{proc.stderr.strip()[:500]}")
    return proc.stdout
