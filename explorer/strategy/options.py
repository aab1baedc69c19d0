"""The strategy options, declared once: one frozen record per option-like Strategy field (issue 25).

An option is a Strategy field whose plumbing is generic: a closed set of choices, an on/off switch or a set of
modules, with a default that keeps every strategy made before it the same. Its record says everything the
consumers need, so that adding one is adding a record here (plus its pricing and its rules):
* `Strategy` declares the field from the record (name, default) and checks it on construction (`checked`);
* the CLI (explorer/cli/args.py) adds `flag` with `help` and resolves it; the search command
  (explorer/cli/search_cmd.py) adds it too when `search` says every candidate carries it;
* share links (explorer/io/share.py) write `link` when the value is not the default, and read it back;
  strategy files (explorer/io/strategies.py) hold every Strategy field under its own name;
* the sidebar (app_pages/sidebar.py) draws its control from `label`, `widget_help` and the kind (a select box, a
  toggle, a multi-select) under the session key `widget_key` (app_pages/state.py);
* `structure`: the option changes the cost tree's blocks (explorer/cost/numeric.py STRUCTURE_FIELDS; the search's
  probe carries it); `superstep`: the terms() keyword it turns on (explorer/strategy/strategy.py memory_options,
  explorer/cost/superstep.py); `search`: the search carries it, fixed, into every candidate (explorer/search);
* `exporters`: the framework exporters that write it and whose importers read it back (explorer/codegen).

grad_dtype and framework are not here: a strategy's gradient dtype follows its framework's default
(explorer/strategy/frameworks.py), which no record can say. A test may append a record to OPTIONS (and
drop it again) before the consumers read it: they read the table when they run, not when they are imported --
except Strategy's fields, which are declared when explorer.strategy.strategy is imported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from explorer.errors import ExplorerError
from explorer.hardware.precision import FP8_RECIPES, MOMENT_DTYPES
from explorer.strategy.moe_rules import ep_overlap_blocker
from explorer.strategy.recompute_rules import recompute_module_absent

KINDS = ("choice", "bool", "modules")
"""choice: one of `choices` (a select box); bool: on or off (a toggle); modules: a set of `choices` (a multi-select,
a comma-separated link value, `nargs='+'` on the command line)."""
WIDGETS = {"choice": "selectbox", "bool": "toggle", "modules": "multiselect"}
"""The sidebar control of each kind (Streamlit's st.<widget>)."""
ANNOTATIONS = {"choice": "str", "bool": "bool", "modules": "tuple"}


def _always(fields) -> bool:
    return True


@dataclass(frozen=True)
class Option:
    """One strategy option and what every consumer needs of it (module docstring)."""

    name: str                       # the Strategy field
    kind: str                       # KINDS
    default: object
    meaning: str                    # one line, with its source
    flag: str                       # the evaluate/timeline/run command-line flag
    help: str                       # its --help
    link: str                       # the share-link parameter
    label: str                      # the sidebar control's label
    widget_help: str = ""
    choices: tuple = ()             # choice and modules kinds
    when: Callable = _always        # fields (a dict of the strategy's values) -> whether the option applies
    reset_off: bool = False         # the sidebar's strategy takes the default where `when` does not hold
    moe_only: bool = False          # drawn for models with experts only; the default otherwise
    structure: bool = False         # changes the cost tree's blocks (STRUCTURE_FIELDS)
    superstep: str = ""             # bool options: the terms() keyword set True when on (memory_options)
    search: bool = False            # the search carries it, fixed, into every candidate
    search_help: str = ""           # the search command's --help for it
    needs_zero: int = 0             # off its default it needs ZeRO >= this: the search prunes lower stages
    zero_reason: str = ""           # the search's name for those pruned points
    exporters: tuple = ()           # explorer.codegen exporters that write it (and whose importers read it)
    canonical: Callable | None = None   # modules: one spelling per set (e.g. the default written out) -> value
    refusal: str = ""               # off its default where `when` fails or below needs_zero: refused with this line
    #                                 (str.format_map over the strategy's fields: {dtype}, {zero}, ...;
    #                                 explorer/strategy/rules.py _options)
    megatron: str = ""              # bool options: the Megatron-LM switch written when on and read back
    megatron_with: Callable | None = None  # strategy -> further Megatron-LM arguments written with that switch
    #                                        (explorer/codegen/megatron.py)
    absent: Callable | None = None  # modules: (choice, model) -> why the model has no such module (its control
    #                                 offers only the others; the rule table refuses them), None when it has it
    blocker: Callable | None = None  # (fields, model) -> why the option cannot be switched on with these choices
    #                                  (its control greyed out, saying so; the sidebar's strategy takes the default)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ExplorerError(f"option {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind != "bool" and not self.choices:
            raise ExplorerError(f"option {self.name!r}: a {self.kind} option lists its choices")
        if not self.flag.startswith("--") or not self.link or not self.link.isalnum():
            raise ExplorerError(f"option {self.name!r}: needs a --flag and an alphanumeric link key")

    @property
    def widget(self) -> str:
        return WIDGETS[self.kind]

    @property
    def widget_key(self) -> str:
        """The sidebar control's session key (app_pages/state.py names the built-in ones W_<NAME>)."""
        return f"w_{self.name}"

    @property
    def annotation(self) -> str:
        return ANNOTATIONS[self.kind]

    def checked(self, value):
        """`value` if valid for this option (modules: as a tuple in the order of `choices`, canonical), else
        one ExplorerError line naming the field and the value."""
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ExplorerError(f"strategy field '{self.name}' must be true or false, got {value!r}")
            return value
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise ExplorerError(f"{self.name} {value!r} is unknown; use one of {', '.join(self.choices)}")
            return value
        items = (value,) if isinstance(value, str) else value
        if not isinstance(items, (tuple, list)) or any(m not in self.choices for m in items):
            raise ExplorerError(f"{self.name} {str(value)[:80]} names a module the explorer does not model; use "
                                f"some of {', '.join(self.choices)}")
        items = tuple(m for m in self.choices if m in items)
        return self.canonical(items) if self.canonical else items

    def applies(self, fields: dict) -> bool:
        return bool(self.when(fields))

    def offered(self, model) -> tuple:
        """The choices a control offers for `model`: those it has (`absent`), else all."""
        return tuple(c for c in self.choices if self.absent is None or self.absent(c, model) is None)

    def blocked(self, fields: dict, model) -> str | None:
        """Why the option cannot be switched on with `fields` (`blocker`), None when it can."""
        return None if self.blocker is None else self.blocker(fields, model)


def _fp8_params_blocked(fields, model):
    """FP8 parameters where Megatron-LM gathers them: through the distributed optimizer's or FSDP's buffers
    (ZeRO >= 1, the record's needs_zero; megatron/core/distributed/param_and_grad_buffer.py). At ZeRO 0 the toggle is
    greyed out saying so, instead of a refusal after it is switched on."""
    zero = fields.get("zero", 0)
    return None if zero >= 1 else (f"FP8 parameters need the distributed optimizer or FSDP (ZeRO ≥ 1), not ZeRO {zero}: "
                                   "Megatron-LM gathers them through its buffers")


def _ep_overlap_blocked(fields, model):
    """EP overlap where Megatron-Core runs it (explorer/strategy/moe_rules.py ep_overlap_blocker: not 1F1B at p > 1,
    not with full recomputation or the all-gather dispatcher, e > 1)."""
    if not getattr(model, "is_moe", False):
        return "the model has no experts"
    return ep_overlap_blocker(model, fields.get("ep", 1), fields.get("moe_dispatcher", "alltoall"),
                              fields.get("recompute", "none"), fields.get("pp", 1), fields.get("schedule", "1f1b"))


RECOMPUTE_MODULES = ("core_attn", "layernorm", "mlp", "moe_act", "mla_up_proj", "shared_experts")
"""Megatron-LM --recompute-modules that selective recomputation may name (explorer/model/recompute.py; 'moe'
-- the whole MoE layer with its all-to-alls -- is not modelled); () = Megatron's default, core_attn."""
CUDA_GRAPHS = ("none", "router", "layer", "full")
"""CUDA graphs (explorer/model/kernels.py): none (eager); per-layer parts, Megatron-LM --cuda-graph-impl
transformer_engine|local with --cuda-graph-scope moe_router moe_preprocess ("router") or attn mlp moe_router
moe_preprocess (+ moe under token-drop with padding: "layer"); the full iteration ("full":
--cuda-graph-impl full_iteration, or --cuda-graph-scope full_iteration; the older --enable-cuda-graph)."""
MOE_DISPATCHERS = ("alltoall", "deepep", "hybridep", "allgather")
"""MoE token dispatchers (Megatron-Core --moe-token-dispatcher-type alltoall|allgather, or flex with
--moe-flex-dispatcher-backend deepep|hybridep): each synchronises with the host once per dropless MoE forward,
HybridEP not under full-iteration CUDA graphs, whose recipes give it a static receive budget (explorer/model/kernels.py
syncs); the all-gather
dispatcher gathers every token of the ep group and reduce-scatters the outputs (explorer/cost/moe_terms.py)."""


def _core_attn_is_default(modules: tuple) -> tuple:
    """Megatron's default, core_attn alone, is spelt (): one cost key per set."""
    return () if modules == ("core_attn",) else modules


OPTIONS = [
    Option("cuda_graphs", "choice", "none", "what the host issues as CUDA graphs (explorer/model/kernels.py)",
           "--cuda-graphs",
           "what the host issues as CUDA graphs: none (eager, default), router (Megatron-LM "
           "--cuda-graph-scope moe_router moe_preprocess), layer (attn mlp moe_router moe_preprocess, "
           "--cuda-graph-impl transformer_engine), full (--cuda-graph-impl full_iteration); "
           "explorer/model/kernels.py", "cg", "CUDA graphs",
           "what the host launches as one graph instead of kernel by kernel (explorer/model/kernels.py): "
           "none (eager); router (the MoE router and the dispatcher's preprocess); layer (each layer's "
           "static-shape parts); full (the whole iteration: no dropless dispatcher that syncs)",
           choices=CUDA_GRAPHS, structure=True, search=True,
           search_help="the host side every candidate runs with: none (eager, default), router, layer or full "
                       "CUDA graphs (evaluate --help; explorer/model/kernels.py)",
           exporters=("megatron", "megatron-bridge")),
    Option("moe_dispatcher", "choice", "alltoall", "the MoE token dispatcher (Megatron-Core "
           "--moe-token-dispatcher-type; explorer/cost/moe_terms.py)", "--moe-dispatcher",
           "MoE token dispatcher: alltoall (default), allgather (every token of the ep group "
           "gathered), deepep or hybridep (Megatron-LM --moe-flex-dispatcher-backend); each synchronises "
           "with the host once per dropless MoE forward, hybridep not under --cuda-graphs full (its static "
           "receive budget)", "disp", "MoE dispatcher",
           "alltoall: Megatron-Core's all-to-all; allgather: every token of the ep group gathered, the "
           "outputs reduce-scattered; deepep / hybridep: the fused dispatchers (Megatron --moe-flex-"
           "dispatcher-backend; Hopper or later). Each stops the host once per dropless MoE forward to "
           "size the exchange, which full-iteration CUDA graphs cannot hold; hybridep is given a static "
           "receive budget there instead",
           choices=MOE_DISPATCHERS, moe_only=True, structure=True, search=True,
           search_help="MoE token dispatcher of every candidate: alltoall (default), allgather, deepep or hybridep "
                       "(every candidate with ep > 1 is tried with and without expert-parallel overlap, evaluate --overlap-ep, "
                       "where Megatron-Core runs it)",
           exporters=("megatron", "megatron-bridge")),
    Option("overlap_ep", "bool", False, "MoE all-to-alls under the other micro-batch's compute (Megatron-LM "
           "--overlap-moe-expert-parallel-comm; explorer/cost/numeric.py ep_exposed)", "--overlap-ep",
           "MoE: run one micro-batch's dispatch and combine under another's compute in the 1F1B "
           "steady state (Megatron-LM --overlap-moe-expert-parallel-comm; explorer/cost/moe_terms.py)",
           "oep", "Overlap EP all-to-alls",
           "Megatron-LM --overlap-moe-expert-parallel-comm: one micro-batch's dispatch and combine run "
           "under another's compute in the 1F1B steady state (needs e > 1; with p > 1 the interleaved "
           "schedule); the Cost page shows what stays exposed and what is hidden",
           when=lambda f: f.get("ep", 1) != 1, moe_only=True, exporters=("megatron", "megatron-bridge"),
           blocker=_ep_overlap_blocked, superstep="ep_overlap"),   # its merged steps' extra layer (memory)
    Option("fp8_recipe", "choice", "delayed", "what Transformer Engine keeps in FP8 (Megatron-LM --fp8-recipe; "
           "explorer/hardware/precision.py)", "--fp8-recipe",
           "with --dtype fp8: Megatron-LM's --fp8-recipe (default delayed); decides what Transformer "
           "Engine keeps: FP8 linear inputs (1 B, MXFP8 and blockwise 1 + 1/32 B with their scales) and "
           "cached FP8 weight copies (2 B/param, MXFP8 2 x 33/32); explorer/hardware/precision.py", "f8r",
           "FP8 recipe",
           "Megatron-LM --fp8-recipe: what Transformer Engine keeps -- the linears' inputs in FP8 (1 B, "
           "MXFP8 and blockwise 1 + 1/32 B) and a cached FP8 copy of each weight (2 B/param)",
           choices=FP8_RECIPES, when=lambda f: f.get("dtype") == "fp8", reset_off=True, structure=True,
           search=True, search_help="with --dtype fp8: what every candidate keeps in FP8 (evaluate --help)",
           exporters=("megatron", "megatron-bridge")),
    Option("adam_moments", "choice", "fp32", "Adam's moments (Megatron-LM --exp-avg-dtype/--exp-avg-sq-dtype with "
           "--use-precision-aware-optimizer; explorer/hardware/precision.py)", "--adam-moments",
           "Adam's moments: fp32 (default) or bf16 (Megatron-LM --use-precision-aware-optimizer "
           "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16: 12 -> 8 B/param, 6 with bf16 weights)", "mom",
           "Adam moments",
           "bf16: Megatron-LM's precision-aware optimizer (--exp-avg-dtype/--exp-avg-sq-dtype bf16, "
           "ZeRO ≥ 1): 6-8 B/param of optimizer states instead of 12",
           choices=MOMENT_DTYPES, search=True,
           search_help="Adam's moments of every candidate: fp32 (default) or bf16 (ZeRO >= 1 only)",
           needs_zero=1, zero_reason="bf16 Adam moments without the distributed optimizer",
           exporters=("megatron", "megatron-bridge")),
    Option("recompute_modules", "modules", (), "the modules selective recomputation redoes (Megatron-LM "
           "--recompute-modules; explorer/model/recompute.py); () = core_attn, Megatron's default",
           "--recompute-modules",
           "with --recompute selective: the modules recomputed, as Megatron-LM's --recompute-modules "
           f"({', '.join(RECOMPUTE_MODULES)}; default core_attn); explorer/model/recompute.py", "rcm",
           "Recompute modules",
           "selective recomputation of these modules (Megatron-LM --recompute-modules; none chosen = "
           "core_attn, its default); only the modules this model has; explorer/model/recompute.py",
           choices=RECOMPUTE_MODULES, absent=recompute_module_absent, when=lambda f: f.get("recompute") == "selective",
           structure=True, search=True, search_help="what the candidates with selective recomputation recompute (evaluate --help; "
                                    "default core_attn)",
           exporters=("megatron", "megatron-bridge"), canonical=_core_attn_is_default),
    Option("fp8_param_gather", "bool", False, "FP8 parameters: Transformer Engine keeps the weights in FP8 (no BF16 "
           "copy) and the distributed optimizer all-gathers them in FP8 (Megatron-LM --fp8-param-gather; "
           "explorer/hardware/precision.py PARAM_GATHER_BYTES, explorer/cost/superstep.py)", "--fp8-param-gather",
           "with --dtype fp8 and --zero >= 1: Megatron-LM's --fp8-param-gather: the weights are FP8 tensors "
           "(Transformer Engine fp8_model_init: no BF16 copy beside the FP8 data) and the distributed optimizer "
           "or FSDP all-gathers them at 1 B/param (MXFP8: 2, as BF16 through the gradient buffer); "
           "explorer/hardware/precision.py", "f8pg", "FP8 parameters",
           "Megatron-LM --fp8-param-gather (FP8 and ZeRO ≥ 1): the weights live in FP8 only and the "
           "distributed optimizer gathers them at 1 B/param instead of 2 (MXFP8: 2)",
           when=lambda f: f.get("dtype") == "fp8", reset_off=True, superstep="fp8_params", search=True,
           search_help="with --dtype fp8: every candidate keeps FP8 parameters and gathers them in FP8 (ZeRO >= 1 "
                       "only; evaluate --help)",
           needs_zero=1, zero_reason="FP8 parameters without the distributed optimizer",
           exporters=("megatron", "megatron-bridge"),
           refusal="fp8_param_gather needs FP8 training and the distributed optimizer or FSDP (dtype fp8, ZeRO >= 1), "
                   "not dtype {dtype} at ZeRO {zero}: Megatron-LM gathers FP8 parameters through the distributed "
                   "optimizer's buffers (megatron/core/distributed/param_and_grad_buffer.py)",
           megatron="--fp8-param-gather", blocker=_fp8_params_blocked,
           megatron_with=lambda s: [("--reuse-grad-buf-for-mxfp8-param-ag",)] if s.fp8_recipe == "mxfp8" else []),
]
"""The option table, in the order the sidebar draws the options it does not place itself and the order of the
Strategy fields it declares."""


def option(name: str) -> Option:
    """The record of option `name` (KeyError if there is none)."""
    for o in OPTIONS:
        if o.name == name:
            return o
    raise KeyError(name)


def names() -> tuple:
    return tuple(o.name for o in OPTIONS)


def structure_fields() -> tuple:
    """The options that change the cost tree's blocks (explorer/cost/numeric.py STRUCTURE_FIELDS)."""
    return tuple(o.name for o in OPTIONS if o.structure)


def searched() -> tuple:
    """The options the search carries into every candidate."""
    return tuple(o for o in OPTIONS if o.search)


class FieldMap(dict):
    """A strategy's fields as str.format_map reads them (Option.refusal)."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj

    def __missing__(self, name):
        return getattr(self.obj, name)


def refusal(view) -> str | None:
    """The refusal of the first option with a `refusal` that `view` (a strategy, or a partial one) holds off its
    default where it does not apply or below its ZeRO stage; None when none is."""
    fields = FieldView(view)
    for o in OPTIONS:
        value = getattr(view, o.name, o.default)
        if o.refusal and value != o.default and \
                (not o.applies(fields) or getattr(view, "zero", o.needs_zero) < o.needs_zero):
            return o.refusal.format_map(FieldMap(view))
    return None


class FieldView:
    """A strategy (or any object with its fields as attributes) read as `when` reads a dict: .get(name, default)."""

    def __init__(self, obj):
        self.obj = obj

    def get(self, name, default=None):
        return getattr(self.obj, name, default)


def superstep_options(strategy) -> dict:
    """The terms() keywords of the bool options that are on and apply to `strategy` (memory_options)."""
    view = FieldView(strategy)
    return {o.superstep: True for o in OPTIONS
            if o.superstep and getattr(strategy, o.name, o.default) is True and o.applies(view)}
