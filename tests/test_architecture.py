"""The package shows its architecture: layered folders, no import cycle, pages read one facade."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("model", "hardware", "strategy", "schedules", "cost", "timeline", "search", "charts", "io", "cli",
          "validation")


def imports(path: Path) -> set:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_graph() -> dict:
    """Module -> modules it imports at module level (function-level imports are lazy on purpose)."""
    files = list(ROOT.glob("explorer/**/*.py")) + list(ROOT.glob("app_pages/*.py"))
    names = {module_name(f) for f in files}
    graph = {}
    for f in files:
        deps = set()
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {m for m in [node.module] + [f"{node.module}.{a.name}" for a in node.names] if m in names}
        graph[module_name(f)] = deps - {module_name(f)}   # a package importing its own submodules
    return graph


def test_no_import_cycle():
    graph, state, path = top_level_graph(), {}, []

    def visit(u):
        state[u] = 1
        path.append(u)
        for v in graph.get(u, ()):
            assert state.get(v) != 1, " -> ".join(path[path.index(v):] + [v])
            if not state.get(v):
                visit(v)
        state[u] = 2
        path.pop()
    for u in graph:
        if not state.get(u):
            visit(u)


def test_the_library_is_layered_and_never_imports_streamlit():
    top = sorted(p.name for p in (ROOT / "explorer").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "__main__.py", "errors.py", "facade.py", "limits.py", "symbols.py"]
    for layer in LAYERS:
        assert (ROOT / "explorer" / layer / "__init__.py").exists(), layer
    for f in ROOT.glob("explorer/**/*.py"):
        assert not any(m.split(".")[0] == "streamlit" for m in imports(f)), f


def test_pages_read_the_facade_only():
    for f in [ROOT / "app.py"] + sorted((ROOT / "app_pages").glob("*.py")):
        used = {m for m in imports(f) if m.startswith("explorer")}
        assert used <= {"explorer.facade"} | {m for m in used if m.startswith("explorer.facade.")}, (f, used)


def test_no_page_script_has_a_bare_string_for_streamlit_to_print():
    """Streamlit's magic writes every bare expression of a page script onto the page: a docstring
    after a constant (a browser walk found one printed above the Cost page's title) must be a comment.
    Only the module docstring, first, is left alone."""
    found = []
    for path in [ROOT / "app.py", *sorted(ROOT.glob("app_pages/*.py"))]:
        body = ast.parse(path.read_text()).body
        found += [f"{path.name}:{node.lineno}" for node in body[1:]
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)]
    assert not found, found
