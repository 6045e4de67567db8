"""The measurement's context: the device and its lock, the step's own namespaces, what
else ran on the host (host_load) and what the serving processes and the GPU did
(telemetry, through nvml), what a measurement ran on (provenance), a level measured
several times (repeats), where a long step is (progress)."""
