"""What a lesson is: a short text with its formula and source, a classroom-sized example with at
most three controls, one picture computed by the library, and a "predict, then reveal" question.

Pure Python (no Streamlit): the pages, the CLI and the tests read the same objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from explorer.io.clusters import load_cluster
from explorer.errors import ExplorerError
from explorer.io.models import load_model
from explorer.lessons.links import address as link_address
from explorer.strategy.strategy import Strategy

CLASSROOM_MODEL = "classroom-gpt"      # assets/models/classroom-gpt.json: 8 layers, 0.47 B parameters
CLASSROOM_CLUSTER = "classroom"        # assets/clusters/classroom.json: 4 GPUs per node, round numbers
CLASSROOM_GPUS = 8                     # 2 nodes x 4 GPUs
MAX_WORDS = 150                        # a lesson's text, as the issue asks
MAX_CONTROLS = 3


@lru_cache(maxsize=8)
def model(name: str = CLASSROOM_MODEL):
    return load_model(name)


@lru_cache(maxsize=4)
def cluster(name: str = CLASSROOM_CLUSTER):
    return load_cluster(name)


@dataclass(frozen=True)
class Control:
    """One lesson control: a choice among a few options (the first is not necessarily the default)."""

    name: str                  # key in the values dict
    label: str
    options: tuple
    default: object
    help: str = ""
    labels: tuple = ()         # text shown for each option; () = str(option)

    def __post_init__(self):
        if self.default not in self.options:
            raise ExplorerError(f"control {self.name}: default {self.default!r} is not an option")
        if self.labels and len(self.labels) != len(self.options):
            raise ExplorerError(f"control {self.name}: {len(self.labels)} labels for {len(self.options)} options")

    def text(self, value) -> str:
        if self.labels and value in self.options:
            return self.labels[self.options.index(value)]
        return ("on" if value else "off") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Setup:
    """A lesson's example as the explorer needs it: model, cluster, strategy (and the schedule drawn)."""

    model: object
    cluster: object
    strategy: Strategy
    schedule_drawn: str = ""   # the timeline schedule to draw ('zb-h1' is drawn from a 1f1b strategy)
    page: str = "cost"         # the explorer page that shows the idea best
    note: str = ""             # what the lesson changed in the example (shown beside the picture)
    search: tuple = ()         # (gpus, global batch, memory cap GiB) for the Search page, if it is the page

    @property
    def gpus(self) -> int:
        return self.strategy.dp * self.strategy.tp * self.strategy.pp


@dataclass(frozen=True)
class Reveal:
    """A "predict, then reveal" question and the library's answer for the current setting."""

    question: str
    answer: float              # in `unit`
    unit: str
    answer_text: str           # the answer as shown (rounded)
    explanation: str           # one or two sentences: how the number comes about
    now: float | None = None   # the same quantity in the setting it is compared with
    now_text: str = ""
    now_label: str = "now"     # what that setting is


