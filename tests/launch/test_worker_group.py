"""WorkerGroup: a failed worker's error line comes from the end of its output, even when the
launcher notices the exit before it has read the traceback from the pipe."""

from __future__ import annotations

import sys
import time

from zgrad.launch.workers import OutputPolicy, WorkerGroup, WorkerSpec

FAILING = "import sys; sys.stderr.write('Traceback (most recent call last):\\n' + 'x\\n' * 50); " \
          "raise ValueError('boom at the end')"


def test_the_failure_read_after_the_drain_names_the_last_error():
    group = WorkerGroup([WorkerSpec("worker0", 0, 0, [sys.executable, "-c", FAILING], {})],
                        OutputPolicy(to_console=set()))
    group.start()
    deadline = time.monotonic() + 30
    while group.popens[0].poll() is None:  # exited, and nothing of its output pumped yet
        assert time.monotonic() < deadline
        time.sleep(0.01)
    _, early = group.poll()
    assert "ValueError" not in early[0].error  # what the race gave the summary
    group.stop(1.0)
    group.drain(5.0)
    (failure,) = group.failures()
    assert failure.error == "ValueError: boom at the end" and failure.exitcode == 1
