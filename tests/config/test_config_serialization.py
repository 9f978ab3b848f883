import json

import fiddle as fdl
import pytest

from ppo.config.errors import ConfigError
from ppo.config.overrides import apply_override
from ppo.config.printing import diff, flattened_text
from ppo.config.serialization import from_json, to_json
from ppo.launch import SlurmExecutor
from tests.config.graphs import graph


def test_json_round_trip_keeps_values_tags_and_structure():
    cfg = graph()
    apply_override(cfg, "optimizer.lr=5e-7")
    cfg.loader.options = {"shuffle": False, "nested": [1, (2, 3)]}
    loaded = from_json(to_json(cfg))
    assert diff(cfg, loaded) == []
    assert flattened_text(loaded) == flattened_text(cfg)
    assert fdl.build(loaded) == fdl.build(cfg)
    apply_override(loaded, "tag:Seed=9")
    run = fdl.build(loaded)
    assert (run.seed, run.model.seed, run.loader.seed) == (9, 9, 9)


def test_json_round_trip_of_an_executor():
    cfg = fdl.Config(SlurmExecutor, nodes=8, setup_lines=("module load cuda",), additional_parameters={"a": 1})
    assert fdl.build(from_json(to_json(cfg))) == fdl.build(cfg)


def test_json_is_plain_json():
    assert "objects" in json.loads(to_json(graph()))


def test_unserializable_values_name_their_path():
    cfg = graph()
    cfg.loader.options = {"fn": lambda x: x}
    with pytest.raises(ConfigError, match="config path 'loader.options.fn' cannot be saved as JSON"):
        to_json(cfg)


def test_from_json_errors_are_one_line():
    with pytest.raises(ConfigError, match="cannot load the config JSON"):
        from_json("{not json")
