"""Names and rules every part of the Slurm integration shares (standard library only,
so the TaskProlog stays light): per-job file names, the job-id rule, the SPANK
variables, the variables the TaskProlog exports.  The algorithm grammar lives in
:mod:`mapper.solve.algorithm_names`."""

from __future__ import annotations

import re

#: the files launchers read; none may survive a failed computation
LAUNCHER_FILES = ("rankfile", "hostfile", "machinefile", "slurm_hostfile", "bindings",
                  "hydra_hostfile", "hydra_rankmap")

#: the SUMMA arrangement (``--rankmap=summa``; format: mapper.io.summa_files), written
#: beside the rankfile; like a launcher file, it must not survive a failed computation
ARRANGEMENT_FILE = "arrangement"

#: the mesh partition of a ``--comm-profile=mesh:NAME`` job (slurm_plugin.modes.mesh_job): line
#: v holds the rank owning mesh vertex v (METIS ``part`` format), written beside the
#: rankfile; like a launcher file, it must not survive a failed computation
PARTITION_FILE = "partition"

#: rank reordering for launchers that place the ranks themselves (srun;
#: slurm_plugin.outputs.reorder_files): one reorder file per (node, socket) method of Slurm's
#: block/cyclic distributions, the seed's Dist_graph file (the plain adjacency) and its
#: group graph (the heaviest edge between sibling groups, with weights; librankmap's
#: rankmap_dist_graph reads it)
REORDER_FILE_BY_METHOD = {("block", "cyclic"): "reorder.block",
                          ("cyclic", "cyclic"): "reorder.cyclic",
                          ("block", "block"): "reorder.block-block",
                          ("cyclic", "block"): "reorder.cyclic-block"}
DIST_GRAPH_FILE = "dist_graph"
GROUP_GRAPH_FILE = "dist_graph.groups"
REORDER_FILES = (*REORDER_FILE_BY_METHOD.values(), DIST_GRAPH_FILE, GROUP_GRAPH_FILE)

#: every file a computation writes besides the report: removed together when it fails
COMPUTED_FILES = (*LAUNCHER_FILES, ARRANGEMENT_FILE, PARTITION_FILE, *REORDER_FILES)

#: per-job files by role → file name in the job directory
FILE_NAMES = {**{name: name for name in LAUNCHER_FILES},
              ARRANGEMENT_FILE: "arrangement", PARTITION_FILE: "partition",
              **{name: name for name in REORDER_FILES},
              "report": "report.txt", "report_json": "report.json"}

#: job directory of job ID: ``OUTPUT_DIR/job.<ID>``
JOB_DIR_PREFIX = "job."

_JOB_ID = re.compile(r"[0-9]+(_[0-9]+)?")


def valid_job_id(job_id: object) -> bool:
    """A Slurm job id: digits, or an array job's ``<id>_<index>``."""
    return isinstance(job_id, str) and _JOB_ID.fullmatch(job_id) is not None


#: what the SPANK plugin's options become in the prolog's environment
SPANK_PROFILE = "SPANK_RANKMAP_COMM_PROFILE"
#: --rankmap=CHOICE (the variable's name predates the job modes; it is kept so that
#: queued jobs keep their choice across an upgrade)
SPANK_RANKMAP = "SPANK_RANKMAP_MODE"
SPANK_TIME = "SPANK_RANKMAP_TIME"
#: --rankmap-record=NAME: record the job's communication into the user's profile NAME
SPANK_RECORD = "SPANK_RANKMAP_RECORD"

#: a profile's store name (slurm_plugin.profiles.store; the SPANK plugin's rule for
#: --rankmap-record): no '/', no leading '.'
PROFILE_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,199}$")

