"""The one logging set-up of every Lanner process: the format, LANNER_LOG_LEVEL, and Huey's own level."""

from __future__ import annotations

import logging

from settings import Settings

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


def configure_logging(settings: Settings) -> None:
    logging.basicConfig(level=settings.log_level, format=LOG_FORMAT)
    # Huey logs every task run at INFO, which is a line per spool flush (4 a second).
    logging.getLogger("huey").setLevel(settings.task_log_level)
