"""A log line for an error that repeats per click or per flush round: at most one a second.

A full disk fails every click and every flush; one line per failure would flood the log (and, if
it is on the same disk, fill it faster). The first failure is logged at once, then at most one
line per interval, saying how many were held back since the last.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any


class ThrottledLog:
    """Per process: each web worker (and the flusher) throttles its own lines."""

    def __init__(
        self,
        logger: logging.Logger,
        level: int = logging.ERROR,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger, self.level, self.interval, self.clock = logger, level, interval, clock
        self.next_at = float("-inf")
        self.held = 0

    def __call__(self, message: str, *args: Any, exc_info: bool = False) -> None:
        now = self.clock()
        if now < self.next_at:
            self.held += 1
            return
        self.next_at = now + self.interval
        if self.held:
            message += " (%d more like it since the last report)"
            args += (self.held,)
            self.held = 0
        self.logger.log(self.level, message, *args, exc_info=exc_info)
