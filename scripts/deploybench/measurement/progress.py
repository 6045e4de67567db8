"""Where a long step is: one line in the step's log and, while a step runs under
deploybench.steps.run (which sends its output to the log), on the terminal too."""

from __future__ import annotations

import os
import time

terminal_fd: int | None = None  # the terminal's stderr while a step's output goes to its log


class Progress:
    """`done(what)` after each of `total` parts: how many, how long, about how long left."""

    def __init__(self, name: str, total: int):
        self.name, self.total, self.count = name, total, 0
        self.start = time.monotonic()

    def done(self, what: str) -> str:
        self.count += 1
        elapsed = time.monotonic() - self.start
        left = elapsed / self.count * (self.total - self.count)
        line = (f"{self.name}: {self.count}/{self.total} ({what}) after {elapsed:.0f} s, "
                f"about {left:.0f} s left")
        print(line, flush=True)
        if terminal_fd is not None:
            os.write(terminal_fd, (line + "\n").encode())
        return line
