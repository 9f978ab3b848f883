"""``bench/gpu_smoke.py`` runs on a GPU only when a session is lent one; its CPU mode keeps it from rotting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_smoke_passes_every_part_on_cpu():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_smoke.py"), "--device", "cpu"],
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    summary = out[out.index("gpu_smoke summary"):]
    for part in ("workers", "hf_parity", "offload", "recompute", "ipc_refit", "vllm"):
        assert f"{part:10} PASS" in summary, summary
