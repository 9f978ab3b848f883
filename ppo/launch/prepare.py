"""From an experiment file and a command line to a checked experiment, before anything is created or submitted.

The order, each step a one-line :class:`ConfigError` on failure:

1. import the file (``SWEEP`` files refused for now), check ``NIGHTLY``, call ``config()``;
2. ``--executor`` (replaces the graph's ``executor`` unless it is already of that kind), fiddlers in the order
   given, ``--name``, overrides in the order given; every change is recorded for the dry-run markers;
3. no argument left unset without a default; the graph stores as JSON and loads back;
4. ``fdl.build`` (errors name the config path that failed to build);
5. the built object has ``name``, ``executor``, ``seed``, ``check``, ``resource_plan``, ``run``; the model
   folders and checkpoints it reads that are on this machine load (:mod:`ppo.launch.model_checks`); its
   ``check()`` and the executor's pass; ``resource_plan()`` is a list of dicts;
6. hub models and datasets (:mod:`ppo.launch.fetch`): a dry run lists them in ``Prepared.hub_inputs`` (here, or
   to fetch) and refuses, where input paths count (below), one that ``HF_HUB_OFFLINE`` keeps from being fetched;
7. input paths: an experiment that reads files lists the missing ones (``missing_paths()``); they are an error
   where the run would read them from this machine's filesystem (:func:`paths_required`), else they are kept in
   ``Prepared.missing_paths`` for the dry run to report.  The data files that are here are checked against their
   loaders' columns (``check_inputs()``);
8. not a dry run: the hub models and datasets are fetched (or found in the cache) and the config's fields set to
   their local paths (marked ``# <- fetched <id>``), then steps 3-7 run again on that config, which is what the run
   directory stores: a job reads local paths only.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import fiddle as fdl

from ppo.config import overrides as ov
from ppo.config.errors import ConfigError
from ppo.config.loading import ExperimentFile, describe, load_experiment
from ppo.config.paths import is_node, locate, required_unset
from ppo.config.printing import EditLog
from ppo.config.serialization import from_json, to_json
from ppo.launch import fetch
from ppo.launch.executors import EXECUTORS, LocalExecutor, SlurmExecutor
from ppo.launch.model_checks import check_models

PROTOCOL = ("name", "executor", "seed", "check", "resource_plan", "run")


@dataclasses.dataclass
class Request:
    """What the command line asks for (everything but the output options)."""

    file: str
    overrides: list[str] = dataclasses.field(default_factory=list)
    fiddlers: list[str] = dataclasses.field(default_factory=list)
    executor: str | None = None
    name: str | None = None
    dry_run: bool = False


@dataclasses.dataclass
class Prepared:
    request: Request
    file: ExperimentFile
    cfg: fdl.Buildable
    edits: EditLog
    experiment: Any
    executor: Any
    plan: list[dict]
    config_json: str
    missing_paths: list[str] = dataclasses.field(default_factory=list)
    hub_inputs: list[str] = dataclasses.field(default_factory=list)
    """A dry run's line for each hub model or dataset: here (where), or what a launch would fetch."""
    model_notes: list[str] = dataclasses.field(default_factory=list)
    """What :func:`ppo.launch.model_checks.check_models` found of the model folders and checkpoints (all usable)."""

    @property
    def name(self) -> str:
        return str(self.experiment.name)


def prepare(request: Request) -> Prepared:
    file = load_experiment(request.file)
    file.nightly  # noqa: B018 - checks the NIGHTLY block
    cfg = file.config()
    edits = EditLog(cfg)
    if request.executor:
        edits.apply(f"--executor {request.executor}", lambda: _select_executor(cfg, request.executor))
    for name in request.fiddlers:
        edits.apply(f"--fiddler {name}", lambda name=name: file.apply_fiddler(cfg, name))
    if request.name is not None:
        edits.apply("--name", lambda: ov.apply_override(cfg, ov.Override("name", request.name, f"name={request.name}")))
    for text in request.overrides:
        edits.apply(f"override {text}", lambda text=text: _apply_override(file, cfg, text))
    prepared = _check(request, file, cfg, edits)
    inputs = fetch.hub_inputs(prepared.experiment)
    if inputs and not request.dry_run:
        resolved = _call_check(lambda: fetch.resolve(inputs, fetch.say_on_stderr), "fetching")
        fetch.pin(cfg, edits, inputs, resolved)
        prepared = _check(request, file, cfg, edits)
    return prepared


