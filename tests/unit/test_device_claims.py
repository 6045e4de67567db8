"""Device locks and GPU claims with some GPUs held, in this process (seconds): a claim of
several GPUs takes all or none and holds no part of them while it waits, a step takes the
free GPU of its key, a conversion takes one without holding it, a step is pinned to its
GPUs' share of the CPUs. The GPUs are a stand-in listing; the locks are real flocks."""

import fcntl
import os
import threading
import time

import pytest

from deploybench.measurement import device, locks
from deploybench.settings import run_facts

H100 = {"key": "h100", "kind": "gpu", "match": ["H100"]}
GPUS = [{"index": "0", "uuid": "GPU-a", "name": "NVIDIA H100 80GB HBM3"},
        {"index": "1", "uuid": "GPU-b", "name": "NVIDIA A100-SXM4-80GB"},
        {"index": "2", "uuid": "GPU-c", "name": "NVIDIA H100 80GB HBM3"}]


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A lock folder of the test's own, the stand-in GPUs, CPU pinning recorded."""
    monkeypatch.setenv("DEPLOYBENCH_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv(locks.TIMEOUT_ENV, "0.6")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(device, "listed_gpus", lambda: GPUS)
    pinned = []
    monkeypatch.setattr(device.os, "sched_setaffinity", lambda pid, cpus: pinned.append(cpus))
    monkeypatch.setattr(device.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    return tmp_path / "locks", pinned


class Holder:
    """Another process's lock on `device` (its own open file: flock tells them apart)."""

    def __init__(self, folder, name):
        folder.mkdir(exist_ok=True)
        self.fd = os.open(folder / f"{name}.lock", os.O_RDONLY | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self):
        os.close(self.fd)


def test_a_claim_of_several_takes_all_or_none_and_keeps_no_part_while_it_waits(host):
    """GPU-a held: a claim of all three waits holding neither GPU-b nor GPU-c (kept, two
    claims each waiting for the other's half would never end), gives up after its timeout,
    and once GPU-a is free takes the three."""
    folder, _ = host
    other = Holder(folder, "GPU-a")
    with pytest.raises(locks.LockError, match=r"gave up after \d+ s"):
        with locks.any_device_lock(["GPU-a", "GPU-b", "GPU-c"], count=3):
            pass
    assert locks.is_free("GPU-b") and locks.is_free("GPU-c")
    free_while_waiting, got = [], {}

    def waiter():
        with locks.any_device_lock(["GPU-a", "GPU-b", "GPU-c"], count=3) as held:
            got.update(held.record)

    os.environ[locks.TIMEOUT_ENV] = "10"
    thread = threading.Thread(target=waiter)
    thread.start()
    for _ in range(5):
        time.sleep(0.1)
        free_while_waiting.append(locks.is_free("GPU-b") and locks.is_free("GPU-c"))
    other.release()
    thread.join(timeout=10)
    assert free_while_waiting == [True] * 5
    assert got["devices"] == ["GPU-a", "GPU-b", "GPU-c"] and got["waited_s"] > 0.4


def test_a_claim_of_two_takes_the_first_free_in_order(host):
    folder, _ = host
    other = Holder(folder, "GPU-b")
    try:
        with locks.any_device_lock(["GPU-a", "GPU-b", "GPU-c"], count=2) as held:
            assert held.record["devices"] == ["GPU-a", "GPU-c"]
            assert len(held.fds) == 2 and not locks.is_free("GPU-c")
        assert locks.is_free("GPU-a") and locks.is_free("GPU-c")
    finally:
        other.release()


def test_a_step_takes_the_free_gpu_of_its_key_and_its_share_of_the_cpus(host):
    """GPU-a (H100, index 0) held: the H100 step takes GPU-c (index 2 of 3 GPUs: CPUs 2 and
    3 of 4), CUDA_VISIBLE_DEVICES names it alone; a conversion beside it takes the free
    H100 unheld; with GPU-c held as well, a second H100 step waits, then gives up."""
    folder, pinned = host
    other = Holder(folder, "GPU-a")
    run = {"gpu": H100, "allow_gpu_mismatch": False}
    with device.claim(run) as claimed:
        assert (claimed.device, claimed.devices) == ("GPU-c", ("GPU-c",))
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-c" and pinned == [{2, 3}]
        assert not locks.is_free("GPU-c")
    os.environ.pop("CUDA_VISIBLE_DEVICES")
    with device.claim(run, hold=False) as conversion:
        assert conversion.device == "GPU-c" and conversion.held is None
        assert locks.is_free("GPU-c")
    os.environ.pop("CUDA_VISIBLE_DEVICES")
    with locks.device_lock("GPU-c"), pytest.raises(locks.LockError, match="GPU-a or GPU-c"):
        with device.claim(run):
            pass
    other.release()


def test_a_deployment_over_two_gpus_waits_for_both_and_a_third_is_refused(host):
    folder, pinned = host
    run = {"gpu": H100, "allow_gpu_mismatch": False}
    other = Holder(folder, "GPU-c")
    with pytest.raises(locks.LockError):
        with device.claim(run, count=2):
            pass
    assert locks.is_free("GPU-a")  # the free half was not kept
    other.release()
    with device.claim(run, count=2) as claimed:
        assert claimed.devices == ("GPU-a", "GPU-c")
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-c"
        assert pinned == [{0, 2, 3}]  # GPU 0's CPU 0, GPU 2's CPUs 2 and 3 of 4
    os.environ.pop("CUDA_VISIBLE_DEVICES")
    with pytest.raises(device.DeviceMismatch, match="triton.gpus 3: GPU key 'h100' has 2"):
        with device.claim(run, count=3):
            pass


LISTING = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaa)\n"
           "  MIG 3g.40gb     Device  0: (UUID: MIG-bbb)\n"
           "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-ccc)\n")


