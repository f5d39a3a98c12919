"""The `lanner bench` harness: load generation with k6, the scenarios and their targets, the fault
suite, and the click generator."""
