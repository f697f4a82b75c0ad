"""A CLI command from start to answer: `trainworks custom-jobs list` against `gcloud ai custom-jobs list` on
the same server, and a bare Python interpreter, in the same run.

One real server on 127.0.0.1 holds a few finished custom jobs. Each trial runs, in an order that rotates from
trial to trial (drift on a shared machine hits all alike):

- bare: `python -c pass` with the interpreter the CLI runs on: what any Python command pays to start;
- trainworks: `trainworks custom-jobs list --format json` (the installed console script);
- gcloud: `gcloud ai custom-jobs list --format json`, set up by the README's "Point gcloud at Trainworks"
  recipe in a configuration folder of its own (skipped where gcloud is not installed);
- with `--compare-src DIR`, also the same trainworks command run from another source tree (an older
  commit's `src/`, put first on PYTHONPATH), to see what a change did.

Every answer is checked: both CLIs must list the same jobs. Medians and p90 over the measured trials, after
unmeasured warm-up runs; ratios against the bare interpreter and between the two CLIs. The server is stopped
by PID at the end, even on errors.

    python benchmarks/cli_start.py [--trials 15] [--warmup 2] [--jobs 5] [--compare-src DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/cli_start.py
    import common  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
GCLOUD = shutil.which("gcloud")


def gcloud_env(server: common.Server, config: Path) -> dict[str, str]:
    """gcloud's environment, configured by the README's recipe (address and project put in) in `config`."""
    env = {
        **os.environ,
        "CLOUDSDK_CONFIG": str(config),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
    }
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Point gcloud at Trainworks") :]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None, "the README's gcloud recipe has no bash block"
    address = server.url.removeprefix("http://")
    for line in block.group(1).splitlines():
        line = line.replace("127.0.0.1:8080", address).replace("my-project", common.PROJECT)
        argv = shlex.split(line, comments=True)
        if argv:
            subprocess.run([GCLOUD or "gcloud", *argv[1:]], env=env, check=True, capture_output=True)
    return env


def sides(
    server: common.Server, config: Path, compare_src: Path | None
) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    trainworks = Path(sys.executable).with_name("trainworks")
    env = {**os.environ, "TRAINWORKS_ENDPOINT": server.url, "TRAINWORKS_PROJECT": common.PROJECT}
    listing = ["custom-jobs", "list", "--region", common.LOCATION, "--format", "json"]
    found: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "bare": ([sys.executable, "-c", "pass"], None),
        "trainworks": ([str(trainworks), *listing], env),
    }
    if compare_src is not None:
        other = {**env, "PYTHONPATH": str(compare_src.resolve())}
        found["compared"] = ([sys.executable, "-m", "trainworks.cli.main", *listing], other)
    if GCLOUD is not None:
        found["gcloud"] = (
            [GCLOUD, "ai", "custom-jobs", "list", "--region", common.LOCATION, "--format", "json"],
            gcloud_env(server, config),
        )
    return found


def run(argv: list[str], env: dict[str, str] | None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, done.stdout


def listed(side: str, output: str) -> list[str]:
    if side == "bare":
        return []
    data: Any = json.loads(output)
    return sorted(str(job["name"]).rsplit("/", 1)[-1] for job in data)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=5, help="finished custom jobs on the server")
    parser.add_argument("--compare-src", type=Path, help="another source tree's src/ to time as well")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    server = common.Server()
    config = Path(tempfile.mkdtemp(prefix="trainworks-bench-gcloud-"))
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            names = []
            for i in range(args.jobs):
                body = common.custom_job(common.container_pool(["true"]), name=f"cli-{i}")
                created = client.post(f"/v1/{common.PARENT}/customJobs", json=body)
                created.raise_for_status()
                names.append(created.json()["name"])
            for name in names:
                common.wait_job(client, name)
        expected = sorted(name.rsplit("/", 1)[-1] for name in names)
        commands = sides(server, config, args.compare_src)
        order = list(commands)
        for _ in range(args.warmup):
            for side in order:
                run(*commands[side])
        times: dict[str, list[float]] = {side: [] for side in order}
        for trial in range(args.trials):
            for side in order[trial % len(order) :] + order[: trial % len(order)]:
                elapsed, output = run(*commands[side])
                if side != "bare" and listed(side, output) != expected:
                    raise RuntimeError(f"{side} listed {listed(side, output)}, expected {expected}")
                times[side].append(elapsed)
    finally:
        server.stop()
        shutil.rmtree(config, ignore_errors=True)

    stats = {side: common.summary(values) for side, values in times.items()}
    results: dict[str, Any] = {"machine": common.machine(), "jobs": args.jobs, "sides": stats}
    bare = stats["bare"]["median"]
    rows = []
    for side, what in (
        ("bare", "`python -c pass`"),
        ("trainworks", "`trainworks custom-jobs list --format json`"),
        ("compared", f"the same, from {args.compare_src}"),
        ("gcloud", "`gcloud ai custom-jobs list --format json`"),
    ):
        if side in stats:
            s = stats[side]
            rows.append((what, common.fmt(s["median"]), common.fmt(s["p90"]), f"{s['median'] / bare:.2f}x"))
    if "gcloud" in stats:
        results["trainworks_over_gcloud"] = stats["trainworks"]["median"] / stats["gcloud"]["median"]
    if args.json:
        print(common.dump_json(results))
        return 0
    print(f"## A CLI command, start to answer ({args.jobs} jobs listed, {args.trials} trials)\n")
    print(common.markdown_table(("command", "median", "p90", "vs bare interpreter"), rows))
    if "gcloud" in stats:
        print(f"\ntrainworks / gcloud: {results['trainworks_over_gcloud']:.2f}x")
    else:
        print("\ngcloud is not installed: its side was skipped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
