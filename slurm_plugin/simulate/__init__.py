"""Simulated run time per placement: SimGrid platforms and ``rankmap simulate``.

:mod:`.platform` turns a Slurm switch tree into a SimGrid platform (pure),
:mod:`.cli` runs an SMPI program once per placement and prints the times beside J.
"""
