"""A Horovod TF1 program (only its import is distflow's) for
test_horovod_recovery.py: softmax regression on Fashion-MNIST under
MonitoredTrainingSession with BroadcastGlobalVariablesHook(0). Every step
each rank prints its global step and the time; at the end the loss on a
fixed test batch before and after, and a checksum of every global variable.

With --hold-rank R --hold-step S --marker PATH, rank R's first process (no
file at PATH yet) creates PATH at global step S, says "holding" with its pid
and sleeps, so the test can SIGKILL it while its peers wait in a reduction;
the restarted process finds PATH and trains on."""
import argparse
import hashlib
import os
import time

import numpy as np

import distflow.compat.v1 as tf
import distflow.horovod.tensorflow as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--num-steps", type=int, default=80)
parser.add_argument("--hold-rank", type=int, default=-1)
parser.add_argument("--hold-step", type=int, default=20)
parser.add_argument("--marker", default="")
args = parser.parse_args()


class ReportHook(tf.train.SessionRunHook):
    def __init__(self, loss, feed):
        self._loss, self._feed = loss, feed

    def begin(self):
        self._variables = tf.global_variables()

    def after_create_session(self, session, coord):
        self.first = session.run(self._loss, feed_dict=self._feed)

    def end(self, session):
        last = session.run(self._loss, feed_dict=self._feed)
        digest = hashlib.sha256()
        for value in session.run(self._variables):
            digest.update(np.ascontiguousarray(value).tobytes())
        step = session.run(tf.train.get_global_step())
        print(f"rank {hvd.rank()} done at step {step}: loss {self.first:.4f} -> {last:.4f}; "
              f"variables {digest.hexdigest()[:16]}", flush=True)


def main():
    hvd.init()
    print(f"rank {hvd.rank()} started, pid {os.getpid()}", flush=True)
    (x_train, y_train), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data()
    x_train = x_train[hvd.rank()::hvd.size()].reshape(-1, 784).astype(np.float32) / 255.0
    y_train = y_train[hvd.rank()::hvd.size()].astype(np.int64)
    fixed = {"x": x_test[:500].reshape(-1, 784).astype(np.float32) / 255.0, "y": y_test[:500].astype(np.int64)}

    image = tf.placeholder(tf.float32, [None, 784], name="image")
    label = tf.placeholder(tf.int64, [None], name="label")
    logits = tf.layers.dense(image, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=label, logits=logits)
    global_step = tf.train.get_or_create_global_step()
    opt = hvd.DistributedOptimizer(tf.train.AdamOptimizer(0.002 * hvd.size()))
    train_op = opt.minimize(loss, global_step=global_step)
    hooks = [hvd.BroadcastGlobalVariablesHook(0), tf.train.StopAtStepHook(last_step=args.num_steps),
             ReportHook(loss, {image: fixed["x"], label: fixed["y"]})]
    rng = np.random.RandomState(hvd.rank())
    with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
        while not sess.should_stop():
            step = sess.run(global_step)
            if hvd.rank() == args.hold_rank and step >= args.hold_step and not os.path.exists(args.marker):
                open(args.marker, "w").close()
                print(f"rank {hvd.rank()} holding at step {step}, pid {os.getpid()}", flush=True)
                time.sleep(600)
            batch = rng.randint(0, len(x_train), 64)
            _, step = sess.run([train_op, global_step], feed_dict={image: x_train[batch], label: y_train[batch]})
            print(f"rank {hvd.rank()} step {step} at {time.time():.3f}", flush=True)


if __name__ == "__main__":
    main()
