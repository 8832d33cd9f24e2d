"""At most ``[prolog] max_workers`` computations at once on a node (standard library only).

One worker is capped at ``worker_memory_bytes`` of address space, but a batch host
that starts many jobs at once would run as many workers.  Each computation therefore
holds one of ``max_workers`` slots: an exclusive ``flock`` on the file
``.worker-slot.<k>`` in the output directory (root's, created with ``O_NOFOLLOW`` through
the directory's descriptor).  The kernel releases a lock when its holder dies, so a
killed prolog never keeps a slot.  A job that finds every slot taken waits, polling,
up to a given time and then gets :class:`NoWorkerSlot` (its prolog keeps Slurm's
placement and says why).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from mapper.errors import RankmapError

SLOT_PREFIX = ".worker-slot."
_POLL = 0.05
#: slots when ``worker_memory_bytes`` is 0 (no per-worker cap to divide the memory by)
UNCAPPED_SLOTS = 2


def slot_count(max_workers: int, worker_memory_bytes: int,
               memory_bytes: int | None = None) -> int:
    """``[prolog] max_workers``, or for 0 as many workers as half the node's memory
    (``memory_bytes``, else read from the system) holds at ``worker_memory_bytes`` each,
    at least 1."""
    if max_workers > 0:
        return max_workers
    if worker_memory_bytes <= 0:
        return UNCAPPED_SLOTS
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            return UNCAPPED_SLOTS
    return max(1, memory_bytes // (2 * worker_memory_bytes))


class NoWorkerSlot(RankmapError, RuntimeError):
    """Every slot stayed taken for the whole wait."""


def _open_slot(dir_fd: int, k: int) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    return os.open(f"{SLOT_PREFIX}{k}", flags, 0o600, dir_fd=dir_fd)


@contextmanager
def worker_slot(dir_fd: int, slots: int, wait: float) -> Iterator[float]:
    """Hold one of ``slots`` slots in the directory open as ``dir_fd`` while the block
    runs; yields the seconds waited for it.  Raises :class:`NoWorkerSlot` after
    ``wait`` seconds of finding all taken."""
    start = time.monotonic()
    fds = [_open_slot(dir_fd, k) for k in range(slots)]
    held = None
    try:
        while held is None:
            for fd in fds:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = fd
                    break
                except BlockingIOError:
                    continue
            if held is None:
                if time.monotonic() - start >= wait:
                    raise NoWorkerSlot(
                        f"{slots} rankmap computation(s) already running on this node "
                        f"for {wait:g} s ([prolog] max_workers = {slots})")
                time.sleep(_POLL)
        yield time.monotonic() - start
    finally:
        for fd in fds:
            os.close(fd)  # closing releases the lock
