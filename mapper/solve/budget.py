"""How map_processes shares one time limit among its parts, and what a step costs.

One place for the budget split inside the solver: the algorithm's share when a baseline
is polished after it, the polish's share and floor, the probe that sizes it, the share
of the phase timer, and the measured costs that turn a time into a search depth or a
number of rounds (measured on this project's 2-core machines; ``bench/bench_budgets.py``
checks the whole against the limit).  Other modules read these as attributes of this
module, so a test may set one for a call.  :class:`Budget` is one call's clock: its
limit, its start and the reserve kept for the final evaluations of J; every part of
map_processes asks it what is left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

#: Share of the time limit the algorithm gets when a baseline is polished after it.
ALGORITHM_SHARE = 0.8

#: Within a time limit, the polish of the baseline may take this share of the time the
#: algorithm used (the same 80/20 split as the budget), but never less than
#: POLISH_MIN_SECONDS, so that where it needs less (from Slurm's block placement of
#: a 3D stencil: 0.3 s CPU at 2^15 ranks, 0.75 s at 2^16, 2.4 s at 2^17 here) it still
#: runs to its local optimum.
POLISH_SHARE = (1 - ALGORITHM_SHARE) / ALGORITHM_SHARE
POLISH_MIN_SECONDS = 1.0

#: Share of a profile's volume in exchange rounds above which candidates are not
#: chosen by phase time (:func:`~mapper.solve.never_worse.phase_timer`).
ROUNDS_SHARE = 0.5

#: The polish's first slice, as a share of the smallest polish budget
#: (POLISH_MIN_SECONDS), after which it goes on only if, at the rate of that slice, it
#: could still beat the algorithm.
POLISH_PROBE = 0.25

#: Arcs one N_C^d breadth-first ball may scan per second of budget.  The compiled
#: search reads the clock every 256 ranks; 256 balls of this size take about 5 % of
#: the budget at the ~2-4 ns per arc measured here.
BALL_ARCS_PER_SECOND = 50_000

#: Seconds per elementary step of the compiled kernels (an arc read with its distance
#: look-up on a 3-level tree), about 5-15 ns measured on this machine's cores; used
#: only to decide whether a stretch the kernels cannot interrupt fits the budget.
SECONDS_PER_STEP = 15e-9

#: Share of the remaining budget one uninterruptible kernel stretch may take.
STRETCH_SHARE = 0.25

#: Seconds per edge of one evaluation of J (mapper.objectives.qap.evaluate), measured
#: unloaded (~35 ns at 2 M edges); map_processes keeps this much per evaluation.
EVAL_SECONDS_PER_EDGE = 60e-9


@dataclass(frozen=True)
class Budget:
    """One map_processes call's time: ``limit`` seconds (None: unbounded) from ``start``
    (``time.perf_counter``), of which ``reserve`` is kept for the final evaluations of
    J.  The parts ask it what is left; none of them does the arithmetic again."""

    limit: float | None
    start: float
    reserve: float = 0.0

    @classmethod
    def starting(cls, limit: float | None, edges: int, evaluations: int) -> Budget:
        """A budget starting now that keeps ``evaluations`` evaluations of J over
        ``edges`` edges (:data:`EVAL_SECONDS_PER_EDGE` each, at most half the limit)."""
        reserve = (0.0 if limit is None
                   else min(0.5 * limit, evaluations * edges * EVAL_SECONDS_PER_EDGE))
        return cls(limit, time.perf_counter(), reserve)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self, share: float = 1.0) -> float | None:
        """Seconds left of ``share`` of the usable time (the limit less the reserve),
        negative once it is spent; None without a limit."""
        if self.limit is None:
            return None
        return share * (self.limit - self.reserve) - self.elapsed()

    def deadline(self) -> float | None:
        """The ``perf_counter`` time at which the usable time ends; None without a limit."""
        return None if self.limit is None else self.start + self.limit - self.reserve

    def spent(self) -> bool:
        """Whether the usable time is over (never without a limit)."""
        left = self.left()
        return left is not None and left <= 0

    def keeping(self, reserve: float) -> Budget:
        """The same clock keeping ``reserve`` seconds instead."""
        return replace(self, reserve=reserve)
