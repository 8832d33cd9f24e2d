#!/bin/sh
# Open MPI launch agent for the network-namespace bench (plm_rsh_agent).
#
# mpirun calls it as ssh would be called: "rsh_agent.sh HOST COMMAND...", where COMMAND
# is one shell string (the orted command line with its own quoting). Node HOST is the
# network namespace "${RMB_PREFIX}HOST" (RMB_PREFIX defaults to "rmb-"); the command runs
# there in a fresh UTS namespace whose hostname is HOST, so that Open MPI, which tells
# nodes apart by hostname, sees one host per namespace (and never uses shared memory
# between two of them).
set -eu
if [ "$#" -lt 2 ]; then
    echo "usage: $0 HOST COMMAND..." >&2
    exit 2
fi
host=$1
shift
ns="${RMB_PREFIX:-rmb-}$host"
if [ ! -e "/run/netns/$ns" ]; then
    echo "$0: no network namespace $ns for host $host" >&2
    exit 255
fi
# $0 of the inner shell is the hostname, $1 the command string, run as ssh would run it.
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && eval "exec $1"' "$host" "$*"
