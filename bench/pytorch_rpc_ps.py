#!/usr/bin/python3
"""PyTorch's parameter server over torch.distributed.rpc: the baseline of
bench/run_replicated_bench.sh, with the cluster shape of mnist_distributed.

  /usr/bin/python3 bench/pytorch_rpc_ps.py --workers 3 --steps 600 [--port P]

One ps process holds the book's CNN and an Adam(1e-3) optimizer; each worker
process, in a loop (asynchronous training, as mnist_distributed without
--sync_replicas): fetches the current parameters from the ps (rpc_sync),
computes the loss and gradients of a batch of 50 locally, and sends the
gradients to the ps, which applies them under a lock and counts a global
step. Training stops when the global step reaches --steps. Every process
runs one intra-op thread. Batches are random [0,1) images with random
labels: the work per step is the same as with Fashion-MNIST.

Prints
  pytorch-rpc-ps workers=<w> global_steps=<s> seconds=<t> examples/s=<e>
where <t> runs from the first worker's first step to the last worker's end.
Use Debian's interpreter (/usr/bin/python3, package python3-torch).
"""
import argparse
import os
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn

from pytorch_cnn import cnn  # the book's CNN, as in the single-process baseline

BATCH = 50


class ParameterServer:
    """Lives in the ps process; workers reach it through module functions."""

    def __init__(self, total_steps):
        torch.manual_seed(0)
        self.model = cnn()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.lock = threading.Lock()
        self.step = 0
        self.total = total_steps

    def params(self):
        with self.lock:
            return [p.detach().clone() for p in self.model.parameters()], self.step

    def apply(self, grads):
        with self.lock:
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g
            self.opt.step()
            self.step += 1
            return self.step


PS = None


def ps_params():
    return PS.params()


def ps_apply(grads):
    return PS.apply(grads)


def run(rank, world, steps, port, results):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8, init_method=f"tcp://127.0.0.1:{port}",
                                           _transports=["uv"], _channels=["basic"])
    global PS
    if rank == 0:
        PS = ParameterServer(steps)
        rpc.init_rpc("ps", rank=0, world_size=world, rpc_backend_options=opts)
    else:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
        model = cnn()
        loss_fn = nn.CrossEntropyLoss()
        x = torch.rand(BATCH, 784)
        y = torch.randint(0, 10, (BATCH,))
        local = 0
        start = time.time()
        while True:
            params, step = rpc.rpc_sync("ps", ps_params)
            if step >= steps:
                break
            with torch.no_grad():
                for p, v in zip(model.parameters(), params):
                    p.copy_(v)
            model.zero_grad()
            loss_fn(model(x), y).backward()
            rpc.rpc_sync("ps", ps_apply, args=([p.grad for p in model.parameters()],))
            local += 1
        results[rank] = (start, time.time(), local)
    rpc.shutdown()  # waits for every process


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--port", type=int, default=29511)
    a = p.parse_args()
    world = a.workers + 1
    with mp.Manager() as m:
        results = m.dict()
        mp.spawn(run, args=(world, a.steps, a.port, results), nprocs=world, join=True)
        starts = [r[0] for r in results.values()]
        ends = [r[1] for r in results.values()]
        local = sum(r[2] for r in results.values())
        secs = max(ends) - min(starts)
        print(f"pytorch-rpc-ps workers={a.workers} global_steps={local} seconds={secs:.2f} "
              f"examples/s={local * BATCH / secs:.1f} torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
