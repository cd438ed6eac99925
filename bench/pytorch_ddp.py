#!/usr/bin/python3
"""PyTorch DistributedDataParallel over gloo: the all-reduce baseline of
bench/run_replicated_bench.sh (config "ddp 3"), beside
`mnist_distributed --all_reduce` (config "allreduce 3").

  /usr/bin/python3 bench/pytorch_ddp.py --workers 3 --steps 600 [--port P]

The book's CNN of bench/pytorch_cnn.py, Adam(1e-3) and a batch of 50 per
process (as bench/pytorch_rpc_ps.py and mnist_distributed), on
Fashion-MNIST from Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist), pixels scaled to [0, 1]. Each of
--workers processes (one intra-op thread each) takes every workers-th
example of one shuffled order, runs --steps steps, and DDP averages the
gradients over gloo (TCP on loopback) each step. Rank 0 then measures the
accuracy on the 10,000 test images.

Prints
  pytorch-ddp workers=<w> steps=<s> examples=<e> seconds=<t> examples/s=<x> test_accuracy=<a>
where <e> counts every process's examples and <t> runs from the first
process's first step to the last one's end.
Use Debian's interpreter (/usr/bin/python3, package python3-torch).
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from pytorch_cnn import cnn  # the book's CNN, as in the other baselines

BATCH = 50
DATA = "/usr/share/datasets/fashion-mnist"


def idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(prefix):
    images = idx(f"{prefix}-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
    labels = idx(f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(images), torch.from_numpy(labels)


def run(rank, world, steps, port, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x, y = load("train")
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[rank::world]
    torch.manual_seed(0)
    model = DistributedDataParallel(cnn())  # rank 0's initial values go to every rank
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    dist.barrier()
    start = time.time()
    pos = 0
    for _ in range(steps):
        if pos + BATCH > len(order):
            pos = 0
        batch = order[pos:pos + BATCH]
        pos += BATCH
        opt.zero_grad()
        loss_fn(model(x[batch]), y[batch]).backward()  # DDP all-reduces the gradients here
        opt.step()
    end = time.time()
    accuracy = None
    if rank == 0:
        tx, ty = load("t10k")
        model.eval()
        with torch.no_grad():
            correct = sum(int((model.module(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum())
                          for i in range(0, len(tx), 1000))
        accuracy = correct / len(tx)
    results[rank] = (start, end, steps, accuracy)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--port", type=int, default=29512)
    a = p.parse_args()
    with mp.Manager() as m:
        results = m.dict()
        mp.spawn(run, args=(a.workers, a.steps, a.port, results), nprocs=a.workers, join=True)
        secs = max(r[1] for r in results.values()) - min(r[0] for r in results.values())
        examples = sum(r[2] for r in results.values()) * BATCH
        print(f"pytorch-ddp workers={a.workers} steps={a.steps} examples={examples} seconds={secs:.2f} "
              f"examples/s={examples / secs:.1f} test_accuracy={results[0][3]:.4f} torch={torch.__version__}",
              flush=True)


if __name__ == "__main__":
    main()
