"""What the app and the CLI read lives in the repository (assets/): the validation cases and the
symbol glossary; nothing reads ../shared at run time, and a copy of the repository with no
../shared beside it runs `validate` and the Validation page."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.io.clusters import load_cluster
from explorer.cost.explain import explain
from explorer.io.models import load_model
from explorer.io.glossary import FIELDS, glossary
from explorer.io.presets import DEFAULT_STRATEGY
from explorer.strategy import Strategy
from tests.conftest import BUNDLED_PUBLISHED, ROOT, SHARED_PUBLISHED


@pytest.mark.skipif(not SHARED_PUBLISHED.is_file(), reason="no ../shared beside the repository")
def test_bundled_published_numbers_equal_the_shared_ones():
    assert json.loads(BUNDLED_PUBLISHED.read_text()) == json.loads(SHARED_PUBLISHED.read_text())


def test_every_bundled_entry_cites_its_source():
    entries = json.loads(BUNDLED_PUBLISHED.read_text())
    assert len(entries) >= 20 and all(e["source"].strip() for e in entries)


SHARED_READ = re.compile(r"""(['"])\.\./shared|/\s*['"]shared['"]|['"]shared/""")


def test_nothing_reads_outside_the_repository():
    files = [ROOT / "app.py", *(ROOT / "explorer").rglob("*.py"), *(ROOT / "app_pages").rglob("*.py")]
    offenders = [f"{path.relative_to(ROOT)}:{i}" for path in files
                 for i, line in enumerate(path.read_text().splitlines(), 1) if SHARED_READ.search(line)]
    assert not offenders, offenders


def test_the_pattern_catches_reads_of_shared():
    for line in ('ROOT.parent / "shared" / "x.json"', 'open("../shared/x")', "Path('shared/validation')"):
        assert SHARED_READ.search(line)


def test_glossary_entries_are_complete():
    entries = glossary()
    assert len({e["symbol"] for e in entries}) == len(entries) >= 30
    for entry in entries:
        assert set(entry) == set(FIELDS) and all(entry[k].strip() for k in FIELDS), entry


TOKEN = re.compile(r"\\[A-Za-z]+(?:\^\{[A-Za-z][^}]*\})?(?:_\{[^}]*\})?|"      # a superscript name, not a power
                   r"[A-Za-z]+(?:\^\{[A-Za-z][^}]*\})?(?:_\{[^}]*\}|_[A-Za-z0-9])?")
NOT_SYMBOLS = {r"\frac", r"\left", r"\right", r"\max", r"\min", r"\mathrm", r"\text", r"\quad", r"\cdot",
               r"\where"}


def latex_symbols(latex: str, levels) -> set:
    latex = re.sub(r"\\(mathrm|text|operatorname)\{[^}]*\}", " ", latex)
    latex = re.sub(r"T\^\{end\}_\{\d+\}", "T^{end}_r", latex)      # stage i's end: T^{end}_r at r = i
    found = set()
    for token in TOKEN.findall(latex):
        if token in NOT_SYMBOLS:
            continue
        for level in levels:      # g_{node}, L_{cluster}: the per-level symbols
            token = token.replace(f"_{{{level}}}", "_{level}")
        found.add(token)
    return found


@pytest.mark.parametrize("model,cluster,strategy", [
    ("gpt3-175b", "dgx-a100-80gb", DEFAULT_STRATEGY),
    ("gpt3-175b", "dgx-a100-80gb", DEFAULT_STRATEGY.with_(schedule="interleaved", chunks=2, zero=1, overlap_dp=True)),
    ("llama2-7b", "h200", Strategy(dp=8, global_batch=64, zero=3, recompute="full")),
    ("tiny-mlp", "classroom", Strategy(dp=2, global_batch=8)),
    ("gpt3-175b", "dgx-a100-80gb", DEFAULT_STRATEGY.with_(schedule="interleaved", chunks=2, overlap_p2p=True))])
def test_every_symbol_of_the_cost_page_is_in_the_glossary(model, cluster, strategy):
    model, cluster = load_model(model), load_cluster(cluster)
    sym = explain(model, strategy, cluster)
    text = " ".join([sym.total_latex(), *sym.latex().values(), *sym.definitions_latex(),
                     *sym.definitions_latex().values()])
    known = {e["latex"] for e in glossary()}
    missing = latex_symbols(text, [lv.name for lv in cluster.levels]) - known
    assert not missing, missing


def test_the_cost_page_shows_the_glossary_not_a_file_outside_the_repository():
    from app_pages import state as S
    from tests.app_util import open_page
    at = open_page("cost")
    assert not any("DESIGN.md" in c.value for c in at.caption)
    assert any("Glossary" in e.label for e in at.expander)
    assert not [df for df in at.dataframe if "meaning" in df.value.columns]     # closed: not built
    at.session_state[S.W_GLOSSARY_TABLE] = True                                 # opened
    at.run()
    shown = [df.value for df in at.dataframe if "meaning" in df.value.columns]
    assert shown and len(shown[0]) == len(glossary())


APP_SCRIPT = """
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=300).run()
assert not at.exception, at.exception
at.switch_page("app_pages/validation.py").run()
assert not at.exception, at.exception
assert not at.error, [e.value for e in at.error]
labels = [m.label for m in at.metric]
assert any("Megatron-LM SC'21 Table 1" in label for label in labels), labels   # run_labels.group_name
print("validation page ok", sum(c.startswith(("ptdp_", "kor_")) for c in at.dataframe[0].value["case"]),
      sum(c.startswith(("mlm_h100_", "automodel_", "mb_ab_")) for c in at.dataframe[0].value["case"]))
"""


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The repository's files (git ls-files) in a temporary folder with no ../shared beside it."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    dest = tmp_path_factory.mktemp("clone") / "repo"
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not name.startswith("assets/screenshots/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not (dest.parent / "shared").exists()
    return dest


def _env(clone: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(clone), "PYTHONDONTWRITEBYTECODE": "1"}


def test_validate_runs_in_a_clone_without_shared(clone):
    run = subprocess.run([sys.executable, "-m", "explorer", "validate", "--json"], cwd=clone, env=_env(clone),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)["summary"]
    assert summary["megatron_table1"]["cases"] == 10 and summary["korthikanti_table4"]["cases"] == 10


def test_validation_page_runs_in_a_clone_without_shared(clone):
    run = subprocess.run([sys.executable, "-c", APP_SCRIPT], cwd=clone, env=_env(clone), capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "validation page ok 20 16" in run.stdout      # the A100 tables; the H100 BF16 and MoE A/B rows
