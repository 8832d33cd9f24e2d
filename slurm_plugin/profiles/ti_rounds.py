"""Exchange rounds of a trace's point-to-point messages, aligned across ranks.

A code that exchanges small messages in rounds -- every rank sends to its neighbours,
waits for theirs, then sends the next round's (NPB MG's borders, one dimension after
the other) -- waits, round after round, for each round's farthest message
(:func:`mapper.objectives.phase_time.round_latency`).  A rank's own count of its rounds does not
name them: at NPB MG's coarsest levels most ranks hold no points and skip rounds, so rank
r's tenth round is another rank's twentieth.  Here rounds are numbered by Lamport's
logical clocks over the trace's matched messages: a rank's clock moves on when it
waits for a message after sending (its round is over) and jumps past the clock its
sender sent at; a message belongs to round = its sender's clock when sent.  Ranks that
skip rounds thus rejoin at the round their neighbours are in -- as soon as they
receive: a rank that sends in a round but had nothing to send or receive in the one
before cannot know it skipped it, and its messages count one round early.  Collective
calls align every clock (each one synchronises in the model).

The input is per rank the sequence of its point-to-point *events* (what
:func:`slurm_plugin.profiles.smpi_ti.import_ti_phases` reads from a trace's lines):
``("send", dst)``, ``("irecv", src)``, ``("recv", src)``, ``("wait", src)`` (a wait
for one request; a ``src`` without an open ``irecv`` from it is a send's request and
does not block), ``("waitall",)`` (every open ``irecv``), ``("sendrecv", dst, src)``
and ``("collective",)``.  Receives are matched to sends in order per (source,
receiver), as MPI does for one tag and communicator.

Reference: L. Lamport, "Time, clocks, and the ordering of events in a distributed
system", CACM 21(7), 1978.

Complexity: O(events): each rank's events are replayed once, a blocked rank resumed
when the message it waits for is sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

Event = tuple  # ("send", dst) | ("irecv", src) | ("recv", src) | ("wait", src) | …


def exchange_rounds(events: Sequence[Sequence[Event]]) -> list[list[int]] | None:
    """Per rank, the round of each of its ``send`` (and ``sendrecv``) events, in order;
    None when the events cannot be replayed to the end (a receive no send matches, or
    a collective some rank never calls): a trace the alignment cannot follow has no
    rounds, which is no error.  O(events)."""
    n = len(events)
    pos = [0] * n
    clock = [0] * n
    sent = [False] * n        # sent since the rank's clock last moved on
    half = [False] * n        # the send half of the rank's current sendrecv is posted
    open_recv: list[list[int]] = [[] for _ in range(n)]
    inbox: dict[tuple[int, int], deque[int]] = {}   # (src, dst) -> senders' clocks
    waiting_for: list[int | None] = [None] * n      # the source a blocked rank needs
    in_collective = [False] * n
    arrived: list[int] = []
    rounds: list[list[int]] = [[] for _ in range(n)]
    ready = deque(range(n))

    def take(r: int, src: int) -> bool:
        queue = inbox.get((src, r))
        if not queue:
            waiting_for[r] = src
            return False
        c = queue.popleft()
        clock[r] = max(clock[r] + (1 if sent[r] else 0), c + 1)
        sent[r] = False
        waiting_for[r] = None
        return True

    def post(r: int, dst: int) -> None:
        rounds[r].append(clock[r])
        inbox.setdefault((r, dst), deque()).append(clock[r])
        sent[r] = True
        if waiting_for[dst] == r:
            ready.append(dst)

    while ready:
        r = ready.popleft()
        if in_collective[r]:
            continue
        todo = events[r]
        while pos[r] < len(todo):
            ev = todo[pos[r]]
            kind = ev[0]
            if kind == "send":
                post(r, ev[1])
            elif kind == "irecv":
                open_recv[r].append(ev[1])
            elif kind == "recv":
                if not take(r, ev[1]):
                    break
            elif kind == "wait":
                if ev[1] in open_recv[r]:
                    if not take(r, ev[1]):
                        break
                    open_recv[r].remove(ev[1])
            elif kind == "waitall":
                while open_recv[r] and take(r, open_recv[r][0]):
                    open_recv[r].pop(0)
                if open_recv[r]:
                    break
            elif kind == "sendrecv":
                if not half[r]:
                    post(r, ev[1])
                    half[r] = True
                if not take(r, ev[2]):
                    break
                half[r] = False
            elif kind == "collective":
                pos[r] += 1
                in_collective[r] = True
                arrived.append(r)
                if len(arrived) < n:
                    break
                top = max(clock[q] + (1 if sent[q] else 0) for q in range(n))
                for q in range(n):
                    clock[q], sent[q], in_collective[q] = top, False, False
                ready.extend(q for q in arrived if q != r)
                arrived.clear()
                continue
            pos[r] += 1
    if any(pos[r] < len(events[r]) or in_collective[r] for r in range(n)):
        return None
    return rounds
