"""What the isolation check allows for and refuses before a server starts."""

import pytest

from deploybench.triton import perf_analyzer, perf_failures, perf_output
from testkit.isolation import _run


def test_foreign_requests_allow_for_every_kept_windows_edges():
    """perf_analyzer reports the server's count over its three kept windows: at each of
    their six edges the requests in flight, and those ending while it queries the
    statistics, are the server's and not its client's. 7 more at 1,000 requests/s and
    concurrency 1 (a CI-like run with no other client) are not foreign; a flood is."""
    out = ("Client: \n    Request count: {sent}\n"
           "Server: \n    Successful request count: {answered}\n")
    row, measured = perf_analyzer.Row(4, 1, "system"), {perf_output.REQUESTS: 1000.0}
    edges = 2 * 3 * (1 + 2)  # concurrency 1, 2 ms of 1,000 requests/s, each edge
    assert perf_output.foreign_requests(out.format(sent=30, answered=37), row,
                                        measured) == 0
    assert perf_output.foreign_requests(out.format(sent=30, answered=30 + edges), row,
                                        measured) == 0
    assert perf_output.foreign_requests(out.format(sent=30, answered=330), row,
                                        measured) == 300 - edges
    assert perf_output.foreign_requests("no counts", row, measured) is None


def test_a_batch_that_cannot_fit_the_host_is_refused_before_a_server_starts():
    """A batch whose inputs and outputs alone exceed the host's memory used to be sent
    and end, after retries, in an OOM-killed stub: it is refused by its numbers first."""
    big = perf_analyzer.Row(2**40, 1, "system")
    with pytest.raises(ValueError, match=r"batch 1099511627776 \(system shared memory\): a "
                       r"request's inputs and outputs take 30,786,325,577,728 bytes"):
        perf_failures.check_fits(_run(100), [perf_analyzer.Row(1, 1, "system"), big])
    perf_failures.check_fits(_run(100), [perf_analyzer.Row(8, 1, "system")])  # fits