@pytest.fixture
def smi(monkeypatch):
    """nvidia-smi's answers (-L: LISTING) without one."""
    import subprocess

    answers = {"-L": LISTING,
               "--query-gpu=name,driver_version": "NVIDIA A100-SXM4-80GB, 570.1\n"
                                                  "NVIDIA H100 80GB HBM3, 570.1\n"}
    monkeypatch.setattr(device.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(device.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, answers[cmd[1]], ""))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv(device.SLOTS_ENV, raising=False)


def test_the_gpus_are_read_from_nvidia_smis_listing_mig_devices_under_their_gpu(smi,
                                                                               monkeypatch):
    a100 = {"index": "0", "uuid": "GPU-aaa", "name": "NVIDIA A100-SXM4-80GB"}
    h100 = {"index": "1", "uuid": "GPU-ccc", "name": "NVIDIA H100 80GB HBM3"}
    assert device.listed_gpus() == [a100, {**a100, "uuid": "MIG-bbb"}, h100]
    assert device.visible_gpus() == [a100, h100] and device.bench_slots() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1, MIG-bbb")  # by index, by UUID
    assert device.visible_gpus() == [h100, {**a100, "uuid": "MIG-bbb"}]
    assert device.gpu_names() == ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
    assert device.query_gpus("name,driver_version") == [
        ["NVIDIA A100-SXM4-80GB", "570.1"], ["NVIDIA H100 80GB HBM3", "570.1"]]
    monkeypatch.setenv(device.SLOTS_ENV, "3")
    assert device.bench_slots() == 3
    monkeypatch.setenv(device.SLOTS_ENV, "0")
    with pytest.raises(ValueError, match="at least 1"):
        device.bench_slots()


def test_the_host_key_is_the_one_key_matching_every_gpu(smi):
    registry = {"h100": {"match": ["H100"]}, "a100": {"match": ["A100"]},
                "any": {"match": ["A100", "H100"]}, "cpu": {"match": []}}
    assert device.host_key(registry) == "any"
    with pytest.raises(device.DeviceMismatch, match="h100, a100 do|none do"):
        device.host_key({k: registry[k] for k in ("h100", "a100")})


def test_which_steps_claim_the_device():
    run = {"backend": {"runner": "onnxruntime"}, "precision": "fp32",
           "server": {"kind": "local"}}
    assert device.claims(run, "offline") and device.claims(run, "rate")
    assert not device.claims(run, "convert") and not device.claims(run, "report")
    assert device.claims({**run, "precision": "fp16"}, "convert")  # cast on the device
    assert device.claims({**run, "backend": {"runner": "tensorrt"}}, "convert")
    remote = {**run, "server": {"kind": "remote"}}
    assert not device.claims(remote, "offline") and device.claims(remote, "conversion_check")
    assert run_facts.may_run_on_device("convert") and not run_facts.may_run_on_device("plots")
    assert device.deployment_gpus({"model": {"triton": {"gpus": 2}}}) == 2
    assert device.deployment_gpus({}) == 1
