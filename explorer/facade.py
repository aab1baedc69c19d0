"""The small public face the app (and notebooks) read: inputs, evaluation, figures, tables, I/O.

Pages import from here only, never from the library's internals or the CLI, so the
package can be rearranged behind it. Everything is a plain function or constant.
"""
from __future__ import annotations

from explorer.io import export
from explorer.strategy import layer_choices
from explorer import timeline
from explorer.charts.attention_curve import attention_curve_figure
from explorer.charts.breakdown import breakdown_bar, comm_figure, memory_figure
from explorer.charts.gantt import microstep_figure, superstep_figure
from explorer.charts.graph_figure import graph_figure
from explorer.charts.parity import band_of, parity_figure
from explorer.charts.residual_heatmap import residual_heatmap
from explorer.charts.event_table import readable_events
from explorer.charts.tables import (CATEGORY_LABELS, GIB, breakdown_table, comm_table, memory_table, readable_columns,
                                    readable_comm_table, summary_table, SUMMARY_LABELS, COMM_LABELS)
from explorer.io.clusters import list_clusters, load_cluster
from explorer.errors import ExplorerError
from explorer.cost.evaluate import Result, evaluate
from explorer.cost.explain import explain, symbol_values
from explorer.model.graph import build_blocks
from explorer.io.models import list_models, load_model
from explorer.model.spec import ModelSpec
from explorer.hardware.cluster import Cluster
from explorer.io.presets import (DEFAULT_CLUSTER, DEFAULT_MODEL, DEFAULT_STRATEGY, fallback_strategy, strategy_presets)
from explorer.cost.superstep import CATEGORIES
from explorer.cost.tree import cost_tree
from explorer.search import search
from explorer.search.figure import pareto_figure
from explorer.search.report import label as search_label
from explorer.search.report import rows as search_rows
from explorer.io.share import decode as decode_link
from explorer.io.share import encode as encode_link
from explorer.schedules import chunked as schedule_is_chunked
from explorer.schedules import get as _schedule
from explorer.schedules.registry import names as schedule_names
from explorer.schedules.registry import names_for as schedule_names_for


def schedule_drawn_as(name: str, pp: int | None = None) -> list:
    """The schedules a strategy of schedule `name` may be drawn as in the Timelines page: its own, then its
    what-ifs (Schedule.drawn_as) that apply to `pp` stages (all of them without pp)."""
    applies = schedule_names_for(pp) if pp is not None else schedule_names()
    return [name, *(other for other in _schedule(name).drawn_as if other in applies)]


def schedule_overlaps_sends(name: str) -> bool:
    """May schedule `name` overlap its point-to-point sends with computation (Schedule.overlaps_sends)?"""
    return _schedule(name).overlaps_sends


def schedule_chunks(name: str) -> int:
    """The one chunk count schedule `name` takes (0: any v >= 2, or an unchunked schedule)."""
    return _schedule(name).chunks
from explorer.strategy.strategy import RECOMPUTE, SCHEDULES, LayerSplit, Strategy
from explorer.io.uploads import cluster_from_upload, model_from_upload, strategy_from_upload
from explorer.io.uploads import SUGGESTED_SEQ_LEN, hf_sequence_suggestion, suggested_training_length  # noqa: E402
from explorer.validation import TARGETS as VALIDATION_TARGETS
from explorer.validation import load_cases, summarize, validate


def layer_ops(model) -> list:
    """Operator names of a model's first layer (what the micro-step view can show)."""
    block = next(b for b in build_blocks(model) if b.kind == "layer")
    return [op.name for op in block.ops]


def plan_of(model, strategy, cluster):
    """The execution plan (blocks on stages with their splits) of a strategy."""
    return cost_tree(model, strategy, cluster).plan


__all__ = [name for name in dir() if not name.startswith("_")]

# ---- limits and checked evaluation (issue 15): every Result the app shows is finite ----------
from explorer import limits as _limits                                   # noqa: E402
from explorer.limits import MODEL_LIMITS as _MODEL_LIMITS, check_result   # noqa: E402
from explorer.cost.checked import evaluate_checked as evaluate             # noqa: E402,F811

