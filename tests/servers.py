"""The tests' throwaway PostgreSQL and Redis are the bench's (workers/bench/servers.py): one copy of
the code that starts them, as root too."""

from workers.bench.servers import PostgresServer, RedisServer, ServerMissing, postgres_bindir, run_as

__all__ = ["PostgresServer", "RedisServer", "ServerMissing", "postgres_bindir", "run_as"]
