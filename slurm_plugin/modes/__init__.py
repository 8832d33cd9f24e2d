"""From a layout and a request to a job's files, one module per mode: the interface every
mode implements, the job it is given and the plan it returns (base), the modes by name
(registry), the graph mode (graph_job: a communication graph mapped, with its rank
reordering files from outputs.reorder_files), the mesh mode (mesh_job: a mesh partitioned) and the
summa mode (summa_job: a SUMMA partition arranged; its files are mapper.io.summa_files)."""
