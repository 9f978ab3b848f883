"""Transformer Engine's layer spec names the fused layer norms differently; the HF conversions work with either.

(Transformer Engine does not install here: the renaming is checked on state dicts, the TE model itself on a GPU.)
"""

import pytest
import torch

from ppo.models.architecture import Architecture
from ppo.models.convert import TE_FUSED_NORMS, hf_to_megatron, load_megatron_state, megatron_to_hf, rename_layer_norms
from tests.models.conftest import make_hf_model


def te_shard(hf):
    arch = Architecture.from_hf_config(hf.config.to_dict())
    local = hf_to_megatron(hf.state_dict(), arch)
    return arch, local, rename_layer_norms(local, to_transformer_engine=True)


@pytest.mark.parametrize("variant", ["qwen2", "qwen3"])
def test_the_norms_move_into_the_linear_layers_and_back(variant):
    """Qwen3's q/k norms are modules of their own in both specs (``self_attention.q_layernorm``): not renamed."""
    arch, local, te = te_shard(make_hf_model(variant, tied=False))
    renamed = set(local) ^ set(te)
    assert renamed == {f"decoder.layers.{i}.{name}" for i in range(arch.num_layers) for pair in TE_FUSED_NORMS.items()
                       for name in pair}
    assert "decoder.final_layernorm.weight" in te  # the final norm keeps its name in both specs
    assert rename_layer_norms(te, to_transformer_engine=False).keys() == local.keys()


@pytest.mark.parametrize("variant", ["qwen2", "qwen3"])
def test_hf_export_reads_either_naming(variant):
    hf = make_hf_model(variant, tied=False)
    arch, local, te = te_shard(hf)
    from_local, from_te = megatron_to_hf([local], arch), megatron_to_hf([te], arch)
    assert from_local.keys() == from_te.keys() == hf.state_dict().keys()
    for name in from_local:
        assert torch.equal(from_local[name], from_te[name]), name


def test_loading_renames_for_a_model_with_transformer_engine_names():
    arch, local, te = te_shard(make_hf_model("qwen2", tied=False))
    model = torch.nn.Module()
    for name, value in te.items():  # a module tree with exactly the TE spec's parameter names
        *path, leaf = name.split(".")
        node = model
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        node.register_parameter(leaf, torch.nn.Parameter(torch.zeros_like(value)))
    load_megatron_state(model, local)  # local names in, TE names inside
    for name, value in model.state_dict().items():
        assert torch.equal(value, te[name]), name
