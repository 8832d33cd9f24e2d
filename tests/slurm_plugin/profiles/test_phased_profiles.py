"""Profiles by phase: the generators' phases (npb-cg, npb-ft) and the store's
``phases`` key (mapper.model.phased_graph.PhasedGraph)."""

from __future__ import annotations

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy
from mapper.io.mtx_file import write_mtx
from mapper.model.phased_graph import PhasedGraph
from mapper.objectives.phase_time import phase_time
from slurm_plugin.profiles.generators import GeneratorError, generate, generate_phases
from slurm_plugin.profiles.samples import SampledGraph
from slurm_plugin.profiles.store import ProfileError, ProfileStore

# -- generators ------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["npb-cg", "npb-cg:bytes=262144", "npb-ft",
                                  "npb-ft:4x8,bytes=3"])
@pytest.mark.parametrize("n", [2, 8, 32, 128, 256])
def test_phased_generators_total_is_todays_graph(spec: str, n: int) -> None:
    if spec.startswith("npb-ft:4x8") and n != 32:
        pytest.skip("dimensions fix the rank count")
    g = generate(spec, n)
    p = generate_phases(spec, n)
    assert isinstance(p, PhasedGraph)
    np.testing.assert_array_equal(p.indptr, g.indptr)
    np.testing.assert_array_equal(p.indices, g.indices)
    np.testing.assert_array_equal(p.weights, g.weights)
    # the phases add up exactly (volumes are small integers times bytes)
    s = sum(ph.repeat * ph.graph.to_csr() for ph in p.phases)
    assert abs(s - g.to_csr()).max() == 0


