"""Where a served request's time goes outside the backend: one model of a configuration's
model repository and its identity twin (the same config served by the C++ backend's
identity engine: the same tensors, no compute), each on a Triton started with its own
trace (level TIMESTAMPS, every request), driven by perf_analyzer at one batch and
concurrency 1. Prints, per model, the medians and means of Triton's trace phases and of
the time outside the server: from one response's send to the next request's read, which
perf_analyzer counts in "Network+Server Send/Recv" and the server's timestamps do not.

    python trace_round_trip.py REPOSITORY MODEL INPUT_DATA [--protocol grpc] [--batch 1]

Run from a workdir whose paths INPUT_DATA is relative to, in the project's environment
(PYTHONPATH=scripts).
"""

import argparse
import collections
import glob
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from deploybench.triton import install
from deploybench.triton.server import TritonServer

PHASES = [("REQUEST_START", "QUEUE_START"), ("QUEUE_START", "COMPUTE_START"),
          ("COMPUTE_START", "COMPUTE_INPUT_END"), ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
          ("COMPUTE_OUTPUT_START", "COMPUTE_END"), ("COMPUTE_END", "REQUEST_END")]


def identity_twin(repository: Path, model: str, into: Path) -> str:
    """MODEL's config served by the identity engine, in a repository of its own."""
    twin = f"{model}-identity"
    (into / twin).mkdir(parents=True)
    config = (repository / model / "config.pbtxt").read_text()
    config = config.replace(f'name: "{model}"', f'name: "{twin}"', 1)
    runner = config.index('key: "runner"')
    start = config.index("string_value:", runner)
    end = config.index("\n", start)
    (into / twin / "config.pbtxt").write_text(
        config[:start] + 'string_value: "identity"' + config[end:])
    shutil.copytree(repository / model / "1", into / twin / "1", symlinks=True)
    return twin


def traced(prepared, repository: Path, model: str, args, out: Path) -> dict:
    trace = out / f"trace-{model}.json"
    flags = (f"--trace-config=triton,file={trace}", "--trace-config=level=TIMESTAMPS",
             "--trace-config=rate=1", "--trace-config=count=-1",
             "--trace-config=triton,log-frequency=1000")
    with TritonServer(prepared, repository, out / f"{model}.log", flags=flags) as server:
        url = server.grpc_url if args.protocol == "grpc" else server.http_url
        run = subprocess.run(
            ["perf_analyzer", "-m", model, "-b", str(args.batch), "--concurrency-range", "1:1",
             "--measurement-mode", "count_windows", "--measurement-request-count", "1000",
             "-i", args.protocol, "-u", url.removeprefix("http://"),
             "--input-data", args.input_data],
            capture_output=True, text=True, env={**os.environ, **prepared.env})
    client = [line.strip() for line in run.stdout.splitlines()
              if "Avg latency" in line or "Throughput" in line or "time:" in line]
    by = collections.defaultdict(dict)
    for name in sorted(glob.glob(f"{trace}*")):
        for t in json.loads(Path(name).read_text()):
            for stamp in t.get("timestamps", []):
                by[t["id"]][stamp["name"]] = stamp["ns"]
    kept = [v for v in by.values() if "REQUEST_START" in v and "REQUEST_END" in v]
    kept.sort(key=lambda v: v["REQUEST_START"])
    prefix = "GRPC" if args.protocol == "grpc" else "HTTP"
    read, sent = (f"{prefix}_WAITREAD_END", f"{prefix}_SEND_END") if prefix == "GRPC" else (
        "HTTP_RECV_END", "HTTP_SEND_END")

    def us(values):
        return f"median {statistics.median(values):7.1f} us, mean {statistics.mean(values):7.1f}"

    lines = [f"{model}: {len(kept)} requests traced; perf_analyzer: {'; '.join(client)}"]
    for a, b in PHASES + [(read, sent)]:
        values = [(v[b] - v[a]) / 1e3 for v in kept if a in v and b in v]
        if values:
            lines.append(f"  {a:>20} -> {b:<20} {us(values)}")
    gaps = [(b[read] - a[sent]) / 1e3 for a, b in zip(kept, kept[1:]) if sent in a and read in b]
    if gaps:
        lines.append(f"  outside the server: {sent} -> the next {read} {us(gaps)}")
    return {"lines": lines}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path)
    parser.add_argument("model")
    parser.add_argument("input_data")
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    prepared = install.prepare()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        twins = out / "repository"
        twin = identity_twin(args.repository, args.model, twins)
        for repository, model in ((args.repository, args.model), (twins, twin)):
            print("\n".join(traced(prepared, repository, model, args, out)["lines"]))


if __name__ == "__main__":
    main()
