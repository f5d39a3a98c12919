"""The processes and the tools around them: runtime/ (the bjoern process manager, the Huey tasks and
the flusher thread), ops/ (`lanner status`, the nginx and systemd renderers) and bench/ (`lanner bench`)."""
