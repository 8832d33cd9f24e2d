"""Simulated run time per placement: SimGrid platforms and the placements compared.

:mod:`.platform` turns a Slurm switch tree into a SimGrid platform (pure),
:mod:`.placements` gives the placements and their J; ``rankmap simulate``
(:mod:`slurm_plugin.commands.simulate_cli`) runs an SMPI program once per placement and
prints the times beside J.
"""
