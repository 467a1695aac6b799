"""The tests that share the ``quick`` module fixture run on one pytest-xdist worker."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group ``analysis_scripts``: every test of this folder that uses the ``quick`` fixture
    (``make check`` distributes with ``--dist loadgroup``); the others spread freely."""
    for item in items:
        if "quick" in getattr(item, "fixturenames", ()) and "analysis_scripts" in str(item.path):
            item.add_marker(pytest.mark.xdist_group("analysis_scripts"))
