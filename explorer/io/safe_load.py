"""Budgeted parsing of untrusted files: size cap, YAML alias and depth budget, JSON depth, short reprs.

A few hundred bytes of YAML can name the same anchor over and over (`&a [*b, *b, ...]`,
the "billion laughs"): the parsed value is a small graph, but anything that walks it
(repr, json, validation) sees 10^9 nodes. `BudgetLoader` counts, while composing the
YAML node graph and before any Python object is built, the aliases used, the nesting
depth and the size of the value once every alias is expanded, and refuses the file
with a message naming the budget it exceeded. JSON has no aliases; its nesting depth
is checked after parsing (iteratively, no recursion) and a RecursionError of the
parser is reported as nesting. Files are read with a cap: at most MAX_FILE_BYTES + 1
bytes are ever read, so a 5 GB file is refused without reading it; and only regular files
are read: a named pipe (whose opening waits for a writer, forever), a device such as
/dev/zero or a directory is refused before a byte is read. A path the system refuses
(too long, a NUL byte) is one ExplorerError naming it, shortened, never an OSError.

>>> parse_text("a: &x [1, 2]\\nb: *x\\n", ".yaml", "f.yaml")
{'a': [1, 2], 'b': [1, 2]}
>>> short_repr(list(range(10 ** 6)))
'[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11...'
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import stat

import yaml
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent

from explorer.errors import ExplorerError

MAX_FILE_BYTES = 1_000_000     # the same cap as an upload: the largest real config is a few kB
MAX_ALIASES = 100              # YAML aliases per file: hand-written configs use a handful
MAX_NODES = 20_000             # values in the file once every alias is expanded: real configs have < 1,000,
#                                and PyYAML composes ~30,000 values a second, so a refusal comes within ~1 s
MAX_JSON_VALUES = 100_000      # JSON (no aliases): a strategy of 2,048 layers with per-operator overrides has ~30,000
MAX_DEPTH = 32                 # nesting of mappings/lists: our schemas nest 3 deep, HF configs 4-5
MAX_PATH_CHARS = 4096          # a file name or path: Linux's PATH_MAX
SHOWN_PATH_CHARS = 200         # a path named in a message: longer ones are shortened


class BudgetLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses alias bombs and deep nesting while composing (before construction)."""

    def __init__(self, stream, where: str = "YAML"):
        super().__init__(stream)
        self._where = where
        self._aliases = 0
        self._depth = 0
        self._nodes = 0           # nodes composed so far (aliases not included): refused early, while composing
        self._sizes = {}          # id(node) -> expanded size (number of values inside, itself included)

    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ExplorerError(f"{self._where}: more than {MAX_ALIASES} YAML aliases (*name); "
                                    "refused as a possible alias bomb")
        else:
            self._nodes += 1
            if self._nodes > MAX_NODES:
                raise ExplorerError(f"{self._where}: more than {MAX_NODES:,} values, more than a model, cluster "
                                    "or strategy file holds")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ExplorerError(f"{self._where}: nested more than {MAX_DEPTH} levels deep")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._sizes[id(node)] = size = self._size(node)
        if size > MAX_NODES:
            raise ExplorerError(f"{self._where}: more than {MAX_NODES:,} values once YAML aliases are expanded; "
                                "refused as a possible alias bomb")
        return node

    def _size(self, node) -> int:
        if id(node) in self._sizes:           # an alias: the anchored node, already measured
            return self._sizes[id(node)]
        if isinstance(node, yaml.SequenceNode):
            return 1 + sum(self._sizes.get(id(child), 1) for child in node.value)
        if isinstance(node, yaml.MappingNode):
            return 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
        return 1


