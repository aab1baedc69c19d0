"""Shared fixtures; and one fresh disk cache for the whole test session (issue 25).

The explorer keeps compiled cost functions on disk (explorer/cost/cache.py: $BRIDGING_DL_CACHE, else
~/.cache/bridging-dl). A session that read the user's cache would depend on earlier runs and on their
order, so this file -- loaded by pytest before any test module imports explorer -- points
BRIDGING_DL_CACHE at an empty temporary directory, removed when the session ends. It is set in
os.environ, so that every subprocess a test starts (the CLI, a streamlit server, a clone's
validate) inherits it. Tests of the cold and warm paths (test_cold_cache.py, test_block_summary.py)
set their own directory with monkeypatch.setenv, which restores this one afterwards.
"""
import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

if os.environ.get("BRIDGING_DL_TEST_SESSION") == str(os.getpid()):    # this file imported again (tests.conftest)
    SESSION_CACHE = Path(os.environ["BRIDGING_DL_CACHE"])
else:
    _root = Path(tempfile.mkdtemp(prefix="bridging-dl-tests-"))         # mode 0700: the cache must be private
    atexit.register(shutil.rmtree, _root, ignore_errors=True)
    SESSION_CACHE = _root / "cache"
    os.environ["BRIDGING_DL_CACHE"] = str(SESSION_CACHE)
    os.environ["BRIDGING_DL_TEST_SESSION"] = str(os.getpid())

ROOT = Path(__file__).resolve().parents[1]
SHARED_PUBLISHED = ROOT.parent / "shared" / "validation" / "published.json"
BUNDLED_PUBLISHED = ROOT / "assets" / "validation" / "published.json"
# The published-number tests read the shared collection when it is beside the repository
# (tests/test_bundled_assets.py checks the bundled copy equals it), else the bundled copy.
PUBLISHED = SHARED_PUBLISHED if SHARED_PUBLISHED.is_file() else BUNDLED_PUBLISHED


@pytest.fixture(scope="session")
def published():
    """Entries of ../shared/validation/published.json (or the bundled copy) by id."""
    return {entry["id"]: entry for entry in json.loads(PUBLISHED.read_text())}


@pytest.fixture(scope="session")
def session_cache() -> Path:
    """The disk cache every test of this session shares, empty when the session began."""
    return SESSION_CACHE


# golden outputs (tests/golden/) are data, e.g. generated MindSpore scripts: never collected
collect_ignore_glob = ["golden/*"]
