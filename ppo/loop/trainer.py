"""The PPO loop: actor-critic with a learned value model and GAE, rollouts on vLLM, workers on Ray.

One step, in order (docs/ppo.md, section 2, says what each phase does and why the order matters):

    1. prompts × generations_per_prompt          (the data loader, repeated per sample)
    2. refit the engines if the policy changed   (policy ranks stream HF-named buckets to vLLM, not via the driver)
    3. generate                                  (vLLM: tokens, logp_gen, finish reasons)
    4. score                                     (math environment, verification in worker processes)
    5. reward shaping                            (overlong penalty, scaling; dynamic sampling drops flat groups)
    6. values V                                  (critic)
    7. logp_old (and logp_ref with a KL term)    (policy)
    8. advantages and returns                    (the estimator: GAE, or a critic-free one)
    9. ppo_epochs × (critic epoch, then actor epoch; the actor only from policy_training_start_step; the critic's own
       trainer.critic_epochs × critic_minibatches when set)
   10. validate every val_period steps           (greedy decoding on held-out prompts)
   11. log                                       (metrics.jsonl, the console line)
   12. checkpoint every checkpoint_period steps   (policy, critic, optimizers, loader, counters — atomically)

State lives here (counters, loader, KL coefficient) and in the workers (models, optimizers).  Steps 1-5 are
:mod:`ppo.rollout.collect`, 6-9 read top to bottom in :meth:`PPOTrainer.train_step` with the critic's schedule
(:mod:`ppo.loop.schedules`), the math is in ``ppo.algorithms`` and the step's metrics in :mod:`ppo.loop.step_metrics`.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import ray
import torch
from transformers import AutoTokenizer

from ppo.algorithms.advantages import estimate_advantages
from ppo.algorithms.kl import KLController, kl_penalty
from ppo.algorithms.masked import masked_mean, masked_var
from ppo.algorithms.rewards import token_level_rewards, whiten_rewards
from ppo.cluster.deadline import WorkerTimeout
from ppo.cluster.placement import check_cluster_shape, cluster_shape, reserve
from ppo.cluster.ray_runtime import connect_or_start
from ppo.data import PromptLoader
from ppo.envs.answer import extract_answer
from ppo.envs.math_env import MathEnvironment
from ppo.loop.checkpoints import CHECKPOINTS, PARTIAL, checkpoint_dir, complete_checkpoints
from ppo.loop.schedules import critic_schedule
from ppo.loop.settings import MISMATCH_PROBE_EVERY, PPOSettings
from ppo.loop.step_metrics import batch_metrics, environment_metrics, skipped_updates, update_metrics
from ppo.metrics import MetricsWriter
from ppo.metrics.samples import every_nth, write_samples
from ppo.metrics.wandb_sink import WandbSink
from ppo.models.export import write_hf_export
from ppo.rollout.batch import build_rollout_batch, select
from ppo.rollout.collect import CollectionStopped, Collector
from ppo.rollout.critic_view import with_prefixes, without_prefixes
from ppo.rollout.evaluate import evaluate
from ppo.rollout.generation import EnginePool, start_generation_worker
from ppo.rollout.settings import Sample
from ppo.seeds import derive_seed
from ppo.workers.group import PolicyGroup, ValueGroup
from ppo.workers.logs import LOGS
from ppo.workers.memory import REFIT_STEPS
from ppo.workers.refit import Refitter
from ppo.workers.traffic import Shipper

REFERENCE = "reference.safetensors"
EXPORT = "export"


WARM_START_CHUNK = 20
"""Warm-start steps the policy takes in one call: a round trip per step cost more than its arithmetic on a laptop
CPU, and a chunk still reports progress (and stays within ``trainer.start_timeout_s``) as it goes."""

WANDB_SAMPLE_ROWS = 64
"""Validation answers a validated step sends to wandb's ``samples`` table (``samples/step_N.jsonl`` keeps all)."""


class TrainingStopped(RuntimeError):
    pass


def _wandb_config(run_dir: Path) -> dict[str, str]:
    """The run's config as data for wandb, as the launcher wrote it (``wandb_config.json``: ``{path: value}`` and
    ``overrides``); empty for a run directory the launcher did not write."""
    path = run_dir / "wandb_config.json"
    return json.loads(path.read_text()) if path.is_file() else {}


