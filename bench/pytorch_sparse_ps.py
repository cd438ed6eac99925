#!/usr/bin/python3
"""PyTorch's side of the sparse-embedding benchmark (bench/run_sparse_bench.sh):
examples/python/sparse_embedding.py's model and data on a torch.distributed.rpc
parameter server.

  /usr/bin/python3 bench/pytorch_sparse_ps.py --ps 2 --workers 2 --vocab 1000000 --dim 64 --steps 400

Each ps process holds one shard of the --vocab x
--dim table (--partition_strategy as the example's: "mod", id i in shard
i % ps, by default; "div", contiguous rows) as an nn.EmbeddingBag(sparse=True) weight with torch.optim.Adagrad
(which takes its sparse gradients); ps 0 also holds the logistic layer. Each
worker, per step: draws a batch (64 bags of 8 power-law ids, the example's
generator), sends each shard only its unique ids (rpc_sync) and gets those
rows back, computes the mean of each bag (F.embedding_bag over the pulled
rows) and the logistic loss, backpropagates, and sends every shard the
gradient rows of its ids, which the ps applies as a sparse COO gradient. The
ids and rows cross the network, never the table, as in distflow. Every
process runs one intra-op thread.

Prints
  pytorch-sparse-ps ps=<p> workers=<w> global_steps=<s> seconds=<t> steps/s=<r>
with each worker's rate measured from its --measure_from-th step (after warm-up) to
its end, summed over the workers.
"""
import argparse
import os
import threading
import time

import numpy as np
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

BATCH, IDS = 64, 8


def hidden_weight(ids):
    return np.where((ids * 2654435761 % 2 ** 32) % 2 == 0, 1.0, -1.0)


class Shard:
    def __init__(self, rows, dim, with_dense):
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(rows, dim, mode="mean", sparse=True)
        nn.init.uniform_(self.bag.weight, -0.05, 0.05)
        params = list(self.bag.parameters())
        self.dense = nn.Linear(dim, 1) if with_dense else None
        if self.dense is not None:
            params += list(self.dense.parameters())
        self.opt = torch.optim.Adagrad(params, lr=0.5)
        self.lock = threading.Lock()
        self.step = 0

    def pull(self, ids):
        with self.lock:
            rows = self.bag.weight[ids].detach().clone()
            dense = [p.detach().clone() for p in self.dense.parameters()] if self.dense is not None else None
            return rows, dense, self.step

    def push(self, ids, grad_rows, dense_grads):
        with self.lock:
            w = self.bag.weight
            w.grad = torch.sparse_coo_tensor(ids.unsqueeze(0), grad_rows, w.shape) if len(ids) else None
            if self.dense is not None:
                for p, g in zip(self.dense.parameters(), dense_grads):
                    p.grad = g
            self.opt.step()
            self.step += 1
            return self.step


SHARD = None


def ps_pull(ids):
    return SHARD.pull(ids)


def ps_push(ids, grad_rows, dense_grads):
    return SHARD.push(ids, grad_rows, dense_grads)


def run(rank, a, results):
    torch.set_num_threads(1)
    world = a.ps + a.workers
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8, init_method=f"tcp://127.0.0.1:{a.port}",
                                           _transports=["uv"], _channels=["basic"])
    bounds = np.linspace(0, a.vocab, a.ps + 1).astype(np.int64)  # "div": contiguous shards
    mod = a.partition_strategy == "mod"

    def shards_of(uniq):  # each id's shard and its row there
        if mod:
            return uniq % a.ps, uniq // a.ps
        shard = np.searchsorted(bounds, uniq, side="right") - 1
        return shard, uniq - bounds[shard]

    global SHARD
    if rank < a.ps:
        rows = (a.vocab - rank + a.ps - 1) // a.ps if mod else int(bounds[rank + 1] - bounds[rank])
        SHARD = Shard(rows, a.dim, rank == 0)
        rpc.init_rpc(f"ps{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
    else:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
        rng = np.random.RandomState(1000 + rank)
        local, start, done = 0, None, False
        while not done:
            ids = np.minimum(rng.zipf(1.3, size=(BATCH, IDS)) - 1, a.vocab - 1)
            labels = torch.tensor((hidden_weight(ids).sum(axis=1) > 0).astype(np.float32)).reshape(-1, 1)
            flat = ids.reshape(-1)
            uniq, inverse = np.unique(flat, return_inverse=True)
            shard_of, row_of = shards_of(uniq)
            pulled, dense = [], None
            futs = []
            for s in range(a.ps):
                mine = row_of[shard_of == s]
                # Shard 0 always answers (it holds the dense layer and the step); others only when they own ids.
                futs.append(rpc.rpc_async(f"ps{s}", ps_pull, args=(torch.from_numpy(mine),))
                            if len(mine) or s == 0 else None)
            for s, f in enumerate(futs):
                if f is None:
                    continue
                rows, d, step = f.wait()
                pulled.append(rows)
                if s == 0:
                    dense, done = d, step >= a.steps
            rows = torch.cat(pulled).requires_grad_()
            order = np.concatenate([np.nonzero(shard_of == s)[0] for s in range(a.ps)])
            position = np.empty_like(order)
            position[order] = np.arange(len(order))
            w, b = (p.requires_grad_() for p in dense)
            bag = F.embedding_bag(torch.from_numpy(position[inverse]).reshape(BATCH, IDS), rows, mode="mean")
            loss = F.binary_cross_entropy_with_logits(bag @ w.t() + b, labels)
            loss.backward()
            futs, offset = [], 0
            for s in range(a.ps):
                n = int((shard_of == s).sum())
                mine = torch.from_numpy(row_of[shard_of == s])
                if n or s == 0:
                    futs.append(rpc.rpc_async(f"ps{s}", ps_push, args=(mine, rows.grad[offset:offset + n],
                                                                        [w.grad, b.grad] if s == 0 else None)))
                offset += n
            for f in futs:
                f.wait()
            local += 1
            if local == a.measure_from:
                start, counted = time.time(), local
        results[rank] = (start, time.time(), local - counted)
    rpc.shutdown()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1000000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--partition_strategy", choices=["mod", "div"], default="mod",
                   help="how ids map to shards, as the example's flag")
    p.add_argument("--measure_from", type=int, default=50, help="each worker's steps/s is measured from this step")
    a = p.parse_args()
    with mp.Manager() as m:
        results = m.dict()
        mp.spawn(run, args=(a, results), nprocs=a.ps + a.workers, join=True)
        rate = sum(r[2] / (r[1] - r[0]) for r in results.values())
        steps = sum(r[2] for r in results.values())
        print(f"pytorch-sparse-ps ps={a.ps} workers={a.workers} global_steps={steps} "
              f"steps/s={rate:.1f} torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
