"""User-derived text shown by Streamlit's markdown elements, made inert: the app's one escaping module.

Model and cluster names, sources, notices and error messages can come from a
share link or an uploaded file. `st.info`, `st.error`, `st.caption`,
`st.markdown`, subheaders, expander and metric labels render markdown (links,
images, HTML-like tags, `$...$` LaTeX, `:red[...]` colours), so every such
text goes through `plain()` first: one line, with a backslash before every
character that starts markup (CommonMark shows a backslash-escaped ASCII
punctuation character as itself): brackets, parentheses and `!` (links,
images, `:red[...]` colours), `<` `>` (tags, autolinks), `*` `_` `~` `` ` ``
(emphasis, code), `$` (LaTeX), `#`, `@` (e-mail autolinks), `|` (table cells), `&`
(entities), a leading list marker, and the `//` of `scheme://` and the `.` of `www.`
(GFM autolinks).
Ordinary punctuation (`-`, `.`, `:`, `'`, `/`) stays as typed. Plotly titles, legends
and hovers render a few HTML tags instead: `plain_html()` escapes for them.
Every page passes names and messages (model, cluster, device, pin labels, fields of an
uploaded saved run, the library's error messages) through one of the two;
tests/test_app_injection.py walks every page with hostile names.

>>> print(plain("[Log in](http://evil/)"))
\\[Log in\\]\\(http:\\/\\/evil/\\)
>>> print(plain("![t](http://evil/x.png) tiny-gpt: 1.5"))
\\!\\[t\\]\\(http:\\/\\/evil/x.png\\) tiny-gpt: 1.5
"""
from __future__ import annotations

import html
import re

_SPECIAL = re.compile(r"([\\`*_\[\]()#!<>~$@|&])")
_LEADING = re.compile(r"^([-+]|[0-9]+\.)(?=\s|$)")
MAX_SHOWN = 600     # characters of one message shown (a message naming a huge value stays short)


def plain(text, limit: int = MAX_SHOWN) -> str:
    """`text` as one line of literal characters for a markdown element."""
    line = " ".join(str(text).split())
    if len(line) > limit:
        line = line[:limit - 1] + "…"
    line = _SPECIAL.sub(r"\\\1", line)
    line = _LEADING.sub(lambda m: m.group(1)[:-1] + "\\" + m.group(1)[-1], line)
    return re.sub(r"(?i)www\.", lambda m: m.group(0)[:3] + "\\.", line.replace("://", ":\\/\\/"))


def plain_html(text, limit: int = 80) -> str:
    """`text` for a plotly title or hover (which render a few HTML tags such as <a href>)."""
    line = " ".join(str(text).split())[:limit]
    return html.escape(line, quote=True)
