"""Ending a child together with everything it started (standard library only).

Killing only the direct child of a time-out leaves its children running: a Slurm
command that is a site's wrapper script (and its ``sleep``), or whatever the job's
user made the worker start.  So children that may hang are started in their own
process group (Slurm commands: :func:`slurm_plugin.slurm.slurm_commands.run_slurm`) or their
own session (the worker: :mod:`slurm_plugin.lifecycle.worker_process`), and are ended as a whole:

* :func:`end_group`: SIGKILL to the process group;
* :func:`end_session`: SIGKILL to every process of the session, found in ``/proc``
  (a grandchild that started a process group of its own is still in the session),
  repeated until none is left, so one that forks while being killed is caught too.

:func:`run_relaying_signals` is the other direction: a wrapper that must outlive its
child (to remove a temporary file afterwards) passes the signals it gets on to it.

A process that calls ``setsid()`` itself leaves the session; only Slurm's own process
tracking (cgroups) can follow that, and the worker's code never does it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

#: rounds of SIGKILL over a session before giving up (each round waits a little)
_ROUNDS = 50


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (Linux ``/proc``; none elsewhere).

    Complexity: O(processes on the machine): one ``stat`` read each.
    """
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold anything, even ")"
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            out.append(int(entry))
    return out


def end_group(pgid: int) -> None:
    """SIGKILL to the process group ``pgid`` (gone already: nothing to do)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def end_session(sid: int) -> int:
    """SIGKILL every process of session ``sid`` until none is left; how many were
    signalled in all.  Zombies (children of a killed parent, not yet reaped by init)
    still count as members for a moment, hence the rounds."""
    signalled: set[int] = set()
    for _ in range(_ROUNDS):
        alive = [pid for pid in session_pids(sid) if not _zombie(pid)]
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                signalled.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return len(signalled)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return True  # gone
    return data[data.rfind(b")") + 2:][:1] == b"Z"


#: what a launcher wrapper passes on to the launcher it runs
RELAYED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                   signal.SIGUSR2)


def run_relaying_signals(argv: Sequence[str], *, executable: str | None = None,
                         env: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` (``executable`` if given, else ``argv[0]``), passing on the
    :data:`RELAYED_SIGNALS` this process gets; its exit status, ``128 + N`` when signal
    N ended it (the shell's convention)."""
    child = subprocess.Popen(list(argv), executable=executable,
                             env=dict(env) if env is not None else None)
    for sig in RELAYED_SIGNALS:
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    status = child.wait()
    return status if status >= 0 else 128 - status
