"""Strategy search: the global space, per-layer splits and stage partition by
dynamic programming, the Pareto front of time vs memory (issue 5).

>>> from explorer import load_model, load_cluster
>>> r = search(load_model("tiny-gpt"), load_cluster("classroom"), gpus=8, global_batch=8, top=3)
>>> len(r.top) <= 3 and r.kept + sum(r.pruned.values()) == r.total
True
"""
from explorer.search.search import Candidate, SearchResult, search

__all__ = ["Candidate", "SearchResult", "search"]
