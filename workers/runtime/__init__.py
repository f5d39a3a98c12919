"""Processes: the bjoern process manager and its connection reaping, the Huey tasks and the flusher
thread, heartbeats, and /proc readers."""
