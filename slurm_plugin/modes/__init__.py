"""From a layout and a profile to a job's files, one module per mode: the mapping
(plan), mesh partitions (mesh_job), SUMMA arrangements (summa_job) and the
rank reordering files (reorder_job)."""
