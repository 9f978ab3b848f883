import fiddle as fdl

from ppo.config.overrides import apply_override
from ppo.config.paths import ABSENT
from ppo.config.printing import EditLog, NodeRef, diff, flattened_text
from tests.config.graphs import OtherOptimizer, graph


def test_flattened_lines_use_override_paths_with_defaults_tags_and_classes():
    lines = flattened_text(graph()).splitlines()
    assert lines[:5] == [
        "name = 'run'",
        "model = Config[Model]",
        "model.hidden = 64",
        "model.dtype = 'float32'  # tag DType",
        "model.seed = 0  # default  # tag Seed",
    ]
    assert "optimizer.weight_decay = 0.0  # default" in lines
    assert "seed = 0  # tag Seed" in lines
    assert "checks = ['a > 1', 'b < 2']" in lines
    assert "stages.1.lr = 2.0" in lines
    assert "loader.options = {'shuffle': True, 'workers': 2}" in lines
    assert "factory_made = <default_factory>  # default" in lines


def test_every_flattened_path_can_be_overridden():
    cfg = graph()
    for line in flattened_text(cfg).splitlines():
        path, _, value = line.partition(" = ")
        if value.startswith(("Config[", "<default_factory>")):
            continue
        apply_override(cfg, f"{path}={value.split('  #')[0]}")
    assert diff(graph(), cfg) == []


def test_marks_show_what_each_edit_changed():
    cfg = graph()
    log = EditLog(cfg)
    log.apply("fiddler swap", lambda: setattr(cfg, "optimizer", fdl.Config(OtherOptimizer, lr=0.5)))
    log.apply("override optimizer.lr=0.25", lambda: apply_override(cfg, "optimizer.lr=0.25"))
    log.apply("override tag:Seed=3", lambda: apply_override(cfg, "tag:Seed=3"))
    log.apply("override checks.0=z", lambda: apply_override(cfg, "checks.0=z"))
    text = flattened_text(cfg, log.marks())
    lines = text.splitlines()
    assert "optimizer = Config[OtherOptimizer]  # <- fiddler swap (was Config[Optimizer])" in lines
    assert "optimizer.lr = 0.25  # <- override optimizer.lr=0.25 (was 2e-05)" in lines
    assert "optimizer.momentum = 0.9  # default  # <- fiddler swap (new)" in lines
    assert "seed = 3  # tag Seed  # <- override tag:Seed=3 (was 0)" in lines
    assert "model.seed = 3  # default  # tag Seed  # <- override tag:Seed=3 (was 0)" not in lines
    assert "model.seed = 3  # tag Seed  # <- override tag:Seed=3 (was 0)" in lines
    assert "checks = ['z', 'b < 2']  # <- override checks.0=z (was ['a > 1', 'b < 2'])" in lines
    assert "# removed: optimizer.betas  # <- fiddler swap (was (0.9, 0.95))" in lines
    assert "model.hidden = 64" in lines


def test_edits_that_cancel_out_leave_no_mark():
    cfg = graph()
    log = EditLog(cfg)
    log.apply("a", lambda: apply_override(cfg, "optimizer.lr=1.0"))
    log.apply("b", lambda: apply_override(cfg, "optimizer.lr=2e-5"))
    assert log.changes() == [] and "# <-" not in flattened_text(cfg, log.marks())


def test_diff_lists_path_old_new_in_print_order():
    old, new = graph(), graph()
    apply_override(new, "optimizer.lr=1e-6")
    apply_override(new, "model.hidden=128")
    new.optimizer.weight_decay = 0.0
    new.stages = ()
    changes = diff(old, new)
    assert [tuple(c) for c in changes][:2] == [("model.hidden", 64, 128), ("optimizer.lr", 2e-5, 1e-6)]
    assert ("stages.0", NodeRef("Config[Optimizer]"), ABSENT) in changes
    assert ("stages", ABSENT, ()) in changes
    assert all(c.path != "optimizer.weight_decay" for c in changes)
    path, old_value, new_value = changes[0]
    assert (path, old_value, new_value) == ("model.hidden", 64, 128)


def test_diff_tells_types_and_nan_apart():
    a, b = graph(), graph()
    b.model.hidden = 64.0
    a.optimizer.weight_decay = b.optimizer.weight_decay = float("nan")
    assert [c.path for c in diff(a, b)] == ["model.hidden"]
