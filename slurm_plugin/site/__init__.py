"""The site's side: the configuration file (/etc/rankmap/rankmap.toml) and what a job
asked for (SPANK options and site rules).  Independent of slurm/."""
