"""Scheduling pass: the time of one `plan_admissions` pass over a queue of 1,000 to 10,000 jobs.

The inventory has exactly 1,000 machines (two regions, five zones, six machine types, CPU and accelerator
quotas), about 30% of them already held by running jobs. The queue is a seeded random mix: 20 projects, three
priorities, one or two worker pools per job, mostly small gangs with a tail of large ones, a few jobs with
attached T4s and a few for an unserved location. Each queue size is the prefix of one 10,000-job queue, so
the sizes differ only in length. Sizes are interleaved within each repetition so drift on a shared machine
hits all alike; one unmeasured warm-up pass per size runs first (catalog look-ups are cached, as in a
running controller). The baseline is the 1,000-job pass of the same run: the growth ratio 10,000 vs 1,000
jobs is 10.0 for a linear pass.

With ``--no-quotas`` the regions have no quotas, so every waiting job goes through the machine checks.

    python benchmarks/scheduling_pass.py [--sizes 1000 2000 5000 10000] [--reps 9] [--seed 1] [--no-quotas]
                                         [--json]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/scheduling_pass.py
    import common  # type: ignore[no-redef]

from trainworks.scheduling import (
    Allocation,
    Demand,
    Inventory,
    JobRequest,
    machines_needed,
    parse_inventory,
    plan_admissions,
)

MACHINES = 1000
HELD_FRACTION = 0.30
# zone -> machine type -> count; 1,000 machines in all
ZONES: dict[str, dict[str, dict[str, int]]] = {
    "us-central1": {
        "us-central1-a": {
            "n1-standard-4": 120,
            "n1-standard-8": 80,
            "a2-highgpu-1g": 40,
            "g2-standard-8": 30,
        },
        "us-central1-b": {
            "n1-standard-4": 100,
            "n1-highmem-16": 40,
            "a2-highgpu-8g": 10,
            "g2-standard-8": 30,
        },
        "us-central1-c": {"n1-standard-4": 90, "n1-standard-8": 60, "a2-highgpu-1g": 30},
    },
    "europe-west4": {
        "europe-west4-a": {
            "n1-standard-4": 110,
            "n1-standard-8": 50,
            "a2-highgpu-1g": 20,
            "g2-standard-8": 20,
        },
        "europe-west4-b": {
            "n1-standard-4": 90,
            "n1-highmem-16": 40,
            "a2-highgpu-8g": 10,
            "g2-standard-8": 30,
        },
    },
}
QUOTAS = {
    "us-central1": {
        "cpu_quota": 1200,
        "accelerator_quotas": {"NVIDIA_TESLA_A100": 64, "NVIDIA_TESLA_T4": 32},
    },
    "europe-west4": {"cpu_quota": 800, "accelerator_quotas": {"NVIDIA_TESLA_A100": 32}},
}
PROJECTS = [f"project-{i:02d}" for i in range(20)]


def build_inventory(quotas: bool = True) -> Inventory:
    regions = {
        name: {
            **(QUOTAS[name] if quotas else {}),
            "zones": {zone: {"machines": machines} for zone, machines in zones.items()},
        }
        for name, zones in ZONES.items()
    }
    inventory = parse_inventory({"regions": regions}, source="benchmark")
    total = sum(sum(z.machines.values()) for r in inventory.regions.values() for z in r.zones if z.machines)
    assert total == MACHINES, total
    return inventory


def build_holding(rng: random.Random) -> list[Allocation]:
    """Running jobs holding about 30% of the machines, within zone totals."""
    free = {
        (region, zone, t): n
        for region, zones in ZONES.items()
        for zone, ms in zones.items()
        for t, n in ms.items()
    }
    keys = sorted(free)
    holding: list[Allocation] = []
    held = 0
    while held < MACHINES * HELD_FRACTION:
        region, zone, machine = rng.choice(keys)
        count = min(free[(region, zone, machine)], rng.choice([1, 1, 2, 2, 4, 8]))
        if count == 0:
            continue
        free[(region, zone, machine)] -= count
        held += count
        job_id = 1_000_000 + len(holding)
        holding.append(Allocation(job_id, rng.choice(PROJECTS), region, zone, (Demand(machine, count),)))
    return holding


def random_demands(rng: random.Random) -> tuple[Demand, ...]:
    roll = rng.random()
    if roll < 0.45:  # one machine
        return (Demand(rng.choice(["n1-standard-4", "n1-standard-8", "g2-standard-8", "a2-highgpu-1g"]), 1),)
    if roll < 0.80:  # chief + workers of one type
        machine = rng.choice(["n1-standard-4", "n1-standard-8", "n1-highmem-16", "a2-highgpu-1g"])
        return (Demand(machine, 1), Demand(machine, rng.choice([1, 2, 3, 4, 7])))
    if roll < 0.90:  # n1 with attached T4s
        return (Demand("n1-standard-8", rng.choice([1, 2, 4]), "NVIDIA_TESLA_T4", rng.choice([1, 2])),)
    if roll < 0.97:  # a CPU chief and GPU workers
        gpu = rng.choice(["a2-highgpu-1g", "g2-standard-8"])
        return (Demand("n1-standard-4", 1), Demand(gpu, rng.choice([2, 4, 8])))
    return (Demand(rng.choice(["a2-highgpu-8g", "n1-standard-4"]), rng.choice([4, 8, 16, 32])),)  # big gangs


def build_queue(rng: random.Random, count: int) -> list[JobRequest]:
    queue = []
    for job_id in range(1, count + 1):
        location = rng.choices(["us-central1", "europe-west4", "asia-east1"], weights=[60, 39, 1])[0]
        queue.append(
            JobRequest(
                job_id=job_id,
                project=rng.choice(PROJECTS),
                location=location,
                priority=rng.choices([0, 1, 2], weights=[80, 15, 5])[0],
                order=(1_700_000_000.0 + job_id * 0.37, job_id),
                demands=random_demands(rng),
            )
        )
    return queue


REASONS = [  # (prefix, kind), most specific first
    ("waiting behind higher-priority or earlier jobs of project", "quota reserved for earlier jobs"),
    ("waiting behind higher-priority or earlier jobs", "machines reserved for earlier jobs"),
    ("waiting for quota", "quota in use"),
    ("waiting for ", "machines in use"),
    ("can never be admitted", "can never fit"),
    ("cannot be placed", "unserved location"),
    ("stock-out", "stock-out"),
]


def reason_mix(waiting: dict[int, str]) -> dict[str, int]:
    mix: dict[str, int] = {}
    for reason in waiting.values():
        kind = next((k for prefix, k in REASONS if reason.startswith(prefix)), "other")
        mix[kind] = mix.get(kind, 0) + 1
    return dict(sorted(mix.items(), key=lambda kv: -kv[1]))


def time_pass(inventory: Inventory, holding: list[Allocation], queue: list[JobRequest]) -> tuple[float, Any]:
    started = time.perf_counter()
    decision = plan_admissions(inventory, holding, queue)
    return time.perf_counter() - started, decision


def run(sizes: list[int], reps: int, seed: int, quotas: bool = True) -> dict[str, Any]:
    rng = random.Random(seed)
    inventory = build_inventory(quotas)
    holding = build_holding(rng)
    queue = build_queue(rng, max(sizes))
    held = sum(sum(machines_needed(a.demands).values()) for a in holding)
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    outcome: dict[int, tuple[int, int]] = {}
    mix: dict[str, int] = {}
    for n in sizes:  # warm-up, unmeasured
        _, decision = time_pass(inventory, holding, queue[:n])
        outcome[n] = (len(decision.admitted), len(decision.waiting))
        mix = reason_mix(dict(decision.waiting))
    for rep in range(reps):
        order = sizes if rep % 2 == 0 else list(reversed(sizes))
        for n in order:
            elapsed, decision = time_pass(inventory, holding, queue[:n])
            assert (len(decision.admitted), len(decision.waiting)) == outcome[n], (
                "the pass is not deterministic"
            )
            samples[n].append(elapsed)
    rows = []
    for n in sizes:
        stats = common.summary(samples[n])
        rows.append(
            {
                "jobs": n,
                "reps": reps,
                "median_s": stats["median"],
                "p90_s": stats["p90"],
                "min_s": stats["min"],
                "per_job_us": stats["median"] / n * 1e6,
                "admitted": outcome[n][0],
                "waiting": outcome[n][1],
            }
        )
    base = min(sizes)
    top = max(sizes)
    medians = {r["jobs"]: r["median_s"] for r in rows}
    return {
        "machines": MACHINES,
        "quotas": quotas,
        "held_machines": held,
        "reason_mix": mix,
        "allocations": len(holding),
        "rows": rows,
        "growth": {"from": base, "to": top, "ratio": medians[top] / medians[base], "jobs_ratio": top / base},
    }


def report(result: dict[str, Any], elapsed: float) -> str:
    table = common.markdown_table(
        ["jobs", "reps", "median ms", "p90 ms", "per-job µs", "admitted", "waiting"],
        [
            [
                f"{r['jobs']:,}",
                r["reps"],
                f"{r['median_s'] * 1000:.1f}",
                f"{r['p90_s'] * 1000:.1f}",
                f"{r['per_job_us']:.1f}",
                r["admitted"],
                r["waiting"],
            ]
            for r in result["rows"]
        ],
    )
    growth = result["growth"]
    top = next(r for r in result["rows"] if r["jobs"] == growth["to"])
    verdict = "meets" if top["median_s"] < 1.0 else "misses"
    return "\n".join(
        [
            f"## One scheduling pass: plan_admissions over {result['machines']:,} machines "
            f"({result['held_machines']} held by {result['allocations']} running jobs; "
            f"{'with' if result['quotas'] else 'no'} quotas)",
            "",
            table,
            "",
            f"- growth {growth['to']:,} vs {growth['from']:,} jobs: {growth['ratio']:.2f}x the time for "
            f"{growth['jobs_ratio']:.0f}x the jobs (baseline: the {growth['from']:,}-job pass of this run; "
            f"linear = {growth['jobs_ratio']:.1f}x)",
            f"- {growth['to']:,} jobs in {top['median_s'] * 1000:.0f} ms (median); {verdict} the < 1 s "
            "target",
            f"- why the {top['waiting']:,} of {growth['to']:,} queued jobs that wait do so: "
            + ", ".join(f"{kind} {n}" for kind, n in result["reason_mix"].items()),
            f"\n{elapsed:.1f}s in all; machine: {common.machine()}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    parser.add_argument("--reps", type=int, default=9, help="measured passes per size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-quotas", action="store_true", help="regions without CPU or accelerator quotas")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes))
    if not sizes or sizes[0] < 1 or args.reps < 1:
        parser.error("sizes and --reps must be positive")
    started = time.perf_counter()
    result = run(sizes, args.reps, args.seed, quotas=not args.no_quotas)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"scheduling_pass": result, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(result, elapsed))


if __name__ == "__main__":
    main()
