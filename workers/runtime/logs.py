"""The one logging set-up of every Lanner process: the format, LANNER_LOG_LEVEL, and Huey's own level."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from settings import Settings

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
# Huey's consumer logs these with a traceback each time the queue's storage fails to answer.
QUEUE_ERRORS = frozenset({"Error reading from queue", "Error reading schedule."})
QUEUE_ERROR_EVERY = 60.0


def configure_logging(settings: Settings) -> None:
    logging.basicConfig(level=settings.log_level, format=LOG_FORMAT)
    # Huey logs every task run at INFO, which is a line per spool flush (4 a second).
    logging.getLogger("huey").setLevel(settings.task_log_level)
    queue_errors = QueueErrorLines()
    for handler in logging.getLogger().handlers:
        handler.addFilter(queue_errors)


class QueueErrorLines(logging.Filter):
    """While Redis is away, each of the consumer's threads logs a traceback at every step of its
    backoff: 4 threads' worth a few times a second at first. One line per QUEUE_ERROR_EVERY says it
    instead, with the error and how many were held back (on the handler: Huey's threads log on loggers
    of their own, `huey.consumer.Worker-N`)."""

    def __init__(self, interval: float = QUEUE_ERROR_EVERY, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval, self.clock = interval, clock
        self.next_at: dict[str, float] = {}
        self.held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg
        if message not in QUEUE_ERRORS or not record.name.startswith("huey"):
            return True
        now = self.clock()
        if now < self.next_at.get(message, float("-inf")):
            self.held[message] = self.held.get(message, 0) + 1
            return False
        self.next_at[message] = now + self.interval
        held = self.held.pop(message, 0)
        error = record.exc_info[1] if record.exc_info else None
        record.msg = "%s (%s); retrying with backoff%s"
        record.args = (
            message.rstrip("."),
            f"{type(error).__name__}: {error}" if error is not None else "no detail",
            f" ({held} more like it since the last report)" if held else "",
        )
        record.exc_info, record.exc_text = None, None
        return True
