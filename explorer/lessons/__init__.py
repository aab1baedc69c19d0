"""Guided lessons: one concept each, a classroom-sized example, one live picture, a question.

>>> [lesson.slug for lesson in LESSONS][:4]
['double-level', 'data-parallel', 'tensor-parallel', 'pipeline']
>>> by_slug("pipeline").number
4
"""
from __future__ import annotations

from explorer.errors import ExplorerError
from explorer.lessons import activations, data_parallel, double_level, hybrid, pipeline, search_lesson, tensor_parallel, zero
from explorer.lessons.base import (CLASSROOM_CLUSTER, CLASSROOM_GPUS, CLASSROOM_MODEL, MAX_WORDS, Control, Lesson, Reveal,
                   Setup, fmt_bytes, fmt_seconds)

LESSONS = tuple(module.LESSON for module in (double_level, data_parallel, tensor_parallel, pipeline, zero,
                                             activations, hybrid, search_lesson))


def by_slug(slug: str) -> Lesson:
    for lesson in LESSONS:
        if lesson.slug == slug:
            return lesson
    raise ExplorerError(f"no lesson {slug!r}; lessons: {', '.join(l.slug for l in LESSONS)}")


__all__ = ["CLASSROOM_CLUSTER", "CLASSROOM_GPUS", "CLASSROOM_MODEL", "Control", "LESSONS", "Lesson", "MAX_WORDS",
           "Reveal", "Setup", "by_slug", "fmt_bytes", "fmt_seconds"]
