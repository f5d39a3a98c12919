"""A click from visit to database: the tracker and its steps (visit, lookups, history, decision), the
spool journal and its line codec, the recent-visitor index, and the flusher that lands journal lines."""
