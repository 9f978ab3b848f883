"""The worker boundary is typed: every method of a façade (the groups of ``ppo.workers.group``, the engine pool of
``ppo.rollout.generation``) calls the actor method of the same name (less ``_async``, which starts it) with the same
parameters — names, kinds, defaults and annotations — and says what it returns.  A renamed or re-signed actor
method fails here, not on the actor in the middle of a run."""

import inspect

import pytest

from ppo.rollout.generation import EnginePool, GenerationWorker
from ppo.workers.group import PolicyGroup, ValueGroup, WorkerGroup
from ppo.workers.policy import PolicyWorker
from ppo.workers.value import ValueWorker

FACADES = [(PolicyGroup, PolicyWorker), (ValueGroup, ValueWorker), (EnginePool, GenerationWorker)]

ROUTING = {"on_rank", "engines"}
"""A façade's own keywords: which ranks or engines a call goes to (no actor parameter)."""

RAY_ADDED = {"_ray_trace_ctx"}
"""What Ray adds to a class's methods once it is made an actor in this process (``ray.remote`` sets a new
``__signature__`` on the class's own functions, so every later ``inspect.signature`` shows it)."""

FACADE_ONLY = {
    (EnginePool, "generate"): "shards the prompts over the engines (each gets generate_async with its first_index)",
    (EnginePool, "kill"): "ends the actors",
    (EnginePool, "call_async"): "the generic call the façade's methods go through",
}
"""Façade methods that call no actor method of their name, and why."""


def facade_methods(facade: type) -> dict[str, object]:
    """The public methods ``facade`` adds to the generic call machinery (``WorkerGroup``'s own are that)."""
    methods = {}
    for cls in reversed(facade.__mro__):
        if cls in (object, WorkerGroup):
            continue
        methods.update({name: fn for name, fn in vars(cls).items()
                        if inspect.isfunction(fn) and not name.startswith("_")})
    return methods


def parameters(fn) -> list[tuple]:
    """``fn``'s parameters after ``self``, as (name, kind, default, annotation); the façade's routing ones left out."""
    return [(p.name, p.kind, p.default, p.annotation)
            for p in list(inspect.signature(fn).parameters.values())[1:] if p.name not in ROUTING | RAY_ADDED]


def mismatches(facade: type, actor: type) -> list[str]:
    found = []
    for name, method in facade_methods(facade).items():
        if (facade, name) in FACADE_ONLY:
            continue
        target = getattr(actor, name.removesuffix("_async"), None)
        if not inspect.isfunction(target):
            found.append(f"{facade.__name__}.{name}: {actor.__name__} has no method {name.removesuffix('_async')}")
            continue
        if parameters(method) != parameters(target):
            found.append(f"{facade.__name__}.{name}{inspect.signature(method)} does not match "
                         f"{actor.__name__}.{target.__name__}{inspect.signature(target)}")
        if inspect.signature(method).return_annotation is inspect.Signature.empty:
            found.append(f"{facade.__name__}.{name} does not say what it returns")
    return found


@pytest.mark.parametrize(("facade", "actor"), FACADES, ids=[f.__name__ for f, _ in FACADES])
def test_every_facade_method_has_the_actor_method_of_its_name_and_signature(facade, actor):
    assert mismatches(facade, actor) == []


def test_the_check_holds_after_ray_made_the_classes_actors():
    """In the full suite earlier tests make these classes Ray actors in the pytest process; Ray then shows an extra
    ``_ray_trace_ctx`` keyword on every method (it failed 4 façade cases in CI once). Made actors here, so the order
    of the tests does not matter."""
    import ray

    for facade, actor in FACADES:
        ray.remote(actor)
        some_method = actor.save if hasattr(actor, "save") else actor.generate
        assert "_ray_trace_ctx" in inspect.signature(some_method).parameters
        assert mismatches(facade, actor) == []


def test_the_check_sees_a_renamed_or_resigned_actor_method(monkeypatch):
    """The check can fail: an actor method renamed, or given another parameter, is named."""
    monkeypatch.delattr(PolicyWorker, "refit_address")
    monkeypatch.setattr(ValueWorker, "values", lambda self, batch, extra=1: None)
    assert mismatches(PolicyGroup, PolicyWorker) == ["PolicyGroup.refit_address: PolicyWorker has no method "
                                                     "refit_address"]
    values, values_async = mismatches(ValueGroup, ValueWorker)
    assert values.startswith("ValueGroup.values(self, batch")
    assert values.endswith("does not match ValueWorker.<lambda>(self, batch, extra=1)")
    assert values_async.startswith("ValueGroup.values_async(self, batch")
    assert values_async.endswith("does not match ValueWorker.<lambda>(self, batch, extra=1)")


def test_the_exemptions_name_facade_methods_that_exist():
    for facade, name in FACADE_ONLY:
        assert name in facade_methods(facade), (facade.__name__, name)


def test_a_group_refuses_a_method_name_or_another_class_method():
    group = WorkerGroup.__new__(WorkerGroup)
    group.worker_cls = PolicyWorker
    group.check(PolicyWorker.logprobs)
    group.check(PolicyWorker.save)  # inherited from MegatronWorker
    for wrong in ("logprobs", ValueWorker.values):
        with pytest.raises(TypeError, match="is not a method of PolicyWorker"):
            group.check(wrong)
