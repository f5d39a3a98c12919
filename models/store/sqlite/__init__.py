"""SQLite: the process's database handle and its pragmas, and the hot path's prepared statements."""
