"""A second local user of the host, and a command run as it with no capability at all."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OTHER_USER = "deploybench-other"  # the second local user of the security tests


# In a mount namespace of the test's own: the installation of this environment's Python
# bound into a tmpfs over the folder that hides it (pyenv's under root's home, mode 0700),
# then the command as the user, every capability dropped.
_UNPRIVILEGED = """set -e
staging=$(mktemp -d)
if [ -n "$HIDDEN" ]; then
    mount --bind "$BASE" "$staging"
    mount -t tmpfs -o mode=755 tmpfs "$HIDDEN"
    mkdir -p "$BASE"
    mount --bind "$staging" "$BASE"
fi
uid=$RUN_UID gid=$RUN_GID
unset BASE HIDDEN RUN_UID RUN_GID
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all \
    --bounding-set=-all -- "$@"
"""


def unprivileged(user, cmd: list[str], env: dict, **popen) -> subprocess.Popen:
    """`cmd` started as `user` (other_user's) with no capability at all: an unprivileged
    user's process, this environment's Python made reachable to it (`_UNPRIVILEGED`)."""
    missing = [tool for tool in ("unshare", "setpriv", "mount") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (util-linux) to act as an unprivileged user")
    base = Path(sys.base_prefix).resolve()
    hidden = next((a for a in reversed(base.parents) if not os.stat(a).st_mode & 0o001), None)
    if hidden:  # the folder within it that holds the installation (pyenv's: its shims too,
        # which the python backend's stub finds its Python through, on the PATH)
        base = hidden / base.relative_to(hidden).parts[0]
    setup = {"BASE": str(base), "HIDDEN": str(hidden or ""), "RUN_UID": str(user.uid),
             "RUN_GID": str(user.gid)}
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             _UNPRIVILEGED, "sh", *cmd], env={**env, **setup}, **popen)