def _prescan(text: str, where: str) -> None:
    """The count and depth budgets of BudgetLoader, checked first on libyaml's event stream (C, where
    PyYAML has it): an oversized file is refused after scanning MAX_NODES events, not after the pure-Python
    composer has built MAX_NODES nodes (~30,000 a second). Same checks, same order, same messages; a
    malformed file is left to BudgetLoader, whose message the user sees."""
    if not getattr(yaml, "__with_libyaml__", False):
        return
    aliases = nodes = depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    return            # BudgetLoader refuses it as an alias bomb, with its own message
            elif isinstance(event, NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise ExplorerError(f"{where}: more than {MAX_NODES:,} values, more than a model, cluster "
                                        "or strategy file holds")
                if isinstance(event, CollectionStartEvent):
                    depth += 1
                    if depth > MAX_DEPTH:
                        return        # BudgetLoader refuses it as nested too deep
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return


def _yaml(text: str, where: str):
    _prescan(text, where)
    loader = BudgetLoader(text, where)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def json_depth_ok(data, where: str, max_values: int = MAX_JSON_VALUES) -> None:
    """Refuse data nested deeper than MAX_DEPTH or holding more than `max_values` values
    (iterative walk; a container's children are counted before they are visited)."""
    stack, seen = [(data, 1)], 1
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExplorerError(f"{where}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, (dict, list)):
            seen += len(value)
            if seen > max_values:
                raise ExplorerError(f"{where}: more than {max_values:,} values, more than a model, cluster "
                                    "or strategy file holds")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


@contextlib.contextmanager
def _gc_paused():
    """Parsing builds up to a megabyte of lists and dicts without a cycle among them; in a process that
    already holds much (a test session, a long-running server) each of the collector's passes over
    that heap, triggered every few hundred allocations, made refusing a megabyte of `[],` take 1.7 s
    instead of 0.15 s. The collector runs again afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_text(text: str, suffix: str, where: str, max_chars: int = MAX_FILE_BYTES,
               max_values: int = MAX_JSON_VALUES):
    """JSON (suffix .json) or YAML text within the budgets above; ExplorerError naming the cause.
    `max_chars` and `max_values` (JSON) are larger for a saved reference run (explorer/runtime/saved.py)."""
    kind = "JSON" if suffix == ".json" else "YAML"
    if len(text) > max_chars:
        raise ExplorerError(f"{where}: more than {max_chars:,} characters, the most a file may have")
    try:
        with _gc_paused():
            data = json.loads(text) if suffix == ".json" else _yaml(text, where)
    except json.JSONDecodeError as e:
        raise ExplorerError(f"{where}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise ExplorerError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except (yaml.YAMLError, ValueError, OverflowError) as e:
        if isinstance(e, ExplorerError):
            raise
        raise ExplorerError(f"{where}: malformed {kind}: {' '.join(str(e).split())[:200]}") from None
    with _gc_paused():
        json_depth_ok(data, where, max_values)
    return data


def shown_path(path) -> str:
    """A path for a message: as given, or its start and its length when longer than SHOWN_PATH_CHARS."""
    text = str(path)
    return text if len(text) <= SHOWN_PATH_CHARS else f"{text[:SHOWN_PATH_CHARS - 40]}… ({len(text):,} characters)"


def _cannot(path, err: Exception) -> ExplorerError:
    why = getattr(err, "strerror", None) or ("a NUL character in the name" if isinstance(err, ValueError)
                                             else type(err).__name__)
    return ExplorerError(f"{shown_path(path)}: cannot be read ({why})")


def is_regular_file(path) -> bool:
    """Whether `path` names a regular file: False for a named pipe, a device, a directory, a missing
    file, or a name the system refuses (too long, a NUL byte), never an OSError."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def path_exists(path) -> bool:
    """os.path.exists that is False, not an OSError, for a name the system refuses."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def read_capped(path, limit: int = MAX_FILE_BYTES) -> bytes:
    """At most `limit` bytes of a regular file; a longer file is refused unread, and anything else
    (a named pipe, /dev/zero, a directory) before a byte is read: it is opened without waiting
    (O_NONBLOCK: opening a named pipe otherwise waits for a writer) and checked on the open file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as e:
        raise _cannot(path, e) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ExplorerError(f"{shown_path(path)}: not a regular file (a pipe, device or directory is not read)")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise _cannot(path, e) from None
    if len(data) > limit:
        raise ExplorerError(f"{shown_path(path)}: more than {limit:,} bytes, the most a file may have")
    return data


def read_text_capped(path, limit: int = MAX_FILE_BYTES) -> str:
    data = read_capped(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ExplorerError(f"{shown_path(path)}: not UTF-8 text") from None


# ---- short reprs with bounded work -------------------------------------------------------

def _bounded(value, room: int, depth: int) -> str:
    """A repr of `value` that stops after about `room` characters; never walks more than that."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 100:
            return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (str, bytes)):
        return repr(value[:room + 1])
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        if depth <= 0:
            return "[...]" if isinstance(value, list) else "{...}" if isinstance(value, (dict, set)) else "(...)"
        opener, closer = {list: "[]", tuple: "()", dict: "{}"}.get(type(value), "{}")
        items = value.items() if isinstance(value, dict) else value
        parts, used = [], 1
        for item in itertools.islice(items, room):
            text = (f"{_bounded(item[0], room - used, depth - 1)}: {_bounded(item[1], room - used, depth - 1)}"
                    if isinstance(value, dict) else _bounded(item, room - used, depth - 1))
            parts.append(text)
            used += len(text) + 2
            if used > room:
                parts.append("...")
                break
        return opener + ", ".join(parts) + closer
    return repr(value)[:room + 1]


def short_repr(value, limit: int = 40) -> str:
    """A one-line repr for error messages, at most `limit` characters, in bounded work."""
    try:
        text = " ".join(_bounded(value, limit, 3).split())
    except (ValueError, RecursionError, TypeError):
        return f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."
