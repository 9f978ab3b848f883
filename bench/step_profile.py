"""Where a step of the embedded default goes, and how far each phase is from plain PyTorch doing the same work.

    .venv/bin/python bench/step_profile.py                         # 10 steps of experiments/tiny_cpu.py, then baselines
    .venv/bin/python bench/step_profile.py --steps 20 trainer.ppo_epochs=1   # overrides as on the launch.py line

First a real run of the default (Megatron-Core, vLLM, Ray, the math verifier's worker pool) in this process, for
``--steps`` steps; the phases are the trainer's own ``timing/train/*`` metrics (medians, the first step left out: it
pays for compilation and first-touch allocations), and the set-up is its ``timing/setup/*``.  Then, with Ray shut
down so that nothing competes for the cores, the same work in plain PyTorch and ``transformers`` on the run's own
initial model, with the same thread count as the workers:

- **generation**: ``transformers`` ``generate`` (sampling, the same prompts × samples, token logprobs kept), and the
  answers checked in this process (no worker pool, no timeout);
- **values + logprobs**: one no-grad forward of the critic and of the policy over the batch;
- **training**: the same epochs × minibatches for the critic and the policy, the project's own loss functions
  (``clipped_pg_loss``, ``value_loss``), ``torch.optim.Adam`` and ``clip_grad_norm_``;
- **validation**: greedy ``generate`` over the validation prompts, answers checked in this process.

Each ratio is the run's phase over its baseline: the overhead of the stack on that phase.  Numbers are seconds on
this machine in this run; compare ratios, not absolute times, across machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import median_seconds, wait_until_quiet  # bench/timing.py (bench/ is the first sys.path entry)

ROOT = Path(__file__).resolve().parents[1]


def run_default(run_dir: Path, steps: int, overrides: list[str]):
    """The default for ``steps`` steps in this process; returns the built experiment, its metrics (``load_metrics``)
    and its wall time."""
    import ray

    from ppo.cluster.ray_runtime import init_local_ray
    from ppo.launch.prepare import Request, prepare
    from ppo.metrics import load_metrics

    request = Request(str(ROOT / "experiments" / "tiny_cpu.py"),
                      [f"trainer.max_steps={steps}", f"trainer.checkpoint_period={steps}",
                       f"trainer.val_period={max(1, steps // 2)}", "trainer.wandb_mode=disabled", *overrides], [])
    prepared = prepare(request)
    init_local_ray()
    try:
        started = time.perf_counter()
        prepared.experiment.run(run_dir)
        wall = time.perf_counter() - started
    finally:
        ray.shutdown()
    return prepared.experiment, load_metrics(run_dir), wall


def median_of(series: dict[str, float]) -> float:
    """The median over steps 2 onwards of one metric (``load_metrics``' step -> value)."""
    values = [value for step, value in series.items() if int(step) > 1]
    return statistics.median(values) if values else 0.0


class Baseline:
    """The run's work in plain PyTorch / ``transformers``: an HF policy, an HF backbone + linear head as critic."""

    def __init__(self, experiment, run_dir: Path, threads: int):
        import torch
        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        torch.manual_seed(0)
        model_dir = run_dir / "initial_model"
        self.exp, self.cfg = experiment, experiment.trainer
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        backbone = AutoModel.from_pretrained(model_dir, dtype=torch.float32)
        self.critic = torch.nn.ModuleDict({"backbone": backbone,
                                           "head": torch.nn.Linear(backbone.config.hidden_size, 1)})
        template = experiment.task.template()
        self.train_prompts = template.encode_many(experiment.task.train_records()[: self.cfg.prompts_per_step],
                                                  self.tokenizer)
        self.val_records = experiment.task.val_records()
        self.val_prompts = template.encode_many(self.val_records, self.tokenizer)
        self.truths = [r.ground_truth for r in experiment.task.train_records()[: self.cfg.prompts_per_step]]

    def generate(self, prompts: list[list[int]], n: int, greedy: bool):
        """Left-padded ``generate``; returns (rows of prompt + response ids, response texts, token logprobs)."""
        import torch

        sampling = self.exp.generation.sampling
        pad = self.tokenizer.pad_token_id
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts])
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad():
            out = self.policy.generate(input_ids=ids, attention_mask=attention, do_sample=not greedy,
                                       temperature=None if greedy else sampling.temperature, top_k=None, top_p=None,
                                       max_new_tokens=sampling.max_new_tokens, num_return_sequences=n,
                                       eos_token_id=list(sampling.stop_token_ids), pad_token_id=pad,
                                       return_dict_in_generate=True, output_logits=True)
        responses = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float()
        logprobs = torch.log_softmax(logits, -1).gather(-1, responses[..., None])[..., 0]
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return responses, texts, logprobs

    def score(self, texts: list[str], truths: list[str]) -> list[float]:
        from ppo.envs.math_worker import init_worker, score_item

        init_worker()
        return [float(score_item(t, g)[0]) for t, g in zip(texts, truths)]

    def batch(self, responses, logprobs):
        """The sampled responses as the trainer's right-padded batch (prompt, response up to its end)."""
        import torch

        from ppo.rollout.batch import build_rollout_batch
        from ppo.rollout.settings import Sample

        n = self.cfg.generations_per_prompt
        eos = set(self.exp.generation.sampling.stop_token_ids)
        groups = []
        for i in range(len(self.train_prompts)):
            group = []
            for row, lp in zip(responses[i * n:(i + 1) * n].tolist(), logprobs[i * n:(i + 1) * n].tolist()):
                end = next((k + 1 for k, t in enumerate(row) if t in eos), len(row))
                group.append(Sample(row[:end], lp[:end], "stop"))
            groups.append(group)
        batch = build_rollout_batch(self.train_prompts, groups, pad_id=self.tokenizer.pad_token_id,
                                    ground_truths=[self.truths[i] for i in range(len(groups))])
        mask = batch.response_mask
        batch.advantages = torch.randn(mask.shape) * mask
        batch.returns = torch.randn(mask.shape) * mask
        return batch

    def logprobs(self, batch):
        import torch

        attention = batch.segment_ids.ne(0).long()
        logits = self.policy(input_ids=batch.input_ids, attention_mask=attention).logits.float()
        logp = torch.log_softmax(logits[:, :-1] / self.exp.generation.sampling.temperature, -1)
        logp = logp.gather(-1, batch.input_ids[:, 1:, None])[..., 0]
        return torch.cat([torch.zeros_like(logp[:, :1]), logp], dim=1)

    def values(self, batch):
        attention = batch.segment_ids.ne(0).long()
        hidden = self.critic["backbone"](input_ids=batch.input_ids, attention_mask=attention).last_hidden_state
        return self.critic["head"](hidden)[..., 0]

    def train(self, batch) -> None:
        """``ppo_epochs`` × (a critic epoch, then a policy epoch) of ``num_minibatches`` Adam steps each."""
        import torch

        from ppo.algorithms.critic_loss import value_loss
        from ppo.algorithms.options import PolicyLoss
        from ppo.algorithms.policy_loss import clipped_pg_loss
        from ppo.data.batch import select, trim

        loss = self.exp.policy.loss
        # the baseline's loss: the run's clip and IS correction, no dual clip, KL or NLL terms
        settings = PolicyLoss(clip_low=loss.clip_low, clip_high=loss.clip_high, is_correction=loss.is_correction,
                              is_cap=loss.is_cap)
        policy_opt = torch.optim.Adam(self.policy.parameters(), lr=self.exp.policy.optimizer.lr)
        critic_opt = torch.optim.Adam(self.critic.parameters(), lr=self.exp.critic.optimizer.lr)
        rows = batch.rows
        for epoch in range(self.cfg.ppo_epochs):
            order = torch.randperm(rows, generator=torch.Generator().manual_seed(epoch))
            for part in order.chunk(self.cfg.num_minibatches):
                mb = trim(select(batch, part))
                mask = mb.response_mask
                critic_opt.zero_grad()
                value, _ = value_loss(self.values(mb), mb.values, mb.returns, mask,
                                      clip_range=self.exp.critic.value_clip, global_valid_toks=mask.sum())
                value.backward()
                torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.exp.critic.optimizer.clip_grad)
                critic_opt.step()
            for part in order.chunk(self.cfg.num_minibatches):
                mb = trim(select(batch, part))
                mask = mb.response_mask
                policy_opt.zero_grad()
                pg, _ = clipped_pg_loss(self.logprobs(mb), mb.logp_old, mb.advantages, mask, settings,
                                        generation_logprobs=mb.logp_gen, global_valid_toks=mask.sum())
                pg.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.exp.policy.optimizer.clip_grad)
                policy_opt.step()