#: a recording job's directory (slurm_plugin.lifecycle.recording_setup makes it, as the
#: user, under [record] dir): its description, the interposer's launches (run.<K>/,
#: slurm_plugin/record/rankmap_record.c) and Open MPI's monitoring files (PREFIX.<R>.prof)
RECORDING_META = "recording.json"
RECORDING_INTERPOSER_DIR = "mpi"
RECORDING_MONITORING_PREFIX = "ompi/prof"
#: what a recording that cannot be used is renamed to (``<job>.incomplete``) and its reason
INCOMPLETE_SUFFIX = ".incomplete"
INCOMPLETE_REASON = "reason.txt"
#: what the TaskProlog exports to a recording job's tasks: the interposer's directory and
#: Open MPI's monitoring parameters (pml, coll and osc ``monitoring`` components: enable 2
#: tells the application's messages from the library's)
RECORD_DIR_VAR = "RANKMAP_RECORD_DIR"
RECORD_OPENMPI_VAR = "RANKMAP_RECORD_OPENMPI"
OMPI_MONITORING_VARS = {"OMPI_MCA_pml_monitoring_enable": "2",
                        "OMPI_MCA_pml_monitoring_enable_output": "3"}
OMPI_MONITORING_FILE_VAR = "OMPI_MCA_pml_monitoring_filename"
#: [record] openmpi: who records an Open MPI program
OPENMPI_RECORDERS = ("monitoring", "interposer")

#: --rankmap values that are not algorithms (the SPANK plugin's ``keywords[]``; a
#: test compares): ``summa`` arranges a heterogeneous SUMMA's partition
#: (slurm_plugin.modes.summa_job) instead of mapping a communication graph
RANKMAP_KEYWORDS = ("auto", "off", "summa")
SUMMA_MODE = "summa"
#: --comm-profile of a SUMMA job: ``summa-fpm[:FILE][,size=N]`` (no FILE: equal speeds)
SUMMA_PROFILE = "summa-fpm"


def summa_args(profile: str) -> str | None:
    """What follows ``summa-fpm`` in a SUMMA profile, separator included (``""``,
    ``":FILE[,size=N]"`` or ``",size=N"``); None when ``profile`` is not one.

    FILE follows a ``:`` and the options a ``,``, so ``summa-fpm,size=N`` (equal speeds
    of an N x N matrix) is as much a SUMMA profile as ``summa-fpm:FILE,size=N``; the
    separator is kept so that the spec's parser can tell a FILE from an option."""
    text = profile.strip()
    rest = text[len(SUMMA_PROFILE):]
    if not text.startswith(SUMMA_PROFILE) or rest[:1] not in ("", ":", ","):
        return None
    return rest


#: --comm-profile of a mesh job: ``mesh:NAME[,OPTION=VALUE...]``, NAME a store entry with
#: ``kind = "mesh"`` (slurm_plugin.profiles.store); the job's --rankmap algorithm maps the
#: mesh's quotient graph (slurm_plugin.modes.mesh_job)
MESH_PREFIX = "mesh:"

#: the job modes, what a request is computed as (slurm_plugin.modes.registry):
#: ``graph`` maps a communication graph (slurm_plugin.modes.graph_job), ``mesh``
#: partitions a mesh (slurm_plugin.modes.mesh_job), ``summa`` arranges a SUMMA partition
#: (slurm_plugin.modes.summa_job).  slurm_plugin.site.request decides a job's mode once,
#: from its --comm-profile and --rankmap
GRAPH_MODE = "graph"
MESH_MODE = "mesh"
JOB_MODES = (GRAPH_MODE, MESH_MODE, SUMMA_MODE)

#: launcher file → the variable the TaskProlog exports for it
EXPORTS = {"rankfile": "RANKMAP_RANKFILE", "hostfile": "RANKMAP_HOSTFILE",
           "machinefile": "RANKMAP_MACHINEFILE", ARRANGEMENT_FILE: "RANKMAP_ARRANGEMENT",
           PARTITION_FILE: "RANKMAP_PARTITION"}
