#!/usr/bin/env bash
# Build a pyslurm wheel against a Slurm installed by build_slurm.sh, once.
#
#   deploy/testcluster/build_pyslurm.sh PREFIX [PYTHON] [PYSLURM_VERSION]
#
# PyPI's pyslurm 25.11.x builds only against Slurm 25.11 (about 1.5 minutes on 2 cores
# with -O0, 3 with -O2; the sdist, Cython and setuptools come from PyPI); the wheel is
# kept in PREFIX/wheels and a second run returns at once.  PYTHON (default
# /usr/bin/python3) must be the minor version that will import the wheel.  Install it into
# a virtual environment with `pip install --no-index PREFIX/wheels/pyslurm-*.whl`; it
# finds libslurm through the RPATH set here (no LD_LIBRARY_PATH) and needs SLURM_CONF.
# The last line printed is the wheel's path.
set -euo pipefail
prefix=${1:?usage: build_pyslurm.sh PREFIX [PYTHON] [PYSLURM_VERSION]}
python=${2:-/usr/bin/python3}
version=${3:-25.11.2}
mkdir -p "$prefix/wheels"
wheel=$(ls "$prefix"/wheels/pyslurm-"$version"-*.whl 2>/dev/null | head -1 || true)
if [ -n "$wheel" ]; then
    echo "build_pyslurm.sh: pyslurm $version already built: $wheel" >&2
    echo "$wheel"; exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/rankmap-pyslurm.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --upgrade pip wheel setuptools "cython>=3" >&2
echo "build_pyslurm.sh: building pyslurm $version against $prefix" >&2
# --no-cache-dir: pip would otherwise reuse a wheel it built against another prefix
# (same version, RUNPATH into a Slurm that may no longer be there)
SLURM_INCLUDE_DIR="$prefix/include" SLURM_LIB_DIR="$prefix/lib" CFLAGS="-O0 -pipe" \
LDFLAGS="-Wl,-rpath,$prefix/lib ${LDFLAGS:-}" \
    "$work/venv/bin/pip" wheel --no-cache-dir --no-deps --no-build-isolation \
    -w "$prefix/wheels" \
    "pyslurm==$version" >&2
ls "$prefix"/wheels/pyslurm-"$version"-*.whl | head -1
