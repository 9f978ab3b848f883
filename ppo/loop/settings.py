"""The PPO loop's settings, as experiment components: plain dataclasses, no torch.

``trainer=fdl.Config(PPOSettings, ...)`` and ``reward_shaping=fdl.Config(RewardShaping, ...)`` in an experiment
graph; :mod:`ppo.loop.trainer` (which imports torch) runs the loop they describe.
Keeping them here lets an experiment file, and ``launch.py --dry-run``, import them without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class RewardShaping:
    """DAPO reward scaling (``scale``: {0,1} → {target_min, target_max}), then overlong shaping (``overlong_buffer``:
    a penalty growing linearly over the last ``overlong_buffer`` tokens of the length budget), and overlong filtering
    (``overlong_filter``: truncated samples are masked out of the losses).  ``whiten_token_rewards`` scales the
    per-token rewards (the KL term included) to unit variance over the batch before the estimator, as TRL's
    ``whiten_rewards`` does (estimators that read per-token rewards only: GAE, Reinforce++).

    ``char_credit`` > 0 adds partial credit for the answer's right characters (``ppo.algorithms.rewards.
    answer_char_credit``): ``char_credit / len(truth)`` for each character that equals the truth's at its place,
    on that character's token, on top of the verifier's 1/0.  Estimators that read per-token rewards (GAE,
    Reinforce++) see each character's credit on its own token; the others see the sequence total.  It needs a task
    whose tokenizer writes one token per character (the arithmetic tasks)."""

    scale: bool = False
    source_min: float = 0.0
    source_max: float = 1.0
    target_min: float = -1.0
    target_max: float = 1.0
    overlong_buffer: int | None = None
    overlong_penalty: float = 1.0
    overlong_filter: bool = False
    whiten_token_rewards: bool = False
    char_credit: float = 0.0


OLD_LOGPROBS = ("policy", "engine")

MISMATCH_PROBE_EVERY = 8
"""With ``old_logprobs="engine"`` the policy recomputes every this many-th sample's logprobs, so that a refit that
fails to reach the engines still shows in ``train/token_mult_prob_error``."""


@dataclass
class PPOSettings:
    """The loop's settings; the model, engine, estimator and task are separate components of the experiment."""

    max_steps: int = 100
    prompts_per_step: int = 32
    generations_per_prompt: int = 16
    ppo_epochs: int = 4
    num_minibatches: int = 1
    # the critic's own passes and optimizer steps per pass (None: ppo_epochs, num_minibatches); a cheaper critic
    critic_epochs: int | None = None
    critic_minibatches: int | None = None
    # the critic's forward pass and updates run while the policy computes logprobs and trains (they read the same
    # batch and never each other's weights): on separate devices or CPU cores a step waits for the slower of the two
    overlap_critic: bool = False
    # the critic's updates run after the actor's, while the engines generate the next step's batch (they read
    # disjoint weights: the same numbers as in order).  CPU ranks only: on GPUs the critic is offloaded then
    critic_beside_generation: bool = False
    # where the PPO ratio's logp_old comes from.  "policy": a forward pass of the policy over the batch (needed where
    # the engine computes differently from the trainer, e.g. bf16 vLLM kernels; policy.loss.is_correction corrects
    # the rest).  "engine": the engine's own logprobs of the tokens it sampled, with the same weights (the refit is
    # synchronous); the policy then recomputes every 8th sample only, for train/token_mult_prob_error
    old_logprobs: str = "policy"
    # how many policy updates old a trained sample may be (README, "ppo.loop: who waits for whom").  0: on-policy,
    # generation and training take turns.  >= 1: the engines collect the next batch with the weights they hold while
    # the critic and the policy train (engines on devices of their own: colocated=False on GPUs); the loss weighs
    # each token by policy.loss.is_correction's weight from the engine's (behaviour) logprobs to logp_old, which the
    # policy recomputes before its update (the proximal policy) whatever old_logprobs says ("tis" when it names none)
    max_staleness: int = 0
    policy_training_start_step: int = 0
    val_period: int = 10
    val_prompts: int | None = None
    # besides the greedy answer, K sampled answers per held-out problem (at the rollouts' sampling settings):
    # validation/avg@K and unbiased validation/pass@k; 0: greedy only.  AIME's 30 problems want K = 32 (DAPO's avg@32)
    val_samples: int = 0
    # the share of each step's training samples kept as text in <run_dir>/samples/step_N.jsonl (validation keeps all)
    train_sample_fraction: float = 0.05
    checkpoint_period: int = 10
    keep_checkpoints: int = 2  # the latest k complete checkpoints are kept ...
    keep_best: int = 0  # ... plus the best k by best_metric (at checkpoint steps where it was logged)
    best_metric: str = "validation/accuracy"
    best_mode: str = "max"
    resume: str = "auto"  # "auto": the latest complete checkpoint in the run dir; "never"; or a checkpoint path
    kl_in_reward_coef: float = 0.0
    kl_target: float | None = None
    dynamic_sampling: bool = False
    max_gen_batches: int = 3
    short_batch: str = "train"  # still short after max_gen_batches: "train" on what was kept (logged), or "fail"
    max_bad_steps_in_a_row: int = 3
    worker_timeout_s: float | None = 1800.0  # a worker call (one phase of a step) that takes longer fails the run
    # start-up: ranks and engines scheduled (a placement Ray cannot satisfy waits here) and their models built
    start_timeout_s: float | None = 3600.0
    math_workers: int = 1  # processes verifying answers (SymPy), each killed and replaced when an answer hangs it
    export_hf: bool = False  # at the end, write the policy and critic as HF directories in <run_dir>/export/
    warm_start_steps: int = 0
    warm_start_batch_size: int = 128
    warm_start_lr: float = 1e-3
    # seeds the warm start's batches, a stand-in for the supervised stage that makes RL's starting checkpoint: a run's
    # `seed` varies the RL (data order, sampling, minibatches) from one starting point, as a seed sweep should
    warm_start_seed: int = 0
    # "online" (needs network and `wandb login`), "offline" (./wandb, sync later), "disabled"
    wandb_mode: str = "offline"
    wandb_project: str = "ppo"
    wandb_group: str | None = None  # e.g. the sweep id, so wandb groups a sweep's trials

    def missing_paths(self) -> list[str]:
        """``trainer.resume`` given as a path that is not a checkpoint here (checked where the run will read it)."""
        if self.resume in ("auto", "never") or (Path(self.resume) / "trainer_state.json").is_file():
            return []
        return [f"trainer.resume={self.resume!r} is neither 'auto', 'never' nor a checkpoint directory "
                "(one holding trainer_state.json)"]

    def check(self) -> None:
        for name in ("max_steps", "prompts_per_step", "generations_per_prompt", "ppo_epochs", "num_minibatches",
                     "val_period", "checkpoint_period", "keep_checkpoints", "max_bad_steps_in_a_row",
                     "max_gen_batches", "math_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_staleness < 0:
            raise ValueError(f"trainer.max_staleness must be >= 0 (0: on-policy), got {self.max_staleness}")
        if self.val_samples < 0:
            raise ValueError(f"trainer.val_samples must be >= 0 (0: greedy only), got {self.val_samples}")
        if not 0 <= self.train_sample_fraction <= 1:
            raise ValueError(f"trainer.train_sample_fraction must be in [0, 1], got {self.train_sample_fraction}")
        if self.best_mode not in ("max", "min"):
            raise ValueError(f"trainer.best_mode must be 'max' or 'min', got {self.best_mode!r}")
        if self.start_timeout_s is not None and not self.start_timeout_s > 0:
            raise ValueError(f"trainer.start_timeout_s must be > 0 (or None for no limit), got {self.start_timeout_s}")
        if self.worker_timeout_s is not None and not self.worker_timeout_s > 0:
            raise ValueError(f"trainer.worker_timeout_s must be > 0 (or None for no limit), "
                             f"got {self.worker_timeout_s}")
        if self.short_batch not in ("train", "fail"):
            raise ValueError(f"trainer.short_batch must be 'train' or 'fail', got {self.short_batch!r}")
        if self.old_logprobs not in OLD_LOGPROBS:
            raise ValueError(f"trainer.old_logprobs must be one of {', '.join(map(repr, OLD_LOGPROBS))}, "
                             f"got {self.old_logprobs!r}")
        if self.wandb_mode not in ("online", "offline", "disabled"):
            raise ValueError(f"trainer.wandb_mode must be 'online', 'offline' or 'disabled', got {self.wandb_mode!r}")
        for name in ("critic_epochs", "critic_minibatches"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"trainer.{name} must be >= 1 or None, got {getattr(self, name)}")
        for name in ("num_minibatches", "critic_minibatches"):
            if (getattr(self, name) or 0) > self.prompts_per_step * self.generations_per_prompt:
                raise ValueError(f"trainer.{name}={getattr(self, name)} exceeds the batch of "
                                 f"{self.prompts_per_step * self.generations_per_prompt} samples")
