#!/usr/bin/env bash
# Debian packages rankmap needs (run as root): Python with venv and headers and a C
# compiler (to build the Cython extension in a virtual environment), and what the local
# test cluster and end-to-end tests use.  Idempotent.  A policy-rc.d stops apt's
# postinst scripts from starting the daemons.  gfortran: Debian's mpif90 compiles the
# Fortran program the preload libraries' do-no-harm tests run.
set -euo pipefail
PKGS=(python3 python3-venv python3-dev
      munge slurmctld slurmd slurm-client libslurm-dev gcc libc6-dev make
      openmpi-bin libopenmpi-dev hwloc gfortran)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-debian-packages: all present"
    exit 0
fi
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod +x "$policy"
    created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
