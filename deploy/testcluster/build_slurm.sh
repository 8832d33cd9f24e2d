#!/usr/bin/env bash
# Build a Slurm from a source archive into a per-version prefix, once.
#
#   deploy/testcluster/build_slurm.sh ARCHIVE [PREFIX]
#
# ARCHIVE is an upstream slurm-X.Y.Z.tar.gz (e.g. ../shared/vendor/slurm-25.11.7.tar.gz);
# PREFIX defaults to ${RANKMAP_SLURM_ROOT:-/opt/rankmap-slurm}/X.Y.Z.  A finished build
# leaves PREFIX/.rankmap-built (holding the archive's sha256): a second run with the
# same archive prints the prefix and returns at once.  Needs root for apt (libmunge-dev
# libjson-c-dev libyaml-dev libhwloc-dev); configure flags as in ../shared/vendor/README.md
# (--enable-multiple-slurmd so several `slurmd -N` share one host), plus what makes a
# test build fast: -O0, no static libraries (libtool would compile every file twice),
# no slurmrestd.  About 3 minutes on 2 cores (7 with -O2 and static libraries); a
# build for production wants the distribution's flags instead.  The last line printed
# is the prefix.
set -euo pipefail
archive=${1:?usage: build_slurm.sh ARCHIVE [PREFIX]}
archive=$(readlink -f "$archive")
[ -f "$archive" ] || { echo "build_slurm.sh: no archive $archive" >&2; exit 2; }
base=$(basename "$archive")
version=${base#slurm-}; version=${version%.tar.gz}; version=${version%.tar.bz2}
case "$version" in [0-9]*.[0-9]*.[0-9]*) ;; *)
    echo "build_slurm.sh: cannot read a version X.Y.Z from $base" >&2; exit 2;; esac
prefix=${2:-${RANKMAP_SLURM_ROOT:-/opt/rankmap-slurm}/$version}
# the stamp names the archive and this recipe: a change of flags rebuilds
recipe="O0-shared-norestd"
sum="$(sha256sum "$archive" | cut -d' ' -f1) $recipe"
# one build per prefix at a time (two test sessions starting together)
mkdir -p "$(dirname "$prefix")"
exec 9>"$prefix.lock"
flock 9
if [ -f "$prefix/.rankmap-built" ] && [ "$(cat "$prefix/.rankmap-built")" = "$sum" ] \
   && [ -x "$prefix/sbin/slurmctld" ]; then
    echo "build_slurm.sh: $version already built in $prefix" >&2
    echo "$prefix"; exit 0
fi
need=()
for p in libmunge-dev libjson-c-dev libyaml-dev libhwloc-dev munge gcc make; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -qq --no-install-recommends "${need[@]}"; }
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/rankmap-slurm-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xzf "$archive" -C "$work"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
log="$work/build.log"
echo "build_slurm.sh: building Slurm $version into $prefix (log kept on failure)" >&2
rm -rf "$prefix"
if ! ( cd "$src" && ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" \
         --with-json --with-yaml --enable-multiple-slurmd --disable-debug \
         --disable-static --disable-slurmrestd CFLAGS="-O0 -pipe" >"$log" 2>&1 \
       && make -j"$(nproc)" >>"$log" 2>&1 && make install >>"$log" 2>&1 ); then
    cp "$log" "/tmp/rankmap-slurm-build-$version.log"
    tail -30 "$log" >&2
    echo "build_slurm.sh: build failed; log in /tmp/rankmap-slurm-build-$version.log" >&2
    exit 1
fi
echo "$sum" > "$prefix/.rankmap-built"
echo "$prefix"
