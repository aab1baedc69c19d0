"""A reference run on a real engine (torch.distributed): a small GPT trained under a strategy.

`run_strategy(model, strategy, procs)` starts `procs` processes (gloo on CPU, nccl
when CUDA is present) that train the model for a few iterations with data
parallelism (gradient all-reduce), Megatron-style tensor parallelism (the f/g
conjugate operators, Shoeybi et al. 2019 Sec 3) and pipeline parallelism (GPipe,
Huang et al. 2019; 1F1B and interleaved 1F1B, Narayanan et al. SC'21 Sec 2.2), with
full or selective recomputation, in fp32 or bf16, and records every
collective and point-to-point call and the compute spans per rank.
`compare(...)` turns the records into bytes per device per cost category with
the model's bus-bandwidth factors and sets them next to `evaluate`'s.

torch is optional: nothing here imports it at module level; `torch_available()`
says whether it is installed and INSTALL_HINT how to install it.
"""
from __future__ import annotations

import importlib.util

INSTALL_HINT = ("the reference run needs PyTorch (a CPU build is enough): "
                "python -m pip install torch==2.13.0")


def torch_available() -> bool:
    """True when `import torch` would work (checked without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False
