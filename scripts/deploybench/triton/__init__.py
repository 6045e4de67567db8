"""Triton itself: the install (server and perf_analyzer binaries), the server process, its
model configs and repositories, perf_analyzer, and the pipeline's own client requests."""
