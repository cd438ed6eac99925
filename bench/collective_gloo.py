"""All-reduce with PyTorch's gloo over TCP, the baseline of collective_bench:
the same sizes, iterations and output line. One process per rank:
  collective_gloo.py RANK WORLD PORT SIZES_MIB ITERS WARMUP"""
import json
import sys
import time

import torch
import torch.distributed as dist

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sizes = [int(s) for s in sys.argv[4].split(",")]
iters, warmup = int(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
for mib in sizes:
    x = torch.ones(mib * 1024 * 256, dtype=torch.float32)
    for _ in range(warmup):
        y = x.clone()
        dist.all_reduce(y)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        y = x.clone()  # distflow's op leaves its input alone too
        dist.all_reduce(y)
        assert y[0].item() == world
    secs = (time.perf_counter() - start) / iters
    b = mib * 1024 * 1024
    if rank == 0:
        print(json.dumps({"impl": "gloo", "ranks": world, "mib": mib, "ms": round(secs * 1e3, 2),
                          "algbw_gbs": round(b / secs / 1e9, 3),
                          "busbw_gbs": round(b / secs / 1e9 * 2 * (world - 1) / world, 3)}), flush=True)
dist.barrier()
dist.destroy_process_group()