def _check(request: Request, file: ExperimentFile, cfg: fdl.Buildable, edits: EditLog) -> Prepared:
    """Steps 3-7 of the module docstring on the configured graph."""
    missing = required_unset(cfg)
    if missing:
        raise ConfigError(f"config path '{missing[0]}' is required but unset; set it in config() or on the command "
                          f"line ({missing[0]}=...)")
    config_json = to_json(cfg)
    from_json(config_json)
    experiment = build(cfg)
    _check_protocol(experiment, file.path)
    executor = experiment.executor if experiment.executor is not None else LocalExecutor()
    if not isinstance(executor, tuple(EXECUTORS.values())):
        raise ConfigError(f"executor must be one of LocalExecutor, DebugExecutor, SlurmExecutor "
                          f"(ppo.launch), got {type(executor).__name__}")
    models = _call_check(lambda: check_models(experiment, executor), "checking the models")
    _call_check(experiment.check, "check()")
    executor.check()
    plan = _call_check(experiment.resource_plan, "resource_plan()")
    if not isinstance(plan, list) or not all(isinstance(g, dict) for g in plan):
        raise ConfigError(f"resource_plan() must return a list of dicts, got {type(plan).__name__}")
    if isinstance(executor, SlurmExecutor) and hasattr(experiment, "node_request"):
        executor = experiment.executor = request_node_resources(executor, experiment)
    hub = []
    if request.dry_run:
        inputs = fetch.hub_inputs(experiment)
        refused = _call_check(lambda: fetch.unavailable(inputs), "looking up hub ids")
        if refused and paths_required(executor, request.dry_run):
            raise ConfigError(_first_of(refused))
        hub = fetch.dry_run_lines(inputs)
    missing = _call_check(getattr(experiment, "missing_paths", list), "missing_paths()")
    if missing and paths_required(executor, request.dry_run):
        raise ConfigError(_first_of(missing))
    _call_check(getattr(experiment, "check_inputs", lambda: None), "check_inputs()")
    return Prepared(request, file, cfg, edits, experiment, executor, plan, config_json, list(missing), hub, models)


def _first_of(problems: list[str]) -> str:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"


def request_node_resources(executor: SlurmExecutor, experiment: Any) -> SlurmExecutor:
    """The executor with ``cpus_per_task`` and ``mem_gb`` filled in from the plan where the recipe leaves them unset
    (a cluster that limits a task to what it asked for would otherwise give one core to every actor of a node).  An
    ``exclusive`` job gets whole nodes, and its sbatch script asks for all their memory (``--mem=0``), but it still
    asks for the CPUs: under ``SLURM_EXACT``, or a SLURM whose ``srun`` does not read the job's count, a job step is
    given ``--cpus-per-task`` CPUs a task (one by default), whatever the job holds."""
    need = _call_check(experiment.node_request, "node_request()")
    if need is None:
        return executor
    cpus, mem_gb = need
    exclusive = (executor.additional_parameters or {}).get("exclusive")
    return dataclasses.replace(executor, cpus_per_task=executor.cpus_per_task or cpus,
                               mem_gb=executor.mem_gb if exclusive else executor.mem_gb or mem_gb)


def paths_required(executor: Any, dry_run: bool) -> bool:
    """Whether the experiment's input paths must exist on this machine before the launch goes on.

    A local or debug run reads them here, so they must exist, in a dry run too (it previews that run).  A SLURM job
    reads them on the cluster: a submission checks them on the submitting host, which shares the cluster's
    filesystem (``executor.check_paths=False`` when they exist only inside the container or on the compute nodes),
    and a dry run only reports them, so a GPU recipe can be shown anywhere.
    """
    if isinstance(executor, SlurmExecutor):
        return executor.check_paths and not dry_run
    return True


def _apply_override(file: ExperimentFile, cfg: fdl.Buildable, text: str) -> None:
    try:
        ov.apply_override(cfg, text)
    except ConfigError as err:
        path, _, raw = text.partition("=")
        if "swap components with a fiddler" in str(err) and raw.strip() in file.fiddler_names():
            raise ConfigError(f"{path} cannot be set to a component from the command line; {raw.strip()} is a "
                              f"fiddler of {file.path}: use --fiddler {raw.strip()}") from None
        raise


def _select_executor(cfg: fdl.Buildable, kind: str) -> None:
    if kind not in EXECUTORS:
        raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, got '{kind}'")
    try:
        slot = locate(cfg, "executor")
    except ConfigError:
        raise ConfigError("--executor needs an 'executor' argument at the root of the config") from None
    current = slot.current
    if is_node(current) and fdl.get_callable(current) is EXECUTORS[kind]:
        return
    slot.set(fdl.Config(EXECUTORS[kind]))


def build(cfg: fdl.Buildable) -> Any:
    try:
        return fdl.build(cfg)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever a constructor raises is a configuration problem here
        match = re.search(r"failed to construct or call (\S+) at <root>\.?(\S*) with", str(err))
        where = f"config path '{match.group(2)}' ({match.group(1)})" if match and match.group(2) else (
            f"the root ({match.group(1)})" if match else "the config")
        raise ConfigError(f"building {where} failed: {describe(err)}") from None


def _check_protocol(experiment: Any, path: Path) -> None:
    missing = [attr for attr in PROTOCOL if not hasattr(experiment, attr)]
    if missing:
        raise ConfigError(f"{path}: config() builds a {type(experiment).__name__}, which lacks "
                          f"{', '.join(missing)} (an experiment needs {', '.join(PROTOCOL)})")


def _call_check(fn, what: str) -> Any:
    try:
        return fn()
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(str(err) or f"{what} failed: {type(err).__name__}") from None
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"{what} raised {describe(err)}") from None
