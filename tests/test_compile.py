"""The train step's collectives (one gradient reduction per step, whatever the depth and the
accumulation), the HLO reader that counts them, and TPU topologies on this host (skipped without
libtpu: `uv sync --extra tpu`; CI installs it). `python -m pretrain.compile` itself:
tests/integration/test_compile_cli.py."""

from __future__ import annotations

import glob
import os

import jax
import pytest
from support.tpu import needs_libtpu
from trainer_worker import make_config, make_global_batch, make_task

from albert_jax import AlbertConfig, Execution
from albert_jax.train import hlo, topology, trainer
from albert_jax.train.config import TrainConfigError, TrainerConfig

# Two nested loops (3 x 5 iterations, the inner one's count read from its condition), an async
# all-gather in the inner body, an all-reduce in the outer and a reduce-scatter in the entry.
HLO = """HloModule m

%inner_cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %c = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%inner_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %ags = (f32[2]{0}, f32[4]{0}) all-gather-start(%x), dimensions={0}, replica_groups={{0,1}}
  %agd = f32[4]{0} all-gather-done(%ags)
  ROOT %t = (s32[], f32[4]{0}) tuple(%i, %agd)
}

%outer_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %w = (s32[], f32[4]{0}) while(%p), condition=%inner_cond, body=%inner_body
  %ar = bf16[8]{0} all-reduce(%y), replica_groups={{0,1}}, to_apply=%add
  ROOT %t = (s32[], f32[4]{0}) tuple(%i, %x)
}

%outer_cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%add (a: bf16[], b: bf16[]) -> bf16[] {
  ROOT %s = bf16[] add(%a, %b)
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %w = (s32[], f32[4]{0}) while(%t), condition=%outer_cond, body=%outer_body, backend_config={"known_trip_count":{"n":"3"}}
  %rs = f32[2]{0} reduce-scatter(%a), dimensions={0}, replica_groups={{0,1}}, to_apply=%add
  ROOT %r = f32[4]{0} copy(%a)
}
"""  # noqa: E501


def test_collectives_are_counted_through_loop_trip_counts():
    stats = hlo.collective_stats(HLO)
    gather, reduce, scatter = stats["all-gather"], stats["all-reduce"], stats["reduce-scatter"]
    assert (gather["count"], gather["executed"]) == (1, 15)  # 3 outer x 5 inner
    assert gather["executed_bytes"] == 15 * 16  # the gathered f32[4], not the tuple
    assert (reduce["count"], reduce["executed"], reduce["executed_bytes"]) == (1, 3, 3 * 16)
    assert (scatter["executed"], scatter["executed_bytes"]) == (1, 16)  # the operand: 2 x 8 B
    assert stats["collective-permute"]["count"] == 0


def _cpu_collectives(layers: int, accum: int, layout: str = "all") -> dict:
    """Executed collectives of the trainer's step on a (data=2, fsdp=2) mesh of host devices."""
    model = AlbertConfig(
        vocab_size=97, embedding_size=8, hidden_size=8, num_layers=layers, num_heads=2,
        intermediate_size=16, max_position_embeddings=16,
    ).with_layout(layout)  # fmt: skip
    config = make_config(total_steps=2, mesh_shape=(2, 2, 1), grad_accum_steps=accum)
    run = trainer.compile_task(
        config, make_task(config, model=model).job(), devices=jax.devices()[:4]
    )
    batch = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in make_global_batch(0).items()}
    stats = hlo.collective_stats(run.lower(batch).compile().as_text())
    return {k: s["executed"] for k, s in stats.items()}


def test_gradients_are_reduced_once_per_step_whatever_the_depth_and_accumulation():
    """All shared: the block's weights are gathered and its gradient reduced the same number of
    times for 2 and 4 layers and for 1 and 2 micro-batches (left to the partitioner, both grew
    with the layers of the scan and with the micro-batches)."""
    base = _cpu_collectives(2, 1)
    assert base["all-gather"] > 0 and base["reduce-scatter"] + base["all-reduce"] > 0
    assert _cpu_collectives(4, 1) == base
    assert _cpu_collectives(2, 2) == base


def test_not_shared_layers_are_gathered_per_layer_and_reduced_per_micro_batch():
    """Not shared: FSDP proper, each layer's slice gathered where it is used (so the count grows
    with the depth) and the data-parallel reduction still once per step."""
    two, four = _cpu_collectives(2, 1, "none"), _cpu_collectives(4, 1, "none")
    assert four["all-gather"] > two["all-gather"]
    assert four["all-reduce"] == two["all-reduce"]


