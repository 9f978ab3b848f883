"""A throwaway 2-node SLURM cluster on loopback, from Debian's packages, for the ``cluster`` tests.

It installs nothing (``.ci/slurm-setup.sh`` does: ``slurmctld slurmd slurm-client munge slurmdbd mariadb-server``) and
touches nothing outside a fresh state directory: its own munged socket, a MariaDB data directory bound to
127.0.0.1, slurmdbd, slurmctld, and two slurmd posing as nodes ``n1``/``n2`` on ports 17001/17002.  Every daemon
runs in the foreground as a child of this process, has a pidfile in the state directory, and is stopped by that
PID (SIGTERM, then SIGKILL), never by name.  Clients find the cluster through ``SLURM_CONF`` (see :attr:`env`).

Runbook::

    python tests/launch/slurm_cluster.py          # start, print the env to export, stop on Enter
    SLURM_CONF=/tmp/ppo-slurm-XXXX/slurm.conf sinfo

Facts this relies on (SLURM 22.05): ``proctrack/pgid`` (``linuxproc`` leaks what a job leaves behind), one
``slurmd -N nX`` per fake node with ``%n`` in its spool/pid/log paths, and accounting through slurmdbd because
submitit polls ``sacct``.  Job ids restart at 1 with every fresh state directory, so give each cluster its own
submitit folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db", "mariadb", "sbatch", "sacct")
NODE_PORTS = {"n1": 17001, "n2": 17002}
GPUS_PER_NODE = 2
"""Logical GPUs per node: allocated by SLURM, declared to Ray, backed by no device."""
CLUSTER_NAME = "ppotest"
PARTITION = "debug"


def missing_reason() -> str | None:
    """Why the cluster cannot start here (a reason for ``pytest.skip``), or None."""
    missing = [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]
    if missing:
        return f"SLURM test cluster unavailable: {', '.join(missing)} not installed (run .ci/slurm-setup.sh)"
    if os.geteuid() != 0:
        return "SLURM test cluster unavailable: the daemons must be started as root"
    busy = [str(p) for p in NODE_PORTS.values() if not _port_free(p)]
    if busy:
        return f"SLURM test cluster unavailable: port(s) {', '.join(busy)} in use (another test cluster running?)"
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """Distinct ports free on every interface: slurmctld and slurmdbd listen on all of them, and the Ray nodes of
    earlier tests hold ports on other loopback addresses (127.0.0.2, ...) that a probe on 127.0.0.1 alone misses."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _exe(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmCluster:
    """Start with :meth:`start` (or ``with SlurmCluster() as c:``), stop with :meth:`stop`."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="ppo-slurm-"))
        self.host = socket.gethostname().split(".")[0]
        self.ctld_port, self.dbd_port, self.db_port = _free_ports(3)
        self._procs: dict[str, subprocess.Popen] = {}

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment for clients (sbatch, sacct, submitit, launch.py) to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 90.0, attempts: int = 2) -> None:
        """Start every daemon and wait for both nodes to be idle.

        A daemon that dies while starting fails the attempt with the end of its output in the message (a port taken
        between probe and bind is the usual cause); the next attempt starts afresh in a new state directory on new
        ports.  The last attempt's directory is kept when it fails.
        """
        failed_roots = []
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(time.monotonic() + timeout)
                for root in failed_roots:
                    shutil.rmtree(root, ignore_errors=True)
                return
            except (RuntimeError, TimeoutError, subprocess.SubprocessError) as e:
                self.stop(keep_state=True)
                if attempt == attempts:
                    raise
                print(f"SLURM test cluster: attempt {attempt} failed, starting afresh: {e}", file=sys.stderr)
                failed_roots.append(self.root)
                self.root = Path(tempfile.mkdtemp(prefix="ppo-slurm-"))
                self.ctld_port, self.dbd_port, self.db_port = _free_ports(3)
            except BaseException:
                self.stop(keep_state=True)
                raise

    def _start_once(self, deadline: float) -> None:
        self._write_configs()
        r = self.root
        self._spawn("munged", [_exe("munged"), "-F", "--force", f"--socket={r / 'munge.socket'}",
                               f"--pid-file={r / 'munged.self.pid'}", f"--log-file={r / 'log' / 'munged.log'}",
                               f"--seed-file={r / 'munged.seed'}", "--key-file=/etc/munge/munge.key"])
        self._wait(lambda: (self.root / "munge.socket").exists(), deadline, "munged socket")
        self._start_mariadb(deadline)
        self._spawn("slurmdbd", [_exe("slurmdbd"), "-D"], env={"SLURM_CONF": str(self.conf)})
        self._wait(lambda: not _port_free(self.dbd_port), deadline, "slurmdbd port")
        self._spawn("slurmctld", [_exe("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self._run("scontrol", "ping").returncode == 0, deadline, "slurmctld ping")
        for node in NODE_PORTS:
            self._spawn(f"slurmd-{node}", [_exe("slurmd"), "-D", "-N", node, "-f", str(self.conf)])
        self._wait(self._nodes_idle, deadline, "both nodes idle")

    def _write_configs(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in ("ctld", "spool", "mysql", "log"):
            (self.root / sub).mkdir(exist_ok=True)
        r = self.root
        auth = f"AuthInfo=socket={r / 'munge.socket'}"
        nodes = "\n".join(
            f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={p} CPUs=2 RealMemory=2000 "
            f"Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
            for n, p in NODE_PORTS.items())
        # logical GPUs: SLURM allocates them (--gpus-per-node) and needs a file per GPU (it drops file-less GPUs);
        # empty files stand in for device nodes.  The job's Ray nodes declare the same count; workers run on CPU.
        gpu_files = []
        for i in range(GPUS_PER_NODE):
            gpu_files.append(self.root / f"fake-gpu{i}")
            gpu_files[-1].touch()
        (self.root / "gres.conf").write_text("".join(
            f"NodeName={n} Name=gpu File={','.join(map(str, gpu_files))}\n" for n in NODE_PORTS))
        self.conf.write_text(f"""\
