"""Starting a run's workers: every rank placed by the experiment's plan on the Ray cluster, the policy (warm-started
when the run starts fresh, with its KL reference), the critic, the engines, and what drives them — the shipper, the
refit and the GPUs' turns.  :func:`start_workers` leaves the GPUs with the groups; the trainer loads a checkpoint
(if it resumes) and then makes the first refit."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ppo.cluster.deadline import Pending
from ppo.cluster.placement import Placement, check_cluster_shape, cluster_shape, reserve
from ppo.loop.gpu_turns import GpuTurns
from ppo.loop.warm_start import REFERENCE, warm_start_cached, warm_started_weights
from ppo.rollout.generation import EnginePool, start_generation_worker
from ppo.workers.group import PolicyGroup, ValueGroup
from ppo.workers.logs import LOGS
from ppo.workers.refit import Refitter
from ppo.workers.traffic import Shipper


@dataclass
class RunWorkers:
    """The run's actors, as the driver calls them, and what drives them."""

    placement: Placement
    policy: PolicyGroup
    critic: ValueGroup | None
    engines: EnginePool
    shipper: Shipper  # counts and ships the batches every group is sent
    gpus: GpuTurns  # who holds shared GPUs
    refitter: Refitter  # the policy's weights to the engines
    critic_beside_generation: bool  # the plan lets the critic train while the engines generate (CPU ranks)
    warm_start: dict[str, float] = field(default_factory=dict)  # warm_start/final_nll, timing/setup/warm_start

    def kill(self) -> None:
        """End every actor and release the placement."""
        for workers in (self.policy, self.critic, self.engines):
            if workers is not None:
                workers.kill()
        self.placement.release()


def start_workers(exp, model_path: Path, run_dir: Path, *, resumes: bool,
                  warm_start_batches: Callable[[], list[dict]]) -> RunWorkers:
    """Place every rank by ``exp``'s plan on this Ray cluster and start the groups and the engines.

    ``resumes``: a checkpoint will be loaded, so no warm start (its weights come with the checkpoint).
    ``warm_start_batches``: the warm start's batches, built only when there is one."""
    with ending_on_failure() as started:
        return _start_workers(exp, model_path, Path(run_dir), resumes=resumes,
                              warm_start_batches=warm_start_batches, started=started)


@contextmanager
def ending_on_failure():
    """A list for what a start made (each with ``kill()`` or ``release()``), all ended if the start fails part way:
    a driver that joined a Ray runtime (a test's) keeps running, and their resources are freed for what follows."""
    started: list = []
    try:
        yield started
    except BaseException:
        for thing in reversed(started):
            (thing.release if isinstance(thing, Placement) else thing.kill)()
        raise


def _start_workers(exp, model_path: Path, run_dir: Path, *, resumes: bool,
                   warm_start_batches: Callable[[], list[dict]], started: list) -> RunWorkers:
    settings = exp.trainer
    nodes, gpus_per_node = cluster_shape()
    check_cluster_shape(exp.shape, (nodes, gpus_per_node))
    plan = exp.placement_plan()
    print(f"[ppo] placement ({nodes} node(s) × {gpus_per_node} GPUs):\n{plan.grid()}", flush=True)
    placement = reserve(plan, threads=exp.worker_threads(plan))
    started.append(placement)
    generation = exp.generation_for(model_path)
    logs = str(Path(run_dir) / LOGS)

    def start_engines() -> EnginePool:
        actors = [start_generation_worker(generation, e, log_dir=logs, **placement.options("generation", e))
                  for e in range(plan.num_engines)]
        started.append(pool := EnginePool(actors, timeout_s=start_timeout, shipper=shipper))
        return pool

    # Where engines share GPUs with the Megatron ranks, vLLM sizes its memory from what is free when it starts
    # and stops if that is short of gpu_memory_utilization, or changes while it profiles: it starts after the
    # groups are built and offloaded.  Elsewhere it starts while the groups build (each loads the initial
    # weights; the refit follows).
    share_gpus = plan.colocated and not plan.cpu_only
    start_timeout = settings.start_timeout_s
    shipper = None  # made once the groups say how many pieces a batch goes in; the engines' is set then
    engines = None if share_gpus else start_engines()
    policy, critic, warm_start_report = start_groups(exp, model_path, run_dir, placement, logs, resumes=resumes,
                                                     warm_start_batches=warm_start_batches, started=started)
    groups = [g for g in (policy, critic) if g is not None]
    # a batch's fields go in pieces that every group's data-parallel ranks can share out
    shipper = Shipper(pieces=math.lcm(*(g.data_parallel for g in groups)))
    for group in groups:
        group.shipper = shipper
    if share_gpus:
        for group in groups:
            group.offload()
        engines = start_engines()  # the groups offloaded, the engines awake once built
    engines.shipper = shipper
    engines.ready()
    for workers in (*groups, engines):
        workers.timeout_s = settings.worker_timeout_s
    gpus = GpuTurns(policy, critic, engines, holder="generate" if share_gpus else "train")
    gpus.hand_to("train")  # where the first refit starts from: engines asleep, the groups on their GPUs
    refitter = Refitter(policy, engines, plan.refit_routes(), generation.refit_bucket_bytes)
    workers = RunWorkers(placement, policy, critic, engines, shipper, gpus, refitter,
                         critic_beside_generation=exp.critic_trains_beside_generation(plan),
                         warm_start=warm_start_report)
    record_placement(Path(run_dir), plan, workers)
    if settings.critic_beside_generation and critic is not None and not workers.critic_beside_generation:
        print("[ppo] trainer.critic_beside_generation applies to CPU ranks only: on GPUs the critic is offloaded "
              "while the engines generate, so it trains in order", flush=True)
    return workers


