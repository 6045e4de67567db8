"""The C++ backend's unit tests (triton_backend/tests/unit_tests.cc, built by its CMake
beside the library): Triton's data types as ATen's, gather and scatter of every data type
over a fake of the server's API, requests of a wrong type or shape failing alone, the
embedding store against a plain gather with a cache a tenth of its tables, its refresh, its
metrics and the .npy reader's refusals. It starts no server: not e2e."""

import subprocess

from deploybench.triton import cpp_backend, install


def test_the_backends_unit_tests_pass():
    program = cpp_backend.unit_tests(install.cache_dir())
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "passed: 0 failure(s)", result.stdout
