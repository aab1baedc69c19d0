import json
from pathlib import Path

import pytest

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

# golden outputs (tests/golden/) are data, e.g. generated MindSpore scripts: never collected
collect_ignore_glob = ["golden/*"]
