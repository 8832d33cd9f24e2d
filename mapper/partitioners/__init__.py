"""Graph partitioners, wrapped once for every caller: METIS and KaHIP's KaFFPa.

Two contracts, each offered by both partitioners:

* exact block sizes (vertex counts), for the sparse-QAP constructions (Top-Down,
  Bottom-Up, the tree approximation of non-tree networks):
  :func:`.metis.balanced_partition`, :func:`.kahip.kahip_partition`;
* weighted targets within an imbalance, for the mesh partitioners
  (:mod:`mapper.mesh.balance` repairs what they return): :func:`.metis.metis_split`,
  :func:`.kahip.kahip_split`.

Modules: :mod:`.metis`, :mod:`.kahip`; :mod:`.exact_sizes` (the size repair, the
size-keeping cut refinement, greedy halving); :mod:`.weights` (integer weights for the
32-bit partitioners, blocks by weight); :mod:`.errors` (:class:`~.errors.PartitionError`,
:class:`~.errors.KahipMissing`).  KaHIP is optional (PyPI ``kahip``).
"""
