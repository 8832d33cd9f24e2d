#!/usr/bin/env bash
# Site install of rankmap on a Slurm node (run as root on every node, or on a shared
# prefix).  Installs the Python package, builds the SPANK plugin against this node's
# Slurm headers, writes an example /etc/rankmap/rankmap.toml if there is none, and
# prints the slurm.conf and plugstack.conf lines to add.
#
#   bash deploy/install.sh [--prefix-lib DIR] [--python PYTHON]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
libdir=/usr/local/lib/rankmap
python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix-lib) libdir="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 2; }
"$python" -m pip install --quiet "$here"
bindir="$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
make -s -C "$here/slurm_plugin/spank" OUT="$libdir"
install -d -m 0755 /etc/rankmap /etc/rankmap/profiles
[ -e /etc/rankmap/rankmap.toml ] || install -m 0644 "$here/deploy/rankmap.toml.example" /etc/rankmap/rankmap.toml
cat <<MSG
rankmap installed.  Add to slurm.conf (all nodes), then restart slurmctld and slurmd:

    Prolog=$bindir/rankmap-prolog
    Epilog=$bindir/rankmap-epilog
    TaskProlog=$bindir/rankmap-task-prolog
    PrologFlags=Alloc
    PlugStackConfig=/etc/slurm/plugstack.conf

and to /etc/slurm/plugstack.conf (max_time caps --rankmap-time at submission):

    optional $libdir/rankmap_spank.so max_time=30

Check the site configuration with:  $bindir/rankmap config check
MSG
