"""The real Triton server: start/stop, ports, load failures, generated configs, the
dynamic batcher, a dead server, private shared memory."""

import pytest

from deploybench.triton import config as triton_config
from testkit.toy_onnx import RUN


def test_generated_config_parses_with_tritons_schema(toy_repo):
    work, _ = toy_repo
    config = triton_config.read(work / "repo" / "toy" / "config.pbtxt")
    assert config.max_batch_size == 8
    assert list(config.dynamic_batching.preferred_batch_size) == [4]
    assert config.parameters["runner"].string_value == "onnxruntime"
    assert not triton_config.scenario_config(config, static_batching=True).HasField(
        "dynamic_batching")


def test_a_retried_command_doubles_the_request_count():
    """perf_analyzer's advice when it cannot stabilise: more requests per window."""
    from types import SimpleNamespace

    from deploybench.triton import perf_analyzer

    run = {**RUN, "model": {**RUN["model"], "online": {"measurement_request_count": 50}},
           "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 5000,
                    "stability_percentage": 10, "max_trials": 10}}
    server = SimpleNamespace(install=SimpleNamespace(perf_analyzer="perf_analyzer"),
                             http_url="127.0.0.1:8000", version="1",
                             served_name=lambda name: name)
    counts = []
    for attempt in (1, 2, 3):
        cmd = perf_analyzer.command(run, "online", server, perf_analyzer.Row(1, 4, "none"),
                                    "data.json", "out.csv", attempt)
        counts.append(int(cmd[cmd.index("--measurement-request-count") + 1]))
    assert counts == [50, 100, 200]


@pytest.mark.parametrize("mode", ["count_windows", "time_windows"])
def test_online_windows_hold_min_requests_and_are_lengthened_to_min_duration(mode):
    """Count windows are raised to a third of perf.min_requests online (not offline); a
    level whose kept windows fell short of min_requests or min_duration_s is measured
    again with windows long enough for both at the rate it measured."""
    from deploybench.records.tail import KEPT_WINDOWS
    from deploybench.settings.run_facts import window
    from deploybench.sweeps.closed_loop import _lengthened

    scenario = {"measurement_request_count": 10}
    run = {**RUN, "model": {**RUN["model"], "online": scenario, "offline": scenario},
           "perf": {"measurement_mode": mode, "measurement_interval_ms": 250,
                    "min_requests": 45, "min_duration_s": 4.0}}
    assert window(run, "offline") == (mode, 250, 10)
    assert window(run, "online") == (mode, 250, 15)
    assert _lengthened(run, {"requests": 300, "seconds": 4.0}, 1) == 0  # it has both
    for requests, seconds in ((45, 0.75), (20, 5.0), (200, 1.0)):
        scale = _lengthened(run, {"requests": requests, "seconds": seconds}, 1)
        assert scale > 1
        # the kept windows at that scale, at the rate measured
        rate = requests / seconds
        if mode == "time_windows":
            span = seconds * scale
        else:  # a count window lasts as long as its count takes at that rate
            span = KEPT_WINDOWS * 15 * scale / rate
        assert span >= 4.0 and span * rate >= 45, (requests, seconds, scale)
    assert _lengthened(run, {"requests": 45, "seconds": 0.75}, 3) > 3  # never shorter
