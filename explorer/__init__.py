"""Bridging DL Explorer: a symbolic cost model of hybrid-parallel training.

One pipeline: model, strategy and cluster in; plan, cost, memory and timeline out.

>>> from explorer import load_model, load_cluster, Strategy, evaluate
>>> r = evaluate(load_model("tiny-gpt"), Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8),
...              load_cluster("classroom"))
>>> r.iteration_time_s > 0
True
"""
from explorer.io.clusters import load_cluster, list_clusters
from explorer.errors import ExplorerError
from explorer.cost.evaluate import Result, evaluate
from explorer.cost.evaluation import Evaluation, evaluation
from explorer.io.models import load_model, list_models
from explorer.model.spec import ModelSpec
from explorer.strategy.strategy import LayerSplit, Strategy

__all__ = ["Evaluation", "ExplorerError", "LayerSplit", "ModelSpec", "Result", "Strategy", "evaluate", "evaluation",
           "list_clusters", "list_models", "load_cluster", "load_model"]
