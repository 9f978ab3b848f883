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

With ``trainer.max_staleness`` = k >= 1 the engines collect step t+k's batch while step t's critic and policy train
(:mod:`ppo.loop.off_policy`): only the first step waits for its batch, the refit follows the update (and the end
of the collection), and the loss corrects from the engine's policy to the proximal one.

State lives here (counters, loader, KL coefficient) and in the workers (models, optimizers).  Steps 1-5 are
:mod:`ppo.rollout.collect`, 6-9 read top to bottom in :meth:`PPOTrainer.train_step` with the critic's schedule
(:mod:`ppo.loop.schedules`), the math is in ``ppo.algorithms`` and the step's metrics in :mod:`ppo.loop.step_metrics`.
Starting the workers is :mod:`ppo.loop.start` (and :mod:`ppo.loop.warm_start`), checkpoints
:mod:`ppo.loop.checkpoints`, the step's records :mod:`ppo.loop.records`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import ray
import torch
from transformers import AutoTokenizer

from ppo.algorithms.advantages import estimate_advantages
from ppo.algorithms.kl import KLController, kl_penalty
from ppo.algorithms.masked import masked_mean, masked_var
from ppo.algorithms.rewards import token_level_rewards, whiten_rewards
from ppo.cluster.deadline import WorkerTimeout
from ppo.cluster.ray_runtime import connect_or_start
from ppo.data import PromptLoader
from ppo.data.batch import Batch
from ppo.envs.math_env import MathEnvironment
from ppo.loop import checkpoints
from ppo.loop.batches import StepBatches
from ppo.loop.clock import StepClock
from ppo.loop.forward import CriticView, LogprobSource
from ppo.loop.gpu_turns import OwnDevices
from ppo.loop.off_policy import CollectAhead, off_policy_metrics, with_behaviour_correction
from ppo.loop.records import StepRecords
from ppo.loop.schedules import Epochs, critic_schedule
from ppo.loop.settings import PPOSettings
from ppo.loop.start import RunWorkers, start_workers
from ppo.loop.step_metrics import batch_metrics, environment_metrics, skipped_updates, update_metrics
from ppo.loop.warm_start import warm_start_batches
from ppo.models.export import write_hf_export
from ppo.rollout.collect import CollectionStopped, Collector
from ppo.rollout.validation import validate
from ppo.seeds import derive_seed

EXPORT = "export"


class TrainingStopped(RuntimeError):
    pass


