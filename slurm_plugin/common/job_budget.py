"""One job's time budget and how the prolog's parts share it.

The budget is the request's seconds (``--rankmap-time``, a rule's ``time_limit``, else
``[solver] time_limit``).  The solver gets :data:`SOLVER_SHARE` of it, the rest absorbing
the overshoot of its own stop checks, so a result that arrives is within the budget
(the solver's own split of its share is :mod:`mapper.solve.budget`).  The prolog waits
for a worker slot, and lets the worker run, up to the budget plus ``[prolog]
grace_seconds`` (the worker's start-up, reading the profile, writing the files); the
worker's CPU limit is the same, rounded up.  Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Share of the time budget given to the solver.
SOLVER_SHARE = 0.9


def cpu_limit(watchdog_seconds: float) -> int:
    """The worker's CPU limit (``RLIMIT_CPU``) under a watchdog of that many seconds."""
    return math.ceil(watchdog_seconds)


@dataclass(frozen=True)
class JobBudget:
    """``seconds``: the job's budget; ``grace_seconds``: what the prolog allows beyond it."""

    seconds: float
    grace_seconds: float = 0.0

    @property
    def solver_seconds(self) -> float:
        """What the solver may use."""
        return self.seconds * SOLVER_SHARE

    @property
    def watchdog_seconds(self) -> float:
        """How long the prolog waits for a worker slot, then for the worker."""
        return self.seconds + self.grace_seconds

    @property
    def cpu_seconds(self) -> int:
        """The worker's CPU limit (``RLIMIT_CPU``)."""
        return cpu_limit(self.watchdog_seconds)
