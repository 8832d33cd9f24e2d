"""One job's life on the node: the prolog and epilog (root), the worker it starts as the
job's user (job_worker, limits) and the protocol between them (worker_protocol,
worker_process, worker_slots), and the TaskProlog (once per task)."""
