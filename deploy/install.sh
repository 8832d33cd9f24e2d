#!/usr/bin/env bash
# Site install of rankmap on a Slurm node (run as root on every node, or on a shared
# prefix).  Job users run the TaskProlog and the prolog's worker, so everything is put
# where they can read and execute it:
#
#   PREFIX (/opt/rankmap)      a virtual environment of PYTHON (/usr/bin/python3) with
#                              rankmap installed (not editable), world-readable
#   PREFIX/lib                 the SPANK plugin, built against this node's Slurm headers,
#                              librankmap_bind.so (the rank binder) and librankmap_record.so
#                              (the profile recorder), neither linked against an MPI, and
#                              librankmap (PREFIX/include/rankmap.h) when mpicc exists
#   /etc/rankmap               rankmap.toml (0644, only if there is none) and profiles/
#   /var/log/rankmap           the prolog log (0750 root:adm, or 0700 root without adm)
#   /run/rankmap               the output directory (0755 root), recreated at boot by
#   /etc/tmpfiles.d/rankmap.conf
#
# then checks that an unprivileged user can import rankmap and prints the slurm.conf
# and plugstack.conf lines with the installed paths.  Idempotent.
#
#   bash deploy/install.sh [--prefix DIR] [--python PYTHON] [--prefix-lib DIR]
#        [--etc-dir DIR] [--log-dir DIR] [--run-dir DIR] [--tmpfiles-dir DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
prefix=/opt/rankmap
python=/usr/bin/python3
libdir=
etcdir=/etc/rankmap
logdir=/var/log/rankmap
rundir=/run/rankmap
tmpfilesdir=/etc/tmpfiles.d
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        --prefix-lib) libdir="$2"; shift 2 ;;
        --etc-dir) etcdir="$2"; shift 2 ;;
        --log-dir) logdir="$2"; shift 2 ;;
        --run-dir) rundir="$2"; shift 2 ;;
        --tmpfiles-dir) tmpfilesdir="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 2; }
