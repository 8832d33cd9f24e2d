"""The prolog's side of the worker: start it, read its stream, stop it (standard library
only).

:func:`run_worker_process` starts the worker in a session of its own with its request
already waiting on its stdin, reads the stream of
:mod:`slurm_plugin.lifecycle.worker_protocol` from its stdout under a wall-clock deadline
and a byte budget, hands every file to a :class:`FileSink` as it arrives (root writing
into the job directory), keeps the last few KiB of its stderr, and at the end — normal
exit, time-out or broken stream alike — ends every process left in the worker's
session (:func:`slurm_plugin.common.processes.end_session`).
"""

from __future__ import annotations

import fcntl
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..common.processes import end_session
from .worker_protocol import MAGIC, MAX_HEADER, ProtocolError, WorkerStatus, parse_header

_CHUNK = 1 << 16
#: stderr kept for the reason of a failed worker
_STDERR_TAIL = 4096
#: a pipe holds at least this much (one page) whatever the system's pipe limits
_PIPE_MIN = 4096


class FileSink(Protocol):
    def create(self, name: str) -> int:
        """A new file for the job file ``name`` (a FILE_NAMES key), open for writing."""


class WorkerTimeout(Exception):
    pass


@dataclass
class _Pipes:
    """stdout read on demand under a deadline; stderr drained meanwhile (its tail kept)."""

    proc: subprocess.Popen
    deadline: float
    stderr_tail: bytes = b""

    def __post_init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        self.sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        self.out_open = self.err_open = True

    def read_out(self) -> bytes:
        """The next stdout bytes; b"" at its end.  WorkerTimeout past the deadline."""
        while self.out_open:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout
            for key, _ in self.sel.select(left):
                data = os.read(key.fileobj.fileno(), _CHUNK)
                if key.data == "err":
                    if not data:
                        self._close("err")
                    self.stderr_tail = (self.stderr_tail + data)[-_STDERR_TAIL:]
                    continue
                if not data:
                    self._close("out")
                    return b""
                return data
        return b""

    def _close(self, which: str) -> None:
        self.sel.unregister(self.proc.stdout if which == "out" else self.proc.stderr)
        setattr(self, f"{which}_open", False)

    def drain_err(self) -> None:
        """Whatever stderr still holds, until its end or the deadline (short)."""
        while self.err_open and time.monotonic() < self.deadline:
            events = self.sel.select(max(0.0, min(0.5, self.deadline - time.monotonic())))
            if not events:
                return
            for key, _ in events:
                data = os.read(key.fileobj.fileno(), _CHUNK)
                if not data:
                    self._close("err" if key.data == "err" else "out")
                elif key.data == "err":
                    self.stderr_tail = (self.stderr_tail + data)[-_STDERR_TAIL:]

    def close(self) -> None:
        self.sel.close()


def _read_stream(pipes: _Pipes, sink: FileSink, max_bytes: int) -> WorkerStatus:
    buf = bytearray()
    seen: set[str] = set()
    budget = max_bytes

    def fill(need: int) -> None:
        while len(buf) < need:
            data = pipes.read_out()
            if not data:
                raise ProtocolError("worker output ended early")
            buf.extend(data)

    while len(buf) < len(MAGIC) and MAGIC.startswith(bytes(buf)):
        data = pipes.read_out()
        if not data:
            raise ProtocolError("worker output ended early")
        buf.extend(data)
    if bytes(buf[:len(MAGIC)]) != MAGIC:
        raise ProtocolError(f"worker output does not start with {MAGIC!r}: "
                            f"{bytes(buf[:40])!r}")
    del buf[:len(MAGIC)]
    while True:
        while b"\n" not in buf[:MAX_HEADER]:
            if len(buf) >= MAX_HEADER:
                raise ProtocolError(f"worker output: header too long: {bytes(buf[:60])!r}")
            data = pipes.read_out()
            if not data:
                raise ProtocolError("worker output ended before its status")
            buf.extend(data)
        end = buf.index(b"\n")
        kind, name, nbytes = parse_header(bytes(buf[:end]), seen, budget)
        del buf[:end + 1]
        budget -= nbytes
        if kind == "status":
            fill(nbytes)
            return WorkerStatus.from_json(bytes(buf[:nbytes]).decode("utf-8", "replace"))
        seen.add(name)
        fd = sink.create(name)
        try:
            left = nbytes
            while left:
                if not buf:
                    fill(1)
                view = memoryview(buf)[:left]
                written = os.write(fd, view)
                view.release()
                del buf[:written]
                left -= written
        finally:
            os.close(fd)


def filled_pipe(data: bytes) -> int:
    """The read end of a pipe that already holds ``data`` and its end (the write end is
    closed): a child reads it at its own pace, and the prolog never waits on a child
    that does not read.  The pipe is sized to hold ``data`` first (Linux
    ``F_SETPIPE_SZ``; at most ``/proc/sys/fs/pipe-max-size`` unless root)."""
    read_fd, write_fd = os.pipe()
    try:
        if len(data) > _PIPE_MIN:
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, len(data))
        os.set_blocking(write_fd, False)
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd


def run_worker_process(argv: Sequence[str], env: Mapping[str, str], sink: FileSink,
                       timeout: float, max_bytes: int, stdin_bytes: bytes | None = None,
                       **popen_kwargs: object) -> tuple[WorkerStatus | None, str]:
    """Run the worker; ``(its status or None, why not)``.

    ``stdin_bytes`` (the worker's request) are its standard input, in a pipe filled
    before it starts (:func:`filled_pipe`); None: /dev/null.  None when it overran
    ``timeout`` seconds (wall clock, from its start), sent a broken stream or more than
    ``max_bytes``, or exited without a status; the string then says which, with the
    tail of its stderr.  Every process of its session is ended before this returns.
    """
    start = time.monotonic()
    stdin = subprocess.DEVNULL if stdin_bytes is None else filled_pipe(stdin_bytes)
    try:
        proc = subprocess.Popen(list(argv), env=dict(env), stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, **popen_kwargs)
    finally:
        if stdin_bytes is not None:
            os.close(stdin)
    pipes = _Pipes(proc, start + timeout)
    status, why = None, ""
    try:
        status = _read_stream(pipes, sink, max_bytes)
        pipes.drain_err()
    except WorkerTimeout:
        why = f"the computation did not finish within {timeout:g} s"
    except ProtocolError as exc:
        pipes.drain_err()
        why = f"the computation failed: {exc}"
    finally:
        end_session(proc.pid)
        pipes.close()
        proc.stdout.close()
        proc.stderr.close()
        code = proc.wait()
    if status is None and not why.startswith("the computation did not finish"):
        tail = pipes.stderr_tail.decode("utf-8", "replace").strip()[-300:]
        why = f"{why} (exit {code}){': ' + tail if tail else ''}"
    return (status.received() if status else None), why