MODEL_DIM_MAX = {name: getattr(_limits, limit) for name, limit in _MODEL_LIMITS.items()}
"""Largest value of each model dimension (explorer/limits.py): the Model page's input maxima."""
__all__ += ["MODEL_DIM_MAX", "check_result", "evaluate"]
from explorer.io.glossary import glossary                                    # noqa: E402
__all__ += ["glossary"]
# ---- lessons, classroom mode, animation (issue 12 "Teach it in class") ----------------------
from explorer import lessons                                                          # noqa: E402
from explorer.charts.animation import animated_gantt                                  # noqa: E402
from explorer.charts.classroom import (MAX_MICRO_BATCHES, classroom_figure, micro_batches_end,  # noqa: E402
                                       zoom_micro_batches)
from explorer.io.slides import lesson_deck, slide_figure, slide_image                 # noqa: E402

from explorer.lessons.links import decode as decode_lesson_link, encode as encode_lesson_link  # noqa: E402
from explorer.lessons.links import PREFIX as LESSON_PARAM_PREFIX, page_path as lesson_page_path  # noqa: E402

__all__ += ["decode_lesson_link", "encode_lesson_link", "LESSON_PARAM_PREFIX", "lesson_page_path"]
__all__ += ["lessons", "animated_gantt", "MAX_MICRO_BATCHES", "classroom_figure", "micro_batches_end", "zoom_micro_batches",
            "lesson_deck", "slide_figure", "slide_image"]
from explorer.io.glossary import TEXTBOOK as TEXTBOOK_FORMULAS                          # noqa: E402
from explorer.cost.contention import contention_warning                                # noqa: E402
from explorer.io.glossary import DENSE_ONLY as DENSE_ONLY_TEXTBOOK                      # noqa: E402
from explorer.io.glossary import legend_of as symbol_legend                             # noqa: E402
from explorer.io.glossary import BUBBLE_MEANING, IDLE_TO_IDEAL, STAGES_IDLE              # noqa: E402
from explorer.charts.classroom import SIGNIFICANT, significant_table                     # noqa: E402

__all__ += ["TEXTBOOK_FORMULAS", "DENSE_ONLY_TEXTBOOK", "contention_warning", "symbol_legend", "BUBBLE_MEANING", "IDLE_TO_IDEAL", "STAGES_IDLE", "SIGNIFICANT",
            "significant_table"]
from explorer.io.share_pins import decode_pins, encode_pins                          # noqa: E402
from explorer.charts.gantt import time_unit                                          # noqa: E402
from explorer.charts.wire import wire_figure                                         # noqa: E402
from explorer.charts.spec_figure import figure_copy                                  # noqa: E402

__all__ += ["decode_pins", "encode_pins", "time_unit", "wire_figure", "figure_copy"]
# ---- framework configs (issue 13, part 1): Megatron-LM, DeepSpeed, torchtitan, MindSpore -----
from explorer.codegen import FILE_SUFFIX as CONFIG_SUFFIX                           # noqa: E402
from explorer.codegen import FRAMEWORKS as CONFIG_FRAMEWORKS                        # noqa: E402
from explorer.codegen import TITLES as CONFIG_TITLES                                # noqa: E402
from explorer.codegen import export as framework_config                             # noqa: E402

__all__ += ["CONFIG_SUFFIX", "CONFIG_FRAMEWORKS", "CONFIG_TITLES", "framework_config"]
from explorer.codegen import LANGUAGE as CONFIG_LANGUAGE                            # noqa: E402
from explorer.codegen import framework_notes                                        # noqa: E402
from explorer.codegen.imports import import_config as strategy_from_framework_config  # noqa: E402