class PPOTrainer:
    """Runs an experiment's PPO loop in ``run_dir``; resumes from the latest complete checkpoint there."""

    def __init__(self, experiment, run_dir: Path):
        self.exp = experiment
        self.cfg: PPOSettings = experiment.trainer
        self.run_dir = Path(run_dir)
        # counters and the loop's own state (a checkpoint keeps step, loader, kl and bad_steps)
        self.step = 0
        self.bad_steps = 0
        self.kl = KLController(self.cfg.kl_in_reward_coef, target=self.cfg.kl_target)
        self.estimator = experiment.advantage
        self.loader: PromptLoader | None = None
        # timings: this step's phases, the steps' totals (for the ETA), and what went before step 1
        self.timings: dict[str, float] = {}
        self.current_phase = "setup"  # named in a worker timeout's message
        self.step_times: list[float] = []
        self.setup_timings: dict[str, float] = {}  # logged with step 0: where the time before the first step went
        self.warm_start_metrics: dict[str, float] = {}  # logged with step 0: where the warm start landed
        # the workers and what drives them, made by setup()
        self.owns_ray = False
        self.env: MathEnvironment | None = None
        self.metrics: MetricsWriter | None = None
        self.wandb: WandbSink | None = None
        self.placement = self.policy = self.critic = self.engines = self.refitter = self.shipper = None
        self.collector: Collector | None = None  # one step's batch from the engines (ppo.rollout.collect)
        self.schedule = None  # how the critic's work interleaves with the policy's (ppo.loop.schedules)
        self.refit_stats: dict[str, float] = {}
        self.sample_rows: list[dict] = []  # the step's kept samples (ppo.metrics.samples), written with its metrics
        self.prompt_of: dict[str, str] = {}  # record id -> the problem's text, for the kept training samples
        self.phase = "train"  # the workers are built on the device; the first refit hands it to generation
        # trainer.critic_beside_generation: the next step's batch, collected while the critic trained, with its env
        # metrics, timings and the driver bytes it cost (and the loader's state before it, which a checkpoint keeps
        # so that a resumed run collects that batch again)
        self.prefetched: tuple[dict, dict, dict, int] | None = None
        self.loader_state_before_prefetch: dict | None = None

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        exp, cfg = self.exp, self.cfg
        started = time.perf_counter()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.owns_ray = not ray.is_initialized()
        connect_or_start()
        self.setup_timings["timing/setup/ray"] = time.perf_counter() - started
        self.model_path = exp.model.materialize(self.run_dir, exp.task)

        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.template = exp.task.template()
        self.train_records = exp.task.train_records()
        self.val_records = exp.task.val_records()[: cfg.val_prompts] if cfg.val_prompts else exp.task.val_records()
        self.loader = PromptLoader(self.train_records, cfg.prompts_per_step, seed=exp.seed)
        self.prompt_of = {record.id: record.prompt for record in self.train_records}
        self.env = MathEnvironment(num_workers=cfg.math_workers, reward=exp.reward)
        print(f"[ppo] run dir {self.run_dir}", flush=True)
        workers_started = time.perf_counter()
        self.start_workers()
        self.setup_timings["timing/setup/workers"] = (time.perf_counter() - workers_started
                                                      - self.setup_timings.get("timing/setup/warm_start", 0.0))
        self.metrics = self._open_metrics()
        self.setup_timings["timing/setup/total"] = time.perf_counter() - started

    def start_workers(self) -> None:
        """Place every rank by the experiment's plan on this Ray cluster, start the groups and engines, first refit."""


        exp = self.exp
        nodes, gpus_per_node = cluster_shape()
        check_cluster_shape(exp.shape, (nodes, gpus_per_node))
        plan = exp.placement_plan()
        print(f"[ppo] placement ({nodes} node(s) × {gpus_per_node} GPUs):\n{plan.grid()}", flush=True)
        self.placement = placement = reserve(plan, threads=exp.worker_threads(plan))
        generation = exp.generation_for(self.model_path)
        logs = str(self.run_dir / LOGS)

        def start_engines() -> list:
            return [start_generation_worker(generation, e, log_dir=logs, **placement.options("generation", e))
                    for e in range(plan.num_engines)]

        # Where engines share GPUs with the Megatron ranks, vLLM sizes its memory from what is free when it starts
        # and stops if that is short of gpu_memory_utilization, or changes while it profiles: it starts after the
        # groups are built and offloaded.  Elsewhere it starts while the groups build (each loads the initial
        # weights; the refit follows).
        share_gpus = plan.colocated and not plan.cpu_only
        actors = [] if share_gpus else start_engines()
        needs_reference = self.cfg.kl_in_reward_coef > 0 or exp.policy.loss.kl_coef > 0
        start_timeout = self.cfg.start_timeout_s
        self.policy = PolicyGroup(exp.policy, str(self.model_path), with_reference=needs_reference,
                                  placement=placement, seed=exp.seed, log_dir=logs, start_timeout_s=start_timeout)
        resume = self.resume_point()
        warm_started = resume is None and self.cfg.warm_start_steps
        if warm_started:
            (self.run_dir / REFERENCE).unlink(missing_ok=True)  # an earlier attempt's, not this warm start's
            self.warm_start()
        if needs_reference and self.cfg.warm_start_steps:
            self.anchor_reference()
        self.critic = (self.start_critic(placement, logs, warm_started=warm_started) if self.estimator.needs_critic
                       else None)
        groups = [g for g in (self.policy, self.critic) if g is not None]
        # a batch's fields go in pieces that every group's data-parallel ranks can share out
        self.shipper = Shipper(pieces=math.lcm(*(g.data_parallel for g in groups)))
        for group in groups:
            group.shipper = self.shipper
        if share_gpus:
            for group in groups:
                group.offload()
            self.phase = "generate"  # the groups offloaded, the engines awake once built
            actors = start_engines()
        self.engines = EnginePool(actors, timeout_s=self.cfg.worker_timeout_s, shipper=self.shipper)
        self.engines.ready(start_timeout)
        self.collector = Collector(engines=self.engines, env=self.env, loader=self.loader, template=self.template,
                                   tokenizer=self.tokenizer, settings=self.cfg, sampling=exp.generation.sampling,
                                   reward_shaping=exp.reward_shaping, seed=exp.seed, timed_part=self.timed_part)
        for group in groups:
            group.timeout_s = self.cfg.worker_timeout_s
        self.enter_phase("train")  # where the first refit starts from: engines asleep, the groups on their GPUs
        self.refitter = Refitter(self.policy, self.engines, plan.refit_routes(), generation.refit_bucket_bytes)
        self.record_placement(plan)
        beside_generation = exp.critic_trains_beside_generation(plan)
        if self.cfg.critic_beside_generation and self.critic is not None and not beside_generation:
            print("[ppo] trainer.critic_beside_generation applies to CPU ranks only: on GPUs the critic is offloaded "
                  "while the engines generate, so it trains in order", flush=True)
        self.schedule = critic_schedule(self, beside_generation=beside_generation)
        if resume is not None:
            self.load(resume)
        self.refit()

    def start_critic(self, placement, log_dir: str, *, warm_started: bool = False) -> ValueGroup:
        """The critic's ranks, from (by priority) a checkpoint step, a model of its own, or the policy: its HF
        folder, or after a warm start the warm-started policy's weights file (:meth:`warm_started_weights`).  Each
        rank reads only its own shard of them."""
        exp = self.exp
        weights, init_checkpoint = None, exp.critic.init_checkpoint()
        if exp.critic.model_path is None and warm_started:
            weights = str(self.warm_started_weights())
        own_model = exp.critic.model_path is not None and not init_checkpoint
        architecture = exp.critic.model_path if own_model else self.model_path
        return ValueGroup(exp.critic, str(architecture), weights=weights, init_checkpoint=init_checkpoint,
                          placement=placement, seed=exp.seed, log_dir=log_dir, start_timeout_s=self.cfg.start_timeout_s)

    def warm_started_weights(self) -> Path:
        """``reference.safetensors``: the warm-started policy in HF names, written once by policy rank 0 (the only
        rank that gathers the whole model); the reference and the critic's ranks read their shards from it."""
        path = self.run_dir / REFERENCE
        if not path.is_file():
            self.policy.write_weights(str(path))
        return path

    def anchor_reference(self) -> None:
        """After a warm start the KL reference is the warm-started policy, where RL starts (not the untrained model
        the run generated).  It is kept in ``reference.safetensors`` so that a resumed run measures KL to the same
        model."""
        self.policy.load_reference(str(self.warm_started_weights()))

    def record_placement(self, plan) -> None:
        """``placement.json``: the plan, and where each rank and engine reports it runs (the run's own account)."""
        groups = {"policy": self.policy, "critic": self.critic}
        record = {
            "nodes": plan.nodes, "gpus_per_node": plan.gpus_per_node, "used": plan.gpus_used_line(),
            "plan": {role: [[s.node, s.gpu] for s in slots] for role, slots in plan.ranks.items()},
            "routes": [vars(r) for r in plan.refit_routes()], "threads": self.placement.threads,
            "actors": {role: group.placement_info() for role, group in groups.items() if group is not None},
        }
        record["actors"]["generation"] = self.engines.placement_info()
        (self.run_dir / "placement.json").write_text(json.dumps(record, indent=1, default=str))

    def _open_metrics(self):
        self.wandb = WandbSink(self.run_dir, mode=self.cfg.wandb_mode, project=self.cfg.wandb_project,
                               name=self.run_dir.name, group=self.cfg.wandb_group, config=_wandb_config(self.run_dir))
        return MetricsWriter(self.run_dir)

    def warm_start(self) -> None:
        """Supervised steps on (prompt, answer) pairs of the training set: teaches the answer format before PPO.

        The batches are drawn with ``trainer.warm_start_seed``, not the run's ``seed``: the warm start stands in for
        the checkpoint RL starts from, so runs that differ only in ``seed`` start from the same weights.  The
        policy takes them :data:`WARM_START_CHUNK` steps a call (:meth:`warm_start_batches` builds them all first)."""
        cfg = self.cfg
        started = time.perf_counter()
        batches = self.warm_start_batches()
        metrics = {}
        for first in range(0, len(batches), WARM_START_CHUNK):
            chunk = self.policy.supervised_steps(batches[first:first + WARM_START_CHUNK], lr=cfg.warm_start_lr)
            for i, metrics in enumerate(chunk, start=first):
                if i % 20 == 0 or i == cfg.warm_start_steps - 1:
                    print(f"[ppo] warm start {i + 1}/{cfg.warm_start_steps}: nll {metrics['loss']:.3f}", flush=True)
        self.policy.reset_optimizer_state()
        self.warm_start_metrics["warm_start/final_nll"] = float(metrics["loss"])
        self.setup_timings["timing/setup/warm_start"] = time.perf_counter() - started
        print(f"[ppo] warm start done in {self.setup_timings['timing/setup/warm_start']:.1f} s", flush=True)

    def warm_start_batches(self) -> list[dict]:
        """The warm start's ``trainer.warm_start_steps`` batches of ``warm_start_batch_size`` records drawn with
        replacement: each record drawn is encoded once, in two batched tokenizer calls (prompts, answers), where
        encoding every draw apart cost the driver ~20 ms a step (3 s of the default's set-up)."""
        cfg = self.cfg
        generator = torch.Generator().manual_seed(cfg.warm_start_seed)
        draws = [torch.randint(len(self.train_records), (cfg.warm_start_batch_size,), generator=generator).tolist()
                 for _ in range(cfg.warm_start_steps)]
        drawn = sorted({j for picks in draws for j in picks})
        records = [self.train_records[j] for j in drawn]
        prompts = dict(zip(drawn, self.template.encode_many(records, self.tokenizer)))
        answers = self.tokenizer([r.ground_truth for r in records], add_special_tokens=False)["input_ids"]
        answers = {j: [*ids, self.tokenizer.eos_token_id] for j, ids in zip(drawn, answers)}
        return [build_rollout_batch([prompts[j] for j in picks],
                                    [[Sample(answers[j], [0.0] * len(answers[j]), "stop")] for j in picks],
                                    pad_id=self.tokenizer.pad_token_id,
                                    ground_truths=[self.train_records[j].ground_truth for j in picks])
                for picks in draws]

    @contextmanager
    def timed(self, phase: str):
        start = time.perf_counter()
        self.current_phase = phase
        yield
        self.timings[f"timing/train/{phase}"] = time.perf_counter() - start

    @contextmanager
    def timed_part(self, part: str):
        """Time spent inside a phase on ``part`` (summed over the step), e.g. scoring within generation."""
        start = time.perf_counter()
        yield
        key = f"timing/train/{part}"
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - start

    # ------------------------------------------------------------------ rollouts
    def refit(self) -> None:
        """Stream the policy's weights to the engines (policy ranks to engines, never through the driver), and hand
        the GPUs to generation, walking :data:`ppo.workers.memory.REFIT_STEPS` (the memory plan sums the bytes of
        the same steps): the critic and the policy's training state leave the GPUs, the engines wake their weights
        only, receive, the policy's weights leave, and only then do the KV caches wake."""
        if self.phase != "train":  # the trainer already holds nothing on the GPUs
            self.refit_stats = self.refitter()
            return
        for target, action in REFIT_STEPS:
            self.refit_step(target, action)
        self.phase = "generate"

    def refit_step(self, target: str, action: str) -> None:
        """One of :data:`ppo.workers.memory.REFIT_STEPS`."""
        if target == "critic":
            if self.critic is not None:
                self.critic.offload()
        elif (target, action) == ("policy", "offload_state"):
            self.policy.offload(keep_weights=True)
        elif (target, action) == ("policy", "offload"):
            self.policy.offload()
        elif (target, action) == ("engines", "wake_weights"):
            self.engines.wake_up(("weights",))
        elif (target, action) == ("engines", "wake_kv_cache"):
            self.engines.wake_up(("kv_cache",))
        elif (target, action) == ("refit", "stream"):
            self.refit_stats = self.refitter()
        else:
            raise ValueError(f"unknown refit step {target}.{action}")

    def enter_phase(self, phase: str) -> None:
        """Colocated GPUs: during ``generate`` the Megatron workers are offloaded and vLLM is awake; during
        ``train`` vLLM sleeps (weights and KV cache freed) and the workers are back on the GPU.  No-ops on CPU."""
        if phase == self.phase:
            return
        groups = [g for g in (self.policy, self.critic) if g is not None]
        if phase == "train":
            self.engines.sleep()
            for group in groups:
                group.onload()
        else:
            for group in groups:
                group.offload()
            self.engines.wake_up()
        self.phase = phase

    # ------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        """One PPO step: the phases of the module docstring, top to bottom."""
        cfg = self.cfg
        self.shipper.new_step()
        batch, env_metrics = self.next_batch()  # generated with the weights of the last refit, scored and shaped
        self.keep_training_samples(batch)
        mask = batch["response_mask"]

        self.current_phase = "values" if self.critic is not None else "logprobs"
        self.enter_phase("train")
        evaluation = self.schedule.evaluate(batch)  # V (critic), logp_old and logp_ref (policy)
        batch.update(evaluation.fields())

        kl = self.kl_to_reference(batch)
        token_rewards = token_level_rewards(batch["rewards"], mask, kl=kl, kl_coef=self.kl.coef,
                                            placed=batch.get("char_credit"))
        if self.exp.reward_shaping.whiten_token_rewards:
            token_rewards = whiten_rewards(token_rewards, mask, shift_mean=False)
        advantages, returns = estimate_advantages(self.estimator, token_rewards=token_rewards, mask=mask,
                                                  values=batch.get("values"), sequence_rewards=batch["rewards"],
                                                  group_ids=batch["group_ids"])
        batch["advantages"] = advantages
        if returns is not None:
            batch["returns"] = returns

        train_policy = self.step >= cfg.policy_training_start_step
        critic_batch = self.critic_view(batch) if self.critic is not None else None
        with self.timed("training"):
            policy_steps, critic_steps = self.schedule.update(batch, critic_batch, train_policy=train_policy)
        self.count_bad_steps(policy_steps + critic_steps)
        refit_metrics = self.refit_after_update(train_policy)
        critic_steps += self.schedule.after_refit(critic_batch)  # beside generation: the critic trains now

        metrics = {"train/token_rewards_std": masked_var(token_rewards, mask).sqrt().item(), **refit_metrics}
        if kl is not None:
            metrics["train/kl_to_reference"] = masked_mean(kl, mask).item()
            if cfg.kl_target is not None:
                self.kl.update(metrics["train/kl_to_reference"], cfg.prompts_per_step * cfg.generations_per_prompt)
        metrics.update(update_metrics(policy_steps, critic_steps, has_critic=self.critic is not None,
                                      policy_updated=train_policy))
        metrics.update(evaluation.probe)  # with old_logprobs="engine", the loss compares logp_gen with itself
        metrics["train/driver_bytes"] = float(self.shipper.bytes + refit_metrics.get("train/refit_driver_bytes", 0.0))
        metrics.update(environment_metrics(env_metrics))
        metrics.update(batch_metrics(batch, advantages, returns,
                                     overlong_filter=self.exp.reward_shaping.overlong_filter))
        metrics["train/kl_coef"] = self.kl.coef
        return metrics

    def next_batch(self) -> tuple[dict, dict]:
        """This step's batch and its environment metrics: the one collected beside the critic's last update, or a
        new one."""
        if self.prefetched is None:
            with self.timed("generation"):
                self.enter_phase("generate")
                return self.collect(self.step)
        batch, env_metrics, timings, sent = self.prefetched
        self.timings.update(timings)
        self.shipper.bytes += sent  # its prompts count in the step that trains on it, as in order
        self.prefetched = self.loader_state_before_prefetch = None
        return batch, env_metrics

    def collect(self, step: int) -> tuple[dict, dict]:
        try:
            return self.collector.collect(step)
        except CollectionStopped as err:
            raise TrainingStopped(str(err)) from None

    def prefetch(self) -> None:
        """Collect the next step's batch now (while the critic trains beside generation) into :attr:`prefetched`.

        A checkpoint taken before that step keeps the loader's state from before this batch, so that a resumed run
        collects it again (same seed, same weights)."""
        self.loader_state_before_prefetch = self.loader.state_dict()
        outer, self.timings = self.timings, {}
        sent = self.shipper.bytes
        try:
            with self.timed("generation"):
                self.enter_phase("generate")
                batch, env_metrics = self.collect(self.step + 1)
            self.prefetched = (batch, env_metrics, self.timings, self.shipper.bytes - sent)
            self.shipper.bytes = sent
        finally:
            self.timings = outer

    def kl_to_reference(self, batch: dict) -> torch.Tensor | None:
        """The per-token KL to the reference ``[B, T]`` (0 off the mask), when a KL term asked for ``logp_ref``."""
        if "logp_ref" not in batch:
            return None
        return kl_penalty(batch["logp_old"], batch["logp_ref"], self.exp.policy.loss.kl_kind) * batch["response_mask"]

    def count_bad_steps(self, steps: list[dict]) -> None:
        """Stop the run after ``max_bad_steps_in_a_row`` PPO steps that each skipped an update for NaN/Inf."""
        self.bad_steps = self.bad_steps + 1 if skipped_updates(steps) else 0
        if self.bad_steps >= self.cfg.max_bad_steps_in_a_row:
            raise TrainingStopped(f"{self.bad_steps} steps in a row had NaN/Inf gradients; stopping. The last good "
                                  f"checkpoint is intact in {self.run_dir / CHECKPOINTS}")

    def refit_after_update(self, policy_updated: bool) -> dict[str, float]:
        """Hand the GPUs to generation: with the new weights when the policy was updated (its refit metrics), else
        as they were (the critic's warm-up keeps the initial weights)."""
        if not policy_updated:
            self.enter_phase("generate")
            return {}
        with self.timed("refit"):
            self.refit()
        return {"train/refit_bytes": self.refit_stats["refit_bytes"],
                "train/refit_driver_bytes": self.refit_stats["refit_driver_bytes"],
                "train/refit_host_bytes": self.refit_stats["refit_host_bytes"],
                "train/refit_buckets": self.refit_stats["refit_buckets"]}

    def critic_view(self, batch: dict) -> dict:
        """The batch as the critic reads it: itself, or with ``critic.reference_answer`` each row led by its reference
        answer and ``<eos>`` (``ppo.rollout.critic_view``; ``prefix_lengths`` says how far each row moved)."""
        if not self.exp.critic.reference_answer:
            return batch
        answers = self.tokenizer(batch["ground_truths"], add_special_tokens=False)["input_ids"]
        view = with_prefixes(batch, [ids + [self.tokenizer.eos_token_id] for ids in answers])
        view["prefix_lengths"] = torch.tensor([len(ids) + 1 for ids in answers])
        return view

    @staticmethod
    def from_critic_view(values: torch.Tensor, view: dict, batch: dict) -> torch.Tensor:
        """The critic's values on ``view`` put back on the columns of ``batch`` (undoing :meth:`critic_view`)."""
        if "prefix_lengths" not in view:
            return values
        return without_prefixes(values, view["prefix_lengths"], batch["input_ids"].shape[1])

    def old_logprobs(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, float]]:
        """``(logp_old, logp_ref, probe)``: ``logp_old`` as ``trainer.old_logprobs`` says, ``logp_ref`` under the
        reference when a KL term needs it (else None).

        From the engine, the policy still recomputes every ``MISMATCH_PROBE_EVERY``-th sample: their disagreement
        is the probe's ``train/token_mult_prob_error``, which would otherwise be 1 by construction and miss a broken
        refit.  (Recomputed, the loss measures it over the whole batch, and the probe is empty.)"""
        temperature = self.exp.generation.sampling.temperature
        probe = {}
        if self.cfg.old_logprobs == "engine":
            logp_old = batch["logp_gen"].clone()
            # the probe's rows of what the two logprobs need (the workers are sent its tokens only)
            rows = select({k: batch[k] for k in ("input_ids", "segment_ids", "logp_gen", "response_mask")},
                          range(0, batch["input_ids"].shape[0], MISMATCH_PROBE_EVERY))
            tokens = {k: rows[k] for k in ("input_ids", "segment_ids")}
            recomputed = self.policy.logprobs(tokens, temperature=temperature)
            probe["train/token_mult_prob_error"] = masked_mean(torch.exp((rows["logp_gen"] - recomputed).abs()),
                                                               rows["response_mask"]).item()
        else:
            logp_old = self.policy.logprobs(batch, temperature=temperature)
        logp_ref = None
        if self.cfg.kl_in_reward_coef > 0 or self.exp.policy.loss.kl_coef > 0:
            logp_ref = self.policy.logprobs(batch, temperature=temperature, reference=True)
        return logp_old, logp_ref, probe

    def validate(self) -> dict[str, float]:
        """The held-out problems (:func:`ppo.rollout.evaluate.evaluate`): greedy ``validation/accuracy`` and
        ``avg_length`` (and per ``metadata["group"]``), with ``trainer.val_samples`` = K also ``avg@K`` and
        ``pass@k``; every answer is kept for the step's samples file."""
        self.enter_phase("generate")
        prompts = self.template.encode_many(self.val_records, self.tokenizer)
        metrics, rows = evaluate(self.engines.generate, self.env, self.val_records, prompts,
                                 self.exp.generation.sampling, samples=self.cfg.val_samples,
                                 seed=derive_seed(self.exp.seed, "validation_sampling", self.step))
        self.sample_rows += [{"split": "validation", **row} for row in rows]
        return metrics

    def keep_training_samples(self, batch: dict) -> None:
        """``trainer.train_sample_fraction`` of the batch's samples, as text, for the step's samples file."""
        for i in every_nth(len(batch["responses"]), self.cfg.train_sample_fraction):
            response = batch["responses"][i]
            self.sample_rows.append({
                "split": "train", "record_id": batch["record_ids"][i], "group": int(batch["group_ids"][i]),
                "prompt": self.prompt_of.get(batch["record_ids"][i]), "response": response,
                "answer": extract_answer(response), "ground_truth": batch["ground_truths"][i],
                "reward": float(batch["scores"][i]), "shaped_reward": float(batch["rewards"][i]),
                "truncated": bool(batch["truncated"][i])})

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """The step's metrics (``metrics.jsonl``, wandb) and its kept samples (``samples/step_N.jsonl``; at a
        validated step its first validation answers as a wandb table)."""
        self.metrics.log(step, metrics)
        self.wandb.log(step, metrics)
        write_samples(self.run_dir, step, self.sample_rows)
        validation = [row for row in self.sample_rows if row["split"] == "validation"]
        if validation:
            # validated steps only, the first rows: wandb's background process spends seconds on a table of
            # hundreds of rows, ~10 % of the default's steps on 2 cores (bench/step_profile.py); the file has them all
            self.wandb.log_samples(step, validation[:WANDB_SAMPLE_ROWS])
        self.sample_rows = []

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_dir(self, step: int) -> Path:
        return checkpoint_dir(self.run_dir, step)

    def resume_point(self) -> Path | None:
        """Where this run continues from: per ``trainer.resume``, the latest complete checkpoint, a given one, or
        none."""
        if self.cfg.resume == "never":
            return None
        if self.cfg.resume == "auto":
            return self.latest_checkpoint()
        return self.latest_checkpoint() or Path(self.cfg.resume)

    def latest_checkpoint(self) -> Path | None:
        complete = complete_checkpoints(self.run_dir)
        return complete[max(complete)] if complete else None

    def save(self, metric: float | None = None) -> None:
        """Write the step's checkpoint into ``<dir>.partial`` and rename it when complete (never a torn one)."""
        self.enter_phase("train")  # the workers' weights must be on their device to be saved
        final = self.checkpoint_dir(self.step)
        partial = final.with_name(final.name + PARTIAL)
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        self.policy.save(str(partial / "policy"))
        if self.critic is not None:
            self.critic.save(str(partial / "critic"))
        loader = self.loader.state_dict() if self.prefetched is None else self.loader_state_before_prefetch
        state = {"step": self.step, "loader": loader, "kl": self.kl.state_dict(),
                 "bad_steps": self.bad_steps, "metric": metric}
        (partial / "trainer_state.json").write_text(json.dumps(state))
        partial.rename(final)
        self.prune_checkpoints()

    def prune_checkpoints(self) -> None:
        """Keep the latest ``keep_checkpoints`` and the best ``keep_best`` (by ``best_metric``); delete the rest."""
        cfg = self.cfg
        complete = list(complete_checkpoints(self.run_dir).values())
        keep = set(complete[-cfg.keep_checkpoints:])
        if cfg.keep_best:
            scored = [(json.loads((p / "trainer_state.json").read_text()).get("metric"), p) for p in complete]
            scored = [(v, p) for v, p in scored if v is not None and math.isfinite(v)]
            scored.sort(key=lambda vp: vp[0], reverse=cfg.best_mode == "max")
            keep |= {p for _, p in scored[: cfg.keep_best]}
        for old in complete:
            if old not in keep:
                shutil.rmtree(old, ignore_errors=True)

    def load(self, path: Path) -> None:
        state = json.loads((path / "trainer_state.json").read_text())
        self.policy.load(str(path / "policy"))
        if self.critic is not None:
            self.critic.load(str(path / "critic"))
        self.loader.load_state_dict(state["loader"])
        self.kl.load_state_dict(state["kl"])
        self.bad_steps = state["bad_steps"]
        self.step = state["step"]
        print(f"[ppo] resumed from {path} (step {self.step})", flush=True)

    # ------------------------------------------------------------------ the loop
    def run(self, should_stop: Callable[[], bool] | None = None) -> str:
        """Train to ``max_steps``; returns ``"completed"``, or ``"stopped"`` when ``should_stop()`` turned true (checked
        at step boundaries: the step finishes and is checkpointed first).  The launcher turns a stop into a requeue."""
        cfg = self.cfg
        should_stop = should_stop or (lambda: False)
        self.setup()
        try:
            if self.step == 0:
                with self.timed("validation"):
                    validation = self.validate()
                validation.update(self.timings)
                validation.update(self.setup_timings)
                validation.update(self.warm_start_metrics)
                self.log(0, validation)
                print(f"[ppo] step 0: validation accuracy {validation['validation/accuracy']:.3f}", flush=True)
            while self.step < cfg.max_steps:
                started = time.perf_counter()
                self.timings = {}
                try:
                    metrics = self.train_step()
                except WorkerTimeout as err:
                    latest = self.latest_checkpoint()
                    raise TrainingStopped(f"step {self.step + 1}, {self.current_phase}: {err}; "
                                          f"the last complete checkpoint is {latest or 'none (no step was saved)'}"
                                          ) from None
                self.step += 1
                if self.step % cfg.val_period == 0 or self.step == cfg.max_steps:
                    with self.timed("validation"):
                        metrics.update(self.validate())
                metrics.update(self.timings)
                metrics["timing/train/total_step_time"] = time.perf_counter() - started
                tokens = metrics["train/mean_gen_tokens_per_sample"] * cfg.prompts_per_step * cfg.generations_per_prompt
                metrics["timing/train/tokens_per_s"] = tokens / metrics["timing/train/total_step_time"]
                self.log(self.step, metrics)
                self.report(metrics)
                stop = should_stop()
                if stop or self.step % cfg.checkpoint_period == 0 or self.step == cfg.max_steps:
                    self.save(metrics.get(cfg.best_metric))
                if stop and self.step < cfg.max_steps:
                    print(f"[ppo] stopped after step {self.step}; checkpoint {self.checkpoint_dir(self.step)} is "
                          f"complete", flush=True)
                    return "stopped"
            if cfg.export_hf:
                self.export_hf()
        finally:
            self.close()
        return "completed"

    def export_hf(self) -> None:
        """``<run_dir>/export/policy`` and ``/critic``: the trained models as HF directories (through the driver:
        meant for models that fit in its memory), e.g. for another run's ``critic.model_path``."""

        self.enter_phase("train")
        for name, group in (("policy", self.policy), ("critic", self.critic)):
            if group is not None:
                out = write_hf_export(group.export(), self.model_path, self.run_dir / EXPORT / name)
                print(f"[ppo] exported the {name} to {out}", flush=True)

    def report(self, m: dict[str, float]) -> None:
        parts = [f"step {self.step}/{self.cfg.max_steps}", f"reward {m['train/reward']:.3f}"]
        if "validation/accuracy" in m:
            parts.append(f"val acc {m['validation/accuracy']:.3f}")
        if "train/kl_to_reference" in m:
            parts.append(f"kl {m['train/kl_to_reference']:.4f}")
        if "train/critic/explained_var" in m:
            parts.append(f"ev {m['train/critic/explained_var']:+.3f}")
        if "train/probs_ratio_clamped_max" in m:
            parts.append(f"clip {m.get('train/clipfrac', 0.0):.3f}")
        parts.append(f"{m['timing/train/total_step_time']:.1f} s/step")
        self.step_times.append(m["timing/train/total_step_time"])
        recent = self.step_times[-20:]
        eta = sum(recent) / len(recent) * (self.cfg.max_steps - self.step)
        parts.append(f"eta {int(eta // 60)}:{int(eta % 60):02d}")
        print("[ppo] " + " | ".join(parts), flush=True)

    def close(self) -> None:
        """Close the logs and the math workers, end this run's actors and placement, and stop Ray if this run
        started it (a driver that joined a runtime, such as a test's, leaves it running).  Safe after a setup that
        failed part way: only what exists is closed."""
        if self.metrics is not None:
            self.metrics.close()
            self.wandb.close()
        if self.env is not None:
            self.env.close()
        if not ray.is_initialized():
            return
        if self.owns_ray:
            ray.shutdown()
            return
        for workers in (self.policy, self.critic, self.engines):
            if workers is not None:
                workers.kill()
        if self.placement is not None:
            self.placement.release()
