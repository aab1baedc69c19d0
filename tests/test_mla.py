"""Multi-head latent attention (DeepSeek-V3) under tensor and sequence parallelism (explorer/model/graph/moe.py mla):
what Megatron-Core's MLASelfAttention runs, checked against its source (transformer/multi_latent_attention.py)."""
import pytest

from explorer import Strategy, load_cluster, load_model
from explorer.timeline.microstep import microstep_events

MODEL, H100 = load_model("deepseek-v3"), load_cluster("dgx-h100")


def _layer(sequence_parallel: bool):
    s = Strategy(dp=8, tp=2, ep=8, expert_tp=1 if sequence_parallel else 2, sequence_parallel=sequence_parallel,
                 micro_batch=1, global_batch=64, zero=1)
    return microstep_events(MODEL, s, H100, layer=4)


def test_the_down_projections_run_on_the_devices_tokens_and_only_the_latents_are_gathered():
    """Megatron-Core builds the query and key/value down-projections as 'duplicated' TELinear on the [s/t, b, h]
    input under sequence parallelism and gathers only their latents (q_lora_rank + kv_lora_rank + the rotary key)
    for the column-parallel up-projections. A review against the source found them priced as replicated operators on
    the whole sequence: the full b s h input all-gathered forward and backward, t times the FLOPs."""
    ev = _layer(True)
    down = ev[ev.operator == "mla_down"]
    assert set(down.kind) <= {"compute", "weight_grad"}                           # no collective of its own
    gathers = ev[(ev.operator == "mla_up") & (ev.kind == "all_gather") & (ev.phase == "fwd")]
    latent = 1 * MODEL.seq_len * (MODEL.q_lora_rank + MODEL.kv_lora_rank + MODEL.qk_rope_head_dim) * 2   # bf16
    assert set(gathers.bytes) == {latent / 2}                                     # (t - 1) / t of it, t = 2
    whole = _layer(False)                                                         # no SP: every token on each
    fwd = lambda e: e[(e.operator == "mla_down") & (e.kind == "compute") & (e.phase == "fwd")].duration_s.iloc[0]
    assert fwd(down) == pytest.approx(fwd(whole[whole.operator == "mla_down"]) / 2, rel=0.05)
