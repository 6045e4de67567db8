"""server.kind remote: accuracy, offline, online and the report measured on a Triton the
test starts itself (standing for a server someone else runs), through the real Snakemake
and perf_analyzer; the pipeline starts, loads and stops nothing, says so in the provenance,
and refuses the steps that need a server of its own."""

import json
import shutil
from contextlib import closing

import pandas as pd
import pytest
import tritonclient.http as httpclient
import yaml

from deploybench.triton import install
from deploybench.triton.remote import RemoteServer
from deploybench.triton.server import ServerError, TritonServer, free_ports
from testkit.workflow import TINY, snakemake

RUN = "results/tft-tiny/cpu/onnx_fp32"


def _served_requests(server: TritonServer) -> int:
    with closing(httpclient.InferenceServerClient(server.http_url)) as client:
        stats = client.get_inference_statistics("tft-tiny")["model_stats"]
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """The configuration's repository, built by the pipeline and copied where its owner
    serves it (dynamic batching, as written); the pipeline then measures that server."""
    work = tmp_path_factory.mktemp("remote")
    snakemake(work, f"{RUN}/model_repository")
    deployed = tmp_path_factory.mktemp("owner") / "repository"
    shutil.copytree(work / RUN / "model_repository", deployed)
    with TritonServer(install.prepare(), deployed, deployed.parent / "server.log",
                      "tft-tiny") as server:
        extra = work / "remote.yaml"
        extra.write_text(yaml.safe_dump({"server": {"kind": "remote", "remote": {
            "http_url": server.http_url, "grpc_url": server.grpc_url}}}))
        before = _served_requests(server)
        result = snakemake(work, f"{RUN}/README.md", "--configfile", str(TINY), str(extra))
        served = _served_requests(server) - before
        refused = snakemake(work, f"{RUN}/floor.csv", "--configfile", str(TINY), str(extra),
                            check=False)
        yield {"work": work, "server": server, "served": served, "result": result,
               "refused": refused}


def test_the_scenarios_measure_the_remote_server_and_say_so(remote):
    work, server = remote["work"], remote["server"]
    online = json.loads((work / RUN / "online.json").read_text())
    for scenario in ("accuracy", "offline", "online"):
        prov = json.loads((work / RUN / f"{scenario}.json").read_text())["provenance"]
        assert prov["server"]["kind"] == "remote"
        assert prov["server"]["http_url"] == server.http_url
        assert prov["server"]["started_by"].startswith("someone else")
        assert prov["device_lock"]["device"] == f"remote-{server.http_url}"
        # it started no server: its server log says so, and nothing else
        assert (work / RUN / f"logs/{scenario}_server.log").read_text().startswith(
            "server.kind remote: no server started here")
    assert (pd.read_csv(work / RUN / "accuracy.csv").query("kind == 'deviation'")["passed"]
            .all())
    offline = pd.read_csv(work / RUN / "offline.csv")
    assert set(offline["Shared memory"]) == {"none"}  # no memory shared with a remote host
    prov = json.loads((work / RUN / "offline.json").read_text())["provenance"]
    assert set(offline["Served by"]) == {prov["server"]["served_by"]}  # as the server said
    assert offline["process CPU mean (%)"].isna().all()  # no process of this host serves
    # every request the online tails counted reached that server
    assert remote["served"] >= sum(t["requests"] for t in online["tail"]) > 0
    assert json.loads((work / RUN / "offline.json").read_text())[
        "perf_analyzer_settings"]["batching"] == "dynamic (the remote server's)"


def test_the_report_says_why_floor_and_native_are_missing(remote):
    readme = (remote["work"] / RUN / "README.md").read_text()
    assert readme.count("Not measured: server.kind remote measures a server someone else "
                        "runs") == 2
    assert not (remote["work"] / RUN / "native.csv").exists()


def test_a_step_that_needs_its_own_server_is_refused_with_the_reason(remote):
    """Refused while the DAG is built, before any job: nothing ran."""
    refused = remote["refused"]
    assert refused.returncode != 0
    assert "floor needs a server the pipeline starts itself" in refused.stdout + refused.stderr
    assert not (remote["work"] / RUN / "floor.csv").exists()
    assert not (remote["work"] / RUN / "logs/floor.log").exists()


def test_a_remote_model_of_another_interface_or_no_server_is_refused(remote):
    server = remote["server"]
    found = RemoteServer({"http_url": server.http_url, "grpc_url": server.grpc_url},
                         install.prepare(), "tft-tiny")
    with pytest.raises(ServerError, match=r"\['no_such_input'\] missing"):
        found.check_inputs(["no_such_input"])
    gone = RemoteServer({"http_url": server.http_url, "grpc_url": server.grpc_url,
                         "model": "not-deployed"}, install.prepare(), "tft-tiny")
    with pytest.raises(ServerError, match="model 'not-deployed' .* is not ready"):
        gone.ensure_alive()
    port = free_ports(1)[0]  # nothing listens there
    nobody = RemoteServer({"http_url": f"127.0.0.1:{port}", "grpc_url": f"127.0.0.1:{port}"},
                          install.prepare(), "tft-tiny")
    with pytest.raises(ServerError, match="does not answer"):
        nobody.ensure_alive()
