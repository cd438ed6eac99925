# tf.estimator.train_and_evaluate as TF 1.4+ ran it on a cluster: every
# process runs this same program; TF_CONFIG (or DISTFLOW_CONFIG) says which
# task it is (ps, worker, chief or evaluator), e.g.
#   TF_CONFIG='{"cluster": {"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]},
#               "task": {"type": "worker", "index": 0}}' python3 estimator_linear.py --model_dir=/tmp/lin
# or, every task at once (the ps tasks run distflow-server), with
#   distflow-launch --ps 1 --workers 2 --evaluator -- python3 estimator_linear.py --model_dir=/tmp/lin
# The model: softmax regression on a synthetic 3-class problem whose
# classes a linear model separates. With TensorFlow 1, only the import differs.
import numpy as np

import distflow.compat.v1 as tf

tf.app.flags.DEFINE_string("model_dir", "/tmp/estimator_linear", "checkpoints and summaries (shared by the tasks)")
tf.app.flags.DEFINE_integer("max_steps", 300, "train until the global step reaches this")
# What distflow-launch appends; the task is read from DISTFLOW_CONFIG (RunConfig).
tf.app.flags.DEFINE_string("job_name", "", "ignored: RunConfig reads the task from TF_CONFIG or DISTFLOW_CONFIG")
tf.app.flags.DEFINE_integer("task_index", 0, "ignored, as --job_name")
tf.app.flags.DEFINE_string("cluster_spec", "", "ignored, as --job_name")
FLAGS = tf.app.flags.FLAGS


def make_data(n, seed):
    rng = np.random.RandomState(seed)
    centers = np.array([[3.0, 0.0], [-3.0, 2.0], [0.0, -3.0]], np.float32)
    y = rng.randint(0, 3, n).astype(np.int32)
    x = centers[y] + rng.normal(0, 1.0, (n, 2)).astype(np.float32)
    return x, y


def model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features["x"], 3, name="logits")
    classes = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes, "logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        opt = tf.train.GradientDescentOptimizer(params["learning_rate"])
        return tf.estimator.EstimatorSpec(mode, loss=loss,
                                          train_op=opt.minimize(loss, global_step=tf.train.get_global_step()))
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        "accuracy": tf.metrics.accuracy(labels=labels, predictions=classes)})


def main(_):
    x, y = make_data(2000, 1)
    x_test, y_test = make_data(500, 2)
    config = tf.estimator.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100)
    est = tf.estimator.Estimator(model_fn, model_dir=FLAGS.model_dir, config=config, params={"learning_rate": 0.1})
    train = tf.estimator.TrainSpec(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=32, num_epochs=None,
                                                                      shuffle=True), max_steps=FLAGS.max_steps)
    evaluate = tf.estimator.EvalSpec(tf.estimator.inputs.numpy_input_fn({"x": x_test}, y_test, batch_size=100,
                                                                        shuffle=False), steps=None,
                                     start_delay_secs=0, throttle_secs=1)
    result = tf.estimator.train_and_evaluate(est, train, evaluate)
    print("Task %s:%d done: %s" % (config.task_type, config.task_id, result), flush=True)


if __name__ == "__main__":
    tf.app.run()
