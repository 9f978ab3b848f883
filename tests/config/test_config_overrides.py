import fiddle as fdl
import pytest

from ppo.config.errors import ConfigError
from ppo.config.overrides import apply_override, parse_override, parse_value, set_tag
from ppo.config.paths import locate, required_unset
from tests.config.graphs import Loader, Model, Optimizer, Run, graph, kwargs_fn


@pytest.mark.parametrize("raw, value", [
    ("5e-7", 5e-7), ("3", 3), ("-1", -1), ("1_000", 1000), ("True", True), ("False", False), ("None", None),
    ("'text'", "text"), ('"with space"', "with space"), ("[1, 2]", [1, 2]), ("(1, 'a')", (1, "a")),
    ("{'k': [1, None]}", {"k": [1, None]}), ("bfloat16", "bfloat16"), ("/data/x.jsonl", "/data/x.jsonl"),
    ("gpu-a100", "gpu-a100"), ("", ""), ("1e3", 1000.0),
])
def test_parse_value_reads_literals_and_keeps_bare_words(raw, value):
    parsed = parse_value(raw)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("raw", ["[1, 2", "a b", "f(1)", "x,y", "'unclosed"])
def test_parse_value_refuses_what_is_neither_literal_nor_bare_word(raw):
    with pytest.raises(ConfigError, match="not a Python literal"):
        parse_value(raw, "p")


@pytest.mark.parametrize("raw", ["none", "null", "true", "FALSE"])
def test_parse_value_refuses_ambiguous_spellings(raw):
    with pytest.raises(ConfigError, match="ambiguous"):
        parse_value(raw, "p")


def test_parse_value_never_evaluates_code(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ConfigError):
        parse_value(f"__import__('os').mkdir('{marker}')")
    assert not marker.exists()


def test_parse_override_splits_on_the_first_equals_sign():
    override = parse_override("checks.0='data[\"x\"] == 1'")
    assert (override.path, override.value) == ("checks.0", 'data["x"] == 1')
    with pytest.raises(ConfigError, match="expected path=value"):
        parse_override("optimizer.lr")
    with pytest.raises(ConfigError, match="expected path=value"):
        parse_override("=3")


def test_override_sets_nested_values_with_types():
    cfg = graph()
    for text in ["optimizer.lr=5e-7", "optimizer.clip_grad=1.0", "optimizer.nesterov=True", "model.hidden=128",
                 "loader.path=/data/gsm8k.jsonl", "optimizer.betas=[0.8, 0.9]", "name=other"]:
        apply_override(cfg, text)
    run = fdl.build(cfg)
    assert run.optimizer == Optimizer(lr=5e-7, betas=(0.8, 0.9), clip_grad=1.0, nesterov=True)
    assert run.model.hidden == 128 and run.loader.path == "/data/gsm8k.jsonl" and run.name == "other"


def test_override_coerces_to_the_existing_type():
    cfg = graph()
    apply_override(cfg, "optimizer.lr=1")
    assert cfg.optimizer.lr == 1.0 and isinstance(cfg.optimizer.lr, float)
    apply_override(cfg, "model.hidden=2e2")
    assert cfg.model.hidden == 200 and isinstance(cfg.model.hidden, int)
    apply_override(cfg, "name=2024")
    assert cfg.name == "2024"
    apply_override(cfg, "optimizer.weight_decay=inf")
    assert cfg.optimizer.weight_decay == float("inf")


@pytest.mark.parametrize("text, message", [
    ("optimizer.lr=fast", "takes a number"),
    ("model.hidden=2.5", "takes an int"),
    ("optimizer.nesterov=1", "takes True or False"),
    ("optimizer=3", "swap components with a fiddler"),
])
def test_override_refuses_values_that_do_not_fit(text, message):
    with pytest.raises(ConfigError, match=message):
        apply_override(graph(), text)


def test_none_is_always_accepted():
    cfg = graph()
    apply_override(cfg, "optimizer.lr=None")
    apply_override(cfg, "loader=None")
    assert cfg.optimizer.lr is None and cfg.loader is None


def test_text_for_a_string_field_needs_no_quotes():
    cfg = graph()
    apply_override(cfg, 'checks.0=data["train/reward"]["40"] > 0.75')
    apply_override(cfg, "loader.path=my data, v2.jsonl")
    assert cfg.checks[0] == 'data["train/reward"]["40"] > 0.75' and cfg.loader.path == "my data, v2.jsonl"
    with pytest.raises(ConfigError, match="not a Python literal"):
        apply_override(cfg, "optimizer.clip_grad=a b")


