"""The sidebar's precision recipe (issue 26 item 3, issue 27 item 4): the FP8 recipe, the Adam moments and the
recompute modules reach the evaluated strategy; a combination Megatron refuses shows one line."""
from app_util import open_page

from app_pages import state as S
from explorer.facade import load_cluster


def _select(at, key, value):
    next(w for w in at.sidebar.selectbox if w.key == key).set_value(value).run()


def test_precision_controls_reach_the_strategy():
    at = open_page("cost")
    at.session_state[S.CLUSTER] = load_cluster("dgx-b200")          # an FP8 peak and MXFP8 (Blackwell only)
    at.run()
    _select(at, S.W_DTYPE, "fp8")
    _select(at, S.W_FP8_RECIPE, "mxfp8")
    _select(at, S.W_ZERO, 1)
    _select(at, S.W_ADAM_MOMENTS, "bf16")
    _select(at, S.W_RECOMPUTE, "selective")
    next(w for w in at.sidebar.multiselect if w.key == S.W_RECOMPUTE_MODULES).set_value(["layernorm", "mlp"]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    s = at.session_state[S.LAST_VALID].strategy
    assert (s.dtype, s.fp8_recipe, s.adam_moments, s.recompute_modules) == ("fp8", "mxfp8", "bf16",
                                                                             ("layernorm", "mlp"))
    _select(at, S.W_DTYPE, "bf16")                 # the recipe's widget keeps its state; the strategy drops it
    assert not at.error and at.session_state[S.LAST_VALID].strategy.fp8_recipe == "delayed"
    _select(at, S.W_ZERO, 0)                       # bf16 moments need the distributed optimizer: one line
    assert at.error and "need ZeRO" in at.error[0].value.splitlines()[0]   # (markdown-escaped >=)


def test_fp8_parameters_are_greyed_out_below_zero_1_with_the_reason():
    """FP8 parameters need the distributed optimizer (options.py fp8_param_gather's blocker): at ZeRO 0 the toggle
    is disabled and its help says why, instead of a one-line refusal once it is switched on (the old behaviour);
    at ZeRO 1 it is offered and reaches the strategy; back at ZeRO 0 the strategy drops it, with no error. (bf16 Adam
    moments keep their one-line refusal above: a select box greyed out at bf16 would show a choice the strategy
    does not take.)"""
    from explorer.strategy.options import option
    key = option("fp8_param_gather").widget_key
    at = open_page("cost")
    at.session_state[S.CLUSTER] = load_cluster("dgx-h100")
    at.run()
    _select(at, S.W_DTYPE, "fp8")
    _select(at, S.W_ZERO, 0)
    toggle = next(w for w in at.sidebar.toggle if w.key == key)
    assert toggle.disabled and "ZeRO ≥ 1" in toggle.help and not at.error
    _select(at, S.W_ZERO, 1)
    toggle = next(w for w in at.sidebar.toggle if w.key == key)
    assert not toggle.disabled
    toggle.set_value(True).run()
    assert not at.error and at.session_state[S.LAST_VALID].strategy.fp8_param_gather is True
    _select(at, S.W_ZERO, 0)
    assert not at.error, [e.value for e in at.error]
    assert next(w for w in at.sidebar.toggle if w.key == key).disabled
    assert at.session_state[S.LAST_VALID].strategy.fp8_param_gather is False
