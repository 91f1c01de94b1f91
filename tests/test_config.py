import glob
import json
import os

import pytest

from albert_jax import AlbertConfig
from albert_jax.model import presets
from albert_jax.model.config import EXECUTION_KEYS, Execution, layout_groups

# `AlbertConfig().to_dict()` as written before the execution fields left AlbertConfig (2a26f36):
# what every checkpoint's, exported model's and pretraining workdir's config.json then held.
OLD_CONFIG_JSON = {
    "attention_dropout": 0.0, "attention_groups": 1, "attention_impl": "auto",
    "dtype": "float32", "embedding_projection_always": False, "embedding_size": 128,
    "ffn_groups": 1, "hidden_act": "gelu_new", "hidden_dropout": 0.0, "hidden_size": 768,
    "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-12,
    "matmul_grad": "auto", "max_position_embeddings": 512, "num_heads": 12, "num_layers": 12,
    "param_dtype": "float32", "remat": "none", "scan_layers": True, "type_vocab_size": 2,
    "vocab_size": 30000,
}  # fmt: skip


@pytest.mark.parametrize(
    "layout,expected",
    [
        ("all", (1, 1)),
        ("attention", (1, 12)),
        ("ffn", (12, 1)),
        ("none", (12, 12)),
        ("groups:3", (3, 3)),
    ],
)
def test_named_layouts(layout, expected):
    cfg = AlbertConfig().with_layout(layout)
    assert (cfg.attention_groups, cfg.ffn_groups) == expected
    assert cfg.layout == layout


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"hidden_size": 100, "num_heads": 12}, "not divisible by num_heads"),
        ({"attention_groups": 0}, "attention_groups must be an int in 1..num_layers=12"),
        ({"ffn_groups": 13}, "ffn_groups must be an int in 1..num_layers=12"),
        ({"hidden_act": "swish"}, "unknown hidden_act 'swish'"),
        ({"hidden_dropout": 1.0}, "hidden_dropout must be in"),
        ({"vocab_size": 0}, "vocab_size must be a positive int"),
    ],
)
def test_invalid_values_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AlbertConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"remat": "some"}, "^Execution: remat must be one of .*'save_dots'.*got 'some'"),
        ({"attention_impl": "flash"}, "^Execution: attention_impl must be one of .*got 'flash'"),
        ({"matmul_grad": "manual"}, "^Execution: matmul_grad must be one of .*got 'manual'"),
        ({"dtype": "int8"}, "^Execution: dtype must be one of .*'bfloat16'.*got 'int8'"),
        ({"param_dtype": "half"}, "^Execution: param_dtype must be one of .*got 'half'"),
    ],
)
def test_invalid_execution_values_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Execution(**kwargs)
    with pytest.raises(TypeError):  # not AlbertConfig's any more
        AlbertConfig(**kwargs)


def test_execution_defaults_and_section_round_trip():
    """Today's defaults; a run config's section reads back as the Execution it was built from."""
    ex = Execution()
    assert (ex.dtype, ex.param_dtype, ex.scan_layers, ex.remat) == (
        "float32", "float32", True, "none",
    )  # fmt: skip
    assert (ex.attention_impl, ex.matmul_grad) == ("auto", "auto")
    section = Execution.section()
    section.update(dtype="bfloat16", scan_layers=False, remat="save_dots")
    assert Execution.from_config(section) == Execution(
        dtype="bfloat16", scan_layers=False, remat="save_dots"
    )
    assert set(section) == EXECUTION_KEYS


def test_unknown_layout_and_frozen():
    with pytest.raises(ValueError, match="unknown sharing layout 'half'"):
        layout_groups("half", 12)
    with pytest.raises(ValueError, match="groups:G"):
        layout_groups("groups:x", 12)
    cfg = AlbertConfig()
    with pytest.raises(AttributeError):
        cfg.hidden_size = 3


def test_json_round_trip_and_unknown_keys():
    cfg = presets.get("albert-large", layout="attention", hidden_dropout=0.0)
    assert AlbertConfig.from_json(cfg.to_json()) == cfg
    assert not set(json.loads(cfg.to_json())) & EXECUTION_KEYS
    with pytest.raises(ValueError, match="unknown keys \\['num_hidden_groups'\\]"):
        AlbertConfig.from_dict({**cfg.to_dict(), "num_hidden_groups": 1})


