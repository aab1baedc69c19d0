"""No export runs code injected through a name (issue 31, item 1).

A model name arrives from a share link or an upload. Each exporter writes it into a comment (Megatron-LM's
shell arguments, MindSpore's Python, torchtitan's TOML), a Python string (Megatron-Bridge's MODEL_NAME, which
must read back as the very name) or a LaTeX title. For names built from every control,
line-break, quoting and escape character, the target's own parser must read the same program as for a plain
name: bash -n and shlex for the shell, the AST of the bytes (so an encoding cookie would count) for Python,
tomllib for TOML, json for JSON, and for LaTeX a tokenizer rule (no control sequence, comment, group or
^^ notation comes from the name)."""
import ast
import dataclasses
import json
import re
import shlex
import subprocess
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer.codegen import FILE_SUFFIX, export
from explorer.io.clusters import load_cluster
from explorer.io.export import formulas_latex
from explorer.io.models import load_model
from explorer.io.quoting import LATEX_SPECIALS, comment_text, latex_text, python_string, toml_string
from explorer.io.share import decode, encode
from explorer.limits import MAX_NAME_CHARS
from explorer.strategy.strategy import Strategy

CLUSTER = load_cluster("dgx-a100-80gb")
LLAMA = load_model("llama2-7b")
# one strategy each framework writes (the golden cases of tests/golden/make_codegen_golden.py)
PP_ZERO1 = Strategy(dp=8, tp=1, pp=4, micro_batch=1, global_batch=64, zero=1, recompute="full", dtype="bf16")
FSDP_TP = Strategy(dp=8, tp=2, pp=1, micro_batch=1, global_batch=64, zero=3, recompute="full",
                   sequence_parallel=True, dtype="bf16", grad_dtype="fp32", overlap_dp=True)
TARGETS = {"megatron": (LLAMA, PP_ZERO1), "deepspeed": (LLAMA, PP_ZERO1), "mindspore": (LLAMA, PP_ZERO1),
           "megatron_bridge": (LLAMA, PP_ZERO1),
           "torchtitan": (LLAMA, FSDP_TP), "megatron-moe": (load_model("mixtral-8x7b"),
                                                          Strategy(dp=4, tp=2, pp=2, ep=4, micro_batch=1,
                                                                   global_batch=64, zero=1, sequence_parallel=True,
                                                                   dtype="bf16"))}

ATTACKS = [
    "x\nimport os; os.system('touch PWNED')\n#",
    "x\rimport os; os.system('touch PWNED')\r#",           # a lone CR ends a Python comment
    "x\r\n$(touch PWNED)\n`touch PWNED`\n",
    "x\x0bimport os\x0c\x1c\x1d\x1e\x85\u2028\u2029y",      # every other line break str.splitlines knows
    "coding: utf-7 +AAo-import os",                       # a PEP 263 cookie on line 2 of a Python file
    "x\u202e\u2066import os\u2069",                       # bidirectional overrides (Trojan Source)
    '"""\'\'\'\\" ]] [x] a = 1 # \\',                     # quotes, brackets and backslashes
    r"\input{/etc/passwd}\catcode`\^^M=13 ^^5cinput %",  # TeX: commands, ^^ notation, comments
    "x\x00y\x7f\x1b[31m",
]
# every control, line-break, quoting and escape character, and the multi-character tokens a single-character
# alphabet almost never draws: triple quotes, TeX's \catcode and ^^ notation, HTML's </script>, a PEP 263 cookie
HOSTILE_CHARS = list("\n\r\t\x0b\x0c\x00\x1b\x1c\x1d\x1e\x1f\x7f\x85\xa0\u2028\u2029\u202e\u2066\u2069\ufeff"
                     "\"'`\\$(){}[]#%&~^_;=:|<>! ")
