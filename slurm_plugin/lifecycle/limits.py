"""Resource limits of the per-job worker (standard library only).

The prolog runs as root and starts ``slurm_plugin.lifecycle.job_worker`` as the job's user; the
worker reads files the user may control (``file:`` profiles) and runs the solver.  The
readers check declared sizes before allocating, but the worker also caps itself, so a
bug or an input nobody thought of ends in a ``MemoryError`` (reported as the worker's
normal fallback status line) instead of eating the batch host's memory:

``RANKMAP_WORKER_MEMORY``
    address space (``RLIMIT_AS``) in bytes; absent or empty: 4 GiB; ``0`` or
    ``unlimited``: no limit.
``RANKMAP_WORKER_CPU_SECONDS``
    CPU time (``RLIMIT_CPU``) in seconds; absent, empty, ``0`` or ``unlimited``: no
    limit.  The kernel kills a process that reaches it (SIGXCPU/SIGKILL), so it should
    be above the prolog's wall-clock watchdog (time budget + grace): it only catches a
    worker that the watchdog somehow missed.

Limits are set soft = hard, so the worker cannot raise them again; a limit already in
force that is lower (a site's ``ulimit``) is kept.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping

MEMORY_ENV = "RANKMAP_WORKER_MEMORY"
CPU_ENV = "RANKMAP_WORKER_CPU_SECONDS"
DEFAULT_MEMORY = 4 << 30
DEFAULT_CPU_SECONDS: int | None = None


def _parse(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in ("unlimited", "infinity", "0"):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a whole number or 'unlimited'") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r}: must not be negative")
    return value


def _apply(which: int, value: int | None) -> int | None:
    """Set soft = hard = value (never above a limit already in force); the soft limit."""
    if value is not None:
        for current in resource.getrlimit(which):
            if current != resource.RLIM_INFINITY:
                value = min(value, current)
        resource.setrlimit(which, (value, value))
    soft = resource.getrlimit(which)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def apply_worker_limits(env: Mapping[str, str] | None = None) -> dict[str, int | None]:
    """Apply RLIMIT_AS and RLIMIT_CPU from ``env`` (default ``os.environ``) to this process.

    Returns the limits now in force, ``{"memory": bytes, "cpu_seconds": s}`` (None: no
    limit).  Raises ValueError for a malformed value, since the prolog sets them from a
    validated configuration.
    """
    env = os.environ if env is None else env
    memory = _parse(env, MEMORY_ENV, DEFAULT_MEMORY)
    cpu = _parse(env, CPU_ENV, DEFAULT_CPU_SECONDS)
    return {"memory": _apply(resource.RLIMIT_AS, memory),
            "cpu_seconds": _apply(resource.RLIMIT_CPU, cpu)}
