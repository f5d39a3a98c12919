"""Cluster mode: what several click nodes share at click speed (Redis), beside the durable truth in the
database. Nothing here is imported unless LANNER_REDIS_URL is set."""
