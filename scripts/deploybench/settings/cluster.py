"""What a job asks a cluster scheduler for (profiles/slurm, profiles/kubernetes).

A step that runs on the keyed device (run_facts.runs_on_device) goes where the GPU registry
places its key and, on a GPU key, asks for exactly one GPU of that type; every other step
(weights, data, export, FP32 conversion, repository) goes where the `cpu` key goes and asks
for no GPU. Plots and reports are local rules (rules/report.smk): no job. Memory, runtime
and CPUs come from the config's `cluster` section. The names are the resources the
executor plugins read: slurm_partition, constraint, gpu + gpu_model (`--gpus=<model>:1`),
mem_mb, runtime (minutes), cpus_per_task (snakemake-executor-plugin-slurm); machine_type
(the node selector node.kubernetes.io/instance-type), gpu + gpu_manufacturer
(nvidia.com/gpu), mem_mb (snakemake-executor-plugin-kubernetes). None leaves a resource
unset.
"""

from __future__ import annotations

from .run_facts import runs_on_device

RESOURCES = ("mem_mb", "runtime", "cpus_per_task", "slurm_partition", "constraint",
             "gpu", "gpu_model", "gpu_manufacturer", "machine_type")
CPU_KEY = "cpu"  # the registry key whose placement the jobs without a device get
# The measuring steps of one configuration (the rules with `group: DEVICE_GROUP`) form one
# cluster job, so that served and native are measured on one machine. The group's name has
# the configuration's wildcards; the cluster profiles merge the steps no file connects
# (`group-components: <DEVICE_GROUP>=3`: accuracy and what reads it, offline, online and
# the search's points; floor; native) and scope bench_slot to the group job, so that they
# run one after another on its GPU.
DEVICE_GROUP = "device-{model}-{gpu}-{backend}-{precision}"


def job_resources(cluster: dict, gpus: dict, step: str, run: dict | None = None) -> dict:
    """The scheduler resources of `step` (of `run`, for a per-configuration step)."""
    on_device = run is not None and runs_on_device(run, step)
    key = run["key"]["gpu"] if on_device else CPU_KEY
    entry = gpus.get(key, {})
    slurm, kubernetes = entry.get("slurm", {}), entry.get("kubernetes", {})
    gpu = on_device and entry.get("kind") == "gpu" and cluster["request_gpus"]
    sizes = cluster["resources"]["device" if on_device else "default"]
    return {
        "mem_mb": sizes["mem_mb"],
        "runtime": sizes["runtime"],
        "cpus_per_task": sizes["cpus_per_task"],
        "slurm_partition": slurm.get("partition"),
        "constraint": slurm.get("constraint"),
        "gpu": 1 if gpu else None,
        "gpu_model": slurm.get("gpu_model") if gpu else None,
        "gpu_manufacturer": "nvidia" if gpu else None,
        "machine_type": kubernetes.get("machine_type"),
    }
