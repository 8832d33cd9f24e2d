#!/usr/bin/env bash
# Fresh machine → rankmap installed and its main job run on the bundled example:
# a 4-node cluster (two leaf switches under a spine, 2 sockets x 4 cores per node)
# and the bundled lammps-3d profile.  As root on Debian this also installs the
# Slurm/Open MPI packages the end-to-end tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    bash deploy/install-debian-packages.sh
fi
python3 -m pip install --quiet -e '.[test]'
out="${RANKMAP_DEMO_OUT:-/tmp/rankmap-demo}"
python3 -m slurm_plugin.cli plan --out "$out"
echo
echo "rankfile (first lines):"
head -n 5 "$out/rankfile"