class PPOTrainer:
    """Runs an experiment's PPO loop in ``run_dir``; resumes from the latest complete checkpoint there."""

    def __init__(self, experiment, run_dir: Path):
        self.exp = experiment = with_behaviour_correction(experiment)  # the decoupled loss when off-policy
        self.cfg: PPOSettings = experiment.trainer  # the experiment's ``trainer`` settings
        self.run_dir = Path(run_dir)
        # counters and the loop's own state (a checkpoint keeps step, loader, kl and bad_steps)
        self.step = 0
        self.bad_steps = 0
        self.kl = KLController(self.cfg.kl_in_reward_coef, target=self.cfg.kl_target)
        self.estimator = experiment.advantage
        self.loader: PromptLoader | None = None
        self.clock = StepClock()  # this step's phase and timings
        self.setup_timings: dict[str, float] = {}  # logged with step 0: where the time before the first step went
        # the workers and what drives them, made by setup()
        self.owns_ray = False
        self.env: MathEnvironment | None = None
        self.records: StepRecords | None = None
        self.workers: RunWorkers | None = None
        self.policy = self.critic = self.engines = self.shipper = None
        self.batches: StepBatches | None = None  # each step's batch: collected now, beside the critic or ahead
        self.schedule = None  # how the critic's work interleaves with the policy's (ppo.loop.schedules)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        exp, cfg = self.exp, self.cfg
        started = self.clock.origin = time.perf_counter()  # the phases' _start/_end count from here
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
        self.env = MathEnvironment(num_workers=cfg.math_workers, reward=exp.reward)
        print(f"[ppo] run dir {self.run_dir}", flush=True)
        workers_started = time.perf_counter()
        self.start_workers()
        self.setup_timings["timing/setup/workers"] = (time.perf_counter() - workers_started
                                                      - self.setup_timings.get("timing/setup/warm_start", 0.0))
        self.records = StepRecords(self.run_dir, cfg, prompt_of={r.id: r.prompt for r in self.train_records})
        self.setup_timings["timing/setup/total"] = time.perf_counter() - started

    def start_workers(self) -> None:
        """The workers (:func:`ppo.loop.start.start_workers`), the collector and the critic's schedule; the
        checkpoint this run resumes from, if any; the first refit."""
        exp, cfg = self.exp, self.cfg
        resume = checkpoints.resume_point(self.run_dir, cfg.resume)
        self.workers = workers = start_workers(
            exp, self.model_path, self.run_dir, resumes=resume is not None,
            warm_start_batches=lambda: warm_start_batches(cfg, self.train_records, self.template, self.tokenizer))
        self.setup_timings.update({k: v for k, v in workers.warm_start.items() if k.startswith("timing/")})
        self.policy, self.critic, self.engines, self.shipper = (workers.policy, workers.critic, workers.engines,
                                                                workers.shipper)
        self.critic_view = CriticView(self.tokenizer, reference_answer=exp.critic.reference_answer)
        # off-policy, logp_old is the proximal policy's: the policy's own pass before its update
        logprobs = LogprobSource("policy" if cfg.max_staleness else cfg.old_logprobs,
                                 exp.generation.sampling.temperature,
                                 reference=cfg.kl_in_reward_coef > 0 or exp.policy.loss.kl_coef > 0)
        self.schedule = critic_schedule(
            self.policy, self.critic, self.clock,
            beside_generation=workers.critic_beside_generation and not cfg.max_staleness,  # all of it is, off-policy
            overlap=cfg.overlap_critic, epochs=Epochs.of(cfg, exp.seed), logprobs=logprobs,
            critic_view=self.critic_view, critic_threads=exp.critic.num_threads_beside_generation)
        ahead = None
        if cfg.max_staleness:  # the engines generate while the groups train: no hand-over, only refits
            workers.gpus = OwnDevices(self.policy, self.critic, self.engines, holder="train")
            clock = StepClock(origin=self.clock.origin)  # the collecting thread's own
            ahead = CollectAhead(self.collector_timed_by(clock).collect, clock, self.engines)
        self.batches = StepBatches(self.collector_timed_by(self.clock), self.loader, self.clock, self.shipper,
                                   workers.gpus, ahead=ahead, max_staleness=cfg.max_staleness,
                                   max_steps=cfg.max_steps)
        if resume is not None:
            self.load(resume)
        workers.gpus.refit(workers.refitter)

    def collector_timed_by(self, clock: StepClock) -> Collector:
        """A collector of this run's batches that times its parts into ``clock``."""
        exp = self.exp
        return Collector(engines=self.engines, env=self.env, loader=self.loader, template=self.template,
                         tokenizer=self.tokenizer, settings=self.cfg, sampling=exp.generation.sampling,
                         reward_shaping=exp.reward_shaping, seed=exp.seed, timed_part=clock.timed_part)

    # ------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        """One PPO step: the phases of the module docstring, top to bottom."""
        cfg = self.cfg
        self.shipper.new_step()
        batch, env_metrics = self.batches.next(self.step)  # generated with the weights of a refit, scored, shaped
        self.records.keep_training_samples(batch)
        self.batches.start_ahead(self.step)  # trainer.max_staleness >= 1: generated while this step trains
        mask = batch.response_mask

        self.clock.phase = "values" if self.critic is not None else "logprobs"
        self.workers.gpus.hand_to("train")
        forward = self.schedule.forward(batch)  # V (critic), logp_old and logp_ref (policy)
        batch.update(forward.fields())

        kl = self.kl_to_reference(batch)
        token_rewards = token_level_rewards(batch.rewards, mask, kl=kl, kl_coef=self.kl.coef,
                                            placed=batch.get("char_credit"))
        if self.exp.reward_shaping.whiten_token_rewards:
            token_rewards = whiten_rewards(token_rewards, mask, shift_mean=False)
        advantages, returns = estimate_advantages(self.estimator, token_rewards=token_rewards, mask=mask,
                                                  values=batch.get("values"), sequence_rewards=batch.rewards,
                                                  group_ids=batch.group_ids)
        batch.advantages = advantages
        if returns is not None:
            batch.returns = returns

        train_policy = self.step >= cfg.policy_training_start_step
        critic_batch = self.critic_view.of(batch) if self.critic is not None else None
        with self.clock.timed("training"):
            policy_steps, critic_steps = self.schedule.update(batch, critic_batch, step=self.step,
                                                              train_policy=train_policy)
        self.count_bad_steps(policy_steps + critic_steps)
        self.batches.wait_for_ahead()  # the engines end their wave before the refit
        refit_metrics = self.refit_after_update(train_policy)
        critic_epochs = self.schedule.start_after_refit(critic_batch, step=self.step)  # beside generation only
        if critic_epochs.running and self.step + 1 < cfg.max_steps:
            self.batches.prefetch(self.step + 1)  # the next step's batch, collected while the critic trains
        critic_steps += critic_epochs.finish()

        metrics = {"train/token_rewards_std": masked_var(token_rewards, mask).sqrt().item(), **refit_metrics}
        if kl is not None:
            metrics["train/kl_to_reference"] = masked_mean(kl, mask).item()
            if cfg.kl_target is not None:
                self.kl.update(metrics["train/kl_to_reference"], cfg.prompts_per_step * cfg.generations_per_prompt)
        metrics.update(update_metrics(policy_steps, critic_steps, has_critic=self.critic is not None,
                                      policy_updated=train_policy))
        metrics.update(forward.probe)  # with old_logprobs="engine", the loss compares logp_gen with itself
        metrics["train/driver_bytes"] = float(self.shipper.bytes + refit_metrics.get("train/refit_driver_bytes", 0.0))
        metrics.update(environment_metrics(env_metrics))
        metrics.update(batch_metrics(batch, advantages, returns,
                                     overlong_filter=self.exp.reward_shaping.overlong_filter))
        metrics["train/kl_coef"] = self.kl.coef
        if cfg.max_staleness:
            metrics.update(off_policy_metrics(batch, self.step))
        return metrics

    def kl_to_reference(self, batch: Batch) -> torch.Tensor | None:
        """The per-token KL to the reference ``[B, T]`` (0 off the mask), when a KL term asked for ``logp_ref``."""
        if not batch.has("logp_ref"):
            return None
        return kl_penalty(batch.logp_old, batch.logp_ref, self.exp.policy.loss.kl_kind) * batch.response_mask

    def count_bad_steps(self, steps: list[dict]) -> None:
        """Stop the run after ``max_bad_steps_in_a_row`` PPO steps that each skipped an update for NaN/Inf."""
        self.bad_steps = self.bad_steps + 1 if skipped_updates(steps) else 0
        if self.bad_steps >= self.cfg.max_bad_steps_in_a_row:
            raise TrainingStopped(f"{self.bad_steps} steps in a row had NaN/Inf gradients; stopping. The last good "
                                  f"checkpoint is intact in {self.run_dir / checkpoints.CHECKPOINTS}")

    def refit_after_update(self, policy_updated: bool) -> dict[str, float]:
        """Hand the GPUs to generation: with the new weights when the policy was updated (its refit metrics), else
        as they were (the critic's warm-up keeps the initial weights)."""
        if not policy_updated:
            self.workers.gpus.hand_to("generate")
            return {}
        with self.clock.timed("refit"):
            stats = self.workers.gpus.refit(self.workers.refitter)
        return {f"train/{name}": stats[name]
                for name in ("refit_bytes", "refit_driver_bytes", "refit_host_bytes", "refit_buckets")}

    def validation(self) -> dict[str, float]:
        """The held-out problems (:func:`ppo.rollout.validation.validate`): greedy ``validation/accuracy`` and
        ``avg_length`` (and per ``metadata["group"]``), with ``trainer.val_samples`` = K also ``avg@K`` and
        ``pass@k``; every answer is kept for the step's samples file."""
        self.workers.gpus.hand_to("generate")
        prompts = self.template.encode_many(self.val_records, self.tokenizer)
        metrics, rows = validate(self.engines.generate, self.env, self.val_records, prompts,
                                 self.exp.generation.sampling, samples=self.cfg.val_samples,
                                 seed=derive_seed(self.exp.seed, "validation_sampling", self.step))
        self.records.keep_validation_samples(rows)
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def save(self, metric: float | None = None) -> None:
        """The step's checkpoint (:func:`ppo.loop.checkpoints.save_checkpoint`), then the pruning of old ones."""
        self.workers.gpus.hand_to("train")  # the workers' weights must be on their device to be saved
        loader, in_flight = self.batches.checkpoint_state()
        state = {"step": self.step, "loader": loader, "kl": self.kl.state_dict(),
                 "bad_steps": self.bad_steps, "metric": metric}
        checkpoints.save_checkpoint(self.run_dir, self.step, self.policy, self.critic, state,
                                    extra=self.batches.save_in_flight(in_flight))
        checkpoints.prune_checkpoints(self.run_dir, keep_latest=self.cfg.keep_checkpoints,
                                      keep_best=self.cfg.keep_best, best_mode=self.cfg.best_mode)

    def load(self, path: Path) -> None:
        state = checkpoints.load_checkpoint(path, self.policy, self.critic)
        self.loader.load_state_dict(state["loader"])
        self.kl.load_state_dict(state["kl"])
        self.bad_steps = state["bad_steps"]
        self.step = state["step"]
        self.batches.resume(path, self.step)
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
                self.log_starting_validation()
            while self.step < cfg.max_steps:
                started = time.perf_counter()
                self.clock.timings = {}
                try:
                    metrics = self.train_step()
                except CollectionStopped as err:
                    raise TrainingStopped(str(err)) from None
                except WorkerTimeout as err:
                    latest = checkpoints.latest_checkpoint(self.run_dir)
                    raise TrainingStopped(f"step {self.step + 1}, {self.clock.phase}: {err}; "
                                          f"the last complete checkpoint is {latest or 'none (no step was saved)'}"
                                          ) from None
                self.step += 1
                if self.step % cfg.val_period == 0 or self.step == cfg.max_steps:
                    with self.clock.timed("validation"):
                        metrics.update(self.validation())
                metrics.update(self.clock.timings)
                metrics["timing/train/total_step_time"] = time.perf_counter() - started
                tokens = metrics["train/mean_gen_tokens_per_sample"] * cfg.prompts_per_step * cfg.generations_per_prompt
                metrics["timing/train/tokens_per_s"] = tokens / metrics["timing/train/total_step_time"]
                self.records.log(self.step, metrics)
                self.records.report(self.step, metrics)
                stop = should_stop()
                if stop or self.step % cfg.checkpoint_period == 0 or self.step == cfg.max_steps:
                    self.save(metrics.get(cfg.best_metric))
                if stop and self.step < cfg.max_steps:
                    print(f"[ppo] stopped after step {self.step}; checkpoint "
                          f"{checkpoints.checkpoint_dir(self.run_dir, self.step)} is complete", flush=True)
                    return "stopped"
            if cfg.export_hf:
                self.export_hf()
        finally:
            self.close()
        return "completed"

    def log_starting_validation(self) -> None:
        """Step 0: the validation of the starting policy, logged with where the set-up's time went and where the
        warm start landed."""
        with self.clock.timed("validation"):
            validation = self.validation()
        validation.update(self.clock.timings)
        validation.update(self.setup_timings)
        validation.update({k: v for k, v in self.workers.warm_start.items() if not k.startswith("timing/")})
        self.records.log(0, validation)
        print(f"[ppo] step 0: validation accuracy {validation['validation/accuracy']:.3f}", flush=True)

    def export_hf(self) -> None:
        """``<run_dir>/export/policy`` and ``/critic``: the trained models as HF directories (through the driver:
        meant for models that fit in its memory), e.g. for another run's ``critic.model_path``."""
        self.workers.gpus.hand_to("train")
        for name, group in (("policy", self.policy), ("critic", self.critic)):
            if group is not None:
                out = write_hf_export(group.export(), self.model_path, self.run_dir / EXPORT / name)
                print(f"[ppo] exported the {name} to {out}", flush=True)

    def close(self) -> None:
        """Close the logs and the math workers, end this run's actors and placement, and stop Ray if this run
        started it (a driver that joined a runtime, such as a test's, leaves it running).  Safe after a setup that
        failed part way: only what exists is closed (a failed start ends its own workers)."""
        if self.batches is not None:
            self.batches.close()
        if self.records is not None:
            self.records.close()
        if self.env is not None:
            self.env.close()
        if not ray.is_initialized():
            return
        if self.owns_ray:
            ray.shutdown()
            return
        if self.workers is not None:
            self.workers.kill()
