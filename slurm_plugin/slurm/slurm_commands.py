"""Running Slurm's commands: the one place rankmap starts a Slurm process.

Prolog scripts get no PATH, so the command is looked up explicitly: in the configured
``[slurm] bin_dir`` when there is one (and only there: a second Slurm elsewhere on the
machine must not answer for this one), else on the caller's PATH and then in
:data:`DEFAULT_DIRS`.  Commands run with a time-out; failures become
:class:`SlurmQueryError` with the command and its stderr.

The directory reaches the runner either as the ``bin_dir`` argument or, through layers
that only pass the environment along, as :data:`BIN_DIR_VAR` in ``env``
(:func:`with_bin_dir`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from mapper.errors import RankmapError

from ..common.processes import end_group

#: searched after the caller's PATH when no bin_dir is configured (/usr/local first, as
#: on a stock PATH: a site Slurm built from source there wins over a distribution's)
DEFAULT_DIRS = ("/usr/local/bin", "/usr/bin")
#: PATH of the prolog's worker process (the slurmd prolog itself gets no PATH)
SLURM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: environment key carrying ``[slurm] bin_dir`` to the runner
BIN_DIR_VAR = "RANKMAP_SLURM_BIN_DIR"


class SlurmQueryError(RankmapError, RuntimeError):
    """A Slurm command failed, timed out or is missing."""


def with_bin_dir(env: Mapping[str, str], bin_dir: str) -> dict[str, str]:
    """``env`` carrying ``bin_dir`` (``[slurm] bin_dir``; empty: the default search)."""
    out = dict(env)
    if bin_dir:
        out[BIN_DIR_VAR] = bin_dir
    return out


def find_command(name: str, env: Mapping[str, str] | None = None,
                 bin_dir: str | None = None) -> str:
    """Absolute path of the Slurm command ``name``.

    ``bin_dir`` (else ``env[BIN_DIR_VAR]``): only there.  Otherwise ``env``'s PATH (the
    process's own when ``env`` has none), then :data:`DEFAULT_DIRS`.
    """
    env = os.environ if env is None else env
    bin_dir = bin_dir or env.get(BIN_DIR_VAR) or ""
    if bin_dir:
        found = shutil.which(name, path=bin_dir)
        if not found:
            raise SlurmQueryError(f"{name}: not found in [slurm] bin_dir {bin_dir}")
        return found
    path = env.get("PATH", os.environ.get("PATH", ""))
    dirs = [d for d in path.split(os.pathsep) if d] + list(DEFAULT_DIRS)
    found = shutil.which(name, path=os.pathsep.join(dirs))
    if not found:
        raise SlurmQueryError(f"{name}: command not found on PATH or in "
                              f"{', '.join(DEFAULT_DIRS)} (is slurm-client installed? "
                              "else set [slurm] bin_dir)")
    return found


def run_slurm(args: list[str], timeout: float = 10.0, env: Mapping[str, str] | None = None,
              bin_dir: str | None = None) -> str:
    """Run a Slurm command (``args[0]`` looked up by :func:`find_command`); its stdout.

    Of ``env`` only ``SLURM_CONF`` reaches the command (a job's environment holds
    SLURM_* variables that would change what the command prints).
    """
    exe = find_command(args[0], env, bin_dir)
    full_env = {"PATH": os.pathsep.join([os.path.dirname(exe), *DEFAULT_DIRS]),
                "LC_ALL": "C"}
    if env and env.get("SLURM_CONF"):
        full_env["SLURM_CONF"] = env["SLURM_CONF"]
    try:
        # a process group of its own: a time-out ends the command and whatever it
        # started (a site's wrapper script and its children), not only the wrapper
        proc = subprocess.Popen([exe, *args[1:]], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=full_env, process_group=0)
    except OSError as exc:  # vanished or not executable between lookup and start
        raise SlurmQueryError(f"{exe}: cannot run: {exc.strerror}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_group(proc.pid)
        proc.communicate()
        raise SlurmQueryError(f"{' '.join(args)}: no answer within {timeout:g} s") from None
    except BaseException:
        end_group(proc.pid)
        proc.wait()
        raise
    if proc.returncode != 0:
        raise SlurmQueryError(f"{' '.join(args)}: exit {proc.returncode}: "
                              f"{stderr.strip()[:500]}")
    return stdout
