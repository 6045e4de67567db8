"""A host of several GPUs: each measuring step claims one GPU of its key by the GPU's lock
(deploybench.measurement.device.claim), so steps run side by side, one a GPU. The GPUs are
a stand-in `nvidia-smi` on PATH (three GPUs: two H100s and an A100); the locks and the
processes claiming them are real."""

import json
import os
import subprocess
import sys
from pathlib import Path

from testkit.gpu_claims import (
    UUIDS,
    host,  # noqa: F401 (a fixture)
)

ROOT = Path(__file__).resolve().parents[2]
H100 = {"key": "h100", "kind": "gpu", "match": ["H100"]}
A100 = {"key": "a100", "kind": "gpu", "match": ["A100"]}
H100S = {UUIDS[0], UUIDS[2]}

CLAIM = """
import json, os, sys, time
from deploybench.measurement import device
run = json.loads(sys.argv[1])
with device.claim(run, hold=sys.argv[2] == "hold", count=int(sys.argv[4])) as c:
    print(json.dumps({"device": c.device, "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                      "cpus": sorted(os.sched_getaffinity(0)),
                      "at": time.time(), "waited_s": c.held.record["waited_s"] if c.held else 0}),
          flush=True)
    time.sleep(float(sys.argv[3]))
"""


def claim(env: dict, gpu: dict, hold: bool = True, seconds: float = 0.0, count: int = 1):
    run = {"gpu": gpu, "allow_gpu_mismatch": False}
    return subprocess.Popen([sys.executable, "-c", CLAIM, json.dumps(run),
                             "hold" if hold else "free", str(seconds), str(count)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def started(proc) -> dict:
    """What a claiming process printed once it held its device."""
    line = proc.stdout.readline()
    assert line, proc.communicate(timeout=60)[1]
    return json.loads(line)


def result(proc) -> dict:
    got = started(proc)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return got


def test_steps_side_by_side_each_get_a_gpu_of_their_key_alone(host):
    first, second = claim(host, H100, seconds=5), claim(host, H100, seconds=5)
    holding = [started(first), started(second)]
    third = claim(host, H100)  # both H100s busy: it waits for one
    a100 = claim(host, A100)
    got = [*holding, result(third), result(a100)]
    first.wait(timeout=60), second.wait(timeout=60)
    assert {got[0]["device"], got[1]["device"]} == H100S  # never the same GPU twice
    assert got[2]["device"] in H100S and got[2]["waited_s"] > 1.0, got[2]
    assert got[3]["device"] == UUIDS[1] and got[3]["waited_s"] < 1.5  # its own GPU, free
    for g in got:  # the step, its server and perf_analyzer see that GPU alone
        assert g["visible"] == g["device"]


def test_a_key_whose_gpu_the_host_lacks_or_hides_is_refused(host):
    l4 = claim(host, {"key": "l4", "kind": "gpu", "match": ["L4"]})
    _, err = l4.communicate(timeout=60)
    assert l4.returncode != 0 and "GPU key 'l4' needs a device whose name contains 'L4'" in err
    assert "NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3" in err
    # a scheduler gave this job the A100 alone (by index): an H100 key is not run on it
    hidden = claim({**host, "CUDA_VISIBLE_DEVICES": "1"}, H100)
    _, err = hidden.communicate(timeout=60)
    assert hidden.returncode != 0 and "this machine has: NVIDIA A100-SXM4-80GB." in err
    # given the second H100 (by UUID), it takes that one
    given = result(claim({**host, "CUDA_VISIBLE_DEVICES": f"1,{UUIDS[2]}"}, H100))
    assert given["device"] == UUIDS[2]


def test_a_conversion_takes_a_free_gpu_without_holding_it_and_the_cpu_key_its_cpus(host):
    measuring = claim(host, H100, seconds=5)
    held = started(measuring)["device"]
    conversion = result(claim(host, H100, hold=False))  # at once, beside the measurement
    assert conversion["device"] == (H100S - {held}).pop() and conversion["waited_s"] == 0
    measuring.wait(timeout=60)
    cpu = result(claim(host, {"key": "cpu", "kind": "cpu", "match": []}))
    assert cpu["device"] == "cpu" and cpu["visible"] is None


def test_side_by_side_steps_are_pinned_to_their_gpus_shares_of_the_cpus(host):
    cpus = set(os.sched_getaffinity(0))
    both = [claim(host, H100, seconds=5) for _ in range(2)]
    got = [started(p) for p in both]
    for p in both:
        p.wait(timeout=60)
    assert {g["device"] for g in got} == H100S
    shares = [set(g["cpus"]) for g in got]  # two H100s: each half the CPUs, apart
    assert all(len(s) == len(cpus) // 2 and s <= cpus for s in shares), shares
    assert not shares[0] & shares[1], shares


def test_a_deployment_over_two_gpus_holds_both_and_a_third_is_refused(host):
    two = claim(host, H100, seconds=5, count=2)
    held = started(two)
    one = claim(host, H100)  # both H100s held: it waits for the pair to end
    got = result(one)
    two.wait(timeout=60)
    assert set(held["visible"].split(",")) == H100S and held["device"] in H100S
    assert got["waited_s"] > 1.0 and got["device"] in H100S
    three = claim(host, H100, count=3)
    _, err = three.communicate(timeout=60)
    assert three.returncode != 0 and "triton.gpus 3: GPU key 'h100' has 2 GPU(s)" in err
