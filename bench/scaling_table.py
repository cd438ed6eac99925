#!/usr/bin/python3
"""Bytes per training step, parameter servers against ring all-reduce, at
8, 64 and 512 workers (issue 29's scaling table, on paper).

    PYTHONPATH=build/python bench/scaling_table.py [--link_gbps 10]

The models' variables are read from real graphs built with distflow's TF1
API: the book's CNN (tf.layers, as examples/python/mnist_distributed.py
builds it) and a BERT-base-shaped encoder of about 110M parameters (a
30,522 x 768 embedding and 12 layers of attention and feed-forward weights;
only the variables are built, since only their sizes matter here).

Per worker and step, asynchronous or synchronous ps training moves every
variable from the ps tasks and every gradient to them: M bytes each way
(M = the model's float32 bytes), whatever the number of workers. The ps
tasks carry N x M each way between them; variables are placed whole, as
replica_device_setter's greedy byte-size strategy places them, so the
busiest ps carries N x (its share), and its share is never below the
largest variable; partitioned variables (fixed_size_partitioner over
every ps) spread evenly, N x M / P on each of P ps tasks. Ring all-reduce (reduce-scatter, then all-gather) sends
and receives 2 (N - 1) / N x M per worker and has no ps. Times are the
busiest endpoint's bytes in one direction over one link of --link_gbps,
full duplex: a lower bound on the communication time of a step when
nothing overlaps.

The formulas are what the runtime sends: collective_test's
AllReduce.EachRankSendsWhatTheAlgorithmsCost asserts the ring's
2 (N - 1) / N x M per rank, and bench/profile_cluster.sh counts the ps
path's M each way per worker and step (docs/PERFORMANCE.md).
"""
import argparse
import heapq

import distflow.compat.v1 as tf


def cnn_variables():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 784])
        net = tf.reshape(x, [-1, 28, 28, 1])
        net = tf.layers.conv2d(net, 32, 5, padding="same", activation=tf.nn.relu)
        net = tf.layers.max_pooling2d(net, 2, 2)
        net = tf.layers.conv2d(net, 64, 5, padding="same", activation=tf.nn.relu)
        net = tf.layers.max_pooling2d(net, 2, 2)
        net = tf.layers.flatten(net)
        net = tf.layers.dense(net, 500, activation=tf.nn.relu)
        tf.layers.dense(net, 10)
        return sizes(tf.trainable_variables())


def bert_base_variables():
    g = tf.Graph()
    hidden, ff, layers, vocab = 768, 3072, 12, 30522
    with g.as_default():
        def var(name, shape):
            tf.get_variable(name, shape, initializer=tf.zeros_initializer())

        var("embeddings/word", [vocab, hidden])
        var("embeddings/position", [512, hidden])
        var("embeddings/type", [2, hidden])
        for i in range(layers):
            with tf.variable_scope("layer_%d" % i):
                for w in ("query", "key", "value", "output"):
                    var(w + "/kernel", [hidden, hidden])
                    var(w + "/bias", [hidden])
                var("intermediate/kernel", [hidden, ff])
                var("intermediate/bias", [ff])
                var("ffn_output/kernel", [ff, hidden])
                var("ffn_output/bias", [hidden])
                for ln in ("ln1", "ln2"):
                    var(ln + "/gamma", [hidden])
                    var(ln + "/beta", [hidden])
        var("pooler/kernel", [hidden, hidden])
        var("pooler/bias", [hidden])
        return sizes(tf.global_variables())


def sizes(variables):
    out = []
    for v in variables:
        n = 1
        for d in v.get_shape().as_list():
            n *= d
        out.append(4 * n)  # float32
    return out


def busiest_ps(var_bytes, num_ps):
    """The largest share of bytes on one ps when whole variables are placed
    greedily, largest first, on the least loaded ps."""
    loads = [0] * num_ps
    heapq.heapify(loads)
    for b in sorted(var_bytes, reverse=True):
        heapq.heapreplace(loads, loads[0] + b)
    return max(loads)


def human(b):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= scale:
            return "%.1f %s" % (b / scale, unit)
    return "%d B" % b


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--link_gbps", type=float, default=10.0, help="one link's speed, each way (default 10)")
    p.add_argument("--workers", default="8,64,512")
    args = p.parse_args()
    link = args.link_gbps * 1e9 / 8  # bytes/s

    print("| model | workers | ps tasks | ps: per worker, each way | busiest ps, whole variables | "
          "busiest ps, partitioned | ps ms/step (whole / partitioned) | ring: per worker, each way | ring ms/step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, var_bytes in (("book's CNN", cnn_variables()), ("BERT-base-shaped", bert_base_variables())):
        m = sum(var_bytes)
        print("| %s: %d variables, %s, largest %s | | | | | | | | |" %
              (name, len(var_bytes), human(m), human(max(var_bytes))))
        for n in (int(w) for w in args.workers.split(",")):
            ring = 2 * (n - 1) / n * m
            for num_ps in sorted({1, max(1, n // 8), n}):
                whole = n * busiest_ps(var_bytes, num_ps)
                even = n * m / num_ps
                print("| | %d | %d | %s | %s | %s | %.0f / %.0f | %s | %.1f |" %
                      (n, num_ps, human(m), human(whole), human(even), 1e3 * max(m, whole) / link,
                       1e3 * max(m, even) / link, human(ring), 1e3 * ring / link))


if __name__ == "__main__":
    main()
