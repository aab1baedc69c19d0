"""explorer/io/latex_lines.py: the formulas export cuts sympy's one-line LaTeX into lines a page holds."""
import re
import shutil
import subprocess

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from explorer.io.latex_lines import LONG_NUMERATOR, WIDTH, flat, lines

SYMBOLS = sp.symbols("a b c d_x F_a eta_a W_{hbm} tau_k")


def _balanced(text: str) -> bool:
    depth = 0
    for token in re.findall(r"\\.|[{}]", text):
        depth += {"{": 1, "}": -1}.get(token, 0)
        if depth < 0:
            return False
    return depth == 0


@st.composite
def expressions(draw, depth=0):
    if depth > 3 or draw(st.booleans()) and depth:
        return draw(st.sampled_from(SYMBOLS)) * draw(st.integers(1, 40))
    kind = draw(st.sampled_from(["add", "frac", "max", "pow"]))
    parts = [draw(expressions(depth=depth + 1)) for _ in range(draw(st.integers(2, 6)))]
    if kind == "add":
        return sp.Add(*parts)
    if kind == "frac":
        return sp.Add(*parts) / draw(st.sampled_from(SYMBOLS))
    if kind == "max":
        return sp.Max(*parts)
    return sp.Add(*parts) ** 2


@settings(max_examples=200, deadline=None)
@given(expr=expressions())
def test_lines_keep_every_token_and_each_line_is_whole(expr):
    latex = sp.latex(expr)
    cut = lines(latex, width=40)
    assert cut and all(_balanced(line) for line in cut)
    assert r"\left" not in "".join(cut) and r"\right" not in "".join(cut)
    squash = lambda s: re.sub(r"\s+", "", s)
    assert squash("".join(cut)) == squash(flat(latex))


def test_a_long_numerator_leaves_its_fraction():
    numerator = " + ".join(f"x_{{{i}}}" for i in range(LONG_NUMERATOR // 5))
    text = flat(rf"\frac{{{numerator}}}{{p}} + y")
    assert text.startswith(r"\frac{1}{p} \bigl[ x_{0} + ") and text.endswith(r"\bigr] + y")
    assert flat(r"\frac{a + b}{p}") == r"\frac{a + b}{p}"          # a short one stays
    assert max(len(line) for line in lines(text)) < 2 * WIDTH


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("zero, pp", [(1, 8), (3, 1)])
def test_the_exported_formulas_compile_within_the_page(tmp_path, zero, pp):
    """A lecturer's walk: the default strategy's export ran 9,025 pt past the page and a ZeRO-3 search result's
    failed ("Dimension too large")."""
    from explorer import Strategy, load_cluster, load_model
    from explorer.cost.evaluate import evaluate
    from explorer.cost.explain import explain
    from explorer.io.export import formulas_latex
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    s = Strategy(dp=1024 // (8 * pp), tp=8, pp=pp, global_batch=1536, zero=zero, sequence_parallel=True,
                 recompute="selective", overlap_dp=True, schedule="interleaved" if pp > 1 else "1f1b",
                 chunks=3 if pp > 1 else 1)
    r = evaluate(model, s, cluster)
    (tmp_path / "f.tex").write_text(formulas_latex(explain(model, s, cluster, None, r), r.breakdown_s, "gpt3-175b"))
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "f.tex"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    log = (tmp_path / "f.log").read_text(errors="replace")
    assert run.returncode == 0 and "Dimension too large" not in log, log[-2000:]
    widths = [float(w) for w in re.findall(r"Overfull \\hbox \(([0-9.]+)pt too wide\)", log)]
    assert max(widths, default=0) < 30, widths
