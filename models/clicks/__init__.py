"""A click from visit to database: the tracker, the spool journal and its line codec, the recent-visitor
index, and the flusher that lands journal lines."""
