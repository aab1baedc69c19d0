"""python -m explorer models | clusters"""
from __future__ import annotations

from explorer.io.clusters import list_clusters
from explorer.io.models import list_models


def register(sub) -> None:
    sub.add_parser("models", help="list the model presets").set_defaults(run=run_models)
    sub.add_parser("clusters", help="list the cluster presets").set_defaults(run=run_clusters)


def run_models(args) -> int:
    print(f"{'name':<16}{'family':<8}{'layers':>7}{'hidden':>8}{'heads':>6}{'seq':>6}{'vocab':>8}{'experts':>9}")
    for spec in list_models():
        experts = f"{spec.experts}/{spec.experts_per_token}" if spec.is_moe else ""
        print(f"{spec.name:<16}{spec.family:<8}{spec.layers:>7}{spec.hidden:>8}{spec.heads:>6}"
              f"{spec.seq_len:>6}{spec.vocab:>8}{experts:>9}")
    return 0


def run_clusters(args) -> int:
    print(f"{'name':<16}{'device':<18}{'TFLOP/s bf16':>13}{'memory GiB':>11}{'per node':>9}")
    for c in list_clusters():
        bf16 = c.device.peak_flops.get("bf16", 0) / 1e12
        print(f"{c.name:<16}{c.device.name:<18}{bf16:>13.1f}{c.device.memory_bytes / 2**30:>11.0f}"
              f"{c.devices_per_node:>9}")
    return 0
