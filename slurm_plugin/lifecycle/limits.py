"""Resource limits of the per-job worker (standard library only).

The prolog runs as root and starts ``slurm_plugin.lifecycle.job_worker`` as the job's user; the
worker reads files the user may control (``file:`` profiles) and runs the solver.  The
readers check declared sizes before allocating, but the worker also caps itself, so a
bug or an input nobody thought of ends in a ``MemoryError`` (reported as the worker's
normal fallback status line) instead of eating the batch host's memory.  The limits
come with the worker's request (:class:`slurm_plugin.lifecycle.worker_protocol.WorkerRequest`,
from ``[prolog] worker_memory_bytes`` and the time budget):

``memory_bytes``
    address space (``RLIMIT_AS``) in bytes; ``0``: no limit (default 4 GiB).
``cpu_seconds``
    CPU time (``RLIMIT_CPU``) in seconds; ``0``: no limit (the default).  The kernel
    kills a process that reaches it (SIGXCPU/SIGKILL), so it should be above the
    prolog's wall-clock watchdog (time budget + grace): it only catches a worker that
    the watchdog somehow missed.

Limits are set soft = hard, so the worker cannot raise them again; a limit already in
force that is lower (a site's ``ulimit``) is kept.
"""

from __future__ import annotations

import resource

DEFAULT_MEMORY = 4 << 30


def _apply(which: int, value: int | None) -> int | None:
    """Set soft = hard = value (never above a limit already in force); the soft limit."""
    if value is not None:
        for current in resource.getrlimit(which):
            if current != resource.RLIM_INFINITY:
                value = min(value, current)
        resource.setrlimit(which, (value, value))
    soft = resource.getrlimit(which)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def apply_worker_limits(memory_bytes: int = DEFAULT_MEMORY,
                        cpu_seconds: int = 0) -> dict[str, int | None]:
    """Apply RLIMIT_AS (``memory_bytes``) and RLIMIT_CPU (``cpu_seconds``) to this
    process; 0 sets no limit.

    Returns the limits now in force, ``{"memory": bytes, "cpu_seconds": s}`` (None: no
    limit).  Raises ValueError for a negative value (the request's parser refuses them).
    """
    for name, value in (("memory_bytes", memory_bytes), ("cpu_seconds", cpu_seconds)):
        if value < 0:
            raise ValueError(f"{name}={value!r}: must not be negative")
    return {"memory": _apply(resource.RLIMIT_AS, memory_bytes or None),
            "cpu_seconds": _apply(resource.RLIMIT_CPU, cpu_seconds or None)}
