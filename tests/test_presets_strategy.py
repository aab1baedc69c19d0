"""Named strategy presets (explorer.io.presets): each runs, or says why not."""
from explorer import evaluate, load_cluster, load_model
from explorer.io.presets import DEFAULT_STRATEGY, fallback_strategy, strategy_presets

import pytest
from explorer import ExplorerError, Strategy


def test_presets_for_gpt3_on_1024_gpus_all_run_on_1024_devices():
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    presets = strategy_presets(model, cluster, 1024, 1536)
    assert {"Pure DP", "ZeRO-3", "Megatron 3D"} <= set(presets)
    for preset in presets.values():
        assert preset.strategy is not None, preset.reason
        assert preset.strategy.devices == 1024
        evaluate(model, preset.strategy, cluster)
    mega = presets["Megatron 3D"].strategy
    assert (mega.tp, mega.pp) == (8, 8), "t = node size; the fewest stages whose memory fits 80 GB"
    assert presets["ZeRO-3"].strategy.zero == 3


def test_a_preset_that_cannot_run_gives_its_reason():
    presets = strategy_presets(load_model("tiny-gpt"), load_cluster("classroom"), 8, 16)
    interleaved = presets["Megatron 3D interleaved"]
    assert interleaved.strategy is not None or interleaved.reason


def test_the_cluster_grows_with_the_run():
    """Fidelity issue: a preset fixes the node; the number of nodes follows the GPUs (the classroom
    cluster describes 2 nodes of 4; 128 GPUs are 32 nodes, the data-parallel groups on the network)."""
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    small = evaluate(model, Strategy(dp=2, global_batch=4), cluster)
    large = evaluate(model, Strategy(dp=128, global_batch=128), cluster)
    assert large.gpus == 128 and large.comm_by_kind[-1]["level"] == cluster.levels[-1].name
    assert large.breakdown_s["dp_comm"] > small.breakdown_s["dp_comm"]
    h100 = evaluate(load_model("gpt3-175b"), Strategy(dp=128, tp=8, pp=8, global_batch=1024), load_cluster("dgx-h100"))
    assert h100.gpus == 8192 > load_cluster("dgx-h100").max_devices


def test_fallback_is_the_default_when_it_runs():
    assert fallback_strategy(load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")) == DEFAULT_STRATEGY
    small = fallback_strategy(load_model("tiny-gpt"), load_cluster("classroom"))
    assert small.devices <= 64


@pytest.mark.parametrize("name, cluster, gpus", [("deepseek-v3", "dgx-h100", 1024),
                                                 ("qwen3-235b-a22b", "dgx-h100", 256),
                                                 ("gpt-oss-120b", "dgx-h100", 64)])
def test_moe_default_strategy_fits_memory(name, cluster, gpus):
    """Issue 11: the default for an MoE preset spreads the experts (ep > 1, carved out of dp, dividing
    the experts) and fits the device; before, DeepSeek-V3 on 1024 H100s defaulted to t=8 p=8 ep=1
    at 187 GiB per 80 GiB device."""
    from explorer.io.presets import fallback_strategy
    model, hw = load_model(name), load_cluster(cluster)
    s = fallback_strategy(model, hw, gpus)
    assert s.ep > 1 and model.experts % s.ep == 0 and s.dp % s.ep == 0
    assert s.devices == gpus
    result = evaluate(model, s, hw)
    assert result.memory_bytes_per_device["total"] <= hw.device.memory_bytes


def test_moe_presets_keep_the_all_to_all_in_a_node_unless_memory_needs_more():
    """Qwen3-30B-A3B on 1,024 A100s: the experts over 8 GPUs of a node, unsplit (expert_tp 1), as the Megatron-Bridge
    recipes run them (e 8 on DGX H100 and B200); the preset used to take the largest ep dividing the experts and d
    (e 128, its all-to-all over the network), which the model prices slower. DeepSeek-V3 on 1,024 H100s grows ep
    until a device fits (e 64, as its recipe)."""
    model, a100 = load_model("qwen3-30b-a3b"), load_cluster("dgx-a100-80gb")
    mega = strategy_presets(model, a100, 1024, 1536)["Megatron 3D"].strategy
    assert (mega.ep, mega.etp) == (8, 1) and fallback_strategy(model, a100) == mega
    wide = evaluate(model, mega.with_(ep=128), a100)
    assert evaluate(model, mega, a100).iteration_time_s < 0.8 * wide.iteration_time_s
    h100 = load_cluster("dgx-h100")
    deepseek = strategy_presets(load_model("deepseek-v3"), h100, 1024, 1536)["Megatron 3D"].strategy
    assert deepseek.ep == 64
    assert evaluate(load_model("deepseek-v3"), deepseek.with_(ep=32), h100).memory_bytes_per_device["total"] > \
        h100.device.memory_bytes


def test_the_expert_parallel_sizes_tried_divide_dp():
    """A hostile review: on 9 H100s the Megatron 3D preset of gpt-oss-120b tried ep 8 ('ep=8 does not divide dp = 9')
    and was refused, though ep 1 runs: the sizes were powers of two up to dp, not its divisors."""
    from explorer.io.presets import expert_parallel_choices
    gpt_oss = load_model("gpt-oss-120b")
    assert expert_parallel_choices(gpt_oss, 9, 8) == [1]
    assert expert_parallel_choices(gpt_oss, 24, 8) == [8]
    preset = strategy_presets(gpt_oss, load_cluster("dgx-h100"), 9, 72)["Megatron 3D"]
    assert preset.strategy is not None and preset.strategy.ep == 1, preset


@pytest.mark.parametrize("first", [0, 1, 5, 11, 12, 16])
def test_the_first_fitting_size_is_found_by_bisection(first):
    """A hostile review: an upload where nothing fits made the presets evaluate every expert-parallel size at every
    pipeline depth (204 evaluations, 41 s of CPU). Memory only falls along the sizes, so the first that fits is found
    in log2 of them; a size that cannot run counts as not fitting; when none fits, the last."""
    from explorer.io.presets import first_fitting
    choices = list(range(16))
    asked = []

    def fits(c):
        asked.append(c)
        if c == 3 and first > 3:       # a size below the first that fits, which cannot run
            raise ExplorerError("cannot run")
        return c >= first
    assert first_fitting(choices, fits) == min(first, 15)
    assert len(asked) <= 5
