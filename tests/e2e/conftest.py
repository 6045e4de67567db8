"""Fixtures of the end-to-end tests alone."""

import pytest

from testkit.workflow import copy_build


@pytest.fixture(scope="module")
def built(request, tiny_build, tmp_path_factory):
    """One full default build of the tiny configuration (onnx, fp32, cpu), the test
    module's own copy: its tests build more in it (a module that builds otherwise defines
    its own `built`)."""
    name = request.module.__name__.removeprefix("test_")
    return copy_build(tiny_build, tmp_path_factory.mktemp(name) / "work")
