"""Accounts: users and their roles (users.py), passwords (passwords.py), who may see and edit which
campaign (access.py), campaign sharing (sharing.py), API keys (apikeys.py), the principal a request
or a command acts as (principal.py), and the audit log of every change (audit.py)."""
