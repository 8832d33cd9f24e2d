#!/bin/sh
# Fetch the NAS Parallel Benchmarks shipped in SimGrid's Debian source package
# (examples/smpi/NAS: IS, DT, EP) and build them with smpicc.  Nothing of their code
# is kept in this repository: it is fetched here, at run time, into DIR.
#
# Usage: sh bench/benefit/fetch_nas.sh [DIR]      (default /tmp/rankmap-nas; as root)
#
# 1. adds a deb-src entry for Debian's main archive (a separate file,
#    /etc/apt/sources.list.d/rankmap-deb-src.sources; remove it afterwards if unwanted),
# 2. apt-get update && apt-get source simgrid (needs dpkg-dev),
# 3. builds is, dt and ep with smpicc into DIR/bin (the class, S/W/A/B..., and the
#    process count are command-line arguments of these versions).
set -eu
DIR=${1:-/tmp/rankmap-nas}
SRC=/etc/apt/sources.list.d/rankmap-deb-src.sources
if [ ! -e "$SRC" ]; then
  cat > "$SRC" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
fi
command -v dpkg-source >/dev/null || apt-get install -y dpkg-dev
apt-get update
mkdir -p "$DIR"
cd "$DIR"
ls -d simgrid-*/ >/dev/null 2>&1 || apt-get source simgrid
NAS=$(ls -d "$DIR"/simgrid-*/examples/smpi/NAS | head -1)
mkdir -p "$DIR/bin"
# SimGrid builds these with CMake (examples/smpi/NAS/CMakeLists.txt: is.c, ep.c, dt.c
# with nas_common.c, dt also DGraph.c); the same, directly with smpicc:
cd "$NAS"
smpicc -O2 -o "$DIR/bin/is" is.c nas_common.c -lm
smpicc -O2 -o "$DIR/bin/ep" ep.c nas_common.c -lm
smpicc -O2 -o "$DIR/bin/dt" dt.c nas_common.c DGraph.c -lm
echo "built $DIR/bin/is $DIR/bin/ep $DIR/bin/dt"
echo "they take NPROCS CLASS on the command line (dt also BH|WH|SH), e.g."
echo "  rankmap simulate --nodes 'n[0-1]' --node-info 'Sockets=2 CoresPerSocket=4' \\"
echo "    --profile alltoall -- $DIR/bin/is 16 S"
