"""Alerts: channels (Telegram, Slack, a signed webhook), the queue that sends them, rules' and operations'
messages (issue 31)."""
