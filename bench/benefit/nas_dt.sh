#!/bin/sh
# NPB DT (SimGrid's Debian source package, built by fetch_nas.sh) through the whole
# loop a site would use: trace it in simulation, import the trace as a rankmap profile,
# place with that profile, simulate every placement.
#
# Usage: sh bench/benefit/nas_dt.sh [CLASS] [GRAPH] [WORK]   (default B SH /tmp/rankmap-dt)
#   needs: rankmap on PATH, smpirun, NAS binaries in $NAS_BIN (default /tmp/rankmap-nas/bin)
#
# DT's graph fixes the rank count: SH (shuffle) has sources × (log2(sources) + 2) nodes,
# sources = 4, 8, 16, 32 for classes S, W, A, B (S: 16, W: 40, A: 96, B: 224 ranks).
# The machine: nodes of 2 sockets × 4 cores, 4 nodes per leaf switch, the leaves under
# one spine, uplinks 4:1 oversubscribed (rankmap simulate's defaults).
set -eu
CLASS=${1:-B}
GRAPH=${2:-SH}
WORK=${3:-/tmp/rankmap-dt}
NAS_BIN=${NAS_BIN:-/tmp/rankmap-nas/bin}
[ -x "$NAS_BIN/dt" ] || { echo "no $NAS_BIN/dt: run sh bench/benefit/fetch_nas.sh first" >&2; exit 2; }
case "$GRAPH$CLASS" in
  SHS) RANKS=16 ;; SHW) RANKS=40 ;; SHA) RANKS=96 ;; SHB) RANKS=224 ;;
  *) echo "this script knows the SH graph of classes S, W, A, B; got $GRAPH $CLASS" >&2; exit 2 ;;
esac
NODES=$(( (RANKS + 7) / 8 ))
LEAVES=$(( (NODES + 3) / 4 ))
mkdir -p "$WORK"
CONF="$WORK/topology.conf"
: > "$CONF"
l=0
while [ $l -lt $LEAVES ]; do
  lo=$(( l * 4 )); hi=$(( lo + 3 )); [ $hi -ge $NODES ] && hi=$(( NODES - 1 ))
  echo "SwitchName=leaf$l Nodes=n[$lo-$hi]" >> "$CONF"
  l=$(( l + 1 ))
done
echo "SwitchName=spine Switches=leaf[0-$(( LEAVES - 1 ))]" >> "$CONF"
# 1. a platform and Slurm's block hostfile to trace on (the trace does not depend on it)
rankmap simulate --nodes "n[0-$(( NODES - 1 ))]" --node-info "Sockets=2 CoresPerSocket=4" \
    --topology-conf "$CONF" --profile alltoall --platform-only --out "$WORK/trace-platform" >/dev/null
# 2. the time-independent trace of one run
rm -rf "$WORK/trace" "$WORK/trace_files"
smpirun -trace-ti --cfg=tracing/filename:"$WORK/trace" \
    -platform "$WORK/trace-platform/platform.xml" -hostfile "$WORK/trace-platform/hostfile.0.block" \
    -np "$RANKS" --cfg=smpi/simulate-computation:no --log=root.thresh:error \
    "$NAS_BIN/dt" "$RANKS" "$CLASS" "$GRAPH" | grep -E "Verification|Time in seconds"
# 3. the trace as a profile
rm -f "$WORK/store/npb-dt-$GRAPH-$CLASS".*
rankmap profile import --format smpi-ti "$WORK/trace" --name "npb-dt-$GRAPH-$CLASS" \
    --store "$WORK/store"
# 4. every placement, simulated (DT's main returns 1 after a verified run)
rankmap simulate --nodes "n[0-$(( NODES - 1 ))]" --node-info "Sockets=2 CoresPerSocket=4" \
    --topology-conf "$CONF" --store "$WORK/store" --profile "npb-dt-$GRAPH-$CLASS" \
    --algorithm topdown+n10 --ok-exit 1 --out "$WORK/sim" -- "$NAS_BIN/dt" "$RANKS" "$CLASS" "$GRAPH"