ClusterName={CLUSTER_NAME}
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
{auth}
StateSaveLocation={r / 'ctld'}
SlurmdSpoolDir={r / 'spool'}/%n
SlurmctldPidFile={r / 'slurmctld.pid'}
SlurmdPidFile={r / 'slurmd-%n.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd-%n.log'}
ProctrackType=proctrack/pgid
TaskPlugin=task/none
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.dbd_port}
AccountingStoragePass={r / 'munge.socket'}
InactiveLimit=0
KillWait=5
MinJobAge=600
Waittime=0
SlurmdTimeout=30
{nodes}
PartitionName={PARTITION} Nodes={','.join(NODE_PORTS)} Default=YES MaxTime=INFINITE State=UP
""")
        dbd = r / "slurmdbd.conf"
        dbd.write_text(f"""\
{auth}
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.dbd_port}
SlurmUser=root
PidFile={r / 'slurmdbd.pid'}
LogFile={r / 'log' / 'slurmdbd.log'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=slurm
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)
        # slurmdbd reads slurmdbd.conf next to the slurm.conf it is given through SLURM_CONF.

    def _start_mariadb(self, deadline: float) -> None:
        data = self.root / "mysql"
        subprocess.run([_exe("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        self._spawn("mariadbd", [_exe("mariadbd"), "--no-defaults", f"--datadir={data}", "--user=root",
                                 "--bind-address=127.0.0.1", f"--port={self.db_port}",
                                 f"--socket={self.root / 'mysql.sock'}",
                                 f"--pid-file={self.root / 'mariadbd.self.pid'}",
                                 "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                                 f"--log-error={self.root / 'log' / 'mariadbd.log'}"])
        self._wait(lambda: not _port_free(self.db_port), deadline, "mariadb port")
        sql = ("CREATE USER 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; "
               "CREATE DATABASE slurm_acct_db;")
        subprocess.run([_exe("mariadb"), "--no-defaults", f"--socket={self.root / 'mysql.sock'}", "-uroot",
                        "-e", sql], check=True, capture_output=True, timeout=30)

    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **(env or {})})
        log.close()
        self._procs[name] = proc
        (self.root / f"{name}.pid").write_text(f"{proc.pid}\n")

    def _run(self, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env})

    def _nodes_idle(self) -> bool:
        out = self._run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split()
        states = dict(zip(out[::2], out[1::2]))
        return all(states.get(n) == "idle" for n in NODE_PORTS)

    def _wait(self, ready, deadline: float, what: str) -> None:
        while True:
            dead = [n for n, p in self._procs.items() if p.poll() is not None]
            if dead:
                tails = "\n".join(self._daemon_output(name) for name in dead)
                raise RuntimeError(f"SLURM test cluster: {', '.join(dead)} exited while waiting for {what}; "
                                   f"logs in {self.root / 'log'}\n{tails}")
            try:
                if ready():
                    return
            except (subprocess.SubprocessError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"SLURM test cluster: timed out waiting for {what}; logs in {self.root / 'log'}")
            time.sleep(0.3)

    def stop(self, keep_state: bool = False) -> None:
        """Cancel every job and let its steps end, then stop the daemons in reverse start order by PID.

        A ``slurmstepd`` that outlives its slurmd keeps retrying forever, so steps still alive after the grace
        period are killed by PID, found through the sockets they hold in this cluster's spool directory.
        """
        if "slurmctld" in self._procs and self._procs["slurmctld"].poll() is None:
            try:
                self._run("scancel", "--full", "--user", "root", timeout=10)
                self._wait_jobs_gone(15)
            except (subprocess.SubprocessError, OSError, RuntimeError):
                pass
        end = time.monotonic() + 15
        while self._stepd_pids() and time.monotonic() < end:
            time.sleep(0.3)
        for pid in self._stepd_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in reversed(list(self._procs)):
            _stop_pid(self._procs[name])
            (self.root / f"{name}.pid").unlink(missing_ok=True)
        self._procs.clear()
        if not keep_state:
            shutil.rmtree(self.root, ignore_errors=True)

    def _stepd_pids(self) -> set[int]:
        """PIDs of the slurmstepd processes of this cluster: holders of the step sockets in its spool directory."""
        spool = str(self.root / "spool")
        inodes = set()
        try:
            for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) >= 8 and fields[7].startswith(spool):
                    inodes.add(fields[6])
        except OSError:
            return set()
        pids = set()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or not inodes:
                continue
            try:
                for fd in (proc / "fd").iterdir():
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        pids.add(int(proc.name))
                        break
            except OSError:
                continue
        pids.discard(os.getpid())
        pids -= {p.pid for p in self._procs.values()}
        return pids

    def _wait_jobs_gone(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self._run("squeue", "-h", timeout=5).stdout.strip():
            time.sleep(0.5)

    def _daemon_output(self, name: str, lines: int = 15) -> str:
        """The end of what the daemon ``name`` printed (its foreground output holds the fatal error)."""
        path = self.root / "log" / f"{name}.out"
        text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else ["(no output)"]
        return f"== {path.name}\n" + "\n".join(text)

    def log_tail(self, lines: int = 30) -> str:
        """The end of every daemon log, for a failing test's message."""
        out = []
        for f in sorted((self.root / "log").glob("*")):
            text = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"== {f.name}\n" + "\n".join(text))
        return "\n".join(out)


def slurm(cluster, *argv: str) -> str:
    """Run a SLURM client command (``squeue``, ``scancel``, ``scontrol``) against ``cluster``; its stdout."""
    import os

    return subprocess.run(list(argv), env={**os.environ, **cluster.env}, capture_output=True, text=True,
                          check=True, timeout=30).stdout


def _stop_pid(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


if __name__ == "__main__":
    reason = missing_reason()
    if reason:
        sys.exit(reason)
    with SlurmCluster() as cluster:
        print(f"export SLURM_CONF={cluster.conf}")
        input("cluster up; press Enter to stop it\n")
