"""The `kubernetes` profile's jobs as the real executor plugin
(snakemake-executor-plugin-kubernetes) submits them, to a stand-in for the Kubernetes API
(there is no cluster here): the plugin sizes a pod's CPU from the job's threads, so a
configuration's measuring steps, one job (DEVICE_GROUP), must ask for the device steps'
cpus_per_task, one GPU of the key's type and its node type, and an export for one CPU and
no GPU. The stand-in records each Job the plugin creates and reports it failed, so nothing
runs; the upstream outputs are placeholders, marked up to date by `--touch`."""

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from deploybench.records import layout
from deploybench.settings.cluster import DEVICE_GROUP
from testkit.workflow import ROOT, TINY, main_config, measuring_rules, snakemake

CONFIGURATION = "results/tft-tiny/h100/onnx_fp32"
MEASURED = [f"{CONFIGURATION}/{name}" for name in ("offline.csv", "floor.csv", "native.csv")]
EXPORT = "results/tft-tiny/export/ts-trace/model.pt"
GROUPED = measuring_rules()


class KubernetesApi(BaseHTTPRequestHandler):
    """The calls the plugin makes: create a secret and jobs, read a job's status and its
    pods, delete. Created Jobs go to `jobs`."""

    jobs: list[dict] = []

    def reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/jobs"):
            self.jobs.append(body)
        self.reply(201, body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path.endswith("/status"):  # a job's: failed, so Snakemake stops
            name = path.split("/")[-2]
            self.reply(200, {"apiVersion": "batch/v1", "kind": "Job",
                             "metadata": {"name": name}, "status": {"failed": 1}})
        else:  # its pods: none
            self.reply(200, {"apiVersion": "v1", "kind": "PodList", "metadata": {},
                             "items": []})

    def do_DELETE(self):
        self.reply(200, {"apiVersion": "v1", "kind": "Status", "status": "Success",
                         "metadata": {}})

    def log_message(self, *args):
        pass


@pytest.fixture
def kubernetes_api(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), KubernetesApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    KubernetesApi.jobs = []
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {
            "server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "test", "user": {"token": "test"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(config))
    yield KubernetesApi.jobs
    server.shutdown()


def placeholders(work: Path, targets: list[str]) -> None:
    """Every output the targets need but the measuring group's and the export's, as empty
    files (folders), marked up to date in the DAG's order."""
    plan = snakemake(work, "-n", *targets).stdout
    for rule, outputs in re.findall(r"^(?:local)?rule (\w+):\n(?:    .*\n)*?    output: (.*)$",
                                    plan, re.M):
        if rule in GROUPED or EXPORT in outputs:
            continue
        for path in outputs.split(", "):
            target = work / path
            if target.name in layout.DIRECTORIES or path.endswith(layout.DIRECTORY_SUFFIXES):
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
    snakemake(work, "--touch", *targets)


def test_a_measuring_group_asks_for_its_cpus_and_one_gpu(tmp_path, kubernetes_api):
    work = tmp_path / "work"
    work.mkdir()
    targets = [*MEASURED, EXPORT]
    placeholders(work, targets)
    # The repository's profile, its S3 storage replaced by this file system: the plugin
    # is told the pods share it (as with a volume mounted at the same path), since its
    # storage would need a bucket. The pods' specs are the plugin's own.
    profile = yaml.safe_load((ROOT / "profiles/kubernetes/config.yaml").read_text())
    for key in ("default-storage-provider", "default-storage-prefix"):
        profile.pop(key)
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile/config.yaml").write_text(yaml.safe_dump(profile))
    shared_fs = ("import dataclasses, sys, snakemake_executor_plugin_kubernetes as k; "
                 "k.common_settings = dataclasses.replace(k.common_settings, "
                 "implies_no_shared_fs=False, job_deploy_sources=False, "
                 "pass_default_storage_provider_args=False, "
                 "auto_deploy_default_storage_provider=False); "
                 "from snakemake.cli import main; sys.exit(main())")
    result = subprocess.run(
        [sys.executable, "-c", shared_fs, "--snakefile", str(ROOT / "Snakefile"),
         "--directory", str(work), "--configfile", str(TINY),
         "--workflow-profile", str(tmp_path / "profile"), *targets],
        capture_output=True, text=True, cwd=work, env=os.environ)
    assert result.returncode != 0  # the stand-in fails every job
    # one job per Job: the export, and the configuration's measuring steps in one
    jobs = {}
    for job in kubernetes_api:
        pod = job["spec"]["template"]["spec"]
        command = pod["containers"][0]["args"][-1]
        steps = re.search(r"--allowed-rules ((?:\w+ )+)", command).group(1).split()
        jobs[" ".join(sorted(steps))] = pod
    assert sorted(jobs) == ["accuracy floor native offline", "export"], (
        list(jobs), result.stderr[-3000:])
    group = DEVICE_GROUP.format(model="tft-tiny", gpu="h100", backend="onnx",
                                precision="fp32")
    assert f"Error in group {group}" in result.stderr, result.stderr[-3000:]

    sizes = main_config()["cluster"]["resources"]
    measuring = jobs["accuracy floor native offline"]
    requests = measuring["containers"][0]["resources"]["requests"]
    cpus = sizes["device"]["cpus_per_task"]
    assert requests["cpu"] == f"{int(cpus * 0.95 * 1000)}m", requests  # the plugin's scalar
    # one GPU: bench_slot=1 in the group job puts its four steps one after another
    assert requests["nvidia.com/gpu"] == "1", requests
    assert requests["memory"] == "{}M".format(sizes["device"]["mem_mb"]), requests
    registry = yaml.safe_load((ROOT / "config/gpus.yaml").read_text())
    assert measuring["nodeSelector"] == {
        "node.kubernetes.io/instance-type": registry["h100"]["kubernetes"]["machine_type"]}

    export = jobs["export"]["containers"][0]["resources"]["requests"]
    assert export == {"cpu": "950m", "memory": "{}M".format(sizes["default"]["mem_mb"])}
