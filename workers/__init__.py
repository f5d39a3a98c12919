"""Background work (Huey tasks) and the bjoern process manager."""
