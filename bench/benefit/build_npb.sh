#!/bin/sh
# Build NAS Parallel Benchmarks 3.3 MPI kernels (LU, BT, SP, MG, ...) for SimGrid's SMPI
# from a source tree you provide (NPB3.3-MPI, as NASA distributes it).  Nothing of NPB's
# code is kept in this repository: the tree is copied into a scratch directory, built
# there with smpiff (Fortran 77 through SimGrid's wrapper; smpif90 names every .f
# object ".o"), and the binaries land in OUT as CODE.CLASS.RANKS.
#
# Usage: sh bench/benefit/build_npb.sh NPB3.3-MPI-DIR OUT CLASS RANKS CODE...
#   e.g. sh bench/benefit/build_npb.sh ~/NPB3.3-MPI /tmp/npb-bin A 256 lu bt sp mg
# Needs gfortran and SimGrid (Debian: gfortran, simgrid, libsimgrid-dev).
set -eu
[ $# -ge 5 ] || { sed -n 2,10p "$0"; exit 2; }
SRC=$1 OUT=$2 CLASS=$3 RANKS=$4
shift 4
[ -f "$SRC/config/make.def.template" ] || { echo "$SRC: not an NPB3.3-MPI tree" >&2; exit 2; }
command -v smpiff >/dev/null || { echo "smpiff not found: install simgrid" >&2; exit 2; }
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$SRC"/. "$WORK"/
mkdir -p "$WORK/bin"
# gfortran >= 10 refuses NPB's argument mismatches and X'..' constants without these
cat > "$WORK/config/make.def" <<'EOF'
MPIF77 = smpiff
FLINK = $(MPIF77)
FMPI_LIB =
FMPI_INC =
FFLAGS = -O2 -fallow-argument-mismatch -std=legacy -fallow-invalid-boz
FLINKFLAGS = -O2
MPICC = smpicc
CLINK = $(MPICC)
CMPI_LIB =
CMPI_INC =
CFLAGS = -O2
CLINKFLAGS = -O2
CC = cc -g
BINDIR = ../bin
RAND = randi8
EOF
for code in "$@"; do
  make -C "$WORK" "$code" NPROCS="$RANKS" CLASS="$CLASS" > "$OUT/build-$code.log" 2>&1 \
    || { echo "$code: build failed, see $OUT/build-$code.log" >&2; exit 1; }
  cp "$WORK/bin/$code.$CLASS.$RANKS" "$OUT/"
  echo "built $OUT/$code.$CLASS.$RANKS"
done
