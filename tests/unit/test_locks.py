"""The device lock cannot be turned against its owner: what a second local user plants in
the lock folder is refused and left as it was, another user's real lock is waited on (with
a bound, naming who holds it), and a lock handed to a server lives as long as it does."""

import fcntl
import os
import re
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from deploybench.measurement import locks
from testkit.users import OTHER_USER


@pytest.fixture
def tmp_root(monkeypatch):
    """A stand-in for /tmp that a second user can reach (pytest's own is root's alone)."""
    monkeypatch.delenv("DEPLOYBENCH_LOCK_DIR", raising=False)
    monkeypatch.delenv(locks.TIMEOUT_ENV, raising=False)
    root = Path(tempfile.mkdtemp(prefix="deploybench-locktest-", dir="/tmp"))
    root.chmod(0o1777)  # sticky and world-writable, as /tmp
    monkeypatch.setattr(locks, "TMP", root)
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=True)


def host_folder(root: Path) -> Path:
    """The host-wide lock folder, as a root run creates it."""
    _, path, scope = locks.lock_folder()
    assert (path, scope) == (root / locks.HOST_FOLDER, "host")
    return path


def mode_and_bytes(path: Path) -> tuple[int, int, bytes]:
    st = os.lstat(path)
    return st.st_mode, st.st_uid, path.read_bytes()


def wait_until_locked(path: Path) -> None:
    fd, deadline = os.open(path, os.O_RDONLY), time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                time.sleep(0.05)
            except BlockingIOError:
                return
        raise AssertionError(f"nothing locked {path}")
    finally:
        os.close(fd)


def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_root, other_user):
    folder = host_folder(tmp_root)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o1777 and folder.stat().st_uid == 0
    secret = tmp_root / "secret"  # root's own file, of the other user's choosing
    secret.write_text("root only")
    secret.chmod(0o600)
    before = mode_and_bytes(secret)
    assert other_user(["ln", "-s", str(secret), str(folder / "cpu.lock")]).returncode == 0
    missing = tmp_root / "made-through-the-link"
    assert other_user(["ln", "-s", str(missing), str(folder / "gpu0.lock")]).returncode == 0
    with pytest.raises(locks.LockError, match=r"cpu\.lock is a symbolic link: refused"):
        with locks.device_lock("cpu"):
            pass
    with pytest.raises(locks.LockError, match=r"gpu0\.lock is a symbolic link: refused"):
        with locks.device_lock("gpu0"):
            pass
    assert mode_and_bytes(secret) == before  # not re-moded, not written
    assert not missing.exists()  # nothing created through a dangling link


@pytest.mark.parametrize("plant", [
    ["sh", "-c", "echo x > {lock}"],                   # a file with content
    ["sh", "-c", "touch {lock}.own && ln {lock}.own {lock}"],  # a hard link
    ["mkfifo", "{lock}"],                              # a FIFO (opening one must not hang)
    ["mkdir", "{lock}"],
], ids=["content", "hard-link", "fifo", "folder"])
def test_a_foreign_file_that_is_no_lock_is_refused_untouched(tmp_root, other_user, plant):
    lock = host_folder(tmp_root) / "cpu.lock"
    made = other_user([part.format(lock=lock) for part in plant])
    assert made.returncode == 0, made.stderr
    before = os.lstat(lock)
    with pytest.raises(locks.LockError, match=r"cpu\.lock (is not|has 2 hard links|is not "
                                              r"empty).*refused and left as it is"):
        with locks.device_lock("cpu"):
            pass
    after = os.lstat(lock)
    assert (after.st_mode, after.st_uid, after.st_size) == \
        (before.st_mode, before.st_uid, before.st_size)


