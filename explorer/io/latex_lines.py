"""A long LaTeX formula as lines a page can hold (the formulas export, explorer/io/export.py formulas_latex).

sympy prints a term on one line: a Cost-page term of the default strategy runs to 16,000 characters, and a ZeRO-3
strategy's to 35,000, which pdflatex set 9,000 pt past the page or refused ("Dimension too large": a box past 16,384
pt; a lecturer's walk, 2026-12-07). LaTeX can break a displayed formula only between the tokens of its outermost
level, and neither inside a group ({...}, a fraction's numerator) nor between \\left and \\right. So:
* \\left / \\right delimiters become fixed \\bigl / \\bigr ones (no group; \\left. and \\right. are dropped);
* a fraction whose numerator is longer than LONG_NUMERATOR characters is written \\frac{1}{D} \\bigl[ N \\bigr],
  the same value, its numerator now outside any group (recursively);
* the result is cut into lines of about WIDTH characters before a + or - or after a comma of the outermost level
  (align*'s lines, \\allowdisplaybreaks lets them run over pages).
Nothing is evaluated: the text is rearranged, its tokens kept.
"""
from __future__ import annotations

import re

WIDTH = 110
"""Characters of LaTeX source a line holds (a landscape A4 page with 1.5 cm margins sets about 130 of sympy's)."""
LONG_NUMERATOR = 200
"""A fraction whose numerator is longer than this is written as 1/D times its numerator."""
_DELIMITER = r"(\\\{|\\\}|\\\||\\[A-Za-z]+|[()\[\]|./<>])"
_LEFT, _RIGHT = re.compile(r"\\left" + _DELIMITER), re.compile(r"\\right" + _DELIMITER)


def _fixed_delimiters(latex: str) -> str:
    def left(m):
        return "" if m.group(1) == "." else r"\bigl" + m.group(1)

    def right(m):
        return "" if m.group(1) == "." else r"\bigr" + m.group(1)
    return _RIGHT.sub(right, _LEFT.sub(left, latex))


def _scan(text: str, start: int = 0):
    """(index, character, brace depth after it) of each character from `start` that is not part of a command or an
    escaped character (\\{ and \\} do not count as braces)."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        yield i, ch, depth
        i += 1


def _group_end(text: str, start: int) -> int:
    """Index one past the group that opens at text[start] == '{'."""
    for i, ch, depth in _scan(text, start):
        if ch == "}" and depth == 0:
            return i + 1
    raise ValueError("unbalanced braces")


def _unfold_fractions(text: str) -> str:
    out, i = [], 0
    while True:
        j = text.find(r"\frac{", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        num_end = _group_end(text, j + 5)
        if num_end >= len(text) or text[num_end] != "{":
            out.append(text[j:num_end])
            i = num_end
            continue
        den_end = _group_end(text, num_end)
        numerator, denominator = text[j + 6:num_end - 1], text[num_end + 1:den_end - 1]
        numerator, denominator = _unfold_fractions(numerator), _unfold_fractions(denominator)
        if len(numerator) > LONG_NUMERATOR:
            out.append(rf"\frac{{1}}{{{denominator}}} \bigl[ {numerator} \bigr]")
        else:
            out.append(rf"\frac{{{numerator}}}{{{denominator}}}")
        i = den_end


def flat(latex: str) -> str:
    """The formula with fixed delimiters and its long numerators unfolded (module docstring)."""
    return _unfold_fractions(_fixed_delimiters(latex))


def lines(latex: str, width: int = WIDTH) -> list:
    """`flat(latex)` cut into lines of about `width` characters at its outermost + , - and commas."""
    text, pieces, start = flat(latex), [], 0
    for i, ch, depth in _scan(text):
        if depth != 0 or ch in "{}" or i - start < width:
            continue
        if ch in "+-" and text[i - 1] == " " and i > start:
            pieces.append(text[start:i].rstrip())
            start = i
        elif ch == ",":
            pieces.append(text[start:i + 1])
            start = i + 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]
