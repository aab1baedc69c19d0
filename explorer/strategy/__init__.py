"""Strategies: how a model is split over devices, the rules a strategy must obey, the device mesh."""
from explorer.strategy.strategy import (DTYPES, LAYER_PRESETS, OP_SPLITS, RECOMPUTE, SCHEDULES, LayerSplit,
                                        Strategy)

__all__ = ["DTYPES", "LAYER_PRESETS", "OP_SPLITS", "RECOMPUTE", "SCHEDULES", "LayerSplit", "Strategy"]