def test_another_users_lock_is_waited_on_with_a_bound_and_never_remoded(
        tmp_root, other_user, monkeypatch):
    """...and made root's, so that its maker can no longer remove it (the swap below)."""
    lock = host_folder(tmp_root) / "cpu.lock"
    assert other_user(["sh", "-c", f"umask 077 && touch {lock}"]).returncode == 0
    before = os.lstat(lock)
    assert stat.S_IMODE(before.st_mode) == 0o600 and before.st_uid == other_user.uid
    # Root may open it, so it waits for the other user's lock, whatever its mode.
    holder = subprocess.Popen(["runuser", "-u", OTHER_USER, "--", "flock", str(lock),
                               "sleep", "1.5"], start_new_session=True)
    try:
        wait_until_locked(lock)
        monkeypatch.setenv(locks.TIMEOUT_ENV, "0.5")
        with pytest.raises(locks.LockError, match=r"gave up after \d+ s waiting for .*cpu\.lock"
                                                  r", held by \d+ \((flock|sleep)\)"):
            with locks.device_lock("cpu"):
                pass
        monkeypatch.setenv(locks.TIMEOUT_ENV, "30")
        start = time.monotonic()
        with locks.device_lock("cpu") as held:
            waited = time.monotonic() - start
            assert held.record["scope"] == "host" and held.record["lock"] == str(lock)
        assert waited > 0.3 and held.record["waited_s"] > 0.3, (waited, held.record)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    after = os.lstat(lock)
    assert (after.st_mode, after.st_ino, after.st_uid) == (before.st_mode, before.st_ino, 0)


def test_a_host_folder_another_user_made_is_not_used(tmp_root, other_user):
    host = tmp_root / locks.HOST_FOLDER
    assert other_user(["mkdir", "-m", "1777", str(host)]).returncode == 0
    with locks.device_lock("cpu") as held:
        own = tmp_root / f"{locks.HOST_FOLDER}-0"
        assert held.record["lock"] == str(own / "cpu.lock")
        assert held.record["scope"].startswith(f"user: {host} is not root's (owner uid "
                                               f"{other_user.uid}")
        assert stat.S_IMODE(own.stat().st_mode) == 0o700
    assert list(host.iterdir()) == []
    # A folder planted where the user's own would be is refused, not used.
    subprocess.run(["rm", "-rf", str(own)], check=True)
    assert other_user(["mkdir", "-m", "700", str(own)]).returncode == 0
    with pytest.raises(locks.LockError, match=r"deploybench-locks-0 is owned by another user"):
        with locks.device_lock("cpu"):
            pass


def test_a_bad_timeout_is_refused_by_name(tmp_root, monkeypatch):
    monkeypatch.setenv(locks.TIMEOUT_ENV, "soon")
    with pytest.raises(locks.LockError, match=r"DEPLOYBENCH_LOCK_TIMEOUT_S='soon'.*above 0"):
        with locks.device_lock("cpu"):
            pass


def test_a_lock_handed_to_a_process_lives_until_that_process_ends(tmp_root, monkeypatch):
    """What a step does with its server: the server inherits the lock's descriptor, so a
    step that dies (here: leaves its block) while its server runs does not free the device."""
    with locks.device_lock("cpu") as held:
        server = subprocess.Popen(["sleep", "60"], pass_fds=(held.fd,))
    try:
        monkeypatch.setenv(locks.TIMEOUT_ENV, "0.5")
        with pytest.raises(locks.LockError, match=rf"held by {server.pid} \(sleep\)"):
            with locks.device_lock("cpu"):
                pass
    finally:
        server.kill()
        server.wait()
    with locks.device_lock("cpu") as held:
        assert held.record["waited_s"] < 0.5


def test_a_run_that_cannot_trust_a_lock_file_says_so_and_does_not_measure(tmp_root, other_user):
    """A user's run finding a third user's lock file (here nobody's) in the shared folder:
    that user could swap it under the run, which root alone can prevent (making it its
    own). The run refuses it, naming the file and what makes it safe; nothing is changed."""
    lock = host_folder(tmp_root) / "cpu.lock"
    lock.touch()
    os.chown(lock, 65534, 65534)
    code = ("from deploybench.measurement import locks\n"
            "with locks.device_lock('cpu'): print('measured')")
    env = {"PYTHONPATH": str(Path(locks.__file__).parents[2]),
           "DEPLOYBENCH_LOCK_DIR": str(lock.parent), "PATH": os.environ["PATH"]}
    ran = other_user(["python3", "-c", code], env=env)
    assert ran.returncode != 0 and "measured" not in ran.stdout, ran.stdout
    assert re.search(r"LockError: lock file .*cpu\.lock belongs to another user \(owner uid "
                     r"65534.*refused, nothing measured. A root run makes it root's",
                     ran.stderr), ran.stderr
    assert os.lstat(lock).st_uid == 65534
