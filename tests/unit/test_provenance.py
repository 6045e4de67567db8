"""The project's revision in a measurement's provenance, on a real git checkout."""

import subprocess
import sys

from deploybench.measurement import provenance
from deploybench.measurement.provenance import code_digest, commits_with_code, git_revision


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_dirty_copy_names_the_commit_that_holds_its_code(tmp_path):
    """A lent machine's copy has older history than its files: the digest of its code as
    it is (changed and new files; not results or documents) is the one of the later
    commit that holds the same code, and the repository is not written to."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "scripts/code.py").write_text("a = 1\n")
    (tmp_path / "results/table.csv").write_text("1\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "one")
    first = git(tmp_path, "rev-parse", "HEAD")
    clean = git_revision(tmp_path)
    assert clean == {"commit": first, "dirty": False, "code": code_digest(tmp_path, first)}

    (tmp_path / "scripts/code.py").write_text("a = 2\n")
    (tmp_path / "scripts/new.py").write_text("b = 1\n")  # new, not yet tracked
    (tmp_path / "results/table.csv").unlink()  # results are not code
    objects = git(tmp_path, "count-objects", "-v")
    dirty = git_revision(tmp_path)
    assert dirty["commit"] == first and dirty["dirty"]
    assert dirty["code"] not in (None, clean["code"])
    assert git(tmp_path, "count-objects", "-v") == objects  # nothing written
    assert git(tmp_path, "diff", "--cached", "--name-only") == ""  # the index untouched

    git(tmp_path, "add", "scripts")
    git(tmp_path, "commit", "-q", "-m", "two")
    second = git(tmp_path, "rev-parse", "HEAD")
    assert code_digest(tmp_path, second) == dirty["code"]
    assert commits_with_code(dirty["code"], tmp_path) == [second]
    assert commits_with_code(clean["code"], tmp_path) == [first]


def test_a_copy_without_git_records_the_digest_of_its_commit(tmp_path):
    """A lent GPU machine's copy has no .git: the digest of its code, from the files alone,
    is its commit's, which `python -m deploybench.measurement.provenance DIGEST` names;
    what git ignores there (bytecode, an egg-info, a step's partial output) is skipped as
    git skips it."""
    root = provenance.PROJECT
    head = git(root, "rev-parse", "HEAD")
    archive = subprocess.run(["git", "-C", str(root), "archive", head, "--",
                              *provenance.CODE_PATHS], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    for junk in ("scripts/deploybench/__pycache__/provenance.cpython-311.pyc",
                 "scripts/deploybench.egg-info/PKG-INFO", "rules/.serve.smk.tmp-1"):
        (tmp_path / junk).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / junk).write_text("not code\n")
    revision = git_revision(tmp_path)
    assert revision == {"commit": None, "dirty": None, "code": code_digest(root, head)}
    named = subprocess.run([sys.executable, "-m", "deploybench.measurement.provenance",
                            revision["code"]],
                           capture_output=True, text=True, check=True, cwd=root).stdout
    assert head in named.split(), named
    (tmp_path / "scripts/deploybench/provenance.py").write_text("changed = True\n")
    assert git_revision(tmp_path)["code"] != revision["code"]
    # git ignores nothing else under the code's paths (the copy would count it as code)
    ignored = git(root, "status", "--ignored", "--porcelain", "--", *provenance.CODE_PATHS)
    for line in (line for line in ignored.splitlines() if line.startswith("!! ")):
        path = line.removeprefix("!! ").rstrip("/")
        assert any(provenance._ignored(part) for part in path.split("/")), line


def test_torchs_cuda_build_is_read_from_its_version_file(tmp_path):
    """What torch.version.cuda says, without importing torch: the installed build's, and
    a CUDA build's file as torch writes it."""
    import torch

    assert provenance._torch_build() == {"cuda": torch.version.cuda}
    (tmp_path / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.11.0+cu130'\ndebug = False\n"
        "cuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n")
    assert provenance.torch_cuda(tmp_path / "version.py") == "13.0"