def measure_baselines(run_dir: Path, overrides: list[str]) -> dict[str, float]:
    """The baselines' seconds per phase, measured in this (fresh) process on ``run_dir``'s initial model."""
    import torch

    from ppo.launch.prepare import Request, prepare

    experiment = prepare(Request(str(ROOT / "experiments" / "tiny_cpu.py"), overrides, [])).experiment
    base = Baseline(experiment, run_dir, threads=experiment.policy.num_threads or torch.get_num_threads())
    n = experiment.trainer.generations_per_prompt
    responses, texts, logprobs = base.generate(base.train_prompts, n, greedy=False)
    truths = [t for t in base.truths for _ in range(n)]
    batch = base.batch(responses, logprobs)
    with torch.no_grad():
        batch.values = base.values(batch)
        batch.logp_old = base.logprobs(batch)
    baseline = {
        "generation/engines": median_seconds(lambda: base.generate(base.train_prompts, n, greedy=False), 3),
        "generation/scoring": median_seconds(lambda: base.score(texts, truths), 3),
        "values": median_seconds(lambda: torch.no_grad()(base.values)(batch), 3),
        "logprobs": median_seconds(lambda: torch.no_grad()(base.logprobs)(batch), 3),
        "training": median_seconds(lambda: base.train(batch), 1),
    }
    val_truths = [r.ground_truth for r in base.val_records]
    baseline["validation"] = median_seconds(lambda: base.score(base.generate(base.val_prompts, 1, greedy=True)[1],
                                                      val_truths), 1)
    baseline["generation"] = baseline["generation/engines"] + baseline["generation/scoring"]
    baseline["total_step_time"] = sum(baseline[k] for k in PER_STEP)
    return baseline


