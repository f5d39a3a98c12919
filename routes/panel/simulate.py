"""Placeholder."""
def add_routes(app, panel):
    pass
