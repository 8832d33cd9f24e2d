#!/bin/sh
# Unpack HPCG 3.1 (the High Performance Conjugate Gradients benchmark, BSD-3-Clause,
# see COPYING inside the archive) and build it for SimGrid SMPI with smpicxx.  Nothing
# of its code is kept in this repository: the unmodified release archive is unpacked
# here, at run time, into DIR.
#
# Usage: sh bench/benefit/fetch_hpcg.sh [DIR [TARBALL]]   (DIR default /tmp/rankmap-hpcg)
#        HPCG_TARBALL=/path/hpcg-3.1.tar.gz sh bench/benefit/fetch_hpcg.sh [DIR]
#
# The archive defaults to ../shared/vendor/hpcg-3.1.tar.gz beside the project checkout
# (the unmodified HPCG 3.1 release: hpcg-3.1/src/*.cpp, setup/Make.*, configure).  The
# project does not need that file: without it, pass the path of a hpcg-3.1.tar.gz as
# TARBALL (or HPCG_TARBALL), e.g. the 3.1 release archive of
#   https://github.com/hpcg-benchmark/hpcg/releases
# or one made from a clone of that repository checked out at its 3.1 release tag:
#   git clone https://github.com/hpcg-benchmark/hpcg hpcg-3.1 && (cd hpcg-3.1 &&
#   git checkout TAG) && tar czf hpcg-3.1.tar.gz hpcg-3.1
#
# Build: HPCG's own configure + make with an arch file written here, at build time, into
# DIR/hpcg-3.1/setup/Make.SMPI: setup/Make.MPI_GCC_OMP with CXX = smpicxx, -fopenmp
# removed and HPCG_OPTS = -DHPCG_NO_OPENMP (MPI on, OpenMP off); no source changes.
# Globals need no flag: smpirun privatizes them itself.  Result: DIR/xhpcg, e.g.
#   smpirun -np 64 -platform P -hostfile H DIR/xhpcg --nx=16 --ny=16 --nz=16 --rt=0
# (--rt=0 is HPCG's "quick path": one call of each timed block and one CG set).  HPCG
# writes hpcg*.txt and HPCG-Benchmark_*.txt into its working directory and exits 0.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PROJECT=$(cd "$HERE/../.." && pwd)
DIR=${1:-/tmp/rankmap-hpcg}
TARBALL=${2:-${HPCG_TARBALL:-$PROJECT/../shared/vendor/hpcg-3.1.tar.gz}}
if [ ! -f "$TARBALL" ]; then
  echo "fetch_hpcg.sh: HPCG archive not found: $TARBALL" >&2
  echo "  pass TARBALL (or set HPCG_TARBALL): a hpcg-3.1.tar.gz with top directory hpcg-3.1/, e.g." >&2
  echo "  the 3.1 release archive of https://github.com/hpcg-benchmark/hpcg/releases" >&2
  exit 2
fi
if ! command -v smpicxx >/dev/null; then
  echo "fetch_hpcg.sh: smpicxx not found: apt-get install libsimgrid-dev simgrid" >&2
  exit 2
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
tar -xzf "$TARBALL" -C "$DIR"
SRC="$DIR/hpcg-3.1"
for f in configure Makefile.ext src/main.cpp src/CG.cpp src/ExchangeHalo.cpp; do
  if [ ! -f "$SRC/$f" ]; then
    echo "fetch_hpcg.sh: $TARBALL has no hpcg-3.1/$f: not the HPCG 3.1 release?" >&2
    exit 2
  fi
done
cat > "$SRC/setup/Make.SMPI" <<'EOF'
# written by rankmap's bench/benefit/fetch_hpcg.sh: Make.MPI_GCC_OMP for SimGrid SMPI,
# OpenMP off
SHELL        = /bin/sh
CD           = cd
CP           = cp
LN_S         = ln -s -f
MKDIR        = mkdir -p
RM           = /bin/rm -f
TOUCH        = touch
TOPdir       = .
SRCdir       = $(TOPdir)/src
INCdir       = $(TOPdir)/src
BINdir       = $(TOPdir)/bin
MPdir        =
MPinc        =
MPlib        =
HPCG_INCLUDES = -I$(INCdir) -I$(INCdir)/$(arch) $(MPinc)
HPCG_LIBS     =
HPCG_OPTS     = -DHPCG_NO_OPENMP
HPCG_DEFS     = $(HPCG_OPTS) $(HPCG_INCLUDES)
CXX          = smpicxx
CXXFLAGS     = $(HPCG_DEFS) -O3 -ffast-math -ftree-vectorize
LINKER       = $(CXX)
LINKFLAGS    = $(CXXFLAGS)
ARCHIVER     = ar
ARFLAGS      = r
RANLIB       = echo
EOF
BUILD="$DIR/build"
rm -rf "$BUILD"
mkdir -p "$BUILD"
cd "$BUILD"
"$SRC/configure" SMPI >/dev/null
make -j2 >/dev/null
cp bin/xhpcg "$DIR/xhpcg"
echo "built $DIR/xhpcg (sources in $SRC, objects in $BUILD)"
echo "e.g. python3 bench/benefit/run_benefit.py --apps hpcg --ranks 64 --hpcg $DIR/xhpcg"
