"""What the prolog and its worker say to each other (standard library only).

The prolog (root) starts ``slurm_plugin.lifecycle.job_worker`` as the job's user and writes
the job's :class:`WorkerRequest` on its standard input, as one JSON object: what to
compute (profile, mode, algorithm, time budget, the refusal if any) and the worker's
resource limits.  The worker reads it with :func:`read_request`, which checks it field by
field; a request that is not what this protocol says becomes the worker's fallback
status.  The request travels on stdin, not in the environment, because the worker's
environment is the job's (Slurm's variables, which the Slurm readers use): the request
is one typed document, read once, that nothing of the job can shadow and that the
commands the worker runs do not inherit.

The worker never writes into the job directory: that directory belongs to root and the user
cannot add anything to it (see "Threat model" in the README).  Instead the worker
sends every file it computed, then its status, on its standard output as one stream:

.. code-block:: text

    rankmap-worker 1\\n
    file <name> <nbytes>\\n<nbytes bytes>      (any number; <name> a FILE_NAMES key)
    status <nbytes>\\n<nbytes bytes of JSON>   (last)

and the prolog writes each file into the job directory as it arrives (owned by the
job's user, mode 0600), refusing unknown names, a repeated name, a header that is not
one of these lines and more than ``max_bytes`` in all: the worker runs as the user, who
could make it say anything (ptrace), so nothing it sends is trusted beyond what the
user could write into their own files.

:class:`WorkerStatus` is the status both sides use, checked field by field on
reading (:meth:`WorkerStatus.from_json`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import BinaryIO

from mapper.errors import RankmapError

from ..common.job_conventions import FILE_NAMES, JOB_MODES, valid_job_id
from .limits import DEFAULT_MEMORY

MAGIC = b"rankmap-worker 1\n"
#: longest header line (``file <name> <nbytes>``) the reader accepts
MAX_HEADER = 200
#: longest status JSON; the notes and reasons it carries are short
MAX_STATUS_BYTES = 1 << 20
#: longest request JSON (its profile and refusal are short: the SPANK plugin takes
#: options of 200 characters); it fits the pipe the prolog fills before the worker starts
MAX_REQUEST_BYTES = 1 << 16


class ProtocolError(RankmapError, ValueError):
    """The worker's output is not what this protocol says."""


