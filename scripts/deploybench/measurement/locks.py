"""Host-wide locks: one measurement at a time per device, across every process and user.

Snakemake's `bench_slot` keeps two measuring jobs of one invocation apart; a second
invocation in the same folder, another user's run, or two jobs a cluster places on one
node know nothing of it. A measuring step holds its device's lock (an flock on a file in
a lock folder) from before it starts a server or a runner until after it has stopped it.
The lock's descriptor is handed to the server and perf_analyzer too (`Held.fd`): the
kernel releases it only when the last of them has ended, so a step killed while its
server lives does not free the device under it.

A lock must never be turned against its owner: the folder is checked (a real folder,
owned by root or the user, sticky where others may write), lock files are opened by
name within it without following links, never re-moded, and refused unless they are
plain empty files. Nor can it be split: a lock file is trusted only where no other user
can unlink or replace it, i.e. it is root's or the run's own in a sticky folder (a
file another user made first in the shared folder could be unlinked and made again
while held, and a second run would take the new one at once). A root run makes such a
file root's (fchown of the checked descriptor: its mode and content stay); any other run
refuses it and says why. After taking the flock, and before a result is written
(`Held.verify`), the holder checks that the path still names the file it holds. The folder
is `/tmp/deploybench-locks` where root made it (shared by every user of the host; root's
runs create it), else a folder of the user's own (`/tmp/deploybench-locks-<uid>`, mode
0700), or `DEPLOYBENCH_LOCK_DIR`. A wait is bounded (`DEPLOYBENCH_LOCK_TIMEOUT_S`,
default 2 h) and says who holds the lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

TMP = Path("/tmp")  # not $TMPDIR: schedulers give each job its own, and the lock is per host
HOST_FOLDER = "deploybench-locks"
TIMEOUT_ENV = "DEPLOYBENCH_LOCK_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 7200.0
REPORT_EVERY_S = 300.0  # how often a waiting step says again who holds the lock


class LockError(RuntimeError):
    """A lock folder or file that cannot be trusted, or a wait that ran out."""


@dataclass
class Held:
    """A held device lock: its descriptor (to hand to the processes that use the device)
    and what a result records of it."""

    fd: int
    record: dict = field(default_factory=dict)
    fds: tuple = ()  # every lock held (a deployment over several GPUs); () : fd's alone
    paths: tuple = ()  # each one's lock file, as fds

    def __post_init__(self):
        self.fds = self.fds or (self.fd,)

    def verify(self) -> None:
        """Raise LockError where a lock file's path no longer names the file this run holds
        (unlinked or replaced while held: another run may have taken the new one, and
        measured beside this one); else record when it was checked."""
        for fd, path in zip(self.fds, self.paths):
            problem = _replaced(fd, path)
            if problem:
                raise LockError(f"lock file {path} {problem} while this run held it: another "
                                "measurement may have run on the device at the same time, so "
                                "none is recorded; find who removes lock files, and run again")
        self.record["verified_at"] = time.time()


def _describe(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}"


def _open_folder(path: Path, private: bool) -> int:
    """A descriptor of the lock folder `path` after checking it: a folder (not a link),
    owned by root or this user; `private`: not writable by anyone else, else sticky
    where group or others may write (so that no one replaces another's lock file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        kind = "a symbolic link" if err.errno == errno.ELOOP else "not a folder"
        raise LockError(f"lock folder {path} is {kind} ({err.strerror}); remove it, or set "
                        "DEPLOYBENCH_LOCK_DIR to a folder of your own") from None
    st = os.fstat(fd)
    shared_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    problem = None
    if st.st_uid not in (0, os.getuid()):
        problem = "is owned by another user"
    elif private and (st.st_uid != os.getuid() or shared_write):
        problem = "must be yours and writable by you alone"
    elif shared_write and not st.st_mode & stat.S_ISVTX:
        problem = "is writable by others without the sticky bit"
    if problem:
        os.close(fd)
        raise LockError(f"lock folder {path} {problem} ({_describe(st)}); a lock there could "
                        "be replaced or taken over: remove it, or set DEPLOYBENCH_LOCK_DIR "
                        "to a folder of your own")
    return fd


def _mkdir(path: Path, mode: int) -> None:
    """Create `path` with exactly `mode` (umask aside); an existing one is left as it is."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:  # ours, just made, in a sticky /tmp no one else may rename it in
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def lock_folder() -> tuple[int, Path, str]:
    """The checked lock folder: (descriptor, path, scope). Scope says who it serialises:
    `host` (every user: root's /tmp/deploybench-locks), `user` (this user's runs alone,
    with why), or `configured` (DEPLOYBENCH_LOCK_DIR)."""
    configured = os.environ.get("DEPLOYBENCH_LOCK_DIR")
    if configured:
        path = Path(configured)
        path.mkdir(parents=True, mode=0o700, exist_ok=True)  # two steps may start at once
        return _open_folder(path, private=False), path, "configured"
    host = TMP / HOST_FOLDER
    if os.getuid() == 0:
        _mkdir(host, 0o1777)
    try:
        st = os.lstat(host)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0:
            return _open_folder(host, private=False), host, "host"
        why = f"{host} is not root's ({_describe(st)})"
    except FileNotFoundError:
        why = f"{host} does not exist (root's runs create it)"
    own = TMP / f"{HOST_FOLDER}-{os.getuid()}"
    _mkdir(own, 0o700)
    return _open_folder(own, private=True), own, f"user: {why}"


def _open_lock(folder_fd: int, folder: Path, name: str, scope: str) -> int:
    """The lock file `name` in the folder, opened read-only (flock needs no more), created
    empty and readable by all where missing; an existing one must be a plain empty file,
    not a link, and in a folder of the user's own, the user's."""
    path = folder / name
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO
    try:
        fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=folder_fd)
        os.fchmod(fd, 0o644)  # the file this call created (O_EXCL): others may lock it too
        return fd
    except FileExistsError:
        pass
    try:
        fd = os.open(name, flags, dir_fd=folder_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise LockError(f"lock file {path} is a symbolic link: refused (a lock is never "
                            "opened through a link); remove it") from None
        raise LockError(f"cannot open lock file {path}: {err.strerror}; its owner or an "
                        "administrator must remove it, or set DEPLOYBENCH_LOCK_DIR") from None
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a plain file"
    elif st.st_nlink != 1:
        problem = f"has {st.st_nlink} hard links"
    elif st.st_size:
        problem = f"is not empty ({st.st_size} bytes)"
    elif scope.startswith("user") and st.st_uid != os.getuid():
        problem = "in your own lock folder belongs to another user"
    if problem:
        os.close(fd)
        raise LockError(f"lock file {path} {problem} ({_describe(st)}): not a lock this "
                        "pipeline made, refused and left as it is; remove it")
    if st.st_uid not in (0, os.getuid()):
        _make_roots(fd, path, st)
    return fd


def _make_roots(fd: int, path: Path, st: os.stat_result) -> None:
    """Another user's lock file in a shared folder: that user may unlink it and make a new
    one while this run holds it, and the next run would take that one at once. Root makes
    it root's (the checked descriptor's file: plain, empty, one link; its mode and any lock
    on it stay); anyone else refuses it."""
    if os.getuid() == 0:
        os.fchown(fd, 0, 0)
        return
    os.close(fd)
    raise LockError(f"lock file {path} belongs to another user ({_describe(st)}), who could "
                    "remove and re-create it while this run holds it, and a second run would "
                    "then measure beside this one: refused, nothing measured. A root run makes "
                    "it root's (or an administrator: chown root), or set DEPLOYBENCH_LOCK_DIR "
                    "to a folder of your own")


def _replaced(fd: int, path: Path) -> str | None:
    """Why `path` no longer names the file of `fd` (None where it does)."""
    held = os.fstat(fd)
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return "was removed"
    if (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
        return "was replaced by another file"
    return None


def holders(fd: int) -> list[str]:
    """The processes (of those this user may see) that have the file of `fd` open, this
    one aside: 'pid (command)'."""
    st = os.fstat(fd)
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        if proc.name == str(os.getpid()):
            continue
        try:
            opened = (os.stat(f) for f in (proc / "fd").iterdir())
            if any((o.st_dev, o.st_ino) == (st.st_dev, st.st_ino) for o in opened):
                command = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                found.append(f"{proc.name} ({Path(command).name or '?'})")
        except OSError:  # gone, or another user's
            continue
    return found


def _timeout_s() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise LockError(f"{TIMEOUT_ENV}={text!r}: give the longest wait for a device lock "
                        "in seconds, a number above 0")
    return value


def _take(fds: dict[str, int], paths: dict[str, Path], count: int) -> list[str]:
    """The first `count` of the locks `fds` that are free, taken; none where fewer are
    (all or none: two jobs never each hold half of what both wait for)."""
    taken = []
    for device, fd in list(fds.items()):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        if _replaced(fd, paths[device]):  # unlinked before the flock: the new one, next
            fresh = _open_locks([device])[0][device]
            os.close(fd)
            fds[device] = fresh
            continue
        taken.append(device)
        if len(taken) == count:
            return taken
    for device in taken:
        fcntl.flock(fds[device], fcntl.LOCK_UN)
    return []


def _wait(fds: dict[str, int], paths: dict[str, Path], timeout_s: float,
          count: int = 1) -> list[str]:
    """Take the first `count` of the locks `fds` (device -> descriptor) that are free,
    waiting while fewer are; the devices taken."""
    start = time.monotonic()
    reported = -REPORT_EVERY_S
    while True:
        taken = _take(fds, paths, count)
        if taken:
            return taken
        waited = time.monotonic() - start
        held_by = "; ".join(f"{paths[d]}, held by {_holders_text(fd)}" for d, fd in fds.items())
        if waited >= timeout_s:
            raise LockError(f"device {' or '.join(fds)}: gave up after {waited:.0f} s waiting "
                            f"for {held_by} (raise {TIMEOUT_ENV}, or end them)")
        if waited - reported >= REPORT_EVERY_S:
            print(f"waiting for device {' or '.join(fds)} ({waited:.0f} s of at most "
                  f"{timeout_s:.0f}): {held_by}", file=sys.stderr, flush=True)
            reported = waited
        time.sleep(min(1.0, timeout_s - waited))


def _holders_text(fd: int) -> str:
    return ", ".join(holders(fd)) or "processes this user cannot see"


def _name(device: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", device) + ".lock"


def _open_locks(devices: list[str]) -> tuple[dict[str, int], Path, str]:
    """The checked lock files of `devices` opened (device -> descriptor; none left open
    where one is refused), their folder and its scope."""
    folder_fd, folder, scope = lock_folder()
    fds: dict[str, int] = {}
    try:
        for device in dict.fromkeys(devices):
            fds[device] = _open_lock(folder_fd, folder, _name(device), scope)
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    finally:
        os.close(folder_fd)
    return fds, folder, scope


@contextmanager
def device_lock(device: str):
    """Hold the lock of `device` ("cpu", or a GPU's UUID); yields a `Held` whose record
    says which lock, its scope, how long this measurement waited for it and (filled in
    on release) when it held it, as Unix times. A step that holds its device for its
    whole run (device.claim) writes its record before the release: `used_until` there
    says when it stopped using the device."""
    with any_device_lock([device]) as held:
        yield held


@contextmanager
def any_device_lock(devices: list[str], count: int = 1):
    """Hold the locks of whichever `count` of `devices` are free first (in their order
    while more are): a job of a host of several GPUs takes free ones; yields a `Held`
    whose record's "device" names the first ("devices": all, where several)."""
    timeout_s = _timeout_s()
    fds, folder, scope = _open_locks(devices)
    start = time.time()
    try:
        paths = {d: folder / _name(d) for d in fds}
        taken = _wait(fds, paths, timeout_s, count)
        for device in [d for d in fds if d not in taken]:
            os.close(fds.pop(device))
        held = Held(fds[taken[0]], {"device": taken[0], "lock": str(paths[taken[0]]),
                                    "scope": scope, "acquired_at": time.time()},
                    tuple(fds[d] for d in taken), tuple(paths[d] for d in taken))
        if count > 1:
            held.record["devices"] = taken
        held.record["waited_s"] = round(held.record["acquired_at"] - start, 3)
        held.verify()
        yield held
        held.record["released_at"] = time.time()
    finally:
        for fd in fds.values():
            os.close(fd)  # the lock ends once every process given the descriptor has ended


def is_free(device: str) -> bool:
    """Whether no one holds the lock of `device` now (a glance: it may be taken next)."""
    fd = _open_locks([device])[0][device]
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
