#!/bin/sh
# NPB DT (SimGrid's Debian source package, built by fetch_nas.sh) through the whole
# loop a site would use: trace it in simulation, import the trace as a rankmap profile,
# place with that profile, simulate every placement.
#
# Usage: sh bench/benefit/nas_dt.sh [CLASS] [GRAPH] [WORK]   (default B SH /tmp/rankmap-dt)
#   needs: rankmap on PATH, smpirun, NAS binaries in $NAS_BIN (default /tmp/rankmap-nas/bin)
#   TREE=2|3 (environment): leaves under one spine (default for S-B), or 4 leaves per
#   middle switch under a top switch (default for C and D: the 3-level tree)
#   SKIP="cyclic scrambled" (environment): placements not to simulate (large classes)
#
# DT's graph fixes the rank count: SH (shuffle) has sources × (log2(sources) + 2) nodes,
# sources = 4, 8, 16, 32, 64, 128 for classes S, W, A, B, C, D
# (S: 16, W: 40, A: 96, B: 224, C: 512, D: 1152 ranks).
# The machine: nodes of 2 sockets × 4 cores, 4 nodes per leaf switch, uplinks 4:1
# oversubscribed at every level (rankmap simulate's defaults).
#
# Memory: DT's feature arrays are num_samples × 4 doubles per graph node (class C 226 MB,
# D 1.8 GB), far beyond this machine for 512 or 1152 ranks.  The simulations therefore
# run with SMPI's automatic shared malloc (--cfg=smpi/auto-shared-malloc-thresh): every
# allocation above 64 KiB is folded onto one shared block, so the arrays' contents are
# garbage but their sizes, and so every message, are DT's (the timing depends on sizes
# only; DT still reports its verification, which does not check the contents' sums).
# With huge pages (HUGEPAGES=/mnt/huge, a hugetlbfs mount with a few free 2 MiB pages:
#   mkdir -p /mnt/huge; mount -t hugetlbfs -o mode=0777 none /mnt/huge
#   echo 64 > /proc/sys/vm/nr_hugepages)
# the folding costs 100x fewer page faults: class C took 97 CPU s instead of ~15 min.
# Class D (1152 ranks) also needs vm.max_map_count above 1M (sysctl -w
# vm.max_map_count=16777216): its trace took 1637 CPU s and 1.4 GB here, the replays
# seconds.
set -eu
CLASS=${1:-B}
GRAPH=${2:-SH}
WORK=${3:-/tmp/rankmap-dt}
NAS_BIN=${NAS_BIN:-/tmp/rankmap-nas/bin}
[ -x "$NAS_BIN/dt" ] || { echo "no $NAS_BIN/dt: run sh bench/benefit/fetch_nas.sh first" >&2; exit 2; }
case "$GRAPH$CLASS" in
  SHS) RANKS=16 ;; SHW) RANKS=40 ;; SHA) RANKS=96 ;; SHB) RANKS=224 ;;
  SHC) RANKS=512 ;; SHD) RANKS=1152 ;;
  *) echo "this script knows the SH graph of classes S, W, A, B, C, D; got $GRAPH $CLASS" >&2; exit 2 ;;
esac
case "$CLASS" in C|D) TREE=${TREE:-3} ;; *) TREE=${TREE:-2} ;; esac
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
if [ "$TREE" = 3 ]; then
  MIDS=$(( (LEAVES + 3) / 4 ))
  m=0
  while [ $m -lt $MIDS ]; do
    lo=$(( m * 4 )); hi=$(( lo + 3 )); [ $hi -ge $LEAVES ] && hi=$(( LEAVES - 1 ))
    echo "SwitchName=mid$m Switches=leaf[$lo-$hi]" >> "$CONF"
    m=$(( m + 1 ))
  done
  echo "SwitchName=top Switches=mid[0-$(( MIDS - 1 ))]" >> "$CONF"
