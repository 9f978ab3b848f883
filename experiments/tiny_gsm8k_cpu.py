"""The GSM8K text path at the embedded scale: real GSM8K questions, a BPE tokenizer trained on them, a tiny model.

    python launch.py experiments/tiny_gsm8k_cpu.py                            # ~3 minutes on 2 cores
    python launch.py experiments/tiny_gsm8k_cpu.py task.train_path=/data/gsm8k/train.jsonl task.test_path=...

Exercises what the arithmetic default does not: long natural-language prompts ("Question: ...\\nAnswer:"), a
learned BPE vocabulary, GSM8K's ``#### answer`` ground truths and the math verifier on free text.  A model this
small cannot solve GSM8K, so learning is not the point; the critic's loss must stay finite and fall.  The data is
the GSM8K sample shipped in the package (``ppo/data/gsm8k_sample``, ``ppo.data.BUNDLED_GSM8K_DIR``: the first 2,000
training and 200 test problems, MIT licence), found from where ``ppo`` is installed, so a fresh clone runs it from any
working directory; a path that is missing stops a dry run or a launch with one line naming the file.  Point
``task.train_path``/``task.test_path`` at the full files for more.
"""

import fiddle as fdl

from experiments import tiny_cpu
from ppo.data.gsm8k import BUNDLED_GSM8K_DIR
from ppo.data.tasks import GSM8KTaskSpec
from ppo.rollout.settings import SamplingConfig

GSM8K = BUNDLED_GSM8K_DIR

NIGHTLY = {
    "step": 20,
    "checks": [
        'max(data["train/critic/loss"]) < 10',
        'mean(data["train/critic/loss"], -5) < mean(data["train/critic/loss"], 1, 6)',
        'max(data["train/token_mult_prob_error"]) < 1.05',
    ],
}


def config() -> fdl.Config:
    """``tiny_cpu`` with GSM8K instead of sums: a longer context, no stop token (the BPE model ends with <eos>)."""
    cfg = tiny_cpu.config()
    cfg.name = "tiny_gsm8k_cpu"
    cfg.model.num_layers = 2
    cfg.model.max_position_embeddings = 512
    cfg.task = fdl.Config(GSM8KTaskSpec, train_path=str(GSM8K / "train.jsonl"), test_path=str(GSM8K / "test.jsonl"),
                          val_size=64, tokenizer_vocab_size=1024)
    cfg.generation.max_model_len = 512
    cfg.generation.kv_cache_bytes = 64 << 20
    cfg.generation.sampling = fdl.Config(SamplingConfig, temperature=1.0, max_new_tokens=8)
    trainer = cfg.trainer
    trainer.max_steps, trainer.prompts_per_step, trainer.generations_per_prompt, trainer.num_minibatches = 20, 32, 4, 2
    trainer.ppo_epochs = 2  # its checks ask for a falling critic loss within 20 steps: two passes a step, as measured
    trainer.checkpoint_period, trainer.warm_start_steps, trainer.warm_start_batch_size = 10, 100, 32
    return cfg
