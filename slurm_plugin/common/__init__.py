"""Shared by every part, standard library only (plus ClusterShell host lists and
mapper.errors): per-job file names and rules, safe text, symlink-safe file writes, the
job directory, ending process groups, and the reorder file a step reads.  Safe for the
TaskProlog, which runs once per task."""
