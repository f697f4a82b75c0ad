"""A small real training job: linear regression with PyTorch DistributedDataParallel on the CPU.

It uses only what Vertex AI gives a replica: MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK for the process
group (gloo), CLUSTER_SPEC for its role, and AIP_MODEL_DIR / AIP_CHECKPOINT_DIR (gs:// URIs, reached through
the /gcs/<bucket>/ mount) for its outputs. Runs unchanged on Vertex AI.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def gcs_to_local(uri: str) -> Path:
    """gs://bucket/path -> /gcs/bucket/path, as Cloud Storage FUSE shows it inside the job."""
    if not uri.startswith("gs://"):
        return Path(uri)
    return Path("/gcs") / uri[len("gs://") :]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    spec = json.loads(os.environ["CLUSTER_SPEC"])
    task = f"{spec['task']['type']}-{spec['task']['index']}"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://", world_size=world, rank=rank)
    print(f"[{task}] rank {rank} of {world}", flush=True)

    # Each rank trains on its own shard of y = 3x - 2 with a little noise.
    generator = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(256, 1, generator=generator)
    y = 3.0 * x - 2.0 + 0.01 * torch.randn(256, 1, generator=generator)
    model = torch.nn.Linear(1, 1)
    torch.manual_seed(0)
    model.reset_parameters()
    ddp = DistributedDataParallel(model) if world > 1 else model
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    loss = torch.tensor(0.0)
    for epoch in range(args.epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradients across every replica here
        optimizer.step()
        if epoch % 10 == 0 or epoch == args.epochs - 1:
            print(f"[{task}] epoch {epoch} loss {loss.item():.5f}", flush=True)

    # The replicas hold identical weights after an all-reduced training run: check it explicitly.
    weight = model.weight.detach().clone()
    if world > 1:
        gathered = [torch.zeros_like(weight) for _ in range(world)]
        dist.all_gather(gathered, weight)
        assert all(torch.allclose(g, weight) for g in gathered), "replicas diverged"
    result = {
        "weight": model.weight.item(),
        "bias": model.bias.item(),
        "loss": loss.item(),
        "world_size": world,
    }
    if rank == 0 and os.environ.get("AIP_MODEL_DIR"):
        model_dir = gcs_to_local(os.environ["AIP_MODEL_DIR"])
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
        (model_dir / "result.json").write_text(json.dumps(result))
        print(f"[{task}] saved the model to {os.environ['AIP_MODEL_DIR']}", flush=True)
    print(f"[{task}] done: {json.dumps(result)}", flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
