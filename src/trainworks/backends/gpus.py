"""GPUs of this host: found with nvidia-smi, handed to replicas through CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.catalog import machines

DEVICES_FILE = "devices"  # in a replica's run folder: the GPU indices it was given, one line


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str


def detect_gpus() -> list[Gpu]:
    """NVIDIA GPUs visible to this server; none when nvidia-smi is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        run = subprocess.run(
            [smi, "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if run.returncode != 0:
        return []
    gpus = []
    for line in run.stdout.splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append(Gpu(int(index), name.strip()))
    return gpus


def accelerators_per_replica(pool: Mapping[str, Any]) -> tuple[str | None, int]:
    """The accelerator type and count one replica of a worker pool asks for (built-in or attached)."""
    spec = pool.get("machineSpec") or {}
    machine = machines.machine_type(spec.get("machineType", ""))
    if machine is not None and machine.accelerator_type:
        return machine.accelerator_type, machine.accelerator_count
    kind = spec.get("acceleratorType")
    count = int(spec.get("acceleratorCount", 0) or 0)
    if not kind or kind == "ACCELERATOR_TYPE_UNSPECIFIED" or count <= 0:
        return None, 0
    return kind, count


def pick(gpus: Iterable[Gpu], busy: set[int], count: int) -> list[int] | None:
    """The lowest free indices, or None when fewer than `count` are free. Pure."""
    free = [g.index for g in sorted(gpus, key=lambda g: g.index) if g.index not in busy]
    return free[:count] if len(free) >= count else None


def devices_of(run_dir: Path) -> set[int]:
    try:
        text = (run_dir / DEVICES_FILE).read_text()
    except OSError:
        return set()
    return {int(part) for part in text.split(",") if part.strip().isdigit()}


def record_devices(run_dir: Path, indices: list[int]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / DEVICES_FILE).write_text(",".join(str(i) for i in indices))
