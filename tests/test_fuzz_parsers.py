"""Fuzzing the parsers at the edge (workers/bench/fuzz.py): 1,000 Hypothesis-made requests each for the
click URL, postbacks, the Click API and the admin API, through the real WSGI app in this process.

For every request: no 5xx and no traceback logged, the endpoint's documented answer, no write by a
refusal (row counts, journal bytes) and a bounded one by an accepted request; /healthz answers after.
Derandomized (the same requests every run); `lanner bench fuzz --examples N` runs longer. The requests
are drawn once per process and sent to each backend's stack (`generated`): one group, so that the
backends' tests share one process under `--dist loadgroup`.
"""

from __future__ import annotations

import os

import pytest

from workers.bench.fuzz import PARSERS, close, fuzz, prepare

EXAMPLES = int(os.environ.get("LANNER_FUZZ_EXAMPLES", "0")) or 1000

pytestmark = pytest.mark.xdist_group("fuzz_parsers")


@pytest.fixture
def stack(start_app, settings, db):
    app = start_app(LANNER_ADMIN_BIND="off")  # The admin API on the web workers' app, as a small install.
    prepared = prepare(db, app.app, settings.spool_dir)
    yield prepared
    close(prepared)


@pytest.mark.long
@pytest.mark.parametrize("parser", list(PARSERS))
def test_hostile_requests_never_get_a_5xx_nor_write_when_refused(stack, parser):
    outcome = fuzz(stack, parser, EXAMPLES)
    assert outcome.examples >= EXAMPLES and outcome.failures == [], outcome
