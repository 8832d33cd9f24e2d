"""Running a piece of a test as another (unprivileged) user, for root's tests."""

from __future__ import annotations

import json
import os
from collections.abc import Callable


def as_user(uid: int, fn: Callable[[], object]) -> object:
    """``fn()`` in a forked child running as ``uid`` (group ``uid``, no supplementary
    groups); its JSON-able result, or ``"ExceptionName: message"`` when it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                result = json.dumps(fn())
            except Exception as exc:
                result = json.dumps(f"{type(exc).__name__}: {exc}")
            os.write(w, result.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        result = fh.read()
    os.waitpid(pid, 0)
    return json.loads(result)
