"""What every rank of a reference run needs to know, as plain data, and the rank layout."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """Everything a rank needs, as plain data (it crosses process boundaries)."""

    hidden: int
    heads: int
    ffn_hidden: int
    seq_len: int
    vocab: int
    layers: int
    dp: int
    tp: int
    pp: int
    micro_batch: int
    global_batch: int
    schedule: str             # gpipe or 1f1b
    scatter_gather: bool
    sequence_parallel: bool   # residual stream split along the sequence (Korthikanti et al. 2022)
    zero: int                 # 0, or 1: optimizer step sharded over the data-parallel group
    stage_blocks: tuple       # per stage: block names ('embedding', 'layer3', 'head')
    iterations: int
    seed: int
    layer_degrees: tuple = ()  # per layer: t (Megatron split) or 1 (replicated on the group); () = all t
    chunks: int = 1            # v: model chunks per stage (the interleaved schedule)
    chunk_blocks: tuple = ()   # per stage, per chunk: block names (v > 1); () = each stage one chunk
    dtype: str = "fp32"        # parameters, activations and the sends (fp32 or bf16)
    grad_dtype: str = "fp32"   # the data-parallel reduction (the cost model's grad_dtype, resolved)
    recompute: str = "none"    # none, selective (attention core) or full (every layer)

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)

    def blocks_of(self, stage: int, chunk: int = 0) -> tuple:
        """The blocks of model chunk `chunk` on `stage`, in order."""
        return self.chunk_blocks[stage][chunk] if self.chunk_blocks else self.stage_blocks[stage]


def coords(cfg: Config, rank: int) -> tuple:
    """(tp, dp, pp) index of a rank; rank order tp-dp-pp, tp fastest (the explorer's default mesh)."""
    return rank % cfg.tp, (rank // cfg.tp) % cfg.dp, rank // (cfg.tp * cfg.dp)


def rank_of(cfg: Config, tp: int, dp: int, pp: int) -> int:
    return tp + cfg.tp * (dp + cfg.dp * pp)
