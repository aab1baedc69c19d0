"""Load and save clusters: presets in assets/clusters, or a JSON/YAML file in the same schema.

Files use the units spec sheets use; the Cluster dataclasses hold SI base units:

| file                      | Cluster                        | factor      |
| ------------------------- | ------------------------------ | ----------- |
| peak_tflops (TFLOP/s)     | peak_flops (FLOP/s)            | 1e12        |
| memory_gib (GiB)          | memory_bytes                   | 2**30       |
| *_gbps (GB/s, decimal)    | *_bytes_per_s                  | 1e9         |
| latency_us (microseconds) | latency_s                      | 1e-6        |

>>> load_cluster("classroom").devices_per_node
4
"""
from __future__ import annotations

import re
from pathlib import Path

from explorer.hardware.cluster import Cluster, Device, Efficiency, Level
from explorer.hardware.precision import FP8_RECIPES
from explorer.hardware.units import GB, GIB, TERA, US_PER_S
from explorer.errors import ExplorerError
from explorer.limits import check_cluster
from explorer.io.models import check_keys, field, load_file, resolve, short_repr

PRESET_DIR = Path(__file__).resolve().parents[2] / "assets" / "clusters"


CLUSTER_KEYS = ("name", "source", "device", "levels", "efficiency")
DEVICE_KEYS = ("name", "peak_tflops", "memory_gib", "hbm_bandwidth_gbps", "sms", "fp8_recipes", "source")
LEVEL_KEYS = ("name", "fanout", "allocated", "bandwidth_gbps", "latency_us", "bandwidth_efficiency", "source")
EFFICIENCY_KEYS = ("gemm_max", "gemm_half_flops", "hbm", "kernel_launch_s", "gemm_max_fp8", "host_launch_s",
                   "host_sync_s", "source")


def _device(d, where: str = "device: ") -> Device:
    if not isinstance(d, dict):
        raise ExplorerError(f"{where}must be a mapping, got {type(d).__name__}")
    check_keys(d, DEVICE_KEYS, where)
    peaks = field(d, "peak_tflops", "mapping", where)
    for dtype in peaks:
        field(peaks, dtype, "positive", f"{where}peak_tflops: ")
    return Device(name=field(d, "name", "text", where),
                  peak_flops={dtype: tflops * TERA for dtype, tflops in peaks.items()},
                  memory_bytes=field(d, "memory_gib", "positive", where) * GIB,
                  hbm_bandwidth_bytes_per_s=field(d, "hbm_bandwidth_gbps", "positive", where) * GB,
                  source=field(d, "source", "text", where, default=""),
                  sms=field(d, "sms", "count", where, default=0),
                  fp8_recipes=_fp8_recipes(d, where))


def _fp8_recipes(d, where: str) -> tuple:
    """The device's 'fp8_recipes': a list of FP8_RECIPES (absent: not stated)."""
    recipes = d.get("fp8_recipes", [])
    if not isinstance(recipes, list) or not all(isinstance(r, str) and r in FP8_RECIPES for r in recipes):
        raise ExplorerError(f"{where}field 'fp8_recipes' must be a list of FP8 recipes among {', '.join(FP8_RECIPES)}, "
                            f"got {short_repr(recipes)}")
    return tuple(dict.fromkeys(recipes))


def _level(d, where: str) -> Level:
    if not isinstance(d, dict):
        raise ExplorerError(f"{where}must be a mapping, got {type(d).__name__}")
    check_keys(d, LEVEL_KEYS, where)
    return Level(name=_level_name(field(d, "name", "text", where), where),
                 fanout=field(d, "fanout", "count", where),
                 bandwidth_bytes_per_s=field(d, "bandwidth_gbps", "positive", where) * GB,
                 latency_s=field(d, "latency_us", "non-negative", where) / US_PER_S,
                 bandwidth_efficiency=field(d, "bandwidth_efficiency", "positive", where, default=1.0),
                 source=field(d, "source", "text", where, default=""),
                 allocated=field(d, "allocated", "count", where, default=0))


LEVEL_NAME = re.compile(r"[^\W_][\w .+-]*")   # letters and digits first, then also space _ . + -