def test_list_tuple_and_dict_elements():
    cfg = graph()
    apply_override(cfg, "checks.0=x > 3")
    apply_override(cfg, "checks.-1='y'")
    apply_override(cfg, "stages.1.lr=0.5")
    apply_override(cfg, "optimizer.betas.0=0.5")
    apply_override(cfg, "loader.options.workers=4")
    apply_override(cfg, "loader.options.pin_memory=True")
    assert cfg.checks == ["x > 3", "y"]
    assert cfg.stages[1].lr == 0.5 and cfg.optimizer.betas == (0.5, 0.95)
    assert cfg.loader.options == {"shuffle": True, "workers": 4, "pin_memory": True}
    with pytest.raises(ConfigError, match=r"index 5 out of range for config path 'checks' \(2 items\)"):
        apply_override(cfg, "checks.5=z")


def test_unknown_path_suggests_the_closest():
    with pytest.raises(ConfigError) as err:
        apply_override(graph(), "optimzer.lr=1")
    assert str(err.value) == "unknown config path 'optimzer.lr'; did you mean 'optimizer.lr'?"
    with pytest.raises(ConfigError, match=r"unknown config path 'zzz.qqq' \(--dry-run lists every path\)"):
        apply_override(graph(), "zzz.qqq=1")
    with pytest.raises(ConfigError, match="unknown config path 'optimizer.lr.x'; did you mean 'optimizer.lr'"):
        apply_override(graph(), "optimizer.lr.x=1")


def test_unknown_argument_of_a_config_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError) as err:
        apply_override(graph(), "optimizer.lrr=1")
    assert str(err.value) == ("Optimizer takes no argument 'lrr' (config path 'optimizer.lrr'); "
                              "did you mean 'optimizer.lr'?")
    with pytest.raises(ConfigError, match="Optimizer takes no argument 'momentum'.*it takes: lr, betas"):
        apply_override(graph(), "optimizer.momentum=1")
    with pytest.raises(ConfigError, match="Optimizer takes no argument 'x' .*it takes: lr, betas, weight_decay"):
        apply_override(graph(), "stages.0.x=1")


def test_kwargs_callables_accept_new_arguments():
    cfg = fdl.Config(kwargs_fn, a=2)
    apply_override(cfg, "b=3")
    assert fdl.build(cfg) == {"a": 2, "b": 3}


def test_default_factory_and_class_defaults_cannot_be_entered():
    with pytest.raises(ConfigError, match="'factory_made' is the class's default_factory"):
        apply_override(graph(), "factory_made.lr=1")
    cfg = graph()
    cfg.loader.options = None
    with pytest.raises(ConfigError, match="unknown config path 'loader.options.x'"):
        apply_override(cfg, "loader.options.x=1")
    with pytest.raises(ConfigError, match="unknown config path 'optimizer.clip_grad.x'"):
        apply_override(graph(), "optimizer.clip_grad.x=1")
    with pytest.raises(ConfigError, match=r"'stages.0.betas' is the class default \(0.9, 0.999\), so"):
        apply_override(graph(), "stages.0.betas.0=0.5")
    with pytest.raises(ConfigError, match="config path 'extra' is the class's default_factory"):
        apply_override(fdl.Config(Run, name="r", model=None, optimizer=None, loader=None), "extra.x=1")


def test_malformed_paths():
    for path in ["a..b", ".a", "a."]:
        with pytest.raises(ConfigError, match="malformed config path"):
            locate(graph(), path)


def test_tag_override_sets_every_tagged_field():
    cfg = graph()
    apply_override(cfg, "tag:Seed=7")
    run = fdl.build(cfg)
    assert (run.seed, run.model.seed, run.loader.seed) == (7, 7, 7)
    apply_override(cfg, "tag:dtype=bfloat16")
    assert fdl.build(cfg).model.dtype == "bfloat16"


def test_a_path_to_a_tagged_field_sets_the_tag_everywhere():
    for path in ("seed", "model.seed", "loader.seed"):
        cfg = graph()
        apply_override(cfg, f"{path}=5")
        run = fdl.build(cfg)
        assert (run.seed, run.model.seed, run.loader.seed) == (5, 5, 5), path


def test_tag_errors():
    with pytest.raises(ConfigError, match="unknown tag 'Sed'; did you mean 'tag:Seed'"):
        apply_override(graph(), "tag:Sed=1")
    with pytest.raises(ConfigError, match=r"unknown tag 'Nope' \(tags in this config: DType, Seed\)"):
        apply_override(graph(), "tag:Nope=1")
    with pytest.raises(ConfigError, match="takes an int"):
        set_tag(graph(), "Seed", "abc")


def test_required_unset_lists_missing_arguments():
    cfg = fdl.Config(Run, model=fdl.Config(Model), optimizer=fdl.Config(Optimizer), loader=fdl.Config(Loader))
    assert required_unset(cfg) == ["name"]
    assert required_unset(graph()) == []
