#!/usr/bin/env bash
# A Debian 13 (trixie) root for the Debian 13 test lane (tests/e2e/test_debian13.py),
# built once on a Debian 12 or 13 machine, as root.
#
#   deploy/testcluster/build_trixie_root.sh [DIR]
#
# DIR: $RANKMAP_TRIXIE_ROOT, else /var/tmp/trixie when that already holds a Debian 13
# root, else /var/tmp/rankmap-trixie.  A missing root is made with
# `debootstrap --variant=minbase trixie` from the Debian mirror this machine's apt uses
# (/etc/apt/sources.list, sources.list.d/*.list or *.sources; $RANKMAP_DEBIAN_MIRROR
# overrides; deb.debian.org otherwise) into DIR.new, renamed to DIR when complete.
# Then, inside it, deploy/install-debian-packages.sh installs the packages the project
# needs (Python with venv and headers, gcc, make, munge, Slurm 24.11, Open MPI 5.0.7,
# hwloc, libslurm-dev) plus ca-certificates, and the host's extra CA certificates
# (/usr/local/share/ca-certificates) are added to its store, so that pip inside it
# passes the same TLS proxy as the host's (the lane passes the host's PIP_* variables).
# /proc, /sys and /dev are bound only inside a private mount namespace: nothing stays
# mounted.  Idempotent: a root whose packages are all there is left alone (seconds).
# 3.5-4.5 minutes and 1.3 GB cold on 2 cores.  The last line printed is DIR.
#
# Exit status 75 when debootstrap or apt-get cannot fetch (no network, no mirror): the
# lane skips with the reason printed on stderr; any other failure is an error.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
say() { echo "build_trixie_root: $*" >&2; }
cannot() { say "$*"; exit 75; }
[ "$(id -u)" = 0 ] || { say "run as root"; exit 2; }

is_trixie() { [ -f "$1/etc/debian_version" ] && case "$(cat "$1/etc/debian_version")" in
    13.*|trixie*) true ;; *) false ;; esac; }
if [ $# -ge 1 ]; then root=$1
elif [ -n "${RANKMAP_TRIXIE_ROOT:-}" ]; then root=$RANKMAP_TRIXIE_ROOT
elif is_trixie /var/tmp/trixie; then root=/var/tmp/trixie
else root=/var/tmp/rankmap-trixie
fi
case "$root" in /*) ;; *) say "$root: use an absolute path"; exit 2 ;; esac

# the Debian mirror of this machine's apt sources (not security, not third parties)
mirror() {
    [ -n "${RANKMAP_DEBIAN_MIRROR:-}" ] && { echo "$RANKMAP_DEBIAN_MIRROR"; return; }
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {
                   u = $i; s = $(i + 1); break }
                   if (u !~ /security/ && s ~ /^(bookworm|trixie|stable|testing)(-updates)?$/ &&
                       s !~ /-updates/) { print u; exit } }' "$f")
        [ -n "$uri" ] && { echo "$uri"; return; }
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk 'BEGIN { RS = ""; FS = "\n" }
                   { u = ""; s = ""; for (i = 1; i <= NF; i++) {
                       if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, a, " "); u = a[1] }
                       if ($i ~ /^Suites:/) s = $i }
                     if (u != "" && u !~ /security/ &&
                         s ~ /[ \t](bookworm|trixie|stable|testing)([ \t]|$)/) { print u; exit } }' "$f")
        [ -n "$uri" ] && { echo "$uri"; return; }
    done
    echo http://deb.debian.org/debian
}

# run a command inside the root with /proc, /sys, /dev bound in a private mount
# namespace (gone when the command ends)
in_root() {
    unshare --mount --propagation private -- /bin/sh -c '
        r=$1; shift
        mount --rbind /proc "$r/proc" && mount --rbind /sys "$r/sys" &&
        mount --rbind /dev "$r/dev" && exec chroot "$r" "$@"' sh "$root" \
        /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
if ! is_trixie "$root"; then
    [ -e "$root" ] && { say "$root exists and is not a Debian 13 root: move it away"; exit 2; }
    command -v debootstrap >/dev/null || cannot "debootstrap not installed (apt-get install debootstrap): cannot build $root"
    new="$root.new"
    if [ -e "$new" ]; then
        grep -q " $new[/ ]" /proc/mounts && { say "$new has mounts: unmount them first"; exit 2; }
        rm -rf --one-file-system "$new"
    fi
    m=$(mirror)
    say "debootstrap --variant=minbase trixie $new $m (about a minute)"
    if ! debootstrap --variant=minbase trixie "$new" "$m" > "$root.debootstrap.log" 2>&1; then
        grep -q " $new[/ ]" /proc/mounts || rm -rf --one-file-system "$new"
        cannot "debootstrap trixie from $m failed: $(grep -E '^(E|W):' "$root.debootstrap.log" | tail -n 3 | tr '\n' ' ')(log $root.debootstrap.log)"
    fi
    mv "$new" "$root"
fi

# what the project installs on a Debian machine (its own list), plus the CA store
install -D -m 0755 "$here/deploy/install-debian-packages.sh" "$root/usr/local/sbin/rankmap-debian-packages"
cp -f /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
if ! out=$(in_root /bin/bash -c 'bash /usr/local/sbin/rankmap-debian-packages &&
        { dpkg-query -W -f="\${Status}" ca-certificates 2>/dev/null | grep -q "install ok installed" ||
          apt-get install -y -qq --no-install-recommends ca-certificates; }' 2>&1); then
    echo "$out" | tail -n 20 >&2
    if echo "$out" | grep -qE "^(E|W): (Failed to fetch|Unable to fetch|Could not resolve|Temporary failure)|Unable to locate package"; then
        cannot "apt-get in $root cannot fetch: $(echo "$out" | grep -E '^(E|W):' | tail -n 2 | tr '\n' ' ')"
    fi
    say "installing the packages in $root failed"; exit 1
fi
echo "$out" | grep -v '^$' | tail -n 1 >&2
# the host's extra CA certificates (a TLS-intercepting proxy's): pip inside trusts them
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    changed=0
    for c in /usr/local/share/ca-certificates/*; do
        cmp -s "$c" "$root/usr/local/share/ca-certificates/$(basename "$c")" || {
            cp -rf "$c" "$root/usr/local/share/ca-certificates/"; changed=1; }
    done
    [ "$changed" = 0 ] || in_root update-ca-certificates >/dev/null
fi
say "Debian $(cat "$root/etc/debian_version") root ready: $root ($(du -sh --one-file-system "$root" 2>/dev/null | cut -f1))"
echo "$root"
