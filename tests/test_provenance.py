"""The project's revision in a measurement's provenance, on a real git checkout."""

import subprocess

from deploybench.provenance import git_revision


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_dirty_copy_names_the_tree_of_the_commit_that_holds_its_files(tmp_path):
    """A lent machine's copy has older history than its files: the tree id of the files
    as they are is the one a later commit of the same files records."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "code.py").write_text("a = 1\n")
    (tmp_path / "untracked.txt").write_text("not part of the tree\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    clean = git_revision(tmp_path)
    assert clean == {"commit": git(tmp_path, "rev-parse", "HEAD"), "dirty": False,
                     "tree": git(tmp_path, "rev-parse", "HEAD^{tree}")}

    (tmp_path / "code.py").write_text("a = 2\n")
    dirty = git_revision(tmp_path)
    assert dirty["commit"] == clean["commit"] and dirty["dirty"]
    assert dirty["tree"] not in (None, clean["tree"])
    assert git(tmp_path, "diff", "--cached", "--name-only") == ""  # the user's index untouched
    git(tmp_path, "commit", "-q", "-am", "two")
    assert git(tmp_path, "rev-parse", "HEAD^{tree}") == dirty["tree"]


def test_outside_a_checkout_there_is_no_revision(tmp_path):
    assert git_revision(tmp_path) is None
