"""Optimisation: labels of sub id values and automation rules that act on report numbers (issue 31)."""
