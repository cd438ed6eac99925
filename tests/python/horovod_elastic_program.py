"""A Horovod elastic TF1 program (only its imports are distflow's) for
test_horovod_elastic.py: softmax regression on Fashion-MNIST with
hvd.elastic.run and hvd.elastic.TensorFlowState, committing every 5 steps;
each rank re-shards its data in a reset callback. Every step each rank
prints its task, rank, group size and step; at the end the loss on a fixed
test batch before and after, and a checksum of every global variable.

Test hooks (flags of this program, not Horovod's):
  --join-marker PATH  a worker started to join (DISTFLOW_JOIN) waits for PATH
                      before hvd.init(), so it joins a job already training;
  --wait-join-step S  at step S, while the group has fewer than
                      --wait-join-size ranks, the ranks keep committing
                      (each commit asks whether workers wait to join)
                      instead of training on, so the join happens at S;
  --hold-task T --hold-step H  task T, at step H in a group of
                      --wait-join-size ranks, says "holding" with its pid
                      and sleeps, so the test can SIGKILL it while the
                      others wait for it in a reduction."""
import argparse
import hashlib
import os
import sys
import time

# Abbreviations allowed (argparse's default): a joining worker's argv has no
# --join=... of the launcher's for --join-marker to take.
parser = argparse.ArgumentParser()
parser.add_argument("--num-steps", type=int, default=60)
parser.add_argument("--join-marker", default="")
parser.add_argument("--wait-join-step", type=int, default=-1)
parser.add_argument("--wait-join-size", type=int, default=3)
parser.add_argument("--hold-task", type=int, default=-1)
parser.add_argument("--hold-step", type=int, default=-1)
# A joining worker is told where to join in its environment.
joining = bool(os.environ.get("DISTFLOW_JOIN"))
args, _ = parser.parse_known_args()
if joining and any(a.startswith("--join") and not a.startswith("--join-marker") for a in sys.argv):
    sys.exit(f"a launcher flag in a joiner's argv: {sys.argv}")

if joining and args.join_marker:
    print(f"joiner {os.getpid()} waiting for the job to train", flush=True)
    while not os.path.exists(args.join_marker):
        time.sleep(0.05)

import numpy as np  # noqa: E402

import distflow.compat.v1 as tf  # noqa: E402
import distflow.horovod.tensorflow as hvd  # noqa: E402

args = parser.parse_args()  # the launcher's flags are gone now


def main():
    hvd.init()
    task = hvd.basics._state.task_index  # for the test's output only
    print(f"task {task} started as rank {hvd.rank()} of {hvd.size()}, pid {os.getpid()}", flush=True)
    try:  # a process set is a fixed list of ranks: refused in elastic mode
        hvd.add_process_set([0])
        print(f"task {task}: a process set was accepted in elastic mode", flush=True)
    except NotImplementedError as e:
        print(f"task {task}: process set refused: {e}", flush=True)
    (x_all, y_all), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data()
    x_all = x_all.reshape(-1, 784).astype(np.float32) / 255.0
    y_all = y_all.astype(np.int64)
    fixed = {"x": x_test[:500].reshape(-1, 784).astype(np.float32) / 255.0, "y": y_test[:500].astype(np.int64)}

    image = tf.placeholder(tf.float32, [None, 784], name="image")
    label = tf.placeholder(tf.int64, [None], name="label")
    logits = tf.layers.dense(image, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=label, logits=logits)
    global_step = tf.train.get_or_create_global_step()
    opt = hvd.DistributedOptimizer(tf.train.AdamOptimizer(0.004))
    train_op = opt.minimize(loss, global_step=global_step)

    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss, feed_dict={image: fixed["x"], label: fixed["y"]})
    state = hvd.elastic.TensorFlowState(session=sess, step=0)
    shard = {}

    def reshard():
        shard["x"], shard["y"] = x_all[hvd.rank()::hvd.size()], y_all[hvd.rank()::hvd.size()]
        shard["rng"] = np.random.RandomState(1000 * hvd.rank() + hvd.size())

    reshard()
    state.register_reset_callbacks([reshard])

    @hvd.elastic.run
    def train(state):
        while state.step < args.num_steps:
            if state.step == args.wait_join_step and hvd.size() < args.wait_join_size:
                if not shard.get("said"):
                    print(f"task {task}: waiting for a join at step {state.step} with {hvd.size()} ranks",
                          flush=True)
                    shard["said"] = True
                state.commit()
                time.sleep(0.05)
                continue
            if task == args.hold_task and state.step == args.hold_step and hvd.size() == args.wait_join_size:
                print(f"task {task} holding at step {state.step}, pid {os.getpid()}", flush=True)
                time.sleep(600)
            batch = shard["rng"].randint(0, len(shard["x"]), 64)
            sess.run(train_op, feed_dict={image: shard["x"][batch], label: shard["y"][batch]})
            state.step += 1
            print(f"task {task} rank {hvd.rank()} of {hvd.size()} step {state.step}", flush=True)
            if state.step % 5 == 0:
                state.commit()

    train(state)
    last = sess.run(loss, feed_dict={image: fixed["x"], label: fixed["y"]})
    digest = hashlib.sha256()
    for value in sess.run(tf.global_variables()):
        digest.update(np.ascontiguousarray(value).tobytes())
    print(f"task {task} rank {hvd.rank()} of {hvd.size()} done at step {state.step} (global step "
          f"{sess.run(global_step)}): loss {first:.4f} -> {last:.4f}; variables {digest.hexdigest()[:16]}",
          flush=True)


if __name__ == "__main__":
    main()