def _level_name(name: str, where: str) -> str:
    """A level's name becomes a symbol of the formulas (g_node, L_node: LaTeX on the Cost and Export pages,
    where a `$`, brace or backslash would end or change the formula): letters, digits, space _ . + - only."""
    if not LEVEL_NAME.fullmatch(name):
        raise ExplorerError(f"{where}level {short_repr(name)}: field 'name' must be letters and digits (then also "
                            "space _ . + -), as it names the level's symbols g and L in the formulas")
    return name


def _efficiency(d, where: str = "efficiency: ") -> Efficiency:
    if not isinstance(d, dict):
        raise ExplorerError(f"{where}must be a mapping, got {type(d).__name__}")
    check_keys(d, EFFICIENCY_KEYS, where)
    numbers = {key: field(d, key, "non-negative", where) for key in EFFICIENCY_KEYS[:-1] if key in d}
    return Efficiency(**numbers, source=field(d, "source", "text", where, default=""))


def cluster_from_dict(d: dict, name_hint: str = "") -> Cluster:
    """A Cluster from the file schema (see the module docstring for units)."""
    if not isinstance(d, dict):
        raise ExplorerError(f"a cluster must be a mapping of fields, got {type(d).__name__}")
    check_keys(d, CLUSTER_KEYS, "")
    levels = field(d, "levels", "list", "")
    if not levels:
        raise ExplorerError("field 'levels' must list at least one level (the node)")
    name = field(d, "name", "text", "", default=name_hint)
    if not name:
        raise ExplorerError("field 'name' must be a non-empty string")
    cluster = Cluster(name=name,
                      device=_device(field(d, "device", "mapping", "")),
                      levels=tuple(_level(level, f"levels[{i}]: ") for i, level in enumerate(levels)),
                      efficiency=_efficiency(field(d, "efficiency", "mapping", "", default={})),
                      source=field(d, "source", "text", "", default=""))
    check_cluster(cluster)           # magnitudes within explorer/limits.py CLUSTER_BOUNDS
    return cluster


def _num(x: float):
    """A file-friendly number: unit conversions undone to 12 digits, integers without '.0'."""
    x = float(f"{x:.12g}")
    return int(x) if x.is_integer() else x


def cluster_to_dict(cluster: Cluster) -> dict:
    """The inverse of cluster_from_dict (same schema and units as the preset files)."""
    dev, eff = cluster.device, cluster.efficiency
    return {
        "name": cluster.name, "source": cluster.source,
        "device": {"name": dev.name,
                   "peak_tflops": {k: _num(v / TERA) for k, v in dev.peak_flops.items()},
                   "memory_gib": _num(dev.memory_bytes / GIB),
                   "hbm_bandwidth_gbps": _num(dev.hbm_bandwidth_bytes_per_s / GB),
                   **({"sms": dev.sms} if dev.sms else {}),
                   **({"fp8_recipes": list(dev.fp8_recipes)} if dev.fp8_recipes else {}), "source": dev.source},
        "levels": [{"name": lv.name, "fanout": lv.fanout, **({"allocated": lv.allocated} if lv.allocated else {}),
                    "bandwidth_gbps": _num(lv.bandwidth_bytes_per_s / GB),
                    "latency_us": _num(lv.latency_s * US_PER_S),
                    "bandwidth_efficiency": _num(lv.bandwidth_efficiency),
                    "source": lv.source} for lv in cluster.levels],
        "efficiency": {"gemm_max": _num(eff.gemm_max), "gemm_half_flops": _num(eff.gemm_half_flops),
                       "hbm": _num(eff.hbm), "kernel_launch_s": _num(eff.kernel_launch_s),
                       **({"gemm_max_fp8": _num(eff.gemm_max_fp8)} if eff.gemm_max_fp8 else {}),
                       **({"host_launch_s": _num(eff.host_launch_s)} if eff.host_launch_s else {}),
                       **({"host_sync_s": _num(eff.host_sync_s)} if eff.host_sync_s else {}),
                       "source": eff.source},
    }


def load_cluster(name_or_path) -> Cluster:
    """A preset by name (see list_clusters), or a .json/.yaml/.yml cluster file."""
    path = resolve(name_or_path, PRESET_DIR, "cluster")
    return load_file(path, cluster_from_dict, path.stem)


def list_clusters() -> list:
    """Every preset in assets/clusters, sorted by name."""
    return sorted((load_cluster(p) for p in PRESET_DIR.glob("*.json")), key=lambda c: c.name)
