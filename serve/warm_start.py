"""`streamlit run app.py` with the library imported before the server opens (issue 31: a session that leaves
stops its work within 1 s).

Streamlit imports an app's modules in its first script run: in a fresh `streamlit run app.py` the first
session's run spent 1.5-2.6 s of CPU importing explorer.facade (sympy, numpy, pandas, plotly, networkx) and
0.9 s more for plotly's figure classes and the app's helpers, and an import is not interrupted by the
session's work budget, so a tab closed 1 s into a fresh server's first run kept a core busy 1.48-2.44 s
(benchmarks/bench_disconnect.py); the worker pool's processes (explorer/runtime/workers.py) were started by the
same first run and imported the library meanwhile. Here the imports run once at start, before the port opens,
and the pool is started too; the first run then does only its own work, which stops at its next spend() check.

    python serve/warm_start.py [streamlit run options]      # e.g. --server.port 8601 --server.headless true

serve/serve.sh starts its processes this way. Only modules are imported: no page script runs, no
st.* element is drawn outside a session (Streamlit's own `streamlit.web.cli` does the rest).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ("explorer.facade", "plotly.graph_objects", "plotly.io", "plotly.offline", "app_pages.state",
           "app_pages.text", "app_pages.budget", "app_pages.compute", "app_pages.jobs", "app_pages.sidebar",
           "app_pages.share_link", "app_pages.classroom")
"""What every first run imports (measured: the modules new in sys.modules after an AppTest's first run)."""


def preload() -> None:
    """Import PRELOAD (the "missing ScriptRunContext" warnings of module-level caches silenced meanwhile)."""
    import importlib
    import logging
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    context_log = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    level = context_log.level
    context_log.setLevel(logging.ERROR)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    finally:
        context_log.setLevel(level)


def warm() -> bool:
    """preload() and start the worker pool; False (and one line on stderr) if either fails: the server then starts
    as a plain `streamlit run app.py` would, and its first run imports what it needs (and says what failed)."""
    try:
        preload()
        from app_pages import jobs
        jobs.pool()     # the worker processes start now and import the library too (their first job waits for none)
    except Exception as err:     # never a dead port for a failed warm-up
        print(f"warm_start: not warmed ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
              "starting the server anyway", file=sys.stderr, flush=True)
        return False
    return True


def main() -> int:
    warm()
    from streamlit.web import cli
    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *sys.argv[1:]]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