HOSTILE_TOKENS = ['"""', "'''", "\r\n", "\\\n", "\\catcode`\\^^M=13", "^^M", "^^5c", "^^^^2028", "\\input{x}",
                  "\\def\\x{", "</script><script>", "<img src=x onerror=alert(1)>", "$(touch PWNED)", "${IFS}",
                  "\n# -*- coding: utf-7 -*-\n", "+AAo-", "\\u0022", "\\x22", "\\N{QUOTATION MARK}", "[[x]]\n"]
HOSTILE = st.lists(st.one_of(st.sampled_from(HOSTILE_CHARS), st.sampled_from(HOSTILE_TOKENS),
                             st.characters(blacklist_categories=("Cs",))),
                   min_size=1, max_size=40).map(lambda parts: "".join(parts)[:MAX_NAME_CHARS])


def _framework(target: str) -> str:
    """The exporter of a target: 'megatron-moe' is Megatron-LM on a MoE model, 'megatron_bridge' Megatron-Bridge."""
    return target.split("-")[0].replace("_", "-")


def _export(framework: str, name: str) -> str:
    model, strategy = TARGETS[framework]
    return export(_framework(framework), dataclasses.replace(model, name=name), strategy, CLUSTER)


def _same_program(framework: str, hostile: str, plain: str) -> None:
    """The target's parser reads the hostile file as the plain one: only comments (and, in Megatron-Bridge's
    recipe, the MODEL_NAME string, which must read back as the name) may differ."""
    suffix = FILE_SUFFIX[_framework(framework)]
    if framework == "megatron_bridge":
        hostile_tree, plain_tree = ast.parse(hostile.encode("utf-8")), ast.parse(plain.encode("utf-8"))
        names = [n for n in hostile_tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "MODEL_NAME"]
        assert len(names) == 1 and isinstance(names[0].value, ast.Constant)
        names[0].value.value = "plain"
        assert ast.dump(hostile_tree) == ast.dump(plain_tree)
    elif suffix == ".py":
        assert ast.dump(ast.parse(hostile.encode("utf-8"))) == ast.dump(ast.parse(plain.encode("utf-8")))
    elif suffix == ".toml":
        assert tomllib.loads(hostile) == tomllib.loads(plain)
    elif suffix == ".json":
        assert json.loads(hostile) == json.loads(plain)
    else:       # shell: the same words once comments and line continuations are dropped, the same lines
        def words(text):
            return shlex.split(text.replace("\\\n", " "), comments=True)
        assert words(hostile) == words(plain)
        assert hostile.count("\n") == plain.count("\n")
        assert all(line.startswith("#") for line, other in zip(hostile.split("\n"), plain.split("\n"))
                   if line != other)


@pytest.mark.parametrize("framework", sorted(TARGETS))
@pytest.mark.parametrize("name", ATTACKS)
def test_known_attacks_stay_in_their_comment(framework, name, tmp_path):
    text = _export(framework, name)
    _same_program(framework, text, _export(framework, "plain"))
    if FILE_SUFFIX[_framework(framework)] == ".sh":     # bash's own parser agrees
        path = tmp_path / "args.sh"
        path.write_text(text, encoding="utf-8")
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=HOSTILE)
def test_generated_names_never_change_the_program(name):
    for framework in ("megatron", "megatron-moe", "mindspore", "torchtitan", "deepspeed", "megatron_bridge"):
        _same_program(framework, _export(framework, name), _export(framework, "plain"))


def test_a_share_link_name_reaches_the_export_only_as_a_comment():
    """The path the issue found: a link carries an uploaded model whose name holds a CR and code."""
    model = dataclasses.replace(LLAMA, name="x\rimport os; os.system('touch PWNED')\r#")
    params = encode(model, CLUSTER, PP_ZERO1)
    view = decode(params)
    text = export("mindspore", view.model, view.strategy, view.cluster)
    assert "\r" not in text and "\nimport os; os.system" not in text
    assert ast.dump(ast.parse(text.encode())) == ast.dump(ast.parse(_export("mindspore", "plain").encode()))


