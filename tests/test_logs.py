"""The consumer's queue errors (its storage away: Redis stopped) are one line a minute, not a traceback
per thread and backoff step."""

from __future__ import annotations

import logging

from workers.runtime.logs import QueueErrorLines


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def queue_error(name: str = "huey.consumer.Worker-1") -> logging.LogRecord:
    try:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    except ConnectionError:
        import sys

        return logging.LogRecord(
            name, logging.ERROR, __file__, 1, "Error reading from queue", (), sys.exc_info()
        )


def test_queue_errors_are_one_line_a_minute_saying_the_error_and_how_many_were_held_back():
    clock = Clock()
    lines = QueueErrorLines(interval=60.0, clock=clock)
    first = queue_error()
    assert lines.filter(first)
    assert first.getMessage() == (
        "Error reading from queue (ConnectionError: Error 111 connecting to 127.0.0.1:6379. Connection "
        "refused.); retrying with backoff"
    )
    assert first.exc_info is None  # No traceback: the error's one line says it.
    held = [lines.filter(queue_error(f"huey.consumer.Worker-{n % 4 + 1}")) for n in range(40)]
    assert not any(held)
    clock.now += 60.0
    later = queue_error("huey.consumer.Worker-3")
    assert lines.filter(later)
    assert later.getMessage().endswith("retrying with backoff (40 more like it since the last report)")
    clock.now += 60.0
    again = queue_error()
    assert lines.filter(again) and "more like it" not in again.getMessage()


def test_other_lines_pass_untouched():
    lines = QueueErrorLines(clock=Clock())
    task_error = logging.LogRecord(
        "huey.consumer.Worker-1",
        logging.ERROR,
        __file__,
        1,
        "Unhandled error during execution of task %s.",
        ("abc",),
        None,
    )
    ours = logging.LogRecord("lanner", logging.ERROR, __file__, 1, "Error reading from queue", (), None)
    for record in (task_error, task_error, ours, ours):
        assert lines.filter(record)
    assert task_error.getMessage() == "Unhandled error during execution of task abc."
