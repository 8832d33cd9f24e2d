"""Scheduler readers: Slurm's text (scontrol, squeue, topology files) parsed into records
(Allocation, NodeShape, SwitchTree), and the backends that fetch it (cli_backend,
pyslurm_backend) behind one reader interface, chosen in backends.  Independent of site/."""
