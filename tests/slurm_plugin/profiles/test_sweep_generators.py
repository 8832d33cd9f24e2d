"""Sweep3D-like and SNAP-like KBA sweep generators: hand-computed small matrices and a
literal replay of the 8 octant sweeps."""

import numpy as np
import pytest

from slurm_plugin.profiles.generators import GeneratorError, generate


def _replay(px: int, py: int, messages: int, volume: float) -> np.ndarray:
    """Every octant (4 corners x ±z) sweeps the PX x PY grid: each rank sends
    ``messages`` messages of ``volume`` to its downstream x and y neighbours."""
    a = np.zeros((px * py, px * py))
    for sx in (1, -1):
        for sy in (1, -1):
            for _z in (1, -1):
                for i in range(px):
                    for j in range(py):
                        for di, dj in ((sx, 0), (0, sy)):
                            ni, nj = i + di, j + dj
                            if 0 <= ni < px and 0 <= nj < py:
                                a[i * py + j, ni * py + nj] += messages * volume
    return a + a.T   # the graph holds both directions as one undirected volume


def test_sweep3d_3x2_by_hand():
    # ranks i*2 + j:   0 1
    #                  2 3
    #                  4 5     each mesh edge: 8 octants x 2 angle blocks x 5 bytes
    g = generate("sweep3d:3x2,angles=2,bytes=5", 6)
    expected = np.zeros((6, 6))
    for u, v in [(0, 1), (2, 3), (4, 5), (0, 2), (2, 4), (1, 3), (3, 5)]:
        expected[u, v] = expected[v, u] = 80
    assert np.array_equal(g.to_csr().toarray(), expected)


def test_snap_2x2_by_hand():
    # 4 ranks in a 2x2 grid, 4 mesh edges; 8 octants x 2 chunks x 3 angles x 4 groups
    g = generate("snap:2x2,angles=3,groups=4,chunks=2", 4)
    expected = np.array([[0, 192, 192, 0], [192, 0, 0, 192], [192, 0, 0, 192],
                         [0, 192, 192, 0]], dtype=float)
    assert np.array_equal(g.to_csr().toarray(), expected)


@pytest.mark.parametrize("spec, px, py, messages, volume", [
    ("sweep3d:4x3,angles=3,blocks=2,bytes=2.5", 4, 3, 6, 2.5),
    ("sweep3d:1x5", 1, 5, 1, 1.0),
    ("snap:3x4,groups=5,bytes=7", 3, 4, 5, 7.0),
    ("snap:5x2,chunks=4,angles=2", 5, 2, 8, 1.0),
])
def test_generators_equal_a_literal_replay_of_the_octant_sweeps(spec, px, py, messages,
                                                                volume):
    g = generate(spec, px * py)
    assert np.allclose(g.to_csr().toarray(), _replay(px, py, messages, volume))


def test_default_grid_is_near_square():
    g = generate("sweep3d", 12)      # 4 x 3 mesh: 3*3 + 4*2 edges
    assert g.m == 17 and set(g.degrees().tolist()) == {2, 3, 4}
    assert set(g.weights.tolist()) == {8.0}
    assert np.array_equal(generate("snap", 12).to_csr().toarray(), g.to_csr().toarray())


@pytest.mark.parametrize("spec, n, msg", [
    ("sweep3d:4x4,angles=0", 16, "angles must be at least 1"),
    ("snap:4x4,groups=two", 16, "groups='two' is not an integer"),
    ("sweep3d:4x4", 12, "make 16 ranks but the job has 12"),
    ("snap:2x2x2", 8, "expected 2 dimensions"),
])
def test_bad_sweep_specs_are_named(spec, n, msg):
    with pytest.raises(GeneratorError, match=msg):
        generate(spec, n)
