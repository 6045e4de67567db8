"""Where the C++ backend cannot be built, the install says why and keeps the python backend."""

import os
import subprocess
import sys

from deploybench.triton import repository
from testkit.cpp_toy import run_of


def test_without_a_compiler_the_install_says_why_and_keeps_the_python_backend(tmp_path):
    """Where the backend cannot be built, the embedded server has the python backend only,
    the install records why (every measurement's provenance.server.cpp_backend), and the
    repository step serves every format with the python backend."""
    env = dict(os.environ, CXX=str(tmp_path / "no-such-g++"),
               DEPLOYBENCH_CACHE=str(tmp_path / "cache"))
    code = ("from deploybench.triton import install; found = install.prepare(); "
            "print(found.backends); print(found.describe()['cpp_backend'])")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True)
    backends, why = result.stdout.splitlines()[-2:]
    assert backends == "['python']"
    assert why == "unavailable: no C++ compiler (g++): install one, or set CXX"
    assert "the C++ backend is not available, the python backend serves every format" \
        in result.stderr
    assert repository.choose_backend(run_of(), ["python"]) == "python"