__all__ += ["CONFIG_LANGUAGE", "framework_notes", "strategy_from_framework_config"]
from explorer.limits import MAX_DEVICES                                                  # noqa: E402
from explorer.limits import MAX_ACTION_CPU_S, WorkCancelled, work_budget                 # noqa: E402
from explorer.validation.evidence import band_text, evidence, mfu_warning, weak as weak_evidence  # noqa: E402

__all__ += ["MAX_DEVICES", "MAX_ACTION_CPU_S", "WorkCancelled", "work_budget", "band_text", "evidence", "mfu_warning",
            "weak_evidence"]
# ---- FP8, fp32 gradients, validation groups (issue 11 / issue 10 E7) -------------------------
from explorer.strategy.strategy import DTYPES, GRAD_DTYPES                              # noqa: E402
from explorer.validation import GROUPS as VALIDATION_GROUPS                             # noqa: E402
from explorer.validation import load_all_cases, load_megatron_bridge                    # noqa: E402
from explorer.validation.regimes import regimes as validated_regimes                    # noqa: E402
from explorer.validation.run_labels import group_name as validation_group_name          # noqa: E402

__all__ += ["DTYPES", "GRAD_DTYPES", "VALIDATION_GROUPS", "validation_group_name", "load_all_cases", "load_megatron_bridge",
            "validated_regimes"]
# ---- long context (issue 10): context parallelism and FlashAttention ---------------------------
from explorer.strategy.strategy import CP_ALGOS                                          # noqa: E402
from explorer.model.spec import ATTENTION                                                # noqa: E402

__all__ += ["CP_ALGOS", "ATTENTION"]
# ---- the host side and the MoE dispatchers (issue 27): the sidebar's choices --------------------
from explorer.strategy.strategy import CUDA_GRAPHS, MOE_DISPATCHERS                       # noqa: E402

__all__ += ["CUDA_GRAPHS", "MOE_DISPATCHERS"]
# ---- what a precision recipe keeps in memory (issue 26 item 3, issue 27 item 4): the sidebar's choices ---------
from explorer.hardware.precision import FP8_RECIPES, MOMENT_DTYPES                         # noqa: E402
from explorer.strategy.strategy import RECOMPUTE_MODULES                                   # noqa: E402

__all__ += ["FP8_RECIPES", "MOMENT_DTYPES", "RECOMPUTE_MODULES"]
# ---- the strategy options, one record each (issue 25): the sidebar draws their controls from them ---------
from explorer.strategy.options import OPTIONS as STRATEGY_OPTIONS                          # noqa: E402

__all__ += ["STRATEGY_OPTIONS"]
# ---- reference run on torch.distributed, measured vs modelled (issue 13, parts 2-3) ----------
from explorer.runtime import INSTALL_HINT as RUN_INSTALL_HINT                       # noqa: E402
from explorer.runtime import torch_available                                        # noqa: E402
from explorer.runtime.saved import load_run                                         # noqa: E402
from explorer.charts.measured import bytes_table as run_bytes_table                 # noqa: E402
from explorer.charts.measured import loss_table as run_loss_table                   # noqa: E402
from explorer.charts.measured import time_table as run_time_table                   # noqa: E402


def reference_run(model, strategy, procs: int, cluster=None, iterations: int = 3) -> dict:
    """Train `model` on `procs` processes under `strategy` (needs torch); cluster None: calibrate now."""
    from explorer.runtime.measure import run_strategy
    if cluster is None:
        from explorer.runtime.calibrate import calibrate
        from explorer.io.clusters import cluster_from_dict
        import os
        cluster = cluster_from_dict(calibrate(procs=min(procs, os.cpu_count() or 1)))
    return run_strategy(model, strategy, procs, cluster, iterations)


def run_gantt(run: dict, normalise: bool = False):
    """The run's measured super-step (per rank) over the model's (per stage)."""
    from explorer.charts.measured import gantt_overlay, model_rows
    from explorer.runtime.saved import model_events
    return gantt_overlay(run["events"], model_rows(model_events(run)), normalise)


