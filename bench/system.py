"""The machine: tools installed from Debian's packages when missing, and its description."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path


def ensure_debian_tool(command: str, package: str | None = None) -> str:
    """The path of `command`, installing its Debian package first when it is missing."""
    found = shutil.which(command)
    if found:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"bench: {command} not found, installing it from Debian's packages", flush=True)
    install = [*sudo, "apt-get", "install", "-y", "-qq", package or command]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run([*sudo, "apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(install, env=env, capture_output=True, check=True)
    found = shutil.which(command)
    if not found:
        raise RuntimeError(f"{command} is still missing after installing {package or command}")
    return found


def machine() -> dict[str, str]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "nproc": str(os.cpu_count()),
        "ram": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "cpu": cpu,
        "python": platform.python_version(),
        "kernel": platform.release(),
    }
