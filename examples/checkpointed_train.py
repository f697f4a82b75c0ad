"""Training that survives preemption: checkpoints to AIP_CHECKPOINT_DIR every few steps, resumes from there.

The data of each step is derived from the step number, so a run that was stopped and resumed any number of
times ends with exactly the weights of an uninterrupted run. Runs unchanged on Vertex AI.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch


def local(uri: str) -> Path:
    """gs://bucket/path -> /gcs/bucket/path (Cloud Storage FUSE), anything else as a plain path."""
    return Path("/gcs") / uri[len("gs://") :] if uri.startswith("gs://") else Path(uri)


def replace_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write to a temporary file of this process's own, then rename it over `path`: a preemption never leaves
    half a file, and replicas sharing AIP_CHECKPOINT_DIR never write into each other's temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        tmp.chmod(0o644)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread: bit-for-bit the same arithmetic on every run

    checkpoint = local(os.environ["AIP_CHECKPOINT_DIR"]) / "state.pt"
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    if checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"resumed from step {start}", flush=True)
    else:
        print("fresh start", flush=True)
    truth = torch.tensor([[1.5], [-2.0], [0.5], [3.0]])
    for step in range(start, args.steps):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(32, 4, generator=generator)
        y = x @ truth + 0.1 + 0.01 * torch.randn(32, 1, generator=generator)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if (step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}
            replace_atomically(checkpoint, lambda tmp, s=state: torch.save(s, tmp))
            print(f"checkpoint {step + 1} loss {loss.item():.6f}", flush=True)
        time.sleep(args.step_seconds)
    result = {"weights": model.weight.flatten().tolist(), "bias": model.bias.item(), "steps": args.steps}
    model_dir = local(os.environ["AIP_MODEL_DIR"])
    replace_atomically(model_dir / "result.json", lambda tmp: tmp.write_text(json.dumps(result)))
    print(f"done {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
