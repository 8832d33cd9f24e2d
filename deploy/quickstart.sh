#!/usr/bin/env bash
# Fresh machine → rankmap installed and its main job run on the bundled example:
# a 4-node cluster (two leaf switches under a spine, 2 sockets x 4 cores per node)
# and the bundled lammps-3d profile.  As root on Debian this also installs the
# Debian packages: Python's venv and headers, a C compiler, and the Slurm/Open MPI
# packages the end-to-end tests use.
#
# The project is installed (editable, with the test extras) into a virtual environment
# .venv in the project, made with the python3 first on PATH; a second run reuses it.
# Debian's python3 refuses `pip install` outside a venv (PEP 668), so nothing is
# installed into the system Python.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    bash deploy/install-debian-packages.sh
fi
venv=.venv
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    echo "quickstart: reusing $venv ($("$venv/bin/python" --version 2>&1))"
else
    [ -e "$venv" ] && { echo "quickstart: $venv is broken, recreating it"; rm -rf "$venv"; }
    echo "quickstart: creating $venv with $(command -v python3) ($(python3 --version 2>&1))"
    python3 -m venv "$venv"
fi
# keep the environment out of git (what Python >= 3.13's venv writes itself)
[ -e "$venv/.gitignore" ] || echo '*' > "$venv/.gitignore"
"$venv/bin/python" -m pip install --quiet -e '.[test]'
# no '-' in the default: Open MPI 5.0.7 (Debian 13) refuses a rankfile path holding one
# (mpirun --map-by rankfile:file=/tmp/rankmap_demo/rankfile)
out="${RANKMAP_DEMO_OUT:-/tmp/rankmap_demo}"
"$venv/bin/python" -m slurm_plugin.commands.cli plan --out "$out"
echo
echo "rankfile (first lines):"
head -n 5 "$out/rankfile"
echo
echo "quickstart: done; run the tests with  $venv/bin/python -m pytest -q"
