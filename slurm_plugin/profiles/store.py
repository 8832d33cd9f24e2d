"""The profile store: named communication profiles in site directories.

A profile is ``NAME.toml`` beside a matrix file::

    ranks = 64
    units = "bytes"
    description = "LAMMPS 3D domain decomposition, 64 ranks"
    source = "Open MPI pml_monitoring, 2026-11-01"
    file = "lammps-3d.mtx"        # .mtx, .graph, .csv or .npz, relative to the .toml

A profile measured in several runs lists the matrix of each run in ``samples``
(``rankmap profile import PREFIX --name NAME --store DIR --add-sample`` appends one)::

    file = "hpcc-8.mtx"                       # the profile rankmap maps with
    samples = ["hpcc-8.mtx", "hpcc-8.s1.mtx", "hpcc-8.s2.mtx"]   # one matrix per run

Each sample must be a file in the store with the profile's rank count.  The plan then
applies rankmap's placement only when it beats Slurm's default under every sample
(:mod:`slurm_plugin.profiles.samples`); errors in ``samples`` name the ``.toml``'s line.

A profile measured by phase (a bulk-synchronous code's steps: CG's row reductions,
an FFT's transposes) lists one matrix per phase, in order, in ``phases``; they must add
up to ``file``'s matrix (within a relative 1e-9 of its largest volume)::

    file = "cg-256.mtx"                               # the sum: what rankmap maps with
    phases = ["cg-256.p0.mtx", "cg-256.p1.mtx"]       # one matrix per phase, in order

The job then gets a :class:`mapper.model.phased_graph.PhasedGraph`: the mapper, J and the
never-worse rule see ``file``'s graph exactly as without the key; the phases (every
rank synchronising in each) are there for :func:`mapper.objectives.phase_time.phase_time`.
``paces`` (optional, one value per phase) marks latency-bound phases
(:attr:`mapper.model.phased_graph.Phase.pace`: pipelines ``"sweep"``, ``"stages"``; exchange
rounds ``"rounds"``; ``""`` for the others), and ``repeats`` (optional, a positive
number per phase, default 1) how often each recurs (the phases times their repeats
add up to ``file``), as ``rankmap profile import`` writes them from a trace::

    phases = ["lu-64.p0.mtx", "lu-64.p1.mtx"]
    paces = ["", "sweep"]
    repeats = [1, 4]
Each phase must be a file in the store with the profile's rank count; errors name the
``.toml`` (and the line of the key).  ``phases`` and ``samples`` together are refused
for now (which run would the phases belong to?).

A profile whose matrix is one of the generated patterns also names that generator,
size-free (``rankmap profile import`` writes it when
:func:`slurm_plugin.profiles.pattern_match.match_generator` finds one)::

    ranks = 512
    file = "lammps-3d.mtx"
    generator = "stencil3d:periodic"   # jobs of other task counts get stencil3d at theirs

A job of exactly ``ranks`` tasks gets the recorded matrix (and its samples); a job of
another size gets the generator's graph at its own size, and the report says so
("profile NAME recorded at 512 ranks, used as stencil3d:periodic at 4096").  The value
must parse as a generator spec without dimensions and generate at 16 ranks (a power
of two and a square, which every family accepts); errors name the ``.toml`` and key.

A **mesh** entry (``--comm-profile=mesh:NAME``, :mod:`slurm_plugin.modes.mesh_job`) says
``kind = "mesh"``: its file is an application mesh of any number of vertices, which the
job partitions onto its ranks, so it has no ``ranks``::

    kind = "mesh"
    description = "cooling plate, 2.1M cells"
    file = "plate.graph"          # METIS fmt 10/11/100/110/111 carries w(v) and c(v)
    weights = "plate.weights"     # optional, for a file without them: 'w [c]' per vertex

It is read by :func:`mapper.io.mesh_file.read_mesh` under the size limit of profiles
(``[profiles] max_file_bytes`` per file, at most a vertex per 8 bytes); a METIS file
with its own vertex weights and a ``weights`` file together are refused.  ``kind`` is
``"graph"`` (the default: a communication profile of ``ranks`` ranks) or ``"mesh"``;
a graph entry is not a mesh and a mesh entry is not a communication profile, and asking
for either as the other names the entry.

The prolog runs as root and the name comes from the user, so names are resolved only
inside the configured stores: a name is ``[A-Za-z0-9_+-][A-Za-z0-9._+-]*``, and the
files it leads to must stay inside the store directory after resolving symlinks.  The
``.toml`` itself is read as its matrix is: a regular file of at most ``[profiles]
max_file_bytes``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tomllib

from mapper import CommGraph, GraphError
from mapper.errors import RankmapError
from mapper.io.graph_file import read_graph
from mapper.io.mesh_file import read_mesh
from mapper.io.regular_file import FileTooLarge, NotARegularFile, read_regular_file
from mapper.io.text_lines import text_pieces
from mapper.mesh.mesh import Mesh
from mapper.model.phased_graph import PACES, SUM_RTOL, make_phase, sum_mismatch, with_phases

from ..common.job_conventions import PROFILE_NAME
from .generators import GeneratorError, generate, is_generator_spec, parse_spec
from .samples import with_samples


class ProfileError(RankmapError, ValueError):
    """A profile that cannot be used for this job; the message says which and why."""


NAME = PROFILE_NAME
TOML_KEYS = {"ranks": int, "units": str, "description": str, "source": str, "file": str,
             "kind": str, "weights": str, "samples": list, "runs": list,
             "generator": str, "phases": list, "paces": list, "repeats": list}
#: ``[[runs]]``: where each sample came from (slurm_plugin.profiles.store_writer writes
#: one per recorded job): its file, the job, the date, the MPI and recorder, the volume
RUN_KEYS = {"file": str, "job": str, "date": str, "mpi": str, "recorder": str,
            "ranks": int, "volume": (int, float)}
REQUIRED = ("ranks", "file")
#: the values of ``kind``: a communication profile (default) or a mesh to partition
KINDS = ("graph", "mesh")
#: keys of a mesh entry (a mesh has no rank count; weights only there)
MESH_REQUIRED = ("file",)
MESH_ONLY = ("weights",)
#: keys a mesh entry cannot have
GRAPH_ONLY = ("samples", "runs", "generator", "phases", "paces", "repeats")
#: the size a ``generator`` value is checked at: a power of two and a square
GENERATOR_CHECK_RANKS = 16


@dataclass(frozen=True)
class ProfileInfo:
    name: str
    path: Path
    ranks: int
    file: Path
    units: str = "bytes"
    description: str = ""
    source: str = ""
    kind: str = "graph"              # "graph" or "mesh" (KINDS)
    weights: Path | None = None      # a mesh's optional weights file
    samples: tuple[Path, ...] = ()   # the matrices of the measured runs (may include file)
    runs: tuple[dict, ...] = ()      # provenance of recorded samples ([[runs]], RUN_KEYS)
    generator: str = ""              # size-free generator spec for other task counts
    phases: tuple[Path, ...] = ()    # one matrix per communication phase, in order
    paces: tuple[str, ...] = ()      # per phase its Phase.pace ("" bandwidth-bound)
    repeats: tuple[float, ...] = ()  # per phase how often it recurs (default 1 each)

    @property
    def is_mesh(self) -> bool:
        return self.kind == "mesh"


@dataclass(frozen=True, eq=False)
class GeneratedProfile(CommGraph):
    """A store profile's generator at the job's size (the job is not the size the
    profile was recorded at); ``note`` says so for the report."""

    note: str = ""


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root.resolve(strict=True))
        return True
    except (FileNotFoundError, ValueError, OSError):
        return False


class ProfileStore:
    """Profiles found in an ordered list of directories (the first match wins)."""

    def __init__(self, dirs: Sequence[str | Path], max_bytes: int | None = None) -> None:
        self.dirs = [Path(d) for d in dirs]
        self.max_bytes = max_bytes

    def list(self) -> list[ProfileInfo]:
        """The usable profiles (see :meth:`scan` for the broken ones too)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[ProfileInfo], list[tuple[str, Path, str]]]:
        """Usable profiles, and broken ones as ``(name, toml path, reason)``; a name
        shadowed by an earlier store is neither."""
        seen: dict[str, ProfileInfo] = {}
        broken: list[tuple[str, Path, str]] = []
        taken: set[str] = set()
        for d in self.dirs:
            if not d.is_dir():
                continue
            for toml in sorted(d.glob("*.toml")):
                name = toml.stem
                if name in taken:
                    continue
                taken.add(name)
                if not NAME.match(name):
                    broken.append((name, toml, "file name is not a valid profile name"))
                    continue
                try:
                    seen[name] = self._info(name, toml, d)
                except ProfileError as exc:
                    broken.append((name, toml, str(exc)))
        return list(seen.values()), broken

    def find(self, name: str) -> ProfileInfo:
        if not NAME.match(name) or ".." in name:
            raise ProfileError(f"profile name {name!r} is not allowed (letters, digits, "
                               f"'.', '_', '+', '-'; no '/' or '..')")
        for d in self.dirs:
            toml = d / f"{name}.toml"
            if toml.is_file():
                if not _inside(toml, d):
                    raise ProfileError(f"profile {name!r}: {toml} leads outside the store {d}")
                return self._info(name, toml, d)
        where = ", ".join(str(d) for d in self.dirs) or "(no stores configured)"
        raise ProfileError(f"profile {name!r} not found in the profile stores {where}")

    def _toml_text(self, toml: Path) -> str:
        """The entry's text, read as the matrices are: a regular file (a FIFO is refused,
        not waited on) of at most ``max_bytes``, newlines normalised as text mode did."""
        try:
            raw = read_regular_file(toml, self.max_bytes)
        except NotARegularFile as exc:
            raise ProfileError(f"{toml}: is {exc.kind}, not a regular file") from None
        except FileTooLarge:
            raise ProfileError(f"{toml}: larger than the limit of {self.max_bytes} bytes "
                               f"([profiles] max_file_bytes)") from None
        except OSError as exc:
            raise ProfileError(f"{toml}: cannot read: {exc}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProfileError(f"{toml}: cannot read: {exc}") from None
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def _info(self, name: str, toml: Path, store: Path) -> ProfileInfo:
        text = self._toml_text(toml)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ProfileError(f"{toml}: TOML syntax error: {exc}") from None
        _check_keys(data, TOML_KEYS, str(toml))
        kind = data.get("kind", "graph")
        if kind not in KINDS:
            raise ProfileError(f"{toml}: kind: {kind!r} is not one of {', '.join(KINDS)}")
        if kind == "mesh":
            for key in GRAPH_ONLY:
                if key in data:
                    raise ProfileError(f"{toml}: {key}: a mesh entry has no {key}")
            if "ranks" in data:
                raise ProfileError(f"{toml}: ranks: a mesh has no rank count (it is "
                                   f"partitioned onto the job's ranks); remove it")
            required = MESH_REQUIRED
        else:
            for key in MESH_ONLY:
                if key in data:
                    raise ProfileError(f"{toml}: {key}: only a mesh entry (kind = "
                                       f"\"mesh\") has it")
            required = REQUIRED
        for key in required:
            if key not in data:
                raise ProfileError(f"{toml}: missing key {key!r}")
        if kind == "graph" and data["ranks"] < 1:
            raise ProfileError(f"{toml}: ranks: must be positive")
        matrix = self._store_file(toml, store, "file", data["file"])
        weights = (self._store_file(toml, store, "weights", data["weights"])
                   if "weights" in data else None)
        samples = self._samples(toml, store, data.get("samples"), text)
        phases = self._samples(toml, store, data.get("phases"), text, key="phases")
        if samples and phases:
            raise ProfileError(f"{toml}:{_key_line(text, 'phases')}: phases: a profile "
                               f"with samples cannot have phases yet (the phases of which "
                               f"run?); keep one of the keys")
        paces = _paces(toml, data.get("paces"), len(phases), text)
        repeats = _repeats(toml, data.get("repeats"), len(phases), text)
        runs = _runs(toml, data.get("runs", []), text)
        generator = _generator(toml, data["generator"]) if "generator" in data else ""
        return ProfileInfo(name, toml, data.get("ranks", 0), matrix,
                           data.get("units", "bytes"), data.get("description", ""),
                           data.get("source", ""), kind, weights, samples, runs,
                           generator, phases, paces, repeats)

    def _samples(self, toml: Path, store: Path, value: list | None,
                 text: str, key: str = "samples") -> tuple[Path, ...]:
        """The ``samples`` (or ``phases``: ``key``) list as files inside ``store``;
        errors name the line of ``text`` (the .toml's) where the key is."""
        if value is None:
            return ()
        where = f"{toml}:{_key_line(text, key)}"
        if not value:
            what = ("one matrix file per measured run" if key == "samples"
                    else "one matrix file per phase")
            raise ProfileError(f"{where}: {key}: empty list (remove the key, or list "
                               f"{what})")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ProfileError(f"{where}: {key}[{i}]: must be a file name (str), "
                                   f"got {type(item).__name__}")
            path = self._store_file(toml, store, f"{key}[{i}]", item, where)
            if path in out:
                raise ProfileError(f"{where}: {key}[{i}]: {item!r} is listed twice")
            out.append(path)
        return tuple(out)

    @staticmethod
    def _store_file(toml: Path, store: Path, key: str, value: str,
                    where: str | None = None) -> Path:
        """``value`` (a path relative to the .toml) as a file inside ``store``; errors
        start with ``where`` (default: the .toml's path)."""
        where = where or str(toml)
        rel = Path(value)
        if rel.is_absolute() or ".." in rel.parts:
            raise ProfileError(f"{where}: {key}: must be a path inside the store")
        path = toml.parent / rel
        if not _inside(path, store):
            raise ProfileError(f"{where}: {key} {value!r} is missing or leads outside "
                               f"the store {store}")
        return path

    def load(self, name: str, ntasks: int) -> CommGraph:
        """The profile's graph, which must have exactly ``ntasks`` ranks."""
        info = self.find(name)
        if info.is_mesh:
            raise ProfileError(f"profile {name!r} is a mesh ({info.path}: kind = \"mesh\"): "
                               f"ask for it as --comm-profile=mesh:{name}")
        if info.ranks != ntasks and info.generator:
            return _resized(info, ntasks)
        if info.ranks != ntasks:
            raise ProfileError(f"profile {name!r} is for {info.ranks} ranks but the job has "
                               f"{ntasks} tasks")
        try:
            graph = read_graph(info.file, max_bytes=self.max_bytes, expected_n=ntasks)
        except GraphError as exc:
            raise ProfileError(f"profile {name!r}: {exc}") from None
        if graph.n != ntasks:
            raise ProfileError(f"profile {name!r}: matrix {info.file.name} has {graph.n} "
                               f"ranks, the job has {ntasks} tasks")
        if info.phases:
            return self._phased(info, graph, ntasks)
        if not info.samples:
            return graph
        samples = []
        for path in info.samples:
            if path == info.file:
                samples.append(graph)
                continue
            try:
                g = read_graph(path, max_bytes=self.max_bytes, expected_n=ntasks)
            except GraphError as exc:
                raise ProfileError(f"profile {name!r}: sample {exc}") from None
            if g.n != ntasks:
                raise ProfileError(f"profile {name!r}: sample {path.name} has {g.n} ranks, "
                                   f"the job has {ntasks} tasks ({info.path})")
            samples.append(g)
        return with_samples(graph, samples, [p.name for p in info.samples])


    def _phased(self, info: ProfileInfo, graph: CommGraph, ntasks: int) -> CommGraph:
        """``graph`` (entry ``info``'s ``file``) carrying the entry's phases, checked to
        add up to it; errors name the .toml.  O(Σ phase sizes)."""
        phases = []
        for path in info.phases:
            try:
                g = read_graph(path, max_bytes=self.max_bytes, expected_n=ntasks)
            except GraphError as exc:
                raise ProfileError(f"profile {info.name!r}: phase {exc} ({info.path})"
                                   ) from None
            if g.n != ntasks:
                raise ProfileError(f"profile {info.name!r}: phase {path.name} has {g.n} "
                                   f"ranks, the job has {ntasks} tasks ({info.path})")
            pace = info.paces[len(phases)] if info.paces else ""
            repeat = info.repeats[len(phases)] if info.repeats else 1.0
            phases.append(make_phase(g, repeat, name=path.name, pace=pace))
        bad = sum_mismatch(graph, phases)
        if bad > SUM_RTOL:
            raise ProfileError(f"profile {info.name!r}: the phases "
                               f"({', '.join(p.name for p in info.phases)}) do not add up "
                               f"to {info.file.name} (largest difference {bad:.3g} of its "
                               f"largest volume, more than {SUM_RTOL:g}; {info.path})")
        return with_phases(graph, phases)

    def load_mesh(self, name: str) -> tuple[Mesh, ProfileInfo]:
        """The mesh of entry ``name`` (``kind = "mesh"``) and the entry; errors name the
        entry, or the file and line (:func:`mapper.io.mesh_file.read_mesh`).  O(file
        sizes)."""
        info = self.find(name)
        if not info.is_mesh:
            raise ProfileError(f"profile {name!r} is a communication profile of "
                               f"{info.ranks} ranks, not a mesh ({info.path} has no "
                               f"kind = \"mesh\")")
        try:
            mesh = read_mesh(info.file, info.weights, max_bytes=self.max_bytes)
        except GraphError as exc:
            raise ProfileError(f"profile {name!r}: {exc}") from None
        return mesh, info


def _check_keys(table: dict, known: dict, where: str) -> None:
    """Every key of ``table`` is one of ``known`` and of its type (a bool is no
    number); errors start with ``where``."""
    for key, value in table.items():
        if key not in known:
            raise ProfileError(f"{where}: unknown key {key!r} (known: {', '.join(known)})")
        kind = known[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            name = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) \
                else kind.__name__
            raise ProfileError(f"{where}: {key}: must be {name}")


def _per_phase(toml: Path, key: str, value: list, phases: int, text: str) -> str:
    """Where a per-phase list ``key`` is in the .toml (for its errors), once it is
    checked to have one value per entry of ``phases``."""
    where = f"{toml}:{_key_line(text, key)}: {key}"
    if len(value) != phases:
        raise ProfileError(f"{where}: {len(value)} values for {phases} phases (one per "
                           f"entry of phases, in order)")
    return where


def _paces(toml: Path, value: list | None, phases: int, text: str) -> tuple[str, ...]:
    """The ``paces`` list: one :data:`mapper.model.phased_graph.PACES` value per phase ("" for a
    phase its busiest link times, "sweep" or "stages" for a latency-bound pipeline,
    "rounds" for an exchange round); errors name the .toml's line."""
    if value is None:
        return ()
    where = _per_phase(toml, "paces", value, phases, text)
    for i, pace in enumerate(value):
        if pace not in PACES:
            raise ProfileError(f"{where}[{i}]: {pace!r} is not one of "
                               f"{', '.join(repr(x) for x in PACES)}")
    return tuple(value)


def _repeats(toml: Path, value: list | None, phases: int, text: str
             ) -> tuple[float, ...]:
    """The ``repeats`` list: how often each phase recurs (a positive number per phase;
    the phases times their repeats add up to ``file``); errors name the .toml's line."""
    if value is None:
        return ()
    where = _per_phase(toml, "repeats", value, phases, text)
    for i, x in enumerate(value):
        if (isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                or x <= 0):
            raise ProfileError(f"{where}[{i}]: {x!r} is not a positive number")
    return tuple(float(x) for x in value)


def _runs(toml: Path, value: list, text: str) -> tuple[dict, ...]:
    """The ``[[runs]]`` tables, checked key by key (errors name the .toml's line)."""
    out = []
    line = _key_line(text, "[[runs]]", literal=True) if value else "?"
    for i, run in enumerate(value):
        where = f"{toml}:{line}: runs[{i}]"
        if not isinstance(run, dict):
            raise ProfileError(f"{where}: must be a [[runs]] table")
        _check_keys(run, RUN_KEYS, where)
        out.append(dict(run))
    return tuple(out)


def _generator(toml: Path, value: str) -> str:
    """A ``generator`` value checked: a size-free spec that generates at
    :data:`GENERATOR_CHECK_RANKS` ranks; errors name the .toml and the key."""
    value = value.strip()
    try:
        if parse_spec(value).dims is not None:
            raise GeneratorError("give it without dimensions (it serves every task count)")
        generate(value, GENERATOR_CHECK_RANKS)
    except GeneratorError as exc:
        raise ProfileError(f"{toml}: generator: {value!r}: {exc}") from None
    return value


def _resized(info: ProfileInfo, ntasks: int) -> GeneratedProfile:
    """Entry ``info``'s generator at ``ntasks`` ranks, with the report's note."""
    try:
        g = generate(info.generator, ntasks)
    except GeneratorError as exc:
        raise ProfileError(f"profile {info.name!r} was recorded at {info.ranks} ranks and "
                           f"its generator {info.generator!r} ({info.path}) does not fit "
                           f"the job's {ntasks} tasks: {exc}") from None
    note = (f"profile {info.name} recorded at {info.ranks} ranks, used as {info.generator} "
            f"at {ntasks}")
    return GeneratedProfile(g.indptr, g.indices, g.weights, note, note)


def _key_line(text: str, key: str, literal: bool = False) -> int | str:
    """The line of a .toml's ``text`` where ``key = …`` starts (for error messages),
    else '?'; the lines are split only up to that one."""
    pattern = re.compile(rf"^\s*{re.escape(key)}" + ("" if literal else r"\s*="))
    no = 0
    for piece in text_pieces(text):
        for line in piece.splitlines():
            no += 1
            if pattern.match(line):
                return no
    return "?"


def bundled_store() -> Path:
    """The example profiles shipped in the package (searched after the site's stores)."""
    return Path(__file__).resolve().parent.parent / "data" / "profiles"


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and every control character
    escaped (tab, newline, DEL included), so any description makes a valid file."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def resolve_profile(spec: str, ntasks: int, stores: Sequence[str | Path],
                    allow_user_files: bool = False, max_bytes: int | None = None
                    ) -> CommGraph:
    """A profile by store name, generator spec or (if allowed) ``file:/PATH``.

    A plain name is looked up in the stores first, then among the generators; a spec
    with arguments (``stencil3d:4x4x4``) is always a generator.
    """
    spec = spec.strip()
    if spec.startswith("file:"):
        if not allow_user_files:
            raise ProfileError("profile files of users (file:PATH) are not enabled on this "
                               "cluster ([profiles] allow_user_files)")
        path = Path(spec[5:])
        if not path.is_absolute() or ".." in path.parts:
            raise ProfileError(f"{spec!r}: give an absolute path without '..'")
        try:
            graph = read_graph(path, max_bytes=max_bytes, expected_n=ntasks)
        except GraphError as exc:
            raise ProfileError(str(exc)) from None
        if graph.n != ntasks:
            raise ProfileError(f"{path}: {graph.n} ranks but the job has {ntasks} tasks")
        return graph
    store = ProfileStore(stores, max_bytes)
    if ":" not in spec:
        try:
            return store.load(spec, ntasks)
        except ProfileError as exc:
            if "not found" not in str(exc) or not is_generator_spec(spec):
                raise
    if is_generator_spec(spec):
        try:
            return generate(spec, ntasks)
        except GeneratorError as exc:
            raise ProfileError(f"generator {spec!r}: {exc}") from None
    return store.load(spec, ntasks)  # raises the "not found" error with the stores
