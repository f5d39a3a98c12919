"""`python -m cli`: the `lanner` command, as tests and the bench harness run it."""

from cli import main

main()
