"""Where the tests find the checkout and their recorded data, wherever a test file sits."""

from pathlib import Path

#: the checkout (the folder holding mapper/, slurm_plugin/, tests/)
REPO = Path(__file__).resolve().parents[2]
#: recorded Slurm, hwloc, Open MPI and MPI-program inputs (tests/data)
TEST_DATA = REPO / "tests" / "data"
