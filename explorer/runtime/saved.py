"""A saved reference run (`explorer run --out FILE`): read it back, and the model's side of its Gantt.

Needs no torch: the file holds the measured records; the modelled events are
recomputed from the model, strategy and cluster saved with it.
"""
from __future__ import annotations

import json

from explorer.errors import ExplorerError
from explorer.io.clusters import cluster_from_dict
from explorer.io.strategies import strategy_from_dict
from explorer.model.spec import ModelSpec

RUN_KEYS = ("model", "model_spec", "procs", "strategy", "measured_bytes_per_device", "model_bytes_per_device",
            "unmodelled_bytes_per_device", "loss_parallel", "loss_single", "iteration_time_s", "cluster_file",
            "events")
MAX_RUN_BYTES = 50 * 2 ** 20      # a run of 16 ranks x 20 iterations is a few MB


def load_run(data) -> dict:
    """A run dict from JSON text/bytes (or a dict), checked for the keys the Measured view reads."""
    if isinstance(data, (bytes, bytearray)):
        if len(data) > MAX_RUN_BYTES:
            raise ExplorerError(f"the run file is larger than {MAX_RUN_BYTES // 2 ** 20} MiB")
        data = data.decode("utf-8", errors="replace")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as err:
            raise ExplorerError(f"the run file is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise ExplorerError("a run file holds one JSON object (written by `explorer run --out FILE`)")
    missing = [k for k in RUN_KEYS if k not in data]
    if missing:
        raise ExplorerError(f"the run file lacks {', '.join(missing)} (write it with `explorer run --out FILE`)")
    if not isinstance(data["events"], list) or not all(isinstance(e, dict) for e in data["events"]):
        raise ExplorerError("the run file's 'events' must be a list of objects")
    return data


def _inputs(run: dict) -> tuple:
    spec = dict(run["model_spec"])
    spec["stage_blocks"] = tuple(spec.get("stage_blocks", ()))
    try:
        return ModelSpec(**spec), strategy_from_dict(run["strategy"]), cluster_from_dict(run["cluster_file"])
    except TypeError as err:
        raise ExplorerError(f"the run file's model_spec is not a model: {err}") from None


def model_events(run: dict):
    """The model's super-step events for the run's model, strategy and cluster (a DataFrame)."""
    from explorer.timeline import superstep_events
    model, strategy, cluster = _inputs(run)
    return superstep_events(model, strategy, cluster, run["procs"])


def model_microstep(run: dict, layer: int):
    """The model's micro-step events of one layer (forward and backward) for the run's inputs."""
    from explorer.timeline import microstep_events
    model, strategy, cluster = _inputs(run)
    if not isinstance(layer, int) or not 0 <= layer < model.layers:
        raise ExplorerError(f"layer must be between 0 and {model.layers - 1}, got {layer!r}")
    return microstep_events(model, strategy, cluster, run["procs"], layer)