def test_a_config_json_from_before_execution_left_the_model_config_still_loads():
    """A config.json written when AlbertConfig held the execution fields (dtype, scan_layers, ...)
    loads with them dropped, to the same model; written again, it holds none of them. Any other
    unknown key is still an error, named."""
    assert EXECUTION_KEYS <= set(OLD_CONFIG_JSON)
    old = {**OLD_CONFIG_JSON, "dtype": "bfloat16", "scan_layers": False, "remat": "full"}
    cfg = AlbertConfig.from_json(json.dumps(old))
    assert cfg == AlbertConfig()
    assert set(cfg.to_dict()) == set(OLD_CONFIG_JSON) - EXECUTION_KEYS
    assert AlbertConfig.from_dict(json.loads(cfg.to_json())) == cfg
    with pytest.raises(ValueError, match=r"unknown keys \['compute_dtype'\]"):
        AlbertConfig.from_dict({**OLD_CONFIG_JSON, "compute_dtype": "float32"})


def test_an_old_pretraining_workdir_model_section_still_loads():
    """The model section of a pretraining workdir's config.json written before `config.execution`
    held dtype / scan_layers / remat / attention_impl / matmul_grad: the model loads, they are
    not the model's (the run's execution section is what runs it now)."""
    import ml_collections

    from albert_jax.model.presets import from_run_config

    old = {"preset": "albert-tiny", "layout": "groups:2", "hidden_size": 128, "num_heads": 2,
           "dtype": "bfloat16", "scan_layers": False, "remat": "save_dots",
           "attention_impl": "auto", "matmul_grad": "auto"}  # fmt: skip
    run = ml_collections.ConfigDict({"model": old})
    want = presets.get("albert-tiny", layout="groups:2", hidden_size=128, num_heads=2)
    assert from_run_config(run) == want
    with pytest.raises(TypeError, match="no_such_field"):  # other keys still reach AlbertConfig
        from_run_config(ml_collections.ConfigDict({"model": {**old, "no_such_field": 1}}))


def test_projection_presence():
    assert AlbertConfig(embedding_size=128, hidden_size=768).has_projection
    assert not AlbertConfig(embedding_size=768, hidden_size=768).has_projection
    assert AlbertConfig(
        embedding_size=768, hidden_size=768, embedding_projection_always=True
    ).has_projection


PRETRAIN_CONFIGS = sorted(
    os.path.basename(p)[:-3]
    for p in glob.glob(os.path.join(os.path.dirname(__file__), "..", "configs", "pretrain", "*.py"))
    if os.path.basename(p) not in ("__init__.py", "common.py")
)


def test_the_pretraining_configs_are_all_found():
    assert {"cpu_small", "cpu_base", "cpu_base_domain", "paper", "tpu_pod"} <= set(PRETRAIN_CONFIGS)


@pytest.mark.parametrize("name", PRETRAIN_CONFIGS)
def test_every_pretraining_config_takes_the_execution_overrides(name):
    """--config.execution.dtype / param_dtype / scan_layers / remat / attention_impl /
    matmul_grad (docs/api.md, docs/performance.md) parse for every pretraining config: the
    command line locks the config, so an undeclared key is an error. The model section has none
    of them."""
    import importlib

    from albert_jax.model.presets import from_run_config

    config = importlib.import_module(f"albert_jax.configs.pretrain.{name}").get_config()
    config.lock()
    overrides = dict(dtype="bfloat16", param_dtype="bfloat16", scan_layers=False, remat="full",
                     attention_impl="fused", matmul_grad="autodiff")  # fmt: skip
    for field, value in overrides.items():
        setattr(config.execution, field, value)
    assert Execution.from_config(config.execution) == Execution(**overrides)
    assert not set(config.model) & EXECUTION_KEYS
    from_run_config(config)  # the model section alone builds the model
    with pytest.raises(AttributeError):
        config.execution.no_such_field = 1  # what the lock guards: the test would pass without it


FINETUNE_CONFIGS = sorted(
    os.path.splitext(os.path.basename(p))[0]
    for p in glob.glob(os.path.join(os.path.dirname(__file__), "..", "configs", "finetune", "*.py"))
    if os.path.basename(p) not in ("__init__.py", "common.py")
)
# the configs that take an argument (`CONFIG:ARG`): one of theirs
FINETUNE_ARGS = {"searched": "sentiment", "suite": "headlines", "glue": "mnli", "clue": "csl",
                 "squad": "v2"}  # fmt: skip


