"""Fixtures for the live-web tests: the fake providers on loopback and configs aimed at them.

Every test gets its own server (fault plans and request logs do not leak between tests),
its own cache database and limiter folder under ``tmp_path``, and short timeouts and
backoffs so fault handling runs in milliseconds.
"""

from __future__ import annotations

import pytest

from envs.live.fakeweb import FakeWeb
from envs.live.manager import LiveWeb
from tests.envs.live.support import KEYS, config_for


@pytest.fixture
def fakeweb():
    with FakeWeb(keys=KEYS, retry_after="1", slow_s=0.05, timeout_s=1.5) as web:
        yield web


@pytest.fixture
def make_live(fakeweb, tmp_path):
    """``make_live(**config_overrides) -> LiveWeb`` over the fixture's server; closed after."""
    made = []

    def make(**overrides) -> LiveWeb:
        live = LiveWeb(config_for(fakeweb, tmp_path, **overrides))
        made.append(live)
        return live

    yield make
    for live in made:
        live.close()