def test_npb_cg_phases_are_row_steps_then_the_transpose() -> None:
    n = 128  # 8 rows x 16 columns
    p = generate_phases("npb-cg", n)
    assert [ph.name for ph in p.phases] == [f"row step {k}" for k in range(4)] + ["transpose"]
    rows, cols = 8, 16
    for k, ph in enumerate(p.phases[:4]):
        u, v, _ = ph.graph.edges()
        assert np.all(u // cols == v // cols)           # within a row
        assert np.all((u % cols) ^ (v % cols) == 1 << k)  # partners differ in bit k
        assert len(u) == n // 2
        np.testing.assert_array_equal(ph.labels(), np.arange(n) // cols)
        assert ph.groups == rows
    assert p.phases[-1].sync is None


def test_npb_ft_phases_are_rows_then_columns() -> None:
    p = generate_phases("npb-ft:4x8", 32)
    row, col = p.phases
    u, v, _ = row.graph.edges()
    assert np.all(u // 8 == v // 8) and len(u) == 4 * 28
    np.testing.assert_array_equal(row.labels(), np.arange(32) // 8)
    u, v, _ = col.graph.edges()
    assert np.all(u % 8 == v % 8) and len(u) == 8 * 6
    np.testing.assert_array_equal(col.labels(), np.arange(32) % 8)


@pytest.mark.parametrize("spec", ["npb-mg", "npb-mg:bytes=3", "npb-lu", "npb-lu:bytes=5",
                                  "npb-bt", "npb-sp:bytes=7"])
@pytest.mark.parametrize("n", [1, 2, 4, 9, 12, 16, 30, 64, 100, 256, 1000])
def test_npb_phases_add_up_to_the_generators_graph(spec: str, n: int) -> None:
    family = spec.split(":")[0]
    if family in ("npb-bt", "npb-sp") and (n < 4 or int(np.sqrt(n)) ** 2 != n):
        with pytest.raises(GeneratorError):
            generate(spec, n)
        return
    g = generate(spec, n)
    assert isinstance(g, PhasedGraph)
    # the graph J sees is the family's graph built edge by edge here (no phases)
    u, v, w = g.edges()
    s = sum(ph.repeat * ph.graph.to_csr() for ph in g.phases)
    assert abs(s - g.to_csr()).max() <= 1e-12 * max(w.max(initial=0.0), 1.0)
    # each rank waits only for its own neighbours: its own synchronising group
    assert all(np.array_equal(ph.labels(), np.arange(n)) for ph in g.phases)
    np.testing.assert_array_equal(generate_phases(spec, n).weights, g.weights)


def test_npb_mg_phases_are_levels_then_dimensions() -> None:
    # 8x4x4 periodic: strides 1 (every axis), 2 (axes of 8 and 4: 4 is not > 2*2, so
    # no wrap there), 4 (the axis of 8 only)
    dims = (8, 4, 4)
    p = generate_phases("npb-mg:8x4x4,bytes=64", 128)
    names = [ph.name for ph in p.phases]
    assert names == [f"level {lv} dimension {a} exchange"
                     for lv, axes in ((0, (0, 1, 2)), (1, (0, 1, 2)), (2, (0,)))
                     for a in axes]
    coords = np.stack(np.unravel_index(np.arange(128), dims), axis=1)
    for ph in p.phases:
        lv, axis = int(ph.name.split()[1]), int(ph.name.split()[3])
        u, v, w = ph.graph.edges()
        d = np.abs(coords[u] - coords[v])
        assert np.all(np.delete(d, axis, axis=1) == 0)
        stride = 1 << lv
        assert np.all((d[:, axis] == stride) | (d[:, axis] == dims[axis] - stride))
        np.testing.assert_allclose(w, 64 / 4 ** lv)


def test_npb_lu_phases_are_the_wavefront_then_each_dimension() -> None:
    p = generate_phases("npb-lu:4x8,bytes=3", 32)
    assert [ph.name for ph in p.phases] == ["wavefront", "dimension 0 exchange",
                                            "dimension 1 exchange"]
    wave, ns, ew = p.phases
    # the SSOR wavefront is latency-bound, in rank order; rhs's exchanges are not
    assert (wave.pace, ns.pace, ew.pace) == ("sweep", "", "")
    u, v, w = wave.graph.edges()
    assert len(u) == 3 * 8 + 4 * 7 and np.allclose(w, 1.0)  # a third of each pair's 3
    u, v, w = ns.graph.edges()
    assert np.all(u % 8 == v % 8) and np.all(abs(u - v) == 8) and np.allclose(w, 2.0)
    u, v, w = ew.graph.edges()
    assert np.all(u // 8 == v // 8) and np.all(abs(u - v) == 1) and np.allclose(w, 2.0)


def test_npb_bt_phases_are_the_face_copy_then_the_three_solves() -> None:
    q = 4
    p = generate_phases("npb-bt:bytes=55", q * q)
    assert [ph.name for ph in p.phases] == ["face copy", "x solve", "y solve", "z solve"]
    copy, x, y, z = p.phases
    # the line solves are pipelined stage by stage (latency-bound); the face copy not
    assert [ph.pace for ph in p.phases] == ["", "stages", "stages", "stages"]
    r, c = np.divmod(np.arange(q * q), q)
    u, v, w = x.graph.edges()
    assert np.all(r[u] == r[v]) and np.all(np.isin((c[u] - c[v]) % q, (1, q - 1)))
    assert np.allclose(w, 35.0) and len(u) == q * q
    u, v, w = y.graph.edges()
    assert np.all(c[u] == c[v]) and np.all(np.isin((r[u] - r[v]) % q, (1, q - 1)))
    assert np.allclose(w, 35.0) and len(u) == q * q
    u, v, w = z.graph.edges()
    assert np.all((r[u] - r[v]) % q == (c[u] - c[v]) % q) and np.all(r[u] != r[v])
    assert len(u) == q * q
    assert np.allclose(w, 35.0)
    u, v, w = copy.graph.edges()
    assert len(u) == 3 * q * q and np.allclose(w, 20.0)


def test_generators_without_phases_are_refused() -> None:
    with pytest.raises(GeneratorError, match="no phases modelled"):
        generate_phases("stencil3d", 8)
    with pytest.raises(GeneratorError, match="no phases modelled"):
        generate_phases("summa", 16)
    with pytest.raises(GeneratorError, match="power-of-two"):
        generate_phases("npb-cg", 12)


def test_cg_model_ranks_block_and_a_row_splitting_placement() -> None:
    # 32 ranks (4 rows x 8 columns) on 8 nodes of 4 cores, 2 nodes per leaf (a leaf
    # holds a row): block puts columns 0-3 of a row on a node, a subcube of the row's
    # Q_3, crossed in one step by 4 messages.  Columns {0, 1, 2, 4} are no subcube:
    # 2 messages cross in each of the 3 steps, so the row waits 6 instead of 4
    # (Harper); columns {0, 1, 4, 5} are another subcube and cost block's time.
    machine = Hierarchy.homogeneous([4, 2, 4], [1, 10, 100])
    p = generate_phases("npb-cg", 32)
    block = np.arange(32)
    r, c = np.divmod(np.arange(32), 8)
    tb = phase_time(p, machine, block, [0, 1])

    def placed(order: list[int]) -> np.ndarray:  # column order[i] on slot i of the row
        slot = np.argsort(order)
        return r * 8 + slot[c]

    assert phase_time(p, machine, placed([0, 1, 4, 5, 2, 3, 6, 7]), [0, 1]) == tb
    ts = phase_time(p, machine, placed([0, 1, 2, 4, 3, 5, 6, 7]), [0, 1])
    assert ts > tb


# -- store -----------------------------------------------------------------------------


def _graph(edges, n=8):
    u, v, w = zip(*edges, strict=True)
    return CommGraph.from_edges(list(u), list(v), list(w), n=n)


P0 = _graph([(0, 1, 2.0), (2, 3, 2.0), (4, 5, 1.0)])
P1 = _graph([(0, 4, 3.0), (1, 5, 1.0), (6, 7, 5.0)])
TOTAL = CommGraph.from_matrix(P0.to_csr() + P1.to_csr(), directed=False)


def _store(tmp_path, extra, files=(("t.mtx", TOTAL), ("p0.mtx", P0), ("p1.mtx", P1))):
    for name, g in files:
        write_mtx(g, tmp_path / name)
    (tmp_path / "p.toml").write_text(f'ranks = 8\nunits = "bytes"\nfile = "t.mtx"\n'
                                     f'{extra}\n')
    return ProfileStore([tmp_path])


def test_store_loads_phases(tmp_path) -> None:
    g = _store(tmp_path, 'phases = ["p0.mtx", "p1.mtx"]').load("p", 8)
    assert isinstance(g, PhasedGraph)
    assert [ph.name for ph in g.phases] == ["p0.mtx", "p1.mtx"]
    np.testing.assert_allclose(g.to_csr().toarray(), TOTAL.to_csr().toarray())
    np.testing.assert_allclose(g.phases[1].graph.to_csr().toarray(), P1.to_csr().toarray())
    assert all(ph.sync is None and ph.repeat == 1.0 for ph in g.phases)


def test_store_without_phases_is_unchanged(tmp_path) -> None:
    g = _store(tmp_path, "").load("p", 8)
    assert type(g) is CommGraph
    info = ProfileStore([tmp_path]).find("p")
    assert info.phases == ()


def test_store_refuses_phases_that_do_not_add_up(tmp_path) -> None:
    store = _store(tmp_path, 'phases = ["p0.mtx"]')
    with pytest.raises(ProfileError, match=r"do not add up to t\.mtx.*p\.toml"):
        store.load("p", 8)
    # off by a little more than the tolerance
    off = CommGraph.from_matrix(P1.to_csr() * (1 + 1e-7), directed=False)
    store = _store(tmp_path, 'phases = ["p0.mtx", "p1.mtx"]',
                   files=(("t.mtx", TOTAL), ("p0.mtx", P0), ("p1.mtx", off)))
    with pytest.raises(ProfileError, match="do not add up"):
        store.load("p", 8)
    # within it
    near = CommGraph.from_matrix(P1.to_csr() * (1 + 1e-12), directed=False)
    store = _store(tmp_path, 'phases = ["p0.mtx", "p1.mtx"]',
                   files=(("t.mtx", TOTAL), ("p0.mtx", P0), ("p1.mtx", near)))
    assert isinstance(store.load("p", 8), PhasedGraph)


@pytest.mark.parametrize("line, message", [
    ('phases = []', r"p.toml:4: phases: empty list"),
    ('phases = ["p0.mtx", "nope.mtx"]', r"p.toml:4: phases\[1\] 'nope.mtx' is missing"),
    ('phases = ["p0.mtx", "p0.mtx"]', r"phases\[1\]: 'p0.mtx' is listed twice"),
    ('phases = ["../p0.mtx"]', r"phases\[0\]: must be a path inside the store"),
    ('phases = [3]', r"phases\[0\]: must be a file name"),
    ('phases = "p0.mtx"', r"phases: must be list"),
    ('samples = ["t.mtx"]\nphases = ["p0.mtx", "p1.mtx"]', r"p.toml:5: phases: a profile "
                                                           r"with samples cannot have phases"),
])
def test_store_phases_errors_name_the_toml(tmp_path, line: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        _store(tmp_path, line).find("p")


def test_store_phase_with_another_rank_count(tmp_path) -> None:
    small = _graph([(0, 1, 1.0)], n=4)
    store = _store(tmp_path, 'phases = ["p0.mtx", "s.mtx"]',
                   files=(("t.mtx", TOTAL), ("p0.mtx", P0), ("s.mtx", small)))
    with pytest.raises(ProfileError, match="phase"):
        store.load("p", 8)


def test_samples_still_work_beside_the_key(tmp_path) -> None:
    g = _store(tmp_path, 'samples = ["t.mtx", "p0.mtx"]').load("p", 8)
    assert isinstance(g, SampledGraph) and not isinstance(g, PhasedGraph)


def test_mesh_entry_has_no_phases(tmp_path) -> None:
    write_mtx(P0, tmp_path / "p0.mtx")
    (tmp_path / "m.toml").write_text('kind = "mesh"\nfile = "p0.mtx"\nphases = ["p0.mtx"]\n')
    with pytest.raises(ProfileError, match="a mesh entry has no phases"):
        ProfileStore([tmp_path]).find("m")


# -- SMPI TI traces split at collective calls --------------------------------------------

TI = {
    0: "0 init\n0 send 1 5 1000 2\n0 bcast 100 0 6 \n0 send 2 1 8 2\n0 barrier\n0 finalize\n",
    1: "1 init\n1 recv 0 5 1000 2\n1 bcast 100 0 6 \n1 barrier\n1 send 3 1 50 2\n",
    2: "2 init\n2 bcast 100 0 6 \n2 recv 0 1 8 2\n2 barrier\n2 finalize\n",
    3: "3 init\n3 bcast 100 0 6 \n3 barrier\n3 recv 1 1 50 2\n",
}


def _ti(tmp_path, ranks=TI):
    files = []
    for r, text in ranks.items():
        p = tmp_path / f"1_rank-{r}.txt"
        p.write_text(text)
        files.append(p)
    return files


def test_ti_phases_split_at_collectives(tmp_path) -> None:
    from slurm_plugin.profiles.smpi_ti import import_ti, import_ti_phases

    files = _ti(tmp_path)
    g = import_ti_phases(files)
    assert isinstance(g, PhasedGraph)
    np.testing.assert_array_equal(g.to_csr().toarray(), import_ti(files).to_csr().toarray())
    # p2p 0 (0->1), bcast 0 (binomial 0->1, 0->2, 2->3), p2p 1 (0->2); the barrier
    # has no volume; p2p 2 (1->3).  Every message is small: each point-to-point phase
    # is an exchange round (the clocks move on at each collective)
    assert [p.name for p in g.phases] == ["p2p 0 round 0", "bcast 0", "p2p 1 round 1",
                                          "p2p 2 round 2"]
    assert [p.pace for p in g.phases] == ["rounds", "", "rounds", "rounds"]
    edges = [sorted(zip(*(a.tolist() for a in p.graph.edges()[:2]), strict=True))
             for p in g.phases]
    assert edges == [[(0, 1)], [(0, 1), (0, 2), (2, 3)], [(0, 2)], [(1, 3)]]
    assert [p.graph.total_volume for p in g.phases] == [1000, 300, 8, 50]


def test_ti_phases_refuse_unmatched_collectives(tmp_path) -> None:
    from slurm_plugin.profiles.smpi_ti import TraceError, import_ti_phases

    ranks = dict(TI)
    ranks[3] = "3 init\n3 bcast 100 0 6 \n3 recv 1 1 50 2\n"  # no barrier
    with pytest.raises(TraceError, match="rank 3 calls 1 collectives"):
        import_ti_phases(_ti(tmp_path, ranks))
    ranks[3] = "3 init\n3 allreduce 1 1 0\n3 barrier\n3 recv 1 1 50 2\n"
    with pytest.raises(TraceError, match="collective call 1 is"):
        import_ti_phases(_ti(tmp_path, ranks))


# -- repeated steps merged, and `rankmap profile import --phases` -------------------------

def _loop_trace(iterations: int) -> dict[int, str]:
    """Four ranks in a ring, each iteration a send to the right (1000 bytes, then 10
    bytes every other iteration) and an allreduce."""
    out = {}
    for r in range(4):
        lines = [f"{r} init"]
        for it in range(iterations):
            size = 1000 if it % 2 == 0 else 10
            lines += [f"{r} send {(r + 1) % 4} {it} {size} 2",
                      f"{r} recv {(r - 1) % 4} {it} {size} 2",
                      f"{r} allreduce 1 1 0"]
        out[r] = "\n".join(lines + [f"{r} finalize"]) + "\n"
    return out


def test_equal_global_phases_merge_without_changing_the_model(tmp_path) -> None:
    from mapper.model.phased_graph import merge_global_phases
    from slurm_plugin.profiles.smpi_ti import import_ti_phases

    g = import_ti_phases(_ti(tmp_path, _loop_trace(6)))
    merged = merge_global_phases(g)
    assert len(g.phases) == 12  # 6 x (p2p, allreduce) as traced
    # the two kinds of ring step and the allreduce: 3 phases with their repeats
    assert sorted((p.repeat, p.graph.total_volume) for p in merged.phases) == [
        (3.0, 40.0), (3.0, 4000.0), (6.0, 64.0)], [(p.name, p.repeat) for p in merged.phases]
    np.testing.assert_array_equal(merged.to_csr().toarray(), g.to_csr().toarray())
    machine = Hierarchy.parse("1:2:2", "1:10:100")
    for seed in range(5):
        pi = np.random.default_rng(seed).permutation(4)
        for model in ("runs", "phases"):
            for level in (0, 1):
                assert phase_time(merged, machine, pi, [level], model=model) == \
                    pytest.approx(phase_time(g, machine, pi, [level], model=model))


def test_profile_import_stores_the_phases(tmp_path) -> None:
    from slurm_plugin.commands.cli import main
    from slurm_plugin.profiles.smpi_ti import import_ti_phases

    files = _ti(tmp_path, _loop_trace(4))
    store = tmp_path / "store"
    assert main(["profile", "import", "--format", "smpi-ti", *map(str, files),
                 "--name", "loop", "--store", str(store), "--phases"]) == 0
    g = ProfileStore([store]).load("loop", 4)
    assert isinstance(g, PhasedGraph) and len(g.phases) == 3
    raw = import_ti_phases(files)
    machine = Hierarchy.parse("1:2:2", "1:10:100")
    pi = np.array([0, 2, 1, 3])
    assert phase_time(g, machine, pi, [0]) == pytest.approx(phase_time(raw, machine, pi, [0]))
    assert main(["profile", "import", "--format", "ompi", str(files[0]), "--name", "x",
                 "--store", str(store), "--phases"]) != 0


# -- stencils exchanged dimension by dimension --------------------------------------------

@pytest.mark.parametrize("spec", ["stencil3d:exchange=axes", "stencil3d:periodic,exchange=axes",
                                  "stencil2d:exchange=axes,bytes=3",
                                  "stencil2d:periodic,exchange=axes"])
@pytest.mark.parametrize("n", [1, 2, 6, 12, 30, 64, 256])
def test_stencil_axis_phases_add_up_to_the_stencil(spec: str, n: int) -> None:
    plain = generate(spec.replace(",exchange=axes", "").replace("exchange=axes,", "")
                     .replace(":exchange=axes", ""), n)
    assert not isinstance(plain, PhasedGraph)
    p = generate(spec, n)
    assert isinstance(p, PhasedGraph)
    np.testing.assert_array_equal(p.indptr, plain.indptr)
    np.testing.assert_array_equal(p.indices, plain.indices)
    np.testing.assert_array_equal(p.weights, plain.weights)
    s = sum(ph.graph.to_csr() for ph in p.phases)
    assert abs(s - plain.to_csr()).max() == 0
    # each rank waits only for its own messages: its own synchronising group
    assert all(ph.repeat == 1 and np.array_equal(ph.labels(), np.arange(n))
               for ph in p.phases)
    np.testing.assert_array_equal(generate_phases(spec, n).indptr, p.indptr)


def test_stencil_axis_phases_are_the_dimensions_in_order() -> None:
    dims = (4, 3, 5)
    p = generate_phases("stencil3d:4x3x5,periodic,exchange=axes", 60)
    assert [ph.name for ph in p.phases] == [f"dimension {k} exchange" for k in range(3)]
    coords = np.stack(np.unravel_index(np.arange(60), dims), axis=1)
    for k, ph in enumerate(p.phases):
        u, v, _ = ph.graph.edges()
        differ = coords[u] != coords[v]
        assert np.all(differ[:, k]) and not np.any(np.delete(differ, k, axis=1))
        # a periodic ring of L > 2 has L edges per line, one of L == 2 a single edge
        lines = 60 // dims[k]
        assert len(u) == lines * (dims[k] if dims[k] > 2 else dims[k] - 1)


def test_stencil_exchange_must_be_known() -> None:
    with pytest.raises(GeneratorError, match="exchange='faces' is not one of all, axes"):
        generate("stencil3d:exchange=faces", 8)
    assert not isinstance(generate("stencil3d:exchange=all", 8), PhasedGraph)