else
  echo "SwitchName=spine Switches=leaf[0-$(( LEAVES - 1 ))]" >> "$CONF"
fi
# smpirun with the shared-malloc options for the large classes (a wrapper, so that
# rankmap simulate runs every placement the same way)
SMPIRUN=smpirun
case "$CLASS" in
  C|D)
    SMPIRUN="$WORK/smpirun-shared"
    if [ -n "${HUGEPAGES:-}" ]; then
      OPTS="--cfg=smpi/auto-shared-malloc-thresh:65536 --cfg=smpi/shared-malloc-blocksize:2097152 --cfg=smpi/shared-malloc-hugepage:$HUGEPAGES"
    else
      OPTS="--cfg=smpi/auto-shared-malloc-thresh:65536 --cfg=smpi/shared-malloc-blocksize:67108864"
    fi
    printf '#!/bin/sh\nexec smpirun %s "$@"\n' "$OPTS" > "$SMPIRUN"
    chmod +x "$SMPIRUN" ;;
esac
SKIP_ARGS=""
for s in ${SKIP:-}; do SKIP_ARGS="$SKIP_ARGS --skip $s"; done
# 1. a platform and Slurm's block hostfile to trace on (the trace does not depend on it)
rankmap simulate --nodes "n[0-$(( NODES - 1 ))]" --node-info "Sockets=2 CoresPerSocket=4" \
    --topology-conf "$CONF" --profile alltoall --platform-only --out "$WORK/trace-platform" >/dev/null
# 2. the time-independent trace of one run
rm -rf "$WORK/trace" "$WORK/trace_files"
"$SMPIRUN" -trace-ti --cfg=tracing/filename:"$WORK/trace" \
    -platform "$WORK/trace-platform/platform.xml" -hostfile "$WORK/trace-platform/hostfile.0.block" \
    -np "$RANKS" --cfg=smpi/simulate-computation:no --log=root.thresh:error \
    "$NAS_BIN/dt" "$RANKS" "$CLASS" "$GRAPH" | grep -E "Verification|Time in seconds" || true
# 3. the trace as a profile
rm -f "$WORK/store/npb-dt-$GRAPH-$CLASS".*
rankmap profile import --format smpi-ti "$WORK/trace" --name "npb-dt-$GRAPH-$CLASS" \
    --store "$WORK/store"
# 4. every placement, simulated (DT's main returns 1 after a verified run).  Classes C
# and D replay the trace instead (REPLAY=1 for the others, REPLAY=0 to run DT again):
# DT's own computation on its feature arrays is real CPU work even when not simulated
# (class D: about 2 TB of memory traffic per run), while a replay sends the same
# messages in seconds; the replayed time is the whole run's (the traced run's Simulated
# time on the block hostfile), not DT's own timer.
case "$CLASS" in C|D) REPLAY=${REPLAY:-1} ;; *) REPLAY=${REPLAY:-0} ;; esac
# shellcheck disable=SC2086  # SKIP_ARGS is a list of words
if [ "$REPLAY" = 1 ]; then
  rankmap simulate --nodes "n[0-$(( NODES - 1 ))]" --node-info "Sockets=2 CoresPerSocket=4" \
      --topology-conf "$CONF" --store "$WORK/store" --profile "npb-dt-$GRAPH-$CLASS" \
      --algorithm topdown+n10 $SKIP_ARGS --out "$WORK/sim" --replay "$WORK/trace"
else
  rankmap simulate --nodes "n[0-$(( NODES - 1 ))]" --node-info "Sockets=2 CoresPerSocket=4" \
      --topology-conf "$CONF" --store "$WORK/store" --profile "npb-dt-$GRAPH-$CLASS" \
      --algorithm topdown+n10 --ok-exit 1 --smpirun "$SMPIRUN" $SKIP_ARGS --out "$WORK/sim" \
      -- "$NAS_BIN/dt" "$RANKS" "$CLASS" "$GRAPH"
fi
