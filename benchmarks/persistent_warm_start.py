"""Warm start on a persistent resource vs cold start: the same CustomJob, submitted through the REST API.

The job is `python -c CODE MARKER`: CODE imports its libraries (torch for the heavy job, nothing for the
light one), then writes `time.time()` to MARKER, the moment the training code could take its first step.
Cold: the job on no resource (the supervisor execs a fresh interpreter, which imports torch). Warm: the job
with `jobSpec.persistentResourceId` naming a RUNNING resource created with the label
`trainworks-preload=torch`, whose pre-started interpreter already holds torch; the replica is forked from it.
Trials alternate cold and warm, one at a time, in one server.

Reported per configuration (medians over the trials):
* submit -> ready: from just before `POST customJobs` to the time in MARKER (the figure that matters);
* submit -> RUNNING: the job's startTime - createTime (server-side: admission and launch only);
* submit -> SUCCEEDED: until the API reports the end.
Target: warm is >= 10x faster than cold for submit -> ready with the heavy job.

    python benchmarks/persistent_warm_start.py [--trials 5] [--no-light] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/persistent_warm_start.py
    import common  # type: ignore[no-redef]

from trainworks.kernel.wire import parse_timestamp

RESOURCE_ID = "bench-warm"
CODE = {
    "heavy": "import sys, time, torch\nopen(sys.argv[1], 'w').write(repr(time.time()))",
    "light": "import sys, time\nopen(sys.argv[1], 'w').write(repr(time.time()))",
}


def wait_op(client: httpx.Client, op: dict[str, Any], timeout: float = 300.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = client.get(f"/ui/{op['name']}").json()
        if current.get("done"):
            if "error" in current:
                raise RuntimeError(f"operation failed: {current['error']}")
            return current  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{op['name']} did not finish")
        time.sleep(0.02)


def trial(client: httpx.Client, folder: Path, kind: str, warm: bool) -> dict[str, Any]:
    marker = folder / f"{kind}-{'warm' if warm else 'cold'}-{time.monotonic_ns()}"
    body = common.custom_job(common.container_pool([sys.executable, "-c", CODE[kind]], args=[str(marker)]))
    if warm:
        body["jobSpec"]["persistentResourceId"] = RESOURCE_ID
    t0 = time.time()
    response = client.post(f"/v1/{common.PARENT}/customJobs", json=body)
    response.raise_for_status()
    done = common.wait_job(client, response.json()["name"], interval=0.005)
    t_end = time.time()
    if done["state"] != "JOB_STATE_SUCCEEDED":
        raise RuntimeError(f"the job did not succeed: {done.get('error')}")
    ready = float(marker.read_text())
    started = parse_timestamp(done["startTime"]) - parse_timestamp(done["createTime"])
    return {
        "kind": kind,
        "warm": warm,
        "submit_to_ready_s": ready - t0,
        "submit_to_running_s": started.total_seconds(),
        "submit_to_succeeded_s": t_end - t0,
    }


def run(trials: int, kinds: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"trials": trials, "machine": common.machine(), "configs": []}
    with common.Server() as server, httpx.Client(base_url=server.url, timeout=60.0) as client:
        t0 = time.monotonic()
        op = client.post(
            f"/v1/{common.PARENT}/persistentResources",
            params={"persistentResourceId": RESOURCE_ID},
            json={
                "displayName": "warm",
                "labels": {"trainworks-preload": "torch"},
                "resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}],
            },
        )
        op.raise_for_status()
        wait_op(client, op.json())
        out["provisioning_s"] = time.monotonic() - t0
        try:
            # The replicas write their markers here: a folder bound into them (they have /tmp of their own).
            folder = server.scratch_dir("warm-")
            for kind in kinds:
                trial(client, folder, kind, warm=True)  # first use: nothing to learn, keeps it fair
                trial(client, folder, kind, warm=False)
                results: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
                for _ in range(trials):
                    for warm in (False, True):
                        results[warm].append(trial(client, folder, kind, warm))
                out["configs"].append(summarize(kind, results))
        finally:
            deletion = client.delete(f"/v1/{common.PARENT}/persistentResources/{RESOURCE_ID}")
            if deletion.status_code == 200:
                wait_op(client, deletion.json())
    return out


def summarize(kind: str, results: dict[bool, list[dict[str, Any]]]) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": kind}
    for metric in ("submit_to_ready_s", "submit_to_running_s", "submit_to_succeeded_s"):
        cold = statistics.median(r[metric] for r in results[False])
        warm = statistics.median(r[metric] for r in results[True])
        row[metric] = {"cold": cold, "warm": warm, "ratio": cold / warm if warm > 0 else float("inf")}
    row["raw"] = {"cold": results[False], "warm": results[True]}
    return row


def report(data: dict[str, Any]) -> str:
    def ms(value: float) -> str:
        return f"{value * 1000:.0f} ms"

    rows = []
    for config in data["configs"]:
        for metric, label in (
            ("submit_to_ready_s", "submit → code ready"),
            ("submit_to_running_s", "submit → RUNNING"),
            ("submit_to_succeeded_s", "submit → SUCCEEDED"),
        ):
            m = config[metric]
            rows.append([config["kind"], label, ms(m["cold"]), ms(m["warm"]), f"{m['ratio']:.1f}×"])
    machine = data["machine"]
    head = (
        f"Persistent resource warm start, median of {data['trials']} trials each "
        f"(Python {machine['python']}, {machine['cpus']} CPUs, load {machine['loadavg_1m']:.2f}); "
        f"provisioning the resource (importing torch once): {ms(data['provisioning_s'])}\n\n"
    )
    return head + common.markdown_table(["job", "measure", "cold", "warm", "cold / warm"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--no-light", action="store_true", help="only the job that imports torch")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    kinds = ["heavy"] if args.no_light else ["heavy", "light"]
    data = run(args.trials, kinds)
    if args.json:
        print(common.dump_json(data))
    else:
        print(report(data))


if __name__ == "__main__":
    main()