class _Formulas:      # the least a LaTeX export reads from a cost model's symbolic view
    def latex(self):
        return {"compute": "w"}

    def definitions_latex(self):
        return {}

    def total_latex(self):
        return "T"


def _tex_title(title: str) -> str:
    lines = formulas_latex(_Formulas(), {"compute": 1.0}, title=title).split("\n")
    section = [line for line in lines if line.startswith(r"\section*{")]
    assert len(section) == 1 and section[0].endswith("}")
    return section[0][len(r"\section*{"):-1]


def _tex_is_inert(body: str) -> bool:
    """A TeX tokenizer's view: once our escapes are removed, no character that starts a control sequence, a
    comment, a group, a math shift, an alignment, a parameter, ^^ notation or an active char is left."""
    for escape in sorted(LATEX_SPECIALS.values(), key=len, reverse=True):
        body = body.replace(escape, "")
    return not re.search(r"[\\{}%$&#^_~]", body) and all(" " <= ch <= "~" for ch in body)


@pytest.mark.parametrize("name", ATTACKS)
def test_latex_title_is_inert(name):
    assert _tex_is_inert(_tex_title(f"{name}: d=8 t=1"))


@settings(max_examples=200, deadline=None)
@given(name=HOSTILE)
def test_latex_title_is_inert_for_generated_names(name):
    assert _tex_is_inert(_tex_title(name))


@settings(max_examples=300, deadline=None)
@given(text=HOSTILE)
def test_quoting_functions_round_trip_in_their_language(text):
    assert "\n" not in comment_text(text) and "\r" not in comment_text(text)
    assert all(ch.isprintable() for ch in comment_text(text))
    assert tomllib.loads(f"k = {toml_string(text)}")["k"] == text
    assert ast.literal_eval(python_string(text)) == text


def test_safe_names_are_kept_as_they_are():
    for name in ("gpt3-175b", "Llama 3.1 (405B)", "模型-7b"):
        assert comment_text(name) == name
        assert tomllib.loads(f"k = {toml_string(name)}")["k"] == name
    assert latex_text("gpt3-175b d=8") == "gpt3-175b d=8"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=HOSTILE)
def test_megatron_bridge_model_name_reads_back_as_itself(name):
    """MODEL_NAME is a Python string literal (python_string): the recipe reader gives back the very name."""
    from explorer.codegen.imports import import_config
    assert import_config(_export("megatron_bridge", name), "megatron-bridge").model["name"] == name


def _markup(page: str) -> tuple:
    """What an HTML parser would open or close: script, image and link tags, case-insensitively."""
    low = page.lower()
    return tuple(low.count(tag) for tag in ("<script", "</script", "<img", "<a ", "<iframe", "<svg", "<!--"))


@pytest.mark.parametrize("name", ATTACKS + ["</script><img src=x onerror=alert(1)><script>alert(1)</script>",
                                            "</SCRIPT ><!--<a href=//x>"])
def test_html_exports_keep_a_hostile_name_inside_their_json(name):
    """The interactive HTML figure and a lesson's deck embed plotly's figure JSON in a <script>: a name in a
    title or a trace must not close it (plotly writes '<', '>' and '/' as \\u escapes) nor open a tag."""
    import plotly.graph_objects as go
    from explorer.io.export import figure_html
    from explorer.io.slides import lesson_deck
    from explorer.lessons import by_slug

    def figure(label):
        return go.Figure(go.Bar(x=[label], y=[1.0], name=label, hovertext=[label]), layout=dict(title=label))
    assert _markup(figure_html(figure(name))) == _markup(figure_html(figure("plain")))
    lesson = by_slug("pipeline")
    decks = [lesson_deck(lesson, lesson.values(), figure(label), lesson.reveal(), label) for label in (name, "plain")]
    assert _markup(decks[0]) == _markup(decks[1])