#: the bind file (slurm_plugin/bind/rankmap_bind.c reads it) and the variables that hand it
#: and the binder to every launcher's ranks: LD_PRELOAD gets the library, the others its
#: inputs
BIND_FILE_VAR = "RANKMAP_BIND_FILE"
BIND_LAUNCHERS_VAR = "RANKMAP_BIND_LAUNCHERS"
#: Hydra's host file and launcher variables: MPICH's mpiexec, Intel MPI's mpirun
#: (slurm_plugin.lifecycle.hydra_srun says why the launcher)
MPICH_HOSTFILE_VARS = ("HYDRA_HOST_FILE",)
MPICH_LAUNCHER_VAR = "HYDRA_LAUNCHER_EXEC"
#: MPICH's Hydra reads its own options from this file: the rank map of a placement that
#: interleaves hosts (``-rankmap``, MPICH 5.0.2 and later); the binder unsets it in an
#: mpiexec that cannot take it (rankmap_bind.c)
MPICH_CONFIG_VAR = "HYDRA_CONFIG_FILE"
#: the first line of a Hydra host file that lists each host once for a placement that
#: interleaves hosts: without its rank map Hydra would run the ranks in blocks, so a job
#: whose files lack the map hands the host file to no launcher (Hydra skips "#" lines)
HYDRA_NEEDS_RANK_MAP = "# ranks interleave hosts: see hydra_rankmap\n"
INTEL_HOSTFILE_VARS = ("I_MPI_HYDRA_HOST_FILE",)
INTEL_LAUNCHER_VARS = {"I_MPI_HYDRA_BOOTSTRAP": "slurm"}
INTEL_LAUNCHER_EXEC_VAR = "I_MPI_HYDRA_BOOTSTRAP_EXEC"
#: Intel MPI's mpirun ignores a host file's ``host:n`` counts and runs as many ranks per
#: host as the node has cores unless told the count: the TaskProlog exports it, and
#: names the value it set (the binder unsets it, unless changed, for a launch that is
#: not rankmap's)
INTEL_PERHOST_VAR = "I_MPI_PERHOST"
INTEL_PERHOST_SET_VAR = "RANKMAP_I_MPI_PERHOST"
#: the batch step's srun host file: the SPANK plugin makes it SLURM_HOSTFILE for a plain
#: srun of the job's size (slurm_plugin/spank/rankmap_spank.c reads this name)
SRUN_HOSTFILE_VAR = "RANKMAP_SRUN_HOSTFILE"
#: set by the SPANK plugin in srun for a step it placed; its tasks are then bound before
#: they exec (rankmap_spank.c PLACED_VAR)
SRUN_PLACED_VAR = "RANKMAP_SRUN_PLACED"
#: what the TaskProlog gives the ranks of a job with several CPUs per task, unless the
#: user set them: one OpenMP place per core of the rank, threads packed over them.  An
#: OpenMP runtime builds its places from the mask the rank starts with, which is the
#: rank's cores under srun and Open MPI (bound before they exec) but not under Hydra,
#: whose ranks are bound at MPI_Init: the binder unsets them in mpiexec
#: (rankmap_bind.c openmp_exports, compared by a test)
OPENMP_EXPORTS = {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
#: the names of OPENMP_EXPORTS the TaskProlog set (comma-separated): later steps and the
#: binder tell them from the user's own
OPENMP_SET_VAR = "RANKMAP_OMP_SET"
#: Open MPI 5's mpirun runs the prterun this names (slurm_plugin.lifecycle.prterun_wrapper)
OMPI_PRTERUN_VAR = "OMPI_PRTERUN"
#: the user's switch for one launch: ``RANKMAP_BIND=off mpirun ./app``
BIND_SWITCH_VAR = "RANKMAP_BIND"

#: Open MPI 4.1 reads rmaps_rank_file_path (alias orte_rankfile); the spelling
#: without the underscore is exported too for tools that document it (mpirun ignores it)
OMPI_RANKFILE_VARS = ("OMPI_MCA_rmaps_rank_file_path", "OMPI_MCA_rmaps_rankfile_path")
