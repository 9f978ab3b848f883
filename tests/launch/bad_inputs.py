"""Bad command lines and the one line ``launch.py`` answers each with (exit status 2).

The table in the README comes from here::

    .venv/bin/python -m tests.launch.bad_inputs        # prints the Markdown table

Inputs run in a scratch directory holding ``exp.py`` (a copy of ``recipes/toy.py``), ``gpu.py`` (a copy of
``experiments/math_1b.py``), the broken files below, and the model folders and checkpoints of
:mod:`tests.launch.model_folders` (``models/``, ``ckpt/``).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tempfile
from pathlib import Path
from unittest import mock

BROKEN_FILES = {
    "notes.txt": "not python\n",
    "syntax_error.py": "def config(:\n    pass\n",
    "import_error.py": "import fiddle as fdl\nimport not_a_module_anywhere\n",
    "no_config.py": "X = 1\n",
    "config_raises.py": "def config():\n    parts = {}\n    return parts['policy']\n",
    "config_returns_dict.py": "def config():\n    return {'lr': 1e-6}\n",
    "sweep.py": "SWEEP = {'base': 'experiments/tiny_cpu.py'}\n",
    "bad_nightly.py": ("NIGHTLY = {'step': 40, 'checks': ['data[\"train/reward\"][\"40\"] >']}\n"
                       "def config():\n    pass\n"),
    "not_an_experiment.py": "import fiddle as fdl\ndef config():\n    return fdl.Config(dict, lr=1e-6)\n",
    "missing_required.py": ("import fiddle as fdl\nfrom exp import ToyExperiment, Optimizer, Data, Parallel\n"
                            "def config():\n    return fdl.Config(ToyExperiment, optimizer=fdl.Config(Optimizer), "
                            "data=fdl.Config(Data), parallel=fdl.Config(Parallel))\n"),
    "unserializable.py": ("import fiddle as fdl\nfrom exp import config as base\n"
                          "def config():\n    cfg = base()\n    cfg.data.path = lambda: 'x'\n    return cfg\n"),
}

CASES: list[tuple[str, str]] = [
    ("", "no experiment file given (usage: python launch.py FILE [path=value ...])"),
    ("nosuch.py", "no such experiment file: nosuch.py"),
    ("notes.txt", "notes.txt is not a Python file (an experiment is a .py file with def config())"),
    ("syntax_error.py", "syntax_error.py:1: importing the file raised SyntaxError: invalid syntax"),
    ("import_error.py",
     "import_error.py:2: importing the file raised ModuleNotFoundError: No module named 'not_a_module_anywhere'"),
    ("no_config.py",
     "no_config.py defines no config() function (an experiment file returns its graph from def config() -> "
     "fdl.Config)"),
    ("config_raises.py", "config_raises.py:3: config() raised KeyError: 'policy'"),
    ("config_returns_dict.py", "config_returns_dict.py: config() returned dict, expected an fdl.Config"),
    ("sweep.py", "sweep.py: SWEEP must be ppo.sweep.Sweep(...), got dict"),
    ("bad_nightly.py", "bad_nightly.py: NIGHTLY['checks'][0]: not a valid expression: invalid syntax"),
    ("not_an_experiment.py",
     "not_an_experiment.py: config() builds a dict, which lacks name, executor, seed, check, resource_plan, run "
     "(an experiment needs name, executor, seed, check, resource_plan, run)"),
    ("missing_required.py",
     "config path 'name' is required but unset; set it in config() or on the command line (name=...)"),
    ("unserializable.py",
     "config path 'data.path' cannot be saved as JSON ('function' object has no attribute '<locals>'); use plain "
     "values (str instead of pathlib.Path, module-level functions instead of lambdas)"),
    ("exp.py optimzer.lr=1e-6", "unknown config path 'optimzer.lr'; did you mean 'optimizer.lr'?"),
    ("exp.py optimizer.lrr=1e-6",
     "Optimizer takes no argument 'lrr' (config path 'optimizer.lrr'); did you mean 'optimizer.lr'?"),
    ("exp.py lr=1e-6",
     "ToyExperiment takes no argument 'lr' (config path 'lr'); it takes: name, optimizer, data, parallel, "
     "executor, seed, steps, mode, max_length, checks, gpus, expect_nodes"),
    ("exp.py optimizer.lr=fast", "config path 'optimizer.lr' takes a number (now 2e-05), got 'fast'"),
    ("exp.py steps=2.5", "config path 'steps' takes an int (now 3), got 2.5"),
    ("exp.py optimizer.lr", "expected path=value, got 'optimizer.lr' (e.g. policy.optimizer.lr=5e-7)"),
    ("exp.py checks.5=x", "index 5 out of range for config path 'checks' (2 items)"),
    ("exp.py optimizer.clip_grad=[1,",
     "cannot parse value '[1,' for 'optimizer.clip_grad': not a Python literal (quote strings: "
     "optimizer.clip_grad=\"'text'\")"),
    ("exp.py seed=none",
     "ambiguous value 'none' for 'seed': write None, or quote it as a string: seed=\"'none'\""),
    ("exp.py optimizer=adam",
     "config path 'optimizer' holds Config[Optimizer]; an override can set it to None but not to 'adam': swap "
     "components with a fiddler (--fiddler NAME)"),
    ("exp.py optimizer=big_lr",
     "optimizer cannot be set to a component from the command line; big_lr is a fiddler of exp.py: use --fiddler "
     "big_lr"),
    ("exp.py tag:Sed=1", "unknown tag 'Sed'; did you mean 'tag:Seed'?"),
    ("exp.py tag:Nope=1", "unknown tag 'Nope' (tags in this config: MaxSequenceLength, Seed)"),
    ("exp.py --fiddler big_lrr", "exp.py has no fiddler 'big_lrr'; did you mean 'big_lr'?"),
    ("exp.py --executor cloud",
     "argument --executor: invalid choice: 'cloud' (choose from 'local', 'slurm', 'debug') (usage: python launch.py "
     "--help)"),
    ("exp.py --bogus", "unrecognized arguments: --bogus (usage: python launch.py --help)"),
    ("exp.py steps=0", "steps must be >= 1, got 0 (set steps=...)"),
    ("exp.py optimizer.lr=-1", "optimizer.lr must be > 0, got -1.0"),
    ("exp.py tag:MaxSequenceLength=0",
     "building config path 'data' (Data) failed: ValueError: max_length must be > 0, got 0"),
    ("exp.py --executor slurm executor.nodes=0", "executor.nodes must be >= 1, got 0"),
    ("exp.py --executor slurm executor.ray_auth_mode=off",
     "executor.ray_auth_mode must be 'token' or 'disabled', got 'off'"),
    ("exp.py --run-dir taken",
     "run directory taken already exists and is not empty; choose another --run-dir (a stopped local run resumes "
     "with: python -m ppo.launch.job taken)"),
    ("exp.py --executor slurm  # in a dirty checkout",
     "the git tree at <checkout> has uncommitted changes; commit them or pass --allow-dirty (the diff is saved in "
     "the run directory)"),
    ("exp.py --executor slurm --allow-dirty  # not on a terminal",
     "submitting 1 node(s) x 8 GPU(s) for 240 min to SLURM needs confirmation: pass --yes"),
    ("gpu.py model.path=models/empty --dry-run",
     "model.path: models/empty is empty (an HF checkpoint folder holds config.json, safetensors weights and a "
     "tokenizer)"),
    ("gpu.py model.path=models/cut_config --dry-run",
     "model.path: models/cut_config/config.json does not parse as JSON (Expecting ',' delimiter: line 1 column 41 "
     "(char 40))"),
    ("gpu.py model.path=models/no_weights --dry-run",
     "model.path: models/no_weights has no weights: no model.safetensors nor model.safetensors.index.json"),
    ("gpu.py model.path=models/mistral --dry-run",
     "model.path: models/mistral/config.json: model_type 'mistral' is not supported; supported: qwen2, qwen3, llama"),
    ("gpu.py model.path=models/missing_tensor --dry-run",
     "model.path: models/missing_tensor: no model.layers.1.mlp.down_proj.weight in model.safetensors, which "
     "config.json (qwen2, 2 layers) needs"),
    ("gpu.py model.path=models/wrong_shape --dry-run",
     "model.path: models/wrong_shape/model.safetensors: model.layers.0.mlp.gate_proj.weight has shape [128, 64], "
     "config.json gives [96, 64]"),
    ("gpu.py model.path=models/fp8 --dry-run",
     "model.path: models/fp8/model.safetensors: model.embed_tokens.weight is F8_E4M3, not a dtype the workers load "
     "(F32, BF16, F16)"),
    ("gpu.py model.path=models/torn_weights --dry-run",
     "model.path: models/torn_weights/model.safetensors is cut off: its header places tensors up to byte 306951, "
     "the file has 153475"),
    ("gpu.py model.path=models/missing_shard --dry-run",
     "model.path: models/missing_shard/model-00002-of-00002.safetensors is missing: model.safetensors.index.json "
     "names it"),
    ("gpu.py model.path=models/bad_tokenizer --dry-run",
     "model.path: models/bad_tokenizer/tokenizer.json does not load as a tokenizer (data did not match any variant "
     "of untagged enum ModelUntagged at line 1 column 12)"),
    ("gpu.py model.path=models/no_tokenizer --dry-run",
     "model.path: models/no_tokenizer has no tokenizer (no tokenizer.json, tokenizer.model, vocab.json or "
     "tokenizer.tiktoken): the run tokenizes prompts with the model's own"),
    ("gpu.py model.path=models/good critic.model_path=models/other_critic --dry-run",
     "critic.model_path: models/other_critic/tokenizer.json is not the policy's tokenizer "
     "(models/good/tokenizer.json): 26 of its 27 tokens have another id or none, and the critic reads the policy's "
     "token ids"),
    ("gpu.py model.path=models/good critic.model_path=models/critic_no_tokenizer --dry-run",
     "critic.model_path: models/critic_no_tokenizer/config.json has vocab_size=64, the policy's 27, and no "
     "tokenizer.json shows they share a tokenizer (the critic reads the policy's token ids)"),
    ("gpu.py model.path=models/good critic.model_path=models/empty --dry-run",
     "critic.model_path: models/empty is empty (an HF checkpoint folder holds config.json, safetensors weights and "
     "a tokenizer)"),
    ("gpu.py model.path=models/good trainer.resume=ckpt/other_model --dry-run",
     "trainer.resume: ckpt/other_model/policy is a checkpoint of another model: embedding.word_embeddings.weight is "
     "[27, 32], the run's model has [27, 64]"),
    ("gpu.py model.path=models/good trainer.resume=ckpt/policy_only --dry-run",
     "trainer.resume: ckpt/policy_only holds no critic/, and the run trains one (the checkpoint is of a run without "
     "a critic)"),
    ("status", "the following arguments are required: run_dir (usage: python launch.py --help)"),
    ("status runs/nothere", "runs/nothere is not a run directory (no launch.json)"),
    ("export runs/nothere --out hf", "runs/nothere is not a run directory (no launch.json)"),
    ("export run", "the following arguments are required: --out (usage: python launch.py --help)"),
    ("export fresh --out hf",
     "fresh has no complete checkpoint (the trainer saves one every trainer.checkpoint_period steps into "
     "checkpoints/step_N)"),
    ("export run --step 5 --out hf", "run has no checkpoint of step 5 (complete: steps 1, 2)"),
    ("export run --step 3 --out hf",
     "the checkpoint of step 3 in run is torn (step_000003.partial: its save never finished); complete: steps 1, 2"),
    ("export run --critic --out hf", "run/checkpoints/step_000002 holds no critic (the run trains none)"),
    ("export run --out taken", "--out taken exists and is not empty: choose another folder, or remove it"),
    ("eval runs/nothere", "runs/nothere is not a run directory (no launch.json)"),
    ("eval run --step 3",
     "the checkpoint of step 3 in run is torn (step_000003.partial: its save never finished); complete: steps 1, 2"),
    ("eval run --samples -1", "--samples must be >= 0 (0: greedy only), got -1"),
]

if shutil.which("dot") is None:
    CASES.append(("exp.py --dry-run --graph g.svg",
                  "--graph g.svg needs Graphviz's dot program (apt-get install graphviz); or write the source with "
                  "--graph g.dot"))


def scratch_dir(root: Path) -> Path:
    """The directory the inputs run in: ``exp.py``, ``gpu.py``, the broken files, ``models/`` and ``ckpt/``, a
    non-empty ``taken/``, and the run directories ``fresh/`` (no checkpoint yet) and ``run/`` (steps 1 and 2 of a
    policy, step 3 torn)."""
    from tests.launch.model_folders import checkpoints, model_folders

    shutil.copy(Path(__file__).parent / "recipes" / "toy.py", root / "exp.py")
    shutil.copy(Path(__file__).parents[2] / "experiments" / "math_1b.py", root / "gpu.py")
    model_folders(root)
    checkpoints(root)
    for name, text in BROKEN_FILES.items():
        (root / name).write_text(text)
    (root / "taken").mkdir()
    (root / "taken" / "x").write_text("")
    for run in ("fresh", "run"):
        (root / run).mkdir()
        for record in ("launch.json", "config.json"):
            (root / run / record).write_text("{}")
    for step in ("step_000001", "step_000002", "step_000003.partial"):
        (root / "run" / "checkpoints" / step / "policy").mkdir(parents=True)
    return root


def _git_checkout(path: Path, dirty: bool) -> Path:
    path.mkdir()
    for args in (["init", "-q"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
                                  "-m", "init"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    (path / "tracked.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(path), "add", "tracked.txt"], check=True, capture_output=True)
    if not dirty:
        subprocess.run(["git", "-C", str(path), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "t"],
                       check=True, capture_output=True)
    return path


def answer(command: str, root: Path) -> tuple[int, str, str]:
    """Run one input in-process in ``root``: ``(exit status, stdout, stderr)``."""
    import os
    import shlex

    from ppo.launch import rundir, slurm
    from tests.launch.conftest import launch_script

    argv = shlex.split(command.split("  #")[0])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        cwd = os.getcwd()
        os.chdir(root)
        stack.callback(os.chdir, cwd)
        if "# in a dirty checkout" in command or "# not on a terminal" in command:
            dirty = "dirty" in command
            repo = _git_checkout(Path(tempfile.mkdtemp(dir=root)) / "checkout", dirty=dirty)
            stack.enter_context(mock.patch.object(rundir, "REPO_ROOT", repo))
            stack.enter_context(mock.patch.object(slurm.shutil, "which", lambda name: f"/usr/bin/{name}"))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        rc = launch_script().main(argv)
    message = err.getvalue()
    if "# in a dirty checkout" in command:
        message = message.replace(str(repo), "<checkout>")
    return rc, out.getvalue(), message


def markdown_table() -> str:
    rows = ["| input | message |", "|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        root = scratch_dir(Path(tmp))
        for command, _ in CASES:
            _, _, err = answer(command, root)
            cell = err.strip().replace("|", "\\|")
            rows.append(f"| `{('python launch.py ' + command).strip()}` | `{cell}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
