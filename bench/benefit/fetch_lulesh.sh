#!/bin/sh
# Unpack LULESH 2.0 (LLNL's hydrodynamics proxy app, BSD-style licence in its sources)
# and build it for SimGrid SMPI with smpicxx.  Nothing of its code is kept in this
# repository: the unmodified release archive is unpacked here, at run time, into DIR.
#
# Usage: sh bench/benefit/fetch_lulesh.sh [DIR [TARBALL]]   (DIR default /tmp/rankmap-lulesh)
#        LULESH_TARBALL=/path/lulesh-2.0.tar.gz sh bench/benefit/fetch_lulesh.sh [DIR]
#
# The archive defaults to ../shared/vendor/lulesh-2.0.tar.gz beside the project
# checkout (the unmodified LULESH 2.0 release: lulesh-2.0/lulesh*.cc, lulesh*.h).
# Without it, make one from LLNL's repository (its top directory holds the same MPI
# sources; the tables in LULESH.md were measured with the 2.0 release archive):
#   git clone https://github.com/LLNL/LULESH lulesh-2.0 && tar czf lulesh-2.0.tar.gz lulesh-2.0
# and pass its path in LULESH_TARBALL.
#
# Build: MPI on (-DUSE_MPI=1), OpenMP off (no -fopenmp, so LULESH's MPI_Init path is
# taken), -O2; no source changes.  Globals need no flag: smpirun privatizes them
# itself (smpi/privatization is set to 1 by smpirun).  Result: DIR/lulesh2.0, e.g.
#   smpirun -np 8 -platform P -hostfile H DIR/lulesh2.0 -s 6 -i 10
# LULESH needs a cube number of ranks (8, 27, 64, ..., 512, 4096) and exits 0.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PROJECT=$(cd "$HERE/../.." && pwd)
DIR=${1:-/tmp/rankmap-lulesh}
TARBALL=${2:-${LULESH_TARBALL:-$PROJECT/../shared/vendor/lulesh-2.0.tar.gz}}
if [ ! -f "$TARBALL" ]; then
  echo "fetch_lulesh.sh: LULESH archive not found: $TARBALL" >&2
  echo "  pass TARBALL (or set LULESH_TARBALL): a lulesh-2.0.tar.gz with top directory lulesh-2.0/, e.g." >&2
  echo "  git clone https://github.com/LLNL/LULESH lulesh-2.0 && tar czf lulesh-2.0.tar.gz lulesh-2.0" >&2
  exit 2
fi
if ! command -v smpicxx >/dev/null; then
  echo "fetch_lulesh.sh: smpicxx not found: apt-get install libsimgrid-dev simgrid" >&2
  exit 2
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
tar -xzf "$TARBALL" -C "$DIR"
SRC="$DIR/lulesh-2.0"
for f in lulesh.cc lulesh-comm.cc lulesh-viz.cc lulesh-util.cc lulesh-init.cc; do
  if [ ! -f "$SRC/$f" ]; then
    echo "fetch_lulesh.sh: $TARBALL has no lulesh-2.0/$f: not the LULESH 2.0 release?" >&2
    exit 2
  fi
done
cd "$SRC"
smpicxx -O2 -DUSE_MPI=1 -I. -o "$DIR/lulesh2.0" \
  lulesh.cc lulesh-comm.cc lulesh-viz.cc lulesh-util.cc lulesh-init.cc -lm
echo "built $DIR/lulesh2.0 (sources in $SRC)"
echo "e.g. python3 bench/benefit/run_benefit.py --apps lulesh --ranks 512 --lulesh $DIR/lulesh2.0"
