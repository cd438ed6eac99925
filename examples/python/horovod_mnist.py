"""A Horovod TF1 training program as Horovod's users write one (argparse,
hvd.init, a shard of the data per rank, DistributedOptimizer with the
learning rate scaled by the number of ranks, BroadcastGlobalVariablesHook,
MonitoredTrainingSession); the only distflow line is the import of hvd:

    distflow-launch --ps 0 --workers 2 -- python3 examples/python/horovod_mnist.py --num-steps 400

(horovodrun -np 2 python3 ...). Each rank prints the loss on a fixed batch
of test images before and after training and a checksum of its variables;
the ranks' checksums are equal because every step applies the same
averaged gradients."""
import argparse
import hashlib

import numpy as np

import distflow.compat.v1 as tf
import distflow.horovod.tensorflow as hvd

parser = argparse.ArgumentParser(description="Horovod-style Fashion-MNIST training")
parser.add_argument("--num-steps", type=int, default=400, help="steps in all, divided among the ranks")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--learning-rate", type=float, default=0.001)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--checkpoint-dir", default=None)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="send the gradients between ranks as float16 (hvd.Compression.fp16)")
args = parser.parse_args()


class ReportHook(tf.train.SessionRunHook):
    """The loss on a fixed batch when the session starts and ends, and a
    checksum of the trainable variables at the end."""

    def __init__(self, loss, feed):
        self._loss, self._feed = loss, feed

    def begin(self):
        self._variables = tf.trainable_variables()

    def after_create_session(self, session, coord):
        self.first = session.run(self._loss, feed_dict=self._feed)

    def end(self, session):
        last = session.run(self._loss, feed_dict=self._feed)
        digest = hashlib.sha256()
        for value in session.run(self._variables):
            digest.update(np.ascontiguousarray(value).tobytes())
        print(f"rank {hvd.rank()} of {hvd.size()}: loss {self.first:.4f} -> {last:.4f}; "
              f"variables {digest.hexdigest()[:16]}", flush=True)


def main():
    hvd.init()
    (x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data(f"MNIST-data-{hvd.rank()}")
    # Each rank trains on its own shard.
    x_train = x_train[hvd.rank()::hvd.size()].reshape(-1, 784).astype(np.float32) / 255.0
    y_train = y_train[hvd.rank()::hvd.size()].astype(np.int64)
    fixed = {"x": x_test[:500].reshape(-1, 784).astype(np.float32) / 255.0, "y": y_test[:500].astype(np.int64)}

    image = tf.placeholder(tf.float32, [None, 784], name="image")
    label = tf.placeholder(tf.int64, [None], name="label")
    hidden = tf.layers.dense(image, args.hidden, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=label, logits=logits)

    global_step = tf.train.get_or_create_global_step()
    # Horovod: scale the learning rate by the number of ranks.
    opt = tf.train.AdamOptimizer(args.learning_rate * hvd.size())
    # Horovod: fp16 compression halves the bytes the all-reduce sends.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    opt = hvd.DistributedOptimizer(opt, compression=compression)
    train_op = opt.minimize(loss, global_step=global_step)

    report = ReportHook(loss, {image: fixed["x"], label: fixed["y"]})
    hooks = [
        # Horovod: rank 0's initial variables to every rank.
        hvd.BroadcastGlobalVariablesHook(0),
        tf.train.StopAtStepHook(last_step=args.num_steps // hvd.size()),
        report,
    ]
    config = tf.ConfigProto()
    config.gpu_options.allow_growth = True
    config.gpu_options.visible_device_list = str(hvd.local_rank())
    # Horovod: only rank 0 writes checkpoints.
    checkpoint_dir = args.checkpoint_dir if hvd.rank() == 0 else None
    rng = np.random.RandomState(hvd.rank())
    with tf.train.MonitoredTrainingSession(checkpoint_dir=checkpoint_dir, hooks=hooks, config=config) as mon_sess:
        while not mon_sess.should_stop():
            batch = rng.randint(0, len(x_train), args.batch_size)
            mon_sess.run(train_op, feed_dict={image: x_train[batch], label: y_train[batch]})


if __name__ == "__main__":
    main()