def runnable_models() -> list:
    """Names of the preset models small enough for the reference run (GPTs under MAX_RUN_PARAMS)."""
    from explorer.runtime.measure import MAX_RUN_PARAMS, run_params
    return [m.name for m in list_models() if m.family == "gpt" and run_params(m) <= MAX_RUN_PARAMS]


def run_microstep(run: dict, layer: int, normalise: bool = False):
    """One layer's forward: the run's measured operator spans per rank over the model's micro-step."""
    from explorer.charts.measured import microstep_overlay
    from explorer.runtime.saved import model_microstep
    return microstep_overlay(run, model_microstep(run, layer), layer, normalise)


__all__ += ["run_time_table", "run_microstep", "runnable_models", "RUN_INSTALL_HINT", "torch_available", "load_run", "run_bytes_table", "run_loss_table", "reference_run",
            "run_gantt"]
# ---- heavy work off the serving interpreter: a bounded pool of worker processes (issue 31 item 4) ----
from explorer.runtime.workers import WORKERS_ENV, Job, WorkerPool                    # noqa: E402
from explorer.runtime.jobs import image_request, reference_run_request, search_request     # noqa: E402
from explorer.runtime.jobs import search_result_from_dict, slide_request                # noqa: E402

from explorer.cost.cold import compile_elsewhere                                       # noqa: E402
from explorer.runtime.offload import compiles_in, explains_in, presets_in, timeline_in  # noqa: E402
from explorer.runtime.explanation import explain_elsewhere, explanation               # noqa: E402

__all__ += ["WORKERS_ENV", "Job", "WorkerPool", "image_request", "reference_run_request", "search_request",
            "search_result_from_dict", "slide_request", "compile_elsewhere", "compiles_in", "explains_in", "presets_in",
            "timeline_in", "explain_elsewhere", "explanation"]
# ---- what a prediction depends on (issue 28 item 2): elasticities to the cluster's constants ----
from explorer.charts.sensitivity import constant_name as sensitivity_constant_name, tornado_figure  # noqa: E402
from explorer.validation.sensitivity import sensitivity, sensitivity_or_reason, sensitivity_text  # noqa: E402

__all__ += ["tornado_figure", "sensitivity_constant_name", "sensitivity", "sensitivity_or_reason", "sensitivity_text"]
# ---- how sure a search's ranking is; the search's memory headroom (issues 28 item 3, 30 item 5) ---------------
from explorer.search.search import MEMORY_HEADROOM                                      # noqa: E402
from explorer.validation.robust import holds_words, robustness                          # noqa: E402

__all__ += ["MEMORY_HEADROOM", "holds_words", "robustness"]
# ---- FLOPs conventions (issue 26 item 4): Eq. 3 (full attention) beside Megatron-LM's count (causal half) ----
from explorer.cost.megatron_flops import CONVENTION as MEGATRON_FLOPS_CONVENTION       # noqa: E402
from explorer.cost.megatron_flops import EQ3_CONVENTION as EQ3_FLOPS_CONVENTION        # noqa: E402
from explorer.search.report import MEGATRON_MFU_COLUMN                                 # noqa: E402

__all__ += ["MEGATRON_FLOPS_CONVENTION", "EQ3_FLOPS_CONVENTION", "MEGATRON_MFU_COLUMN"]
# ---- the framework a strategy targets, whose defaults apply (issue 26 item 5) ----------------------------------
from explorer.strategy.frameworks import FRAMEWORKS as STRATEGY_FRAMEWORKS                # noqa: E402
from explorer.strategy.frameworks import GRAD_FROM_FRAMEWORK, default_grad_dtype          # noqa: E402
from explorer.strategy.frameworks import TITLES as FRAMEWORK_TITLES                       # noqa: E402
from explorer.strategy.frameworks import GENERIC as GENERIC_FRAMEWORK                     # noqa: E402

__all__ += ["STRATEGY_FRAMEWORKS", "GRAD_FROM_FRAMEWORK", "default_grad_dtype", "FRAMEWORK_TITLES",
            "GENERIC_FRAMEWORK"]
