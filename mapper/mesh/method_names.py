"""Mesh partitioning method names (issue 10): the one spelling CLI, config and code share.

Standard library only, so that a configuration can be validated without loading numpy.
"""

from __future__ import annotations

#: recursive bisection, block ids in bisection order (Schulz, Träff & von Kirchbach §4)
RB = "rb"
#: recursive hierarchical multisection along the machine, block ids = PE ids (same §4)
RMS = "rms"
#: Moulitsas & Karypis predictor-corrector variants: VolS, VolNS, ElTS, ElTNS
ARCHAWARE_VOL_SPARSE = "archaware-vol-sparse"
ARCHAWARE_VOL_DENSE = "archaware-vol-dense"
ARCHAWARE_ELT_SPARSE = "archaware-elt-sparse"
ARCHAWARE_ELT_DENSE = "archaware-elt-dense"

#: every method a user may name, in the order the documentation lists them
PARTITION_METHODS = (RB, RMS, ARCHAWARE_VOL_SPARSE, ARCHAWARE_VOL_DENSE,
                     ARCHAWARE_ELT_SPARSE, ARCHAWARE_ELT_DENSE)

#: graph partitioners behind rb and rms; the first is the default (see bench/mesh)
METIS = "metis"
KAHIP = "kahip"
BACKENDS = (METIS, KAHIP)
DEFAULT_BACKEND = METIS