for d in "$prefix" "$etcdir" "$logdir" "$rundir" "$tmpfilesdir" ${libdir:+"$libdir"}; do
    case "$d" in /*) ;; *) echo "install.sh: $d: use an absolute path" >&2; exit 2 ;; esac
done
libdir="${libdir:-$prefix/lib}"
umask 022
say() { echo "install.sh: $*"; }

# blocked PATH: prints the first of PATH (resolved) and the directories above it that
# other users cannot use (a file needs r-x, a directory above it --x); status 1 if any
blocked() {
    local p mode
    p="$(readlink -f "$1")" || { echo "$1"; return 1; }
    mode="$(stat -L -c %a "$p")"
    (( (8#$mode & 5) == 5 )) || { echo "$p (mode $mode)"; return 1; }
    while [ "$p" != / ]; do
        p="$(dirname "$p")"
        mode="$(stat -c %a "$p")"
        (( 8#$mode & 1 )) || { echo "$p (mode $mode)"; return 1; }
    done
}

command -v "$python" >/dev/null || { echo "install.sh: no $python (--python)" >&2; exit 2; }
if ! where="$(blocked "$(command -v "$python")")"; then
    echo "install.sh: $python is not usable by job users: $where is not open to others." >&2
    echo "install.sh: choose an interpreter they can run, e.g. --python /usr/bin/python3" >&2
    exit 2
fi

# 1. the virtual environment, rankmap installed from a copy of the source tree (so
#    that the build leaves nothing in the checkout)
if [ -x "$prefix/bin/python" ] && "$prefix/bin/python" -c 'import sys' 2>/dev/null; then
    say "reusing the virtual environment $prefix"
else
    say "creating the virtual environment $prefix with $python ($("$python" --version 2>&1))"
    "$python" -m venv "$prefix" || {
        echo "install.sh: '$python -m venv' failed (on Debian: apt-get install python3-venv)" >&2
        exit 1; }
fi
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
tar -C "$here" --exclude=./.git --exclude=./.venv --exclude=./build \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache \
    --exclude=.hypothesis --exclude=./bench/results --exclude='./mapper/*.so' \
    --exclude='./mapper/*/*.so' --exclude='./mapper/*/_*.c' -cf - . | tar -C "$src" -xf -
say "installing rankmap into $prefix (compiles the solver's extension)"
"$prefix/bin/python" -m pip install --quiet "$src"

# 2. the SPANK plugin
make -s -C "$here/slurm_plugin/spank" OUT="$libdir"
chmod -R a+rX "$prefix" "$libdir"
say "SPANK plugin $libdir/rankmap_spank.so"
# 2a. librankmap_bind (LD_PRELOAD: binds each rank of any launcher to its cores; needs
#     no MPI).  The TaskProlog looks for it in PREFIX/lib unless [launchers] bind_library
#     names another place.
make -s -C "$here/slurm_plugin/bind" OUT="$libdir"
chmod a+rX "$libdir/librankmap_bind.so"
say "rank binder $libdir/librankmap_bind.so"
if [ "$libdir" != "$prefix/lib" ]; then
    say "set [launchers] bind_library = \"$libdir/librankmap_bind.so\" in $etcdir/rankmap.toml"
fi
# 2a. the recorder (librankmap_record.so: an MPI program's communication, whatever the
#     MPI), linked against no MPI, like the binder
make -s -C "$here/slurm_plugin/record" OUT="$libdir"
chmod a+rX "$libdir/librankmap_record.so"
say "recorder $libdir/librankmap_record.so"
if [ "$libdir" != "$prefix/lib" ]; then
    say "set [record] library = \"$libdir/librankmap_record.so\" in $etcdir/rankmap.toml"
fi
# 2b. librankmap (rankmap_comm: the reordered communicator for srun-launched jobs),
#     built with the MPI's compiler wrapper when there is one
if command -v mpicc >/dev/null; then
    make -s -C "$here/slurm_plugin/userlib/librankmap" OUT="$libdir" INCDIR="$prefix/include"
    chmod -R a+rX "$libdir" "$prefix/include"
    say "librankmap $libdir/librankmap.so (.a), header $prefix/include/rankmap.h"
else
    say "no mpicc on PATH: librankmap not built (install MPI and rerun to get it)"
fi

# 3. configuration, log, output directory
install -d -m 0755 "$etcdir" "$etcdir/profiles"
if [ -e "$etcdir/rankmap.toml" ]; then
    say "kept the existing $etcdir/rankmap.toml"
else
    sed -e "s|^output_dir = \"/run/rankmap\"|output_dir = \"$rundir\"|" \
        -e "s|^log_file = \"/var/log/rankmap/rankmap.log\"|log_file = \"$logdir/rankmap.log\"|" \
        -e "s|^stores = \\[\"/etc/rankmap/profiles\"\\]|stores = [\"$etcdir/profiles\"]|" \
        -e "s|^fallback_dir = \"/run/rankmap-fallback\"|fallback_dir = \"$rundir-fallback\"|" \
        "$here/deploy/rankmap.toml.example" > "$etcdir/rankmap.toml"
    chmod 0644 "$etcdir/rankmap.toml"
    say "wrote $etcdir/rankmap.toml (from deploy/rankmap.toml.example)"
fi
if getent group adm >/dev/null; then
    install -d -m 0750 -o root -g adm "$logdir"
    say "log directory $logdir (0750 root:adm)"
else
    install -d -m 0700 -o root -g root "$logdir"
    say "log directory $logdir (0700 root)"
fi
install -d -m 0755 -o root -g root "$rundir"
install -d -m 0755 "$tmpfilesdir"
printf '# rankmap output directory (rankmap.toml [general] output_dir); /run is emptied at boot\nd %s 0755 root root -\n' \
    "$rundir" > "$tmpfilesdir/rankmap.conf"
chmod 0644 "$tmpfilesdir/rankmap.conf"
say "output directory $rundir (0755 root), recreated at boot by $tmpfilesdir/rankmap.conf"

# 4. can a job user run it?
if id nobody >/dev/null 2>&1 && command -v runuser >/dev/null; then
    if ! runuser -u nobody -- "$prefix/bin/python" -c 'import slurm_plugin, mapper' ; then
        echo "install.sh: user nobody cannot run $prefix/bin/python: check the modes of" \
             "$prefix and the directories above it" >&2
        exit 1
    fi
    say "checked: an unprivileged user (nobody) can run rankmap from $prefix"
fi

# 5. a configuration outside /etc/rankmap: slurmd runs the prolog, epilog and task
#    scripts with its own environment, so each gets a wrapper in PREFIX/sbin that names
#    the file, and slurm.conf points at the wrappers
entry="$prefix/bin"
config_note=
if [ "$etcdir" != /etc/rankmap ]; then
    install -d -m 0755 "$prefix/sbin"
    for tool in rankmap-prolog rankmap-epilog rankmap-task-prolog rankmap-task-epilog; do
        printf '#!/bin/sh\n# deploy/install.sh --etc-dir: the site configuration is not in /etc/rankmap\nRANKMAP_CONFIG=%s/rankmap.toml\nexport RANKMAP_CONFIG\nexec %s/bin/%s "$@"\n' \
            "$etcdir" "$prefix" "$tool" > "$prefix/sbin/$tool"
        chmod 0755 "$prefix/sbin/$tool"
    done
    entry="$prefix/sbin"
    say "wrappers $entry/rankmap-{prolog,epilog,task-prolog,task-epilog} (RANKMAP_CONFIG=$etcdir/rankmap.toml)"
    config_note="    (the config is not in /etc/rankmap: the wrappers above name it; the rankmap"$'\n'"     command takes --config $etcdir/rankmap.toml or RANKMAP_CONFIG)"$'\n'
fi
cat <<MSG

rankmap installed.  Add to slurm.conf (all nodes), then restart slurmctld and slurmd:

    Prolog=$entry/rankmap-prolog
    Epilog=$entry/rankmap-epilog
    TaskProlog=$entry/rankmap-task-prolog
    TaskEpilog=$entry/rankmap-task-epilog
    PrologFlags=Alloc
    PlugStackConfig=/etc/slurm/plugstack.conf

and to /etc/slurm/plugstack.conf (max_time caps --rankmap-time at submission):

    optional $libdir/rankmap_spank.so max_time=30

${config_note}Check the site configuration with:  $prefix/bin/rankmap config check
MSG
