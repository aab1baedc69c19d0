"""Text from users (model, cluster and level names from links and uploads) quoted for the file it lands in.

Every exporter that writes a name into generated code goes through one of these, so a name can never end
its comment or string and become code (issue 31: a name with a newline, or a lone carriage return in a
Python file, ran the text after it). Each function keeps a safe name unchanged.

* `comment_text`: one line for a shell, Python or TOML comment. Python, bash and TOML end a comment at a
  line break, and Python's tokenizer also at a lone carriage return; every character that is not printable
  (str.isprintable: controls, line and paragraph separators, format characters such as the bidirectional
  overrides of "Trojan Source", CVE-2021-42574) becomes '?'.
* `toml_string`: a TOML basic string (TOML 1.0.0, "String": quotation mark, backslash and the control
  characters other than tab must be escaped).
* `python_string`: a Python string literal.
* `latex_text`: text for a LaTeX argument: the ten special characters escaped (Lamport, *LaTeX*, 2nd ed.,
  Sec 2.2.1 and C.2.4: # $ % & ~ _ ^ \\ { }), everything outside printable ASCII replaced by '?', so that no
  control sequence, comment, ^^ notation or active character comes from the name.

>>> comment_text("gpt\\nimport os")
'gpt?import os'
>>> toml_string('a"b\\\\c')
'"a\\\\"b\\\\\\\\c"'
>>> latex_text(r"\\input{x}")
'\\\\textbackslash{}input\\\\{x\\\\}'
"""
from __future__ import annotations

MAX_COMMENT_CHARS = 400     # a title line: the longest name (limits.MAX_NAME_CHARS = 200) and the strategy

LATEX_SPECIALS = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "#": r"\#", "$": r"\$", "%": r"\%",
                  "&": r"\&", "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def comment_text(text, limit: int = MAX_COMMENT_CHARS) -> str:
    """`text` as one printable line (at most `limit` characters), safe after '#' in bash, Python and TOML."""
    line = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return line if len(line) <= limit else line[: limit - 3] + "..."


def toml_string(text) -> str:
    """`text` as a TOML basic string: "..." with the characters TOML forbids written as escapes."""
    out = []
    for ch in str(text):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\t" or (ch.isprintable() and ord(ch) != 0x7F):
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04X}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08X}")
    return '"' + "".join(out) + '"'


def python_string(text) -> str:
    """`text` as a Python string literal in double quotes: quote and backslash escaped, every character
    that is not printable as a \\x, \\u or \\U escape (Python reference, "String and Bytes literals")."""
    out = []
    for ch in str(text):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF
                       else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def latex_text(text) -> str:
    """`text` for a LaTeX argument: specials escaped, anything but printable ASCII as '?'."""
    out = []
    for ch in str(text):
        if ch in LATEX_SPECIALS:
            out.append(LATEX_SPECIALS[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)
