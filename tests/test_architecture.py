"""The package shows its architecture: layered folders, no import cycle, pages read one facade."""
import ast
import shutil
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


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGE_ORDER = ("errors", "symbols", "hardware", "schedules", "limits", "strategy", "model", "cost", "io",
                 "codegen", "timeline", "search", "charts", "validation", "runtime", "lessons", "cli", "__init__",
                 "__main__", "facade")
"""explorer's packages and top-level modules from the bottom up: each imports only those before it (issue 25)."""
MAX_FUNCTION_IMPORTS = 110
"""Imports made inside functions (lazy on purpose: sympy, networkx, pandas and torch only where needed) --
counted, and in the graph like any other, so that they can hide no cycle; the count may not creep up."""


def _explorer_imports(node, names: set) -> set:
    mods = []
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Import):
        mods = [a.name for a in node.names]
    return {m for m in mods if m in names}


def import_graph(root: Path = ROOT, top_level_only: bool = False) -> dict:
    """Module -> the explorer/app_pages modules it imports: anywhere in the file, or (top_level_only) in
    its body only."""
    files = list(root.glob("explorer/**/*.py")) + list(root.glob("app_pages/*.py"))
    names = {module_name(f, root) for f in files}
    graph = {}
    for f in files:
        tree = ast.parse(f.read_text())
        nodes = tree.body if top_level_only else ast.walk(tree)
        deps = set().union(*(_explorer_imports(node, names) for node in nodes))
        graph[module_name(f, root)] = deps - {module_name(f, root)}   # a package importing its own submodules
    return graph


def top_level_graph() -> dict:
    return import_graph(top_level_only=True)


def find_cycle(graph: dict) -> list:
    """One import cycle of `graph` as [a, b, ..., a], or [] (depth-first search)."""
    state, path = {}, []

    def visit(u):
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if not state.get(v):
                found = visit(v)
                if found:
                    return found
        state[u] = 2
        path.pop()
        return []
    for u in sorted(graph):
        if not state.get(u):
            found = visit(u)
            if found:
                return found
    return []


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "explorer" and len(parts) > 1 else "__init__"


def test_no_import_cycle():
    assert find_cycle(top_level_graph()) == []


def test_no_import_cycle_counting_imports_inside_functions():
    assert find_cycle(import_graph()) == []


def test_the_cycle_test_finds_a_planted_cycle(tmp_path):
    """A lazy import inside a function that closes a loop (errors -> facade -> ... -> errors) is found."""
    shutil.copytree(ROOT / "explorer", tmp_path / "explorer")
    (tmp_path / "app_pages").mkdir()
    planted = tmp_path / "explorer" / "errors.py"
    planted.write_text(planted.read_text() + "\n\ndef _planted():\n    from explorer.facade import evaluate\n")
    cycle = find_cycle(import_graph(tmp_path))
    assert cycle and "explorer.errors" in cycle and "explorer.facade" in cycle
    assert find_cycle(import_graph(tmp_path, top_level_only=True)) == []      # invisible to a body-only test


def test_packages_import_only_downward():
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    upward = [(u, v) for u, deps in import_graph().items() if u.startswith("explorer") for v in deps
              if v.startswith("explorer") and rank[package_of(v)] > rank[package_of(u)]]
    assert not upward, upward[:10]
    packages = {package_of(module_name(f)) for f in ROOT.glob("explorer/**/*.py")}
    assert packages == set(PACKAGE_ORDER), packages ^ set(PACKAGE_ORDER)


def test_imports_inside_functions_are_counted_and_bounded():
    count = 0
    for f in ROOT.glob("explorer/**/*.py"):
        tree = ast.parse(f.read_text())
        inside = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside |= {id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))}
        count += len(inside)
    assert 0 < count <= MAX_FUNCTION_IMPORTS, count


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
