"""Operating an install: `lanner status`, and the nginx and systemd renderers."""
