"""The database's statements, by dialect (`sqlite/` today), behind one connection per process."""
