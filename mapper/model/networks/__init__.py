"""Non-tree interconnects: node-level hop matrices and the machine built on them.

* :mod:`.grids` — 2D/3D (any dimension) mesh and torus;
* :mod:`.tianhe3` — the Tianhe-3 prototype layout (nodes in chips, chips in rows and
  columns);
* :mod:`.dragonfly` — dragonfly with minimal routing;
* :mod:`.node_hop_machine` — :class:`NodeHopMachine`: PEs = nodes × cores, distance = the node's
  own socket/core hierarchy inside a node, ``base + per_hop × hops`` between nodes,
  stored in O(nodes² + PEs · levels) memory;
* :mod:`.order` — which hop-matrix slot each allocated node occupies.

Every generator returns an ``int64`` matrix ``H`` with ``H[a, b]`` the hop count
between node slots a and b (symmetric, zero diagonal).
"""

from .dragonfly import dragonfly_hops
from .grids import mesh_hops, torus_hops
from .node_hop_machine import NodeHopMachine
from .order import restrict_hops
from .tianhe3 import TIANHE3_DEFAULT_HOPS, tianhe3_hops

__all__ = ["TIANHE3_DEFAULT_HOPS", "NodeHopMachine", "dragonfly_hops", "mesh_hops",
           "restrict_hops", "tianhe3_hops", "torus_hops"]
