"""The documentation a newcomer reads stays short, starts with the two commands, and points at things that exist.

README.md is at most 300 lines and opens with the fresh-machine commands; every relative link (and
its #anchor) in README.md and docs/*.md leads to a file (and heading) of the repository; every
repository path named in backticks there -- docs/extending.md names every file a schedule, an axis, a
hardware preset or a page touches -- exists, so a file that moves takes its documentation with it.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 300
FIRST_COMMANDS = ("pip install -r requirements.txt && streamlit run app.py",
                  "bash .ci/install && python -m pytest -q")

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`]+)`")       # a span may break across lines
REPO_PATH = re.compile(r"^(?:(?:explorer|app_pages|tests|assets|benchmarks|serve|docs|\.ci|\.streamlit)/[^\s:`,;()]*"
                       r"|app\.py\b|requirements(?:-test)?\.txt\b|pytest\.ini\b)")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text without its fenced code blocks (a link inside code is not a link)."""
    return FENCE.sub("", text)


def _anchors(path: Path) -> set:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", _prose(path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_the_readme_starts_with_the_two_commands():
    text = README.read_text()
    before_sections = text.split("\n## ", 1)[0]
    blocks = [b.strip("`\n").split("\n", 1) for b in FENCE.findall(before_sections)]
    assert [(lang, body.strip()) for lang, body in blocks[:2]] == [("bash", c) for c in FIRST_COMMANDS]
    first = text.index(FIRST_COMMANDS[0])
    assert first < text.index(FIRST_COMMANDS[1]) and text[:first].count("\n") <= 10


def test_code_spans_pair_up():
    """An odd backtick would shift every later span and hide paths from the check below."""
    odd = [_name(page) for page in PAGES if _prose(page.read_text()).count("`") % 2]
    assert not odd, odd


def test_every_docs_file_is_linked_from_the_readme():
    linked = {(README.parent / target.split("#")[0]).resolve()
              for target in LINK.findall(_prose(README.read_text())) if not target.startswith("#")}
    assert [_name(d) for d in DOCS if d.resolve() not in linked] == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_lead_to_files_and_headings(page):
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):          # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{_name(page)}: {broken}"


def repo_paths(text: str) -> list:
    """The repository paths named at the start of code spans (`explorer/x.py: f` names explorer/x.py);
    placeholders such as `app_pages/<name>.py` are not paths."""
    out = []
    for span in CODE_SPAN.findall(_prose(text)):
        found = REPO_PATH.match(span.strip())
        if found and "<" not in found.group(0):
            out.append(found.group(0).rstrip("."))
    return out


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_repository_path_named_exists(page):
    missing = [p for p in repo_paths(page.read_text())
               if not (list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists())]
    assert not missing, f"{_name(page)} names files that do not exist: {missing}"


def test_extending_names_the_files_of_each_walkthrough():
    text = (ROOT / "docs" / "extending.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    titles = [s.split("\n", 1)[0] for s in sections]
    assert titles == ["1. A pipeline schedule", "2. A parallelism axis", "3. A hardware preset", "4. A page",
                      "5. A strategy option"]
    for section in sections:
        assert len(set(repo_paths(section))) >= 8, section.split("\n", 1)[0]
    must = {"explorer/schedules/registry.py", "explorer/schedules/critical_path.py", "explorer/strategy/strategy.py",
            "explorer/strategy/mesh.py", "explorer/strategy/rules.py", "explorer/io/share.py", "explorer/cli/args.py",
            "app_pages/sidebar.py", "explorer/io/clusters.py", "explorer/hardware/cluster.py", "app.py",
            "explorer/facade.py", "app_pages/state.py"}
    assert must <= set(repo_paths(text)), must - set(repo_paths(text))


def test_the_path_pattern_reads_spans_as_meant():
    assert repo_paths("`explorer/cost/numeric.py: stage_values` and `app.py`") == ["explorer/cost/numeric.py", "app.py"]
    assert repo_paths("`app_pages/<name>.py`, `tests/test_app_*.py`, `--cp N`") == ["tests/test_app_*.py"]


CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")   # a module-level constant's name, e.g. MAX_GRAPH_PASSES
OUTSIDE_NAMES = {"NCCL_P2P_NET_CHUNKSIZE", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_C2C", "PYTORCH_CUDA_ALLOC_CONF",
                 "CUDA_DEVICE_MAX_CONNECTIONS"}
"""Names of other software (environment variables of NCCL, PyTorch, CUDA) that the docs cite as what a run set."""
CODE_DIRS = ("explorer", "app_pages", "benchmarks", "serve", "tests", ".ci")


def constant_names(text: str) -> set:
    return {m for m in CODE_SPAN.findall(_prose(text)) if CONSTANT.match(m)}


def test_every_constant_named_is_in_the_code():
    """A constant the docs name in backticks (`MAX_GRAPH_PASSES`, `SMALL_ENTRIES`) is defined or read somewhere in
    the code: a renamed constant takes its documentation with it (a walk found four names that had left the code)."""
    code = "\n".join(p.read_text() for d in CODE_DIRS for p in (ROOT / d).rglob("*.py")) + (ROOT / "app.py").read_text()
    code += "\n".join(p.read_text() for p in (ROOT / ".ci").iterdir() if p.is_file()) + (ROOT / "serve" / "serve.sh").read_text()
    words = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", code))
    missing = {_name(page): sorted(constant_names(page.read_text()) - words - OUTSIDE_NAMES) for page in PAGES}
    assert not {k: v for k, v in missing.items() if v}, missing
    assert constant_names("`MAX_GRAPH_PASSES` and `--cp N` and `Strategy` and `A_B`") == {"MAX_GRAPH_PASSES", "A_B"}
