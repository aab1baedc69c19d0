"""Cluster: a device and a hierarchy of machine levels (Multi-BSP).

Level 0 joins `fanout` devices (a node: NVLink/NVSwitch), level 1 joins
`fanout` level-0 units (the cluster network), and so on. Each level has the
per-device bandwidth and latency a collective sees when its group crosses that
level; a group pays the slowest level it crosses (DESIGN.md, BSP cost).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from explorer.errors import ExplorerError
from explorer.hardware.precision import FP8_RECIPES

DTYPES = ("bf16", "fp16", "fp32", "fp8")
BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 2}
"""beta of the cost model: bytes of a parameter, gradient, kept activation and communicated
element. "fp8" is Transformer Engine's FP8 training: TE casts the operands of each GEMM to FP8
inside its modules, while the weights the optimizer updates (bf16, fp32 master copy), the
gradients reduced over dp, the outputs of row-parallel linears (reduce-scatter / all-reduce in the
activation dtype) and every non-GEMM activation stay bf16 (Megatron-Core exchanges bf16 weights
unless --fp8-param-gather, NVIDIA/Megatron-LM megatron/training/arguments.py). Two things TE does
move in FP8: the sequence-parallel all-gather in front of a column-parallel linear gathers the
already cast FP8 input, and the linear inputs saved for the weight gradient are the FP8 copies
(NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py @ 0004dbd0, _Linear.forward:
cast_to_fp8 before gather_along_first_dim). With one beta for all of them we take 2 for fp8: an
upper bound on those all-gathers (half of the SP bytes). What fp8 changes is the GEMM peak
(Device.peak_flops['fp8']) and its achieved fraction (Efficiency.gemm_max_fp8), and what TE keeps in
memory per recipe -- the saved linear inputs in FP8, the cached FP8 weight copies -- which
explorer/hardware/precision.py prices (Strategy.fp8_recipe). See assets/hardware_sources.md, "FP8 training"."""


def _positive(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ExplorerError(f"{owner} field '{name}' must be a positive number, got {value!r}")


def _fraction(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ExplorerError(f"{owner} field '{name}' must be in (0, 1], got {value!r}")


@dataclass(frozen=True)
class Level:
    """One machine level: `fanout` units of the level below joined by a network."""

    name: str
    fanout: int                      # units of the level below in one unit of this level
    bandwidth_bytes_per_s: float     # per device, one direction, as links are rated
    latency_s: float                 # per message hop (alpha)
    bandwidth_efficiency: float = 1.0  # fraction of the rated bandwidth collectives achieve
    source: str = ""
    allocated: int = 0               # units of the fanout one job is given (a scheduler's block); 0 = all

    def __post_init__(self):
        owner = f"level {self.name!r}"
        if isinstance(self.fanout, bool) or not isinstance(self.fanout, int) or self.fanout < 1:
            raise ExplorerError(f"{owner} field 'fanout' must be a positive integer, got {self.fanout!r}")
        if isinstance(self.allocated, bool) or not isinstance(self.allocated, int) or \
                not 0 <= self.allocated <= self.fanout:
            raise ExplorerError(f"{owner} field 'allocated' must be a whole number from 1 to its fanout "
                                f"{self.fanout} (or 0: all of it), got {self.allocated!r}")
        _positive(owner, "bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        if isinstance(self.latency_s, bool) or not isinstance(self.latency_s, (int, float)) or self.latency_s < 0:
            raise ExplorerError(f"{owner} field 'latency_s' must be a non-negative number, got {self.latency_s!r}")
        _fraction(owner, "bandwidth_efficiency", self.bandwidth_efficiency)

    @property
    def job_fanout(self) -> int:
        """Units of the level below that one job holds in one unit of this level: the allocation where
        the scheduler gives jobs less than the whole unit (GB200 NVL72: 16 of the 18 compute trays of a
        rack, 64 of its 72 GPUs), else the fanout. The mesh places ranks by it."""
        return self.allocated or self.fanout

    @property
    def seconds_per_byte(self) -> float:
        """g_l of the BSP cost: achieved seconds per byte per device."""
        return 1.0 / (self.bandwidth_bytes_per_s * self.bandwidth_efficiency)


@dataclass(frozen=True)
class Device:
    """One accelerator."""

    name: str
    peak_flops: dict                 # dtype -> dense FLOP/s
    memory_bytes: float              # HBM capacity
    hbm_bandwidth_bytes_per_s: float
    source: str = ""
    sms: int = 0                     # streaming multiprocessors (0: not given; nothing reads an SM share then)
    fp8_recipes: tuple = ()          # the FP8 scaling recipes its tensor cores run (explorer.hardware.precision
    #                                  FP8_RECIPES, RECIPE_HARDWARE); () = not stated: every recipe is taken

    def __post_init__(self):
        owner = f"device {self.name!r}"
        if not isinstance(self.fp8_recipes, tuple) or not set(self.fp8_recipes) <= set(FP8_RECIPES):
            raise ExplorerError(f"{owner} field 'fp8_recipes' must list FP8 recipes among {', '.join(FP8_RECIPES)}, "
                                f"got {self.fp8_recipes!r}")
        if isinstance(self.sms, bool) or not isinstance(self.sms, int) or self.sms < 0:
            raise ExplorerError(f"{owner} field 'sms' must be a whole number of streaming multiprocessors "
                                f"(0: not given), got {self.sms!r}")
        if not isinstance(self.peak_flops, dict) or not self.peak_flops:
            raise ExplorerError(f"{owner} needs 'peak_flops' per dtype, e.g. {{'bf16': 312e12}}")
        for dtype, value in self.peak_flops.items():
            if dtype not in DTYPES:
                raise ExplorerError(f"{owner}: dtype {dtype!r} is unknown; use {', '.join(DTYPES)}")
            _positive(owner, f"peak_flops[{dtype}]", value)
        _positive(owner, "memory_bytes", self.memory_bytes)
        _positive(owner, "hbm_bandwidth_bytes_per_s", self.hbm_bandwidth_bytes_per_s)

    def __hash__(self):  # peak_flops is a dict; hash its items
        return hash((self.name, tuple(sorted(self.peak_flops.items())), self.memory_bytes,
                     self.hbm_bandwidth_bytes_per_s, self.sms, self.fp8_recipes))

    def flops(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise ExplorerError(
                f"device {self.name!r} has no peak FLOP/s for dtype {dtype!r}; "
                f"it has {', '.join(self.peak_flops)}")
        return float(self.peak_flops[dtype])


@dataclass(frozen=True)
class Efficiency:
    """What makes real runs slower than peak; one set per hardware."""

    gemm_max: float = 1.0            # eta: best achieved fraction of peak on large GEMMs
    gemm_half_flops: float = 0.0     # GEMM FLOPs (per device) at which efficiency is half of gemm_max
    hbm: float = 1.0                 # achieved fraction of HBM bandwidth (memory-bound ops)
    kernel_launch_s: float = 0.0     # fixed overhead per kernel
    source: str = ""
    gemm_max_fp8: float = 0.0        # eta for FP8 GEMMs (dtype 'fp8'); 0 = the same as gemm_max
    host_launch_s: float = 0.0       # tau_h: host CPU seconds to issue one kernel (framework + library + launch
    #                                  path; the host side of a pass, explorer/model/kernels.py); 0 = not priced
    host_sync_s: float = 0.0         # tau_s: stall of one device-to-host synchronisation (dropless dispatcher)

    def __post_init__(self):
        _fraction("efficiency", "gemm_max", self.gemm_max)
        if self.gemm_max_fp8 != 0:
            _fraction("efficiency", "gemm_max_fp8", self.gemm_max_fp8)
        _fraction("efficiency", "hbm", self.hbm)
        for name in ("gemm_half_flops", "kernel_launch_s", "host_launch_s", "host_sync_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ExplorerError(f"efficiency field '{name}' must be a non-negative number, got {value!r}")

    def gemm_max_for(self, dtype: str) -> float:
        """eta for the training dtype: FP8 GEMMs have their own achieved fraction of the FP8 peak
        (per-tensor amax/scale and cast kernels included: they are not separate terms)."""
        return self.gemm_max_fp8 if dtype == "fp8" and self.gemm_max_fp8 else self.gemm_max


@dataclass(frozen=True)
class Cluster:
    name: str
    device: Device
    levels: tuple                    # of Level, innermost first
    efficiency: Efficiency = field(default_factory=Efficiency)
    source: str = ""

    def __post_init__(self):
        object.__setattr__(self, "levels", tuple(self.levels))
        if not self.levels:
            raise ExplorerError(f"cluster {self.name!r} needs at least one level")
        # hashed on every cached lookup of the cost model: computed once (the fields are frozen)
        object.__setattr__(self, "_hash", hash((self.name, self.device, self.levels, self.efficiency, self.source)))
        units, unit = [], 1
        for level in self.levels:
            unit *= level.job_fanout
            units.append(unit)
        # the devices one unit of each level holds for a job (cumulative job fanouts): the mesh places ranks by
        # them for every group of every candidate, so they are computed once here
        object.__setattr__(self, "units", tuple(units))

    def __hash__(self):
        return self._hash

    @property
    def devices_per_node(self) -> int:
        return self.levels[0].job_fanout

    @property
    def max_devices(self) -> int:
        """The devices the levels describe (fanouts multiplied). A run may use more: the outermost
        level is the network, which grows with the run (the preset fixes the node and the links;
        the number of nodes follows the GPUs asked for, explorer.strategy.mesh.span_level)."""
        n = 1
        for level in self.levels:
            n *= level.job_fanout
        return n
