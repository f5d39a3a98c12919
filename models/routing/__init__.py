"""Where a click goes: campaign configuration, the router, filters, caps, URL macros and the trace."""
