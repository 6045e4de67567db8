import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.users import OTHER_USER
from testkit.workflow import ROOT, main_config, needs, snakemake

# The checkout under test first, in this process and in every process it starts: a
# PYTHONPATH naming another checkout's scripts/ would otherwise import that one's package
# (a test changing this checkout's code would then see no change).
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "scripts"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
sys.path.insert(0, str(ROOT / "scripts"))
# the tools the tests import as modules (results_archive, bench_incremental, pack_offline)
sys.path[1:1] = [str(ROOT / "scripts" / d) for d in ("benchmarks", "machines", "results_tools")]
# tests/ itself (pytest puts it first, as this file's folder): the tests' helper modules,
# tests/testkit (a test module imports from them by name, never from another test module)


# A test's kind is its folder, the one place that says it: every test under tests/e2e is
# marked `e2e` (`pytest -m "not e2e"`: the unit pass), every one under tests/gpu `gpu`; no
# test module marks itself (tests/unit/test_code_shape.py checks both).
KINDS = {"e2e": pytest.mark.e2e, "gpu": pytest.mark.gpu}


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the markers
def pytest_collection_modifyitems(config, items):
    """Mark each test by its folder (KINDS). A `gpu` test needs a CUDA GPU: skipped where
    there is none (`pytest -m gpu` selects every one, as scripts/machines/gpu_tests.sh runs
    them on a lent machine)."""
    tests = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else ""
        if folder in KINDS:
            item.add_marker(KINDS[folder])
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    import torch

    if not torch.cuda.is_available():
        for item in marked:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory) -> Path:
    """The tiny config's default build (tft-tiny, cpu, onnx, fp32: every step and report),
    made once a session and never changed: a module copies it (copy_build) and re-runs
    only what its own settings change, as a user's second run would."""
    work = tmp_path_factory.mktemp("tiny-build")
    result = snakemake(work)
    (work / "terminal.txt").write_text(result.stderr + result.stdout)  # what the user saw
    return work


@pytest.fixture(scope="session")
def settings():
    from deploybench.settings.resolve import Settings

    return Settings(main_config())


# Debian's Chromium (apt package chromium), never a browser Playwright downloads. Without
# the background-networking flags it keeps opening connections a closed network refuses;
# --no-sandbox: its sandbox cannot start as root in a container.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium driven by Playwright: skipped where Chromium is not installed,
    failed under CI, which installs it (.ci/run) and Playwright (the test extra)."""
    if not CHROMIUM.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is not installed: .ci/run installs Debian's chromium",
                        pytrace=False)
        pytest.skip(f"{CHROMIUM} is not installed (Debian: apt-get install chromium)")
    sync_api = needs("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def other_user():
    """Run commands as a second, unprivileged user of this host: `other_user(cmd, ...)`
    is subprocess.run as that user (created where the tests run as root; the tests that
    need one are skipped elsewhere, with the reason)."""
    import pwd

    if os.getuid() != 0:
        pytest.skip("acting as a second local user needs root (the tests create "
                    f"'{OTHER_USER}' where they run as root)")
    try:
        entry = pwd.getpwnam(OTHER_USER)
    except KeyError:  # another test process may create it at the same moment: no check
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", OTHER_USER], capture_output=True)
        entry = pwd.getpwnam(OTHER_USER)

    def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(cmd, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                              **kwargs)

    run.uid, run.gid = entry.pw_uid, entry.pw_gid
    return run


@pytest.fixture(scope="module")
def toy_repo(tmp_path_factory):
    """A real ONNX model in a generated repository (testkit.toy_onnx's RUN: the python
    backend serves it)."""
    import torch

    from deploybench.triton import repository
    from testkit.toy_onnx import RUN

    work = tmp_path_factory.mktemp("toy")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    torch.onnx.export(model, (torch.randn(2, 4),), str(work / "m.onnx"), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}},
                      opset_version=17, dynamo=False)
    repository.create(RUN, work / "m.onnx", work / "repo", ["python"])
    return work, model
