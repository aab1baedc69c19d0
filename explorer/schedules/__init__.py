"""Pipeline schedules: one object per schedule, registered by name (registry.py).

Each schedule holds what every part of the explorer needs of it: the order of
passes on each stage (the timeline), its critical path and its bubble (the cost
tree's super-step), the micro-batches a stage keeps in flight (memory), the
window the gradient synchronisation may hide under (overlap) and its rules
(chunks, stages, micro-batches). Adding a schedule is one module plus one line
in registry.py.
"""
from explorer.schedules.base import Schedule
from explorer.schedules.registry import NAMES, SCHEDULES, chunked, get

__all__ = ["NAMES", "SCHEDULES", "Schedule", "chunked", "get"]