@pytest.mark.parametrize(
    "name, chips, shape", [("v4-256", 128, "v4:4x4x8"), ("v5e-256", 256, "v5e:16x16"),
                           ("v5p-128", 64, "v5p:4x4x4"), ("v4-8", 4, "v4:2x2x1"),
                           ("v5e:2x2", 4, "v5e:2x2")],
)  # fmt: skip
def test_topology_names(name, chips, shape):
    t = topology.parse(name)
    assert (t.chips, t.libtpu_name) == (chips, shape)
    assert topology.parse(name, slices=2).chips == 2 * chips


def test_topology_name_errors():
    for bad, match in (("v9-8", "unknown TPU generation"), ("v5e", "expected e.g."),
                       ("v4-6", "power of two"), ("v4-3", "two per chip")):  # fmt: skip
        with pytest.raises(topology.TopologyError, match=match):
            topology.parse(bad)


def test_compile_command_without_libtpu_says_how_to_install(monkeypatch):
    """Without libtpu the topology cannot be built: one line naming the extra."""
    t = topology.parse("v5e:2x2")
    monkeypatch.setattr(
        "jax.experimental.topologies.get_topology_desc",
        lambda **kw: (_ for _ in ()).throw(RuntimeError("Unable to initialize backend 'tpu'")),
    )
    with pytest.raises(topology.TopologyError, match="uv sync --extra tpu"):
        t.devices()


def test_layout_is_a_field_of_every_pretraining_config():
    """--config.model.layout parses for the paper's and the pod's configs (the not-shared
    baseline can be asked for)."""
    from albert_jax.configs.pretrain import paper, tpu_pod
    from albert_jax.model import presets

    for module in (paper, tpu_pod):
        c = module.get_config("albert-base")
        assert c.model.layout == ""
        assert presets.from_run_config(c).layout == "all"
        c.model.layout = "none"
        assert presets.from_run_config(c).attention_groups == 12


@needs_libtpu
def test_multi_slice_mesh_puts_data_across_slices():
    """--slices 2: 'data' spans the two slices (each device row of the mesh is one slice), and
    'fsdp' stays inside a slice."""
    from albert_jax.train import partitioning

    devices = topology.parse("v5e:2x2", slices=2).devices()
    mesh = partitioning.make_mesh((-1, 4, 1), devices, slices=2)
    assert dict(mesh.shape) == {"data": 2, "fsdp": 4, "tensor": 1}
    for row, index in zip(mesh.devices[:, :, 0], (0, 1), strict=True):
        assert {d.slice_index for d in row} == {index}
    with pytest.raises(ValueError, match="multiple of the 3 slices"):
        partitioning.make_mesh((2, 4, 1), devices, slices=3)


def test_profile_steps_write_a_trace_for_tensorboard(tmp_path):
    """--config.profile_steps=2:4 traces steps 2-3 into WORKDIR/tensorboard (the profile
    plugin's plugins/profile/RUN/*.xplane.pb); a bad range is one line."""
    config = make_config(total_steps=4, checkpoint_every=4, profile_steps="2:4")
    trainer.train(config, str(tmp_path), make_task(config).job())
    traces = glob.glob(str(tmp_path / "tensorboard/plugins/profile/*/*.xplane.pb"))
    assert len(traces) == 1 and os.path.getsize(traces[0]) > 0
    for bad in ("4:2", "x"):
        with pytest.raises(TrainConfigError, match="profile_steps"):
            TrainerConfig.from_config(make_config(profile_steps=bad))


def test_auto_switches_resolve_for_the_mesh_platform_not_the_host():
    """A TPU program built on this CPU host gets the TPU variants (fused attention, autodiff
    matmuls) inside the compiled task's scope, and the CPU ones outside it."""
    from albert_jax.model.albert import resolve_attention, resolve_matmul_grad, target_platform

    config = Execution(attention_impl="auto", matmul_grad="auto")
    assert (resolve_attention(config, 0.0), resolve_matmul_grad(config)) == ("explicit", "custom")
    with target_platform("tpu"):
        assert resolve_attention(config, 0.0) == "fused"
        assert resolve_matmul_grad(config) == "autodiff"
        assert resolve_attention(config, 0.1) == "explicit"  # dropout: the fused kernel has none
    assert resolve_matmul_grad(config) == "custom"
