"""Keeping an install healthy: backups and retention."""