def start_groups(exp, model_path: Path, run_dir: Path, placement: Placement, logs: str, *, resumes: bool,
                 warm_start_batches: Callable[[], list[dict]], started: list) -> tuple:
    """The policy (warm-started when the run starts fresh, with its KL reference) and the critic, if the estimator
    has one: ``(policy, critic or None, the warm start's report)``.  The warm start's batches are drawn while the
    policy's ranks start, and the critic's ranks start while the warm start runs."""
    settings = exp.trainer
    needs_reference = settings.kl_in_reward_coef > 0 or exp.policy.loss.kl_coef > 0
    policy = PolicyGroup(exp.policy, str(model_path), with_reference=needs_reference, placement=placement,
                         seed=exp.seed, log_dir=logs, start_timeout_s=settings.start_timeout_s, wait=False)
    started.append(policy)
    warm_started = not resumes and bool(settings.warm_start_steps)
    batches = warm_start_batches() if warm_started else []  # the driver's part, while the policy's ranks start
    policy.wait_ready()
    # The critic's ranks start their processes (Python, torch, Megatron, their torch.distributed world) while the
    # warm start runs; the model is built once the warm-started weights it starts from are written.
    critic = None
    if exp.advantage.needs_critic:
        critic = ValueGroup(exp.critic, None, placement=placement, seed=exp.seed, log_dir=logs,
                            start_timeout_s=settings.start_timeout_s, wait=False)
        started.append(critic)
    warm_start_report = {}
    if warm_started:
        (Path(run_dir) / REFERENCE).unlink(missing_ok=True)  # an earlier attempt's, not this warm start's
        warm_start_report = warm_start_cached(exp, policy, batches, model_path, run_dir, plan=placement.plan,
                                              threads=placement.threads)
    critic_built = None
    if critic is not None:  # built while the policy loads its reference
        critic_built = build_critic(exp, critic, model_path, run_dir, warm_started=warm_started, policy=policy)
    if needs_reference and settings.warm_start_steps:
        # the KL reference is the warm-started policy, where RL starts (not the untrained model the run generated)
        policy.load_reference(str(warm_started_weights(policy, run_dir)))
    if critic_built is not None:
        critic_built.wait()
    return policy, critic, warm_start_report


def build_critic(exp, critic: ValueGroup, model_path: Path, run_dir: Path, *, warm_started: bool,
                 policy: PolicyGroup) -> Pending:
    """Start building the critic's model on its started ranks, from (by priority) a checkpoint step, a model of its
    own, or the policy: its HF folder, or after a warm start the warm-started policy's weights file
    (:func:`ppo.loop.warm_start.warm_started_weights`).  Each rank reads only its own shard of them."""
    weights, init_checkpoint = None, exp.critic.init_checkpoint()
    if exp.critic.model_path is None and warm_started:
        weights = str(warm_started_weights(policy, run_dir))
    own_model = exp.critic.model_path is not None and not init_checkpoint
    architecture = exp.critic.model_path if own_model else model_path
    critic.wait_ready()
    return critic.build_async(str(architecture), weights=weights, init_checkpoint=init_checkpoint)


def record_placement(run_dir: Path, plan, workers: RunWorkers) -> None:
    """``placement.json``: the plan, and where each rank and engine reports it runs (the run's own account)."""
    groups = {"policy": workers.policy, "critic": workers.critic}
    record = {
        "nodes": plan.nodes, "gpus_per_node": plan.gpus_per_node, "used": plan.gpus_used_line(),
        "plan": {role: [[s.node, s.gpu] for s in slots] for role, slots in plan.ranks.items()},
        "routes": [vars(r) for r in plan.refit_routes()], "threads": workers.placement.threads,
        "actors": {role: group.placement_info() for role, group in groups.items() if group is not None},
    }
    record["actors"]["generation"] = workers.engines.placement_info()
    (run_dir / "placement.json").write_text(json.dumps(record, indent=1, default=str))
