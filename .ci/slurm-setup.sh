#!/usr/bin/env bash
# Install what the `cluster` tests need: SLURM 22.05 daemons and clients, munge, slurmdbd with MariaDB (Debian 12).
# Installs only; nothing is started here — tests/launch/slurm_cluster.py starts a private 2-node cluster per test
# session and stops it by PID. Needs root (apt). Safe to run again: it does nothing when everything is installed.
set -euo pipefail
packages=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "slurm-setup: all of ${packages[*]} already installed"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "slurm-setup: installed ${missing[*]}"
