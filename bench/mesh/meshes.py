"""Mesh generators for the mesh benchmarks (imported by fig4.py and seed002.py).

* :func:`rgg` — random geometric graph: n points uniform in the unit square, an edge
  between every two points closer than r = 0.55 · sqrt(ln n / n), the radius of the
  DIMACS ``rgg_n_2_X_s0`` graphs the sparse-QAP paper uses (Schulz, Träff & von
  Kirchbach, arXiv:1702.04164 §5; Holtgrewe, Sanders & Schulz, IPDPS 2010).  Pairs by
  ``scipy.spatial.cKDTree.query_pairs``: O(n log n + m).
* :func:`delaunay` — Delaunay triangulation of n points uniform in the unit square
  (``scipy.spatial.Delaunay``, Qhull), edges of the triangles: O(n log n).
* :func:`grid2d`, :func:`grid3d` — 5-point and 7-point stencils (FD meshes): O(n).

Every mesh has unit vertex weights, communication sizes and edge weights.  Nothing
here reads files or prints; :func:`shared_mesh` reads a graph of shared/bench-graphs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.spatial import Delaunay, cKDTree

from mapper.io.graph_file import read_graph
from mapper.mesh import Mesh, mesh_from_graph
from mapper.model.graph import CommGraph

BENCH_GRAPHS = Path("/work/shared/bench-graphs")


def _mesh(u: np.ndarray, v: np.ndarray, n: int, source: str) -> Mesh:
    """Unit-weight mesh of the undirected edges (u, v) (duplicates merged)."""
    a = sp.coo_matrix((np.ones(len(u)), (u, v)), shape=(n, n)).tocsr()
    a = a + a.T
    a.data[:] = 1.0                 # an edge listed twice stays weight 1
    a.setdiag(0)
    a.eliminate_zeros()
    return mesh_from_graph(CommGraph.from_matrix(a, directed=False, source=source))


def rgg(n: int, seed: int = 0) -> Mesh:
    """Random geometric graph on n points, radius 0.55 · sqrt(ln n / n)."""
    pts = np.random.default_rng(seed).random((n, 2))
    r = 0.55 * np.sqrt(np.log(n) / n)
    pairs = cKDTree(pts).query_pairs(r, output_type="ndarray")
    return _mesh(pairs[:, 0], pairs[:, 1], n, f"rgg(n={n}, seed={seed})")


def delaunay(n: int, seed: int = 0) -> Mesh:
    """Delaunay triangulation of n random points in the unit square."""
    pts = np.random.default_rng(seed).random((n, 2))
    tri = Delaunay(pts).simplices
    u = np.concatenate([tri[:, 0], tri[:, 1], tri[:, 2]])
    v = np.concatenate([tri[:, 1], tri[:, 2], tri[:, 0]])
    return _mesh(u, v, n, f"delaunay(n={n}, seed={seed})")


def grid2d(rows: int, cols: int) -> Mesh:
    """rows × cols 5-point stencil, vertex = r · cols + c."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return _mesh(u, v, rows * cols, f"grid2d({rows}x{cols})")


def grid3d(nx: int, ny: int, nz: int) -> Mesh:
    """nx × ny × nz 7-point stencil."""
    idx = np.arange(nx * ny * nz).reshape(nx, ny, nz)
    u = np.concatenate([idx[:-1].ravel(), idx[:, :-1].ravel(), idx[:, :, :-1].ravel()])
    v = np.concatenate([idx[1:].ravel(), idx[:, 1:].ravel(), idx[:, :, 1:].ravel()])
    return _mesh(u, v, nx * ny * nz, f"grid3d({nx}x{ny}x{nz})")


def shared_mesh(name: str) -> Mesh | None:
    """The mesh of shared/bench-graphs/NAME (METIS, unit weights), None when absent."""
    path = BENCH_GRAPHS / name
    if not path.is_file():
        return None
    return mesh_from_graph(read_graph(path, limit=None), source=name)
