"""The pipeline's settings: the configuration files read safely (`config_files`), loaded,
validated and merged (`config`, `merge`), a run key resolved once, and the facts of a
resolved run the rules, steps and reports ask alike: its deployments, its scenarios, what
of it each step depends on and what its jobs ask a cluster scheduler for."""