@dataclass(frozen=True)
class WorkerStatus:
    """The outcome of one job's computation.

    ``applied``: rankmap's placement is in the files; ``kept_default``: nothing beat
    Slurm's placement, which the job keeps (the report says so); otherwise ``reason``
    says why the job got no placement.  ``from_worker`` is set by the prolog, never
    read from the stream.
    """

    applied: bool
    reason: str | None = None
    n: int | None = None
    objective: float | None = None
    seconds: float | None = None
    kept_default: bool = False
    notes: tuple[str, ...] = ()
    traceback: str | None = None
    from_worker: bool = field(default=False, compare=False)

    def to_json(self) -> str:
        out = asdict(self)
        del out["from_worker"]
        out["notes"] = list(self.notes)
        return json.dumps(out)

    @classmethod
    def from_json(cls, text: str) -> WorkerStatus:
        """Parse and check the worker's status; :class:`ProtocolError` names the field."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProtocolError(f"worker status is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ProtocolError("worker status is not a JSON object")
        unknown = set(raw) - {f for f in cls.__dataclass_fields__
                              if f != "from_worker"}
        if unknown:
            raise ProtocolError(f"worker status has unknown fields {sorted(unknown)}")
        if not isinstance(raw.get("applied"), bool):
            raise ProtocolError("worker status: 'applied' must be true or false")
        kwargs = {"applied": raw["applied"],
                  "kept_default": _typed(raw, "kept_default", bool, False),
                  "reason": _typed(raw, "reason", str, None),
                  "traceback": _typed(raw, "traceback", str, None),
                  "n": _typed(raw, "n", int, None),
                  "objective": _number(raw, "objective"),
                  "seconds": _number(raw, "seconds")}
        notes = raw.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(x, str) for x in notes):
            raise ProtocolError("worker status: 'notes' must be a list of strings")
        return cls(notes=tuple(notes), **kwargs)

    def received(self) -> WorkerStatus:
        """This status as the prolog read it from a worker."""
        return replace(self, from_worker=True)


def _typed(raw: dict, key: str, kind: type, default: object) -> object:
    value = raw.get(key, default)
    if value is None or value is default:
        return value
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"worker status: {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _number(raw: dict, key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise ProtocolError(f"worker status: {key!r} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class WorkerRequest:
    """What the prolog asks its worker to compute for one job.

    ``job_id``: the Slurm job; ``profile``, ``mode`` (one of
    :data:`~slurm_plugin.common.job_conventions.JOB_MODES`), ``algorithm``, ``time_limit``
    (seconds) and ``refusal`` (why the job may not be mapped: it gets its mode's
    fallback report) are the job's :class:`~slurm_plugin.site.request.MappingRequest`;
    ``memory_bytes`` (``RLIMIT_AS``) and ``cpu_seconds`` (``RLIMIT_CPU``) the worker's
    limits (0: none; :mod:`slurm_plugin.lifecycle.limits`), which it sets before
    anything else.
    """

    job_id: str | None
    profile: str
    mode: str
    algorithm: str
    time_limit: float
    refusal: str | None = None
    memory_bytes: int = DEFAULT_MEMORY
    cpu_seconds: int = 0

    def to_bytes(self) -> bytes:
        """The request as the worker reads it; :class:`ProtocolError` when it is over
        :data:`MAX_REQUEST_BYTES`."""
        data = json.dumps(asdict(self)).encode("utf-8")
        if len(data) > MAX_REQUEST_BYTES:
            raise ProtocolError(f"the worker's request is {len(data)} bytes, over the "
                                f"protocol's {MAX_REQUEST_BYTES}")
        return data

    @classmethod
    def from_json(cls, data: str | bytes) -> WorkerRequest:
        """Parse and check a request; :class:`ProtocolError` names the field."""
        try:
            raw = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"worker request is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ProtocolError("worker request is not a JSON object")
        fields = set(cls.__dataclass_fields__)
        if set(raw) - fields:
            raise ProtocolError(f"worker request has unknown fields {sorted(set(raw) - fields)}")
        if fields - set(raw):
            raise ProtocolError(f"worker request lacks the fields {sorted(fields - set(raw))}")
        job_id = raw["job_id"]
        if job_id is not None and not valid_job_id(job_id):
            raise ProtocolError(f"worker request: 'job_id' must be a Slurm job id, got "
                                f"{job_id!r}")
        for key in ("profile", "algorithm"):
            if not isinstance(raw[key], str) or not raw[key].strip():
                raise ProtocolError(f"worker request: {key!r} must be a non-empty string, "
                                    f"got {raw[key]!r}")
        if raw["mode"] not in JOB_MODES:
            raise ProtocolError(f"worker request: 'mode' must be one of "
                                f"{', '.join(JOB_MODES)}, got {raw['mode']!r}")
        time_limit = raw["time_limit"]
        if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or \
                not math.isfinite(time_limit) or time_limit <= 0:
            raise ProtocolError(f"worker request: 'time_limit' must be a positive number of "
                                f"seconds, got {time_limit!r}")
        if raw["refusal"] is not None and not isinstance(raw["refusal"], str):
            raise ProtocolError(f"worker request: 'refusal' must be a string or null, got "
                                f"{raw['refusal']!r}")
        for key in ("memory_bytes", "cpu_seconds"):
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ProtocolError(f"worker request: {key!r} must be a whole number >= 0 "
                                    f"(0: no limit), got {value!r}")
        return cls(**{**raw, "time_limit": float(time_limit)})


# -- the worker's side ---------------------------------------------------------------

def read_request(stream: BinaryIO) -> WorkerRequest:
    """The request on ``stream`` (the worker's stdin, read to its end, at most
    :data:`MAX_REQUEST_BYTES`); :class:`ProtocolError` when it is not one."""
    data = stream.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise ProtocolError(f"worker request over {MAX_REQUEST_BYTES} bytes")
    if not data:
        raise ProtocolError("no worker request on standard input")
    return WorkerRequest.from_json(data)


def write_stream(out: BinaryIO, files: dict[str, str], status: WorkerStatus) -> None:
    """Send ``files`` (FILE_NAMES keys → text, in order) and then ``status``."""
    out.write(MAGIC)
    for name, text in files.items():
        if name not in FILE_NAMES:
            raise ValueError(f"unknown job file {name!r}")
        data = text.encode("utf-8", "backslashreplace")
        out.write(f"file {name} {len(data)}\n".encode("ascii"))
        out.write(data)
    data = status.to_json().encode("utf-8")
    out.write(f"status {len(data)}\n".encode("ascii"))
    out.write(data)
    out.flush()


# -- the prolog's side ---------------------------------------------------------------

def parse_header(line: bytes, seen: set[str], budget: int) -> tuple[str, str | None, int]:
    """``(kind, name, nbytes)`` of one header line (without its newline): kind ``file``
    (name a FILE_NAMES key not ``seen`` before) or ``status`` (name None).  ``budget``
    is what the stream may still send."""
    try:
        words = line.decode("ascii").split(" ")
    except UnicodeDecodeError:
        raise ProtocolError("worker output: a header line is not ASCII") from None
    if len(words) == 3 and words[0] == "file":
        kind, name, size = words
        if name not in FILE_NAMES:
            raise ProtocolError(f"worker output: unknown file {name[:40]!r}")
        if name in seen:
            raise ProtocolError(f"worker output: file {name!r} sent twice")
    elif len(words) == 2 and words[0] == "status":
        kind, name, size = "status", None, words[1]
    else:
        raise ProtocolError(f"worker output: unexpected header {line[:60]!r}")
    if not size.isdigit():
        raise ProtocolError(f"worker output: bad size in {line[:60]!r}")
    nbytes = int(size)
    limit = min(budget, MAX_STATUS_BYTES) if kind == "status" else budget
    if nbytes > limit:
        raise ProtocolError(f"worker output: {kind} {name or ''} of {nbytes} bytes is over "
                            f"the limit ({limit} bytes left; [prolog] max_output_bytes)")
    return kind, name, nbytes
