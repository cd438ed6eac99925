#!/usr/bin/python3
"""The PyTorch baseline for bench/train_bench.cc: the same training step.

  /usr/bin/python3 bench/pytorch_cnn.py [--threads N] [--steps S] [--model cnn|mlp]

cnn: the book's CNN (conv 5x5x32 + ReLU SAME, max-pool 2x2, conv 5x5x64 +
ReLU, max-pool 2x2, flatten, FC 500 + ReLU, FC 10), softmax cross-entropy on
int class ids, Adam(1e-4), batch 50 of random [0,1) 28x28 images (fed as
[N,784] and reshaped, as ours). mlp: 784-256(ReLU)-10, SGD(0.1), batch 64.

Runs a few warm-up steps, then times --steps steps (wall clock) and prints
  pytorch <model> threads=<n> steps=<s> ms/step=<t>
Use Debian's interpreter (/usr/bin/python3, package python3-torch); pin it
with taskset for single-core numbers: torch's own thread setting alone has
been seen using both cores.
"""
import argparse
import time

import torch
import torch.nn as nn


def cnn():
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(7 * 7 * 64, 500), nn.ReLU(),
        nn.Linear(500, 10))


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    p.add_argument("--repeats", type=int, default=1, help="timed runs; the best is reported too")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.model == "cnn":
        model, batch = cnn(), 50
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    else:
        model, batch = mlp(), 64
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(batch, 784)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        times.append((time.perf_counter() - t0) * 1e3 / a.steps)
    times.sort()
    median = times[len(times) // 2]
    print(f"pytorch {a.model} threads={a.threads} steps={a.steps} ms/step={median:.3f} "
          f"best={times[0]:.3f} torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
