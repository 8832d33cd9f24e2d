"""The job's machine: the layout of its task slots (from the allocation, node shapes
and switch tree), hwloc groups, Slurm's own distribution, speeds and a non-tree network."""
