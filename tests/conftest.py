import json
from pathlib import Path

import pytest

PUBLISHED = Path(__file__).resolve().parents[2] / "shared" / "validation" / "published.json"


@pytest.fixture(scope="session")
def published():
    """Entries of ../shared/validation/published.json by id."""
    return {entry["id"]: entry for entry in json.loads(PUBLISHED.read_text())}