@dataclass(frozen=True)
class Lesson:
    number: int
    slug: str                  # page url: learn-<slug>
    title: str
    text: str                  # markdown, at most MAX_WORDS words
    formula_latex: str
    formula_text: str          # the same formula in plain text (offline slides, captions)
    source: str                # paper and equation of the formula
    controls: tuple
    build: Callable            # values -> Setup (ExplorerError with a one-line message if impossible)
    picture: Callable          # (Setup, values) -> plotly Figure
    question: Callable         # values -> Reveal
    caption: Callable = field(default=lambda setup, values, palette="default": "")
    # (Setup or None, values, palette) -> one line under the picture; its colour words are the palette's

    def __post_init__(self):
        if len(self.controls) > MAX_CONTROLS:
            raise ExplorerError(f"lesson {self.slug}: {len(self.controls)} controls, at most {MAX_CONTROLS}")

    def defaults(self) -> dict:
        return {c.name: c.default for c in self.controls}

    def values(self, given: dict | None = None) -> dict:
        """The defaults updated with `given`; an unknown name or value is refused in one line."""
        out = self.defaults()
        for name, value in (given or {}).items():
            control = next((c for c in self.controls if c.name == name), None)
            if control is None:
                raise ExplorerError(f"lesson {self.slug} has no control {name!r}")
            if value not in control.options:
                raise ExplorerError(f"lesson {self.slug}: {name} = {value!r} is not one of "
                                    f"{', '.join(map(str, control.options))}")
            out[name] = value
        return out

    def setup(self, given: dict | None = None) -> Setup:
        return self.build(self.values(given))

    def figure(self, given: dict | None = None):
        values = self.values(given)
        return self.picture(self.build(values), values)

    def reveal(self, given: dict | None = None) -> Reveal:
        return self.question(self.values(given))

    def address(self, given: dict | None = None) -> str:
        """This lesson at a setting, as a path and query on the app's server (explorer/lessons/links.py)."""
        return link_address(self, self.values(given))

    def words(self) -> int:
        return len(self.text.split())

    def caption_text(self, given: dict | None = None, palette: str = "default") -> str:
        """The caption for a setting, its colours named in `palette` ('okabe-ito' in classroom mode)."""
        values = self.values(given)
        return self.caption(self.build(values), values, palette)


def fmt_seconds(seconds: float, digits: int = 3) -> str:
    """Seconds with a unit a student reads at once: 12.3 ms, 1.25 s, 840 µs."""
    value, unit = (seconds, "s") if abs(seconds) >= 1 else (seconds * 1e3, "ms") if abs(seconds) >= 1e-3 \
        else (seconds * 1e6, "µs")
    return f"{value:.{digits}g} {unit}"


def fmt_bytes(nbytes: float, digits: int = 3) -> str:
    """Bytes in GiB or MiB (powers of two, as memory is counted)."""
    return f"{nbytes / 2 ** 30:.{digits}g} GiB" if abs(nbytes) >= 2 ** 30 else f"{nbytes / 2 ** 20:.{digits}g} MiB"


def gbps(level) -> str:
    """A machine level's achieved bandwidth in words: '100 GB/s'."""
    return f"{level.bandwidth_bytes_per_s * level.bandwidth_efficiency / 1e9:.3g} GB/s"


def per_node(cluster) -> int:
    """GPUs in one unit of the innermost level (a node)."""
    return cluster.levels[0].job_fanout


def links(cluster) -> str:
    """'100 GB/s inside a node, 10 GB/s between nodes': the classroom cluster's two levels."""
    inner = cluster.levels[0]
    if len(cluster.levels) < 2:
        return f"{gbps(inner)} inside a {inner.name}"
    return f"{gbps(inner)} inside a {inner.name}, {gbps(cluster.levels[1])} between {inner.name}s"


def ratio_words(new: float, old: float, more: str = "grows", less: str = "shrinks", same: str = "stays",
                tolerance: float = 0.05) -> str:
    """'grows 1.8×', 'shrinks 2×' or 'stays about the same': how `old` became `new`, in words that
    cannot point the wrong way."""
    if old == new or (old and abs(new / old - 1) <= tolerance):
        return f"{same} about the same"
    if old == 0:
        return f"{more} from nothing"
    if new == 0:
        return f"{less} to nothing"
    factor = new / old if new > old else old / new
    return f"{more if new > old else less} {factor:.2g}×"


def strategy(gpus: int = CLASSROOM_GPUS, tp: int = 1, pp: int = 1, micro_batches: int = 8, micro_batch: int = 1,
             **fields) -> Strategy:
    """A strategy on `gpus` GPUs with d = gpus / (t p) and B = m b d (m micro-batches per replica)."""
    if gpus % (tp * pp):
        raise ExplorerError(f"t x p = {tp} x {pp} does not divide the {gpus} GPUs")
    dp = gpus // (tp * pp)
    return Strategy(dp=dp, tp=tp, pp=pp, micro_batch=micro_batch, global_batch=micro_batches * micro_batch * dp,
                    **fields)
