"""Bounded caches: in memory (BoundedCache) and on disk (load / store).

The disk cache keeps what a fresh process would otherwise rebuild with sympy: the
source lambdify generated for the cost tree's compiled functions, the tree's
numeric arrays and the LaTeX of explained results (explorer.cost.cold). It lives
in $BRIDGING_DL_CACHE, or $XDG_CACHE_HOME/bridging-dl, or ~/.cache/bridging-dl
(BRIDGING_DL_CACHE=off turns it off). Safety: the directory must belong to the
user and be writable by nobody else (mode 0700 when created; otherwise the cache
is off); every entry carries an HMAC-SHA256 of its content under a random key
kept in that directory (mode 0600), and the full key text it was stored for, so
a corrupt, foreign or colliding file is ignored and rebuilt -- nothing is
executed unless it is exactly what this user's explorer wrote. Entries are keyed
by the explorer's source fingerprint as well (a changed model rebuilds), and the
directory holds at most MAX_ENTRIES entries of at most MAX_ENTRY_BYTES each
(least recently written removed first).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

MAX_ENTRIES = 4096
"""About 8 searches' worth (a search of gpt3-175b on 1,024 GPUs stores ~170 entries, llama2-70b at
32k tokens with cp ~490; each a few KB: ~20 MB when full)."""
MAX_ENTRY_BYTES = 4 << 20
_PACKAGE = Path(__file__).resolve().parents[1]
_SOURCES = ("cost", "model", "schedules", "strategy", "hardware", "symbols.py", "io/glossary.py")
"""What the cached functions, arrays and formulas are built from: their source is part of every key (the glossary
names the stored formulas' legend: explorer/runtime/explanation.py)."""
_ASSETS = ("glossary.json",)
"""Bundled assets the stored formulas read (the legend's text), part of every key as the sources are."""


class BoundedCache:
    """A small LRU dict: compiled functions and plans are reused, memory stays bounded."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()     # the app's sessions are threads of one server: look-up and eviction
                                          # are one step each (make() runs outside it; two makers may both build)

    def get(self, key, make):
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = make()
        with self._lock:
            self._data[key] = value
            if len(self._data) > self.max_entries:
                self._data.popitem(last=False)
        return value

    def __len__(self):
        return len(self._data)

    def clear(self):
        self._data.clear()


_STATE: dict = {}


def fingerprint() -> str | None:
    """sha256 of the explorer's source files the cached objects are built from (once per process);
    None when they cannot be read (then nothing is loaded or stored)."""
    if "fingerprint" not in _STATE:
        digest = hashlib.sha256()
        try:
            for name in _SOURCES:
                root = _PACKAGE / name
                for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
                    digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
            for name in _ASSETS:
                digest.update(name.encode() + b"\0" + (_PACKAGE.parent / "assets" / name).read_bytes() + b"\0")
        except OSError:
            return None
        _STATE["fingerprint"] = digest.hexdigest()
    return _STATE["fingerprint"]


def directory() -> Path | None:
    """The private cache directory, created if needed; None when off or not private."""
    env = os.environ.get("BRIDGING_DL_CACHE", "")
    if env.lower() in ("off", "0", "no", "false") or not hasattr(os, "getuid"):   # (no owner check: off)
        return None
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "bridging-dl"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022
    return path if private else None


def _secret(path: Path) -> bytes | None:
    """The HMAC key: 32 random bytes in `path`/key, readable by the user only."""
    cached = _STATE.get(("secret", path))
    if cached:
        return cached
    key_file = path / "key"
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(os.urandom(32))
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(key_file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as src:
            info = os.fstat(src.fileno())
            secret = src.read(64)
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or len(secret) != 32:
        return None
    _STATE[("secret", path)] = secret
    return secret


def _entry_path(path: Path, kind: str, key_text: str) -> Path:
    name = hashlib.sha256((str(fingerprint()) + "\0" + key_text).encode()).hexdigest()[:40]
    return path / f"{kind}-{name}.json"


def load(kind: str, key_text: str):
    """The value stored for (kind, key_text) by this user's explorer of this source, or None."""
    path = directory()
    secret = path and fingerprint() and _secret(path)
    if not secret:
        return None
    try:
        fd = os.open(_entry_path(path, kind, key_text), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as src:
            data = src.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    mac, _, body = data.partition(b"\n")
    if len(data) > MAX_ENTRY_BYTES or \
            not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).hexdigest().encode()):
        return None
    try:
        entry = json.loads(body)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("key") != key_text or entry.get("source") != fingerprint():
        return None
    return entry.get("value")


def store(kind: str, key_text: str, value) -> bool:
    """Write (kind, key_text) -> value (JSON-able) atomically; False when the cache is off or full."""
    path = directory()
    secret = path and fingerprint() and _secret(path)
    if not secret:
        return False
    try:
        body = json.dumps({"key": key_text, "source": fingerprint(), "value": value},
                          separators=(",", ":")).encode()
    except (TypeError, ValueError):          # not JSON (a value this cache does not keep)
        return False
    if len(body) > MAX_ENTRY_BYTES - 100:
        return False
    mac = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    try:
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "wb") as out:
            out.write(mac + b"\n" + body)
        os.replace(tmp, _entry_path(path, kind, key_text))
    except OSError:
        return False
    count = _STATE.get(("entries", path))       # entries at the last prune + those written since
    if count is None or count >= MAX_ENTRIES:
        prune(path)
    else:
        _STATE[("entries", path)] = count + 1
    return True


def prune(path: Path, max_entries: int | None = None) -> None:
    """Above max_entries (MAX_ENTRIES) entries, keep the 90 % most recently written (room for the
    next writes before the directory is listed again)."""
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    try:
        entries = [(p.stat().st_mtime, p) for p in path.glob("*.json")]
    except OSError:
        return
    keep = len(entries) if len(entries) <= max_entries else max_entries * 9 // 10
    _STATE[("entries", path)] = keep
    for _, old in sorted(entries)[:len(entries) - keep]:
        try:
            old.unlink()
        except OSError:
            pass


def stored_or_elsewhere(lookup, elsewhere, model, strategy, cluster, key_text: str):
    """What `lookup(key_text)` finds in this process's disk cache, else after `elsewhere` (a worker-pool job that
    builds it and stores it there: explorer/runtime/offload.py) said it did; None when neither has it. The one
    read-through order of the cold tree (explorer/cost/cold.py) and the formulas (explorer/runtime/explanation.py)."""
    found = lookup(key_text)
    if found is None and elsewhere is not None and directory() is not None and \
            elsewhere(model, strategy, cluster, key_text):
        found = lookup(key_text)
    return found