PER_STEP = ["generation", "values", "logprobs", "training"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--keep", help="keep the run directory here (default: a temporary one)")
    parser.add_argument("--baselines-of", help=argparse.SUPPRESS)  # internal: measure the baselines, print JSON
    parser.add_argument("overrides", nargs="*", help="launch.py-style overrides of experiments/tiny_cpu.py")
    args = parser.parse_args()
    if args.baselines_of:
        print(json.dumps(measure_baselines(Path(args.baselines_of), args.overrides)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.keep or tmp) / "run"
        print(f"[profile] {args.steps} steps of the default in {run_dir} ...", flush=True)
        _, data, wall = run_default(run_dir, args.steps, args.overrides)
        phases = {key[len("timing/train/"):]: median_of(series) for key, series in sorted(data.items())
                  if key.startswith("timing/train/") and key != "timing/train/tokens_per_s"}
        busy = wait_until_quiet()
        # a fresh process: after a run, this one's torch ran attention kernels ~100x slower (not yet understood)
        print(f"[profile] baselines in plain PyTorch / transformers, in a fresh process (CPU {busy:.0f}% busy "
              f"before) ...", flush=True)
        out = subprocess.run([sys.executable, __file__, "--baselines-of", str(run_dir), *args.overrides],
                             check=True, capture_output=True, text=True).stdout
        baseline = json.loads(out.strip().splitlines()[-1])

    print(f"\nstep phases, median s over steps 2-{args.steps} (validation: over the steps that ran it)")
    print(f"{'phase':<22}{'this stack':>12}{'plain torch':>13}{'ratio':>8}")
    # critic_beside_generation: the critic's updates while the engines generate the next batch (that generation is
    # counted under the next step's generation); the baseline does them in order, under training
    for phase in [*PER_STEP[:1], "generation/engines", "generation/scoring", *PER_STEP[1:], "refit",
                  "critic_beside_generation", "validation", "total_step_time"]:
        ours, plain = phases.get(phase), baseline.get(phase)
        cells = [f"{value:.3f}" if value is not None else "—" for value in (ours, plain)]
        ratio = f"{ours / plain:.2f}" if ours is not None and plain else ""
        print(f"{phase:<22}{cells[0]:>12}{cells[1]:>13}{ratio:>8}")  # — : not measured (older trainer, or no baseline)
    print("\nset-up, s (the run's timing/setup/*)")
    for key in sorted(k for k in data if k.startswith("timing/setup/")):
        print(f"  {key[len('timing/setup/'):]:<20}{data[key]['0']:8.1f}")
    steps_time = sum(data.get("timing/train/total_step_time", {}).values())
    print(f"  {'end to end':<20}{wall:8.1f}  ({wall - steps_time:.1f} outside the steps: set-up, step 0's "
          f"validation, checkpoints, shutdown)")


if __name__ == "__main__":
    main()
