"""A long step's progress lines: in the step's log (stdout) and on the terminal."""

import os

from deploybench.measurement import progress


def test_progress_says_how_many_how_long_and_about_how_long_is_left(monkeypatch, capsys):
    clock = iter([100.0, 110.0, 130.0])  # start, after the first part, after the second
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    read, write = os.pipe()
    monkeypatch.setattr(progress, "terminal_fd", write)
    levels = progress.Progress("offline (tft)", 4)
    first = levels.done("batch 1")
    second = levels.done("batch 2")
    os.close(write)
    assert first == "offline (tft): 1/4 (batch 1) after 10 s, about 30 s left"
    assert second == "offline (tft): 2/4 (batch 2) after 30 s, about 30 s left"
    assert capsys.readouterr().out == f"{first}\n{second}\n"  # the step's log
    assert os.read(read, 4096).decode() == f"{first}\n{second}\n"  # the terminal