@pytest.mark.parametrize("name", FINETUNE_CONFIGS)
def test_a_finetuning_config_has_no_pretraining_leaf(name):
    """A fine-tuning config is the trainer's section, fine-tuning's and its own task / model /
    optimizer sections: none of pretraining's own leaves (objective, electra, train_flops, ...),
    and every trainer and fine-tuning leaf reads back typed."""
    import importlib

    from albert_jax.configs.pretrain.common import pretrain_defaults
    from albert_jax.tasks.finetune_config import FinetuneConfig
    from albert_jax.train.config import TrainerConfig

    # the optimizer's, the evaluators' (`config.evals`) and the execution's sections are every job's
    shared = set(TrainerConfig.section()) | set(FinetuneConfig.section())
    shared |= {"optim", "evals", "execution"}
    pretraining_only = set(pretrain_defaults()) - shared
    assert {"objective", "electra", "train_flops", "cross_eval"} <= pretraining_only
    arg = FINETUNE_ARGS.get(name)
    config = importlib.import_module(f"albert_jax.configs.finetune.{name}").get_config(arg)
    assert not set(config) & pretraining_only, sorted(set(config) & pretraining_only)
    assert set(TrainerConfig.section()) | set(FinetuneConfig.section()) <= set(config)
    assert FinetuneConfig.from_config(config).batch_size == config.batch_size
    assert TrainerConfig.from_config(config).log_every == config.log_every
    # how the model runs is its own section (unrolled layers: faster at fine-tuning depths)
    assert Execution.from_config(config.execution) == Execution(scan_layers=False)
    assert not set(config.model) & EXECUTION_KEYS


@pytest.mark.parametrize("name", FINETUNE_CONFIGS)
def test_a_finetuning_configs_task_section_reads_into_its_kinds_settings(name):
    """`config.task` holds every leaf of its kind's settings (they parse on the command line) and
    reads back into them typed; the leaves another kind declares (every config has the
    classification and tagging ones) are left unread, not refused."""
    import dataclasses
    import importlib

    from albert_jax.tasks.finetune_config import TASK_SETTINGS, TaskSettings

    arg = FINETUNE_ARGS.get(name)
    config = importlib.import_module(f"albert_jax.configs.finetune.{name}").get_config(arg)
    kind = TASK_SETTINGS[config.task.type]
    assert set(kind.section()) <= set(config.task)
    settings = kind.from_config(config.task)
    assert isinstance(settings, TaskSettings) and type(settings) is kind
    declared = {f.name for f in dataclasses.fields(kind)}
    assert {k: getattr(settings, k) for k in kind.section()} == {
        k: config.task[k] for k in kind.section()
    }
    assert "input" in declared and "input" not in config.task  # finetune.predict's own
    classification = {"text_a", "text_b", "label", "id", "columns", "skip_labels", "positive",
                      "bad_rows"}  # fmt: skip
    tagging = {"scheme", "space_between_words", "words", "tags"}
    others = (classification | tagging) - declared
    assert set(config.task) - declared == others  # unread


def test_each_task_type_has_a_reader_on_its_settings_and_the_task_no_data_hooks():
    """The data side of a task type is its module's `Reader` (a `FinetuneReader` built on the
    type's settings); the trainer's `Task` has none of the old static hooks."""
    from albert_jax.tasks import finetuning as F
    from albert_jax.tasks.finetune_config import TASK_SETTINGS

    assert tuple(TASK_SETTINGS) == F.TASK_TYPES
    hooks = ("read", "featurize", "head_fields", "check_targets", "training_examples", "labels")
    for task_type, kind in TASK_SETTINGS.items():
        module = F.task_module(task_type)
        assert issubclass(module.Reader, F.FinetuneReader)
        assert issubclass(module.Task, F.FinetuneTask)
        reader = module.Reader(kind())
        assert reader.settings == kind()
        assert not any(hasattr(module.Task, h) for h in hooks), task_type


def test_a_run_config_from_before_the_layout_key_still_loads():
    """A pretraining workdir's config.json written before `model.layout` existed: the preset's
    own layout, as a '' layout gives."""
    import ml_collections

    from albert_jax.model.presets import from_run_config

    old = ml_collections.ConfigDict({"model": {"preset": "albert-base", "num_layers": 2}})
    new = ml_collections.ConfigDict({"model": {"preset": "albert-base", "layout": ""}})
    new.model.num_layers = 2
    assert from_run_config(old) == from_run_config(new)
    assert from_run_config(old).layout == "all" and from_run_config(old).num_layers == 2
    new.model.layout = "none"
    assert from_run_config(new).layout == "none"


def test_a_section_leaf_defaulting_to_none_is_a_typed_placeholder():
    """Fine-tuning's model overrides: None keeps the checkpoint's value, a float given on the
    command line parses as one, a value of another type is refused; the head's dropout is not
    an encoder field."""
    from albert_jax.tasks.finetune_config import ModelOverrides

    c = ModelOverrides.section()
    assert c.hidden_dropout is None and c.classifier_dropout == 0.1
    c.hidden_dropout = 0.25
    assert ModelOverrides.from_config(c).hidden_dropout == 0.25
    with pytest.raises(TypeError):
        c.attention_dropout = "high"
    assert ModelOverrides.encoder(c) == {"hidden_dropout": 0.25}
    assert ModelOverrides.from_config({}).classifier_dropout == 0.1  # the one default
