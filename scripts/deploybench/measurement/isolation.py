"""A measurement no other local user can reach. A step that starts a server of its own
first moves itself, and so the server, its stubs and perf_analyzer (its children), into a
network namespace and a mount namespace with a /dev/shm of their own. No one else can
then connect to the server's ports (inference, shared-memory registration, the settings
the run's key guards: a key read from the command line opens nothing) or list, open or
create its shared memory, and the kernel frees that /dev/shm when the last of them has
ended. It takes CAP_SYS_ADMIN (root: CI, the lent GPU machines, most containers); a run
without it (another user, a container without it) first makes a user namespace of its
own, its user mapped to itself alone, in which it has that capability over the namespaces
it then makes (what `unshare -Urn` does; the kernel allows it to a process of one thread,
so a step isolates itself before numpy or a server starts any). Where even that is
refused, the step runs on the host's loopback and /dev/shm under the server's other
guards (deploybench.triton.server), every level still counting requests it did not send,
and `isolate()` says why for the provenance.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
SHM = "/dev/shm"
ENV = "DEPLOYBENCH_ISOLATION"  # "off": the host's network and /dev/shm (a test's fallback)
HOST_NETWORK = "the host's loopback"
HOST_SHM = "the host's /dev/shm (names private to the server)"

_done: dict | None = None


def isolate() -> dict:
    """Move this process into a network and a mount namespace of its own (once; call it
    before any thread or server starts: later threads and children inherit them). Returns
    what the measurement runs on, with the reason where it is the host's."""
    global _done
    if _done is None:
        if os.environ.get(ENV) == "off":
            why = f"{ENV}=off"
            _done = {"network": HOST_NETWORK, "network_why": why,
                     "shared_memory": HOST_SHM, "shared_memory_why": why}
        else:
            _done = _network()
            if "network_why" in _done:  # no CAP_SYS_ADMIN here: a user namespace gives it
                user = _user_namespace(_done["network_why"])
                _done = user | (_network() if "user_namespace_why" not in user else _done)
            _done |= _shared_memory()
    return _done


def current() -> dict:
    """What this process runs on: `isolate()`'s answer, or the host's where it was not
    called (a step run outside `deploybench.steps.run`)."""
    why = "not isolated: the step was not started by deploybench.steps.run"
    return _done or {"network": HOST_NETWORK, "network_why": why,
                     "shared_memory": HOST_SHM, "shared_memory_why": why}


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _user_namespace(refused: str) -> dict:
    """A user namespace of this process's own, its user and group mapped to themselves
    alone (files keep their owners; every other user is unmapped there), in which it holds
    the capabilities the namespaces it makes next need. `refused`: why the host's own
    namespaces were refused (provenance)."""
    uid, gid = os.getuid(), os.getgid()
    threads = len(os.listdir("/proc/self/task"))
    try:
        _check(_libc().unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    except OSError as err:
        why = str(err) + (f" (the step had {threads} threads: the kernel makes a user namespace "
                          "for a process of one)" if threads > 1 else "")
        return {"user_namespace_why": f"{why}; the host's namespaces: {refused}"}
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError as err:  # in it, unmapped: the namespaces it makes still hold
        return {"user_namespace": f"its own, its user unmapped ({err})"}
    return {"user_namespace": f"its own (uid {uid}, gid {gid} mapped to themselves alone), "
                              f"since the host's namespaces need CAP_SYS_ADMIN: {refused}"}


def _network() -> dict:
    """A network namespace holding only its loopback, brought up; on failure, back in
    the host's."""
    libc = _libc()
    host = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        _check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        try:
            _loopback_up()
        except OSError:
            _check(libc.setns(host, CLONE_NEWNET), "setns back to the host's network")
            raise
    except OSError as err:
        return {"network": HOST_NETWORK, "network_why": str(err)}
    finally:
        os.close(host)
    return {"network": "a namespace of its own (its loopback only)"}


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _shared_memory() -> dict:
    """A tmpfs of the host's /dev/shm size over /dev/shm, seen only in a mount namespace
    of its own. Where the mount fails the namespace stays: a copy of the host's mounts,
    /dev/shm the host's."""
    libc = _libc()
    try:
        st = os.statvfs(SHM)
        size = st.f_blocks * st.f_frsize
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        # nothing mounted here reaches the host's mounts
        _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        _check(libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                          f"mode=1777,size={size}".encode()), f"mount tmpfs on {SHM}")
    except OSError as err:
        return {"shared_memory": HOST_SHM, "shared_memory_why": str(err)}
    return {"shared_memory": f"a {SHM} of its own (tmpfs of {size} bytes, the host's size)"}
