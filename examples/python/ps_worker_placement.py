# The seeds' placement program (README, "Specifying distributed devices in
# your model"): variables on two ps tasks, the model on worker 7, a session
# on worker 7's server. The seed is pseudocode (`tf.Variable(...)`,
# `input, labels = ...`, `train_op = ...`); the `...` are filled in below
# with a two-layer network on random data, plus the initialisation the
# seed leaves out. Run it against three servers, e.g.
#   distflow-server --cluster_spec="$SPEC" --job_name=ps --task_index=0   (and 1)
#   distflow-server --cluster_spec="$SPEC" --job_name=worker --task_index=7
# where SPEC='{"ps": ["ps0:2222", "ps1:2222"], "worker": {"7": "worker7:2222"}}' 
# with worker 7 at worker7:2222 (or change the target).
import distflow.compat.v1 as tf
import numpy as np

with tf.device("/job:ps/task:0"):
  weights_1 = tf.Variable(tf.truncated_normal([784, 100], stddev=0.05))
  biases_1 = tf.Variable(tf.zeros([100]))

with tf.device("/job:ps/task:1"):
  weights_2 = tf.Variable(tf.truncated_normal([100, 10], stddev=0.05))
  biases_2 = tf.Variable(tf.zeros([10]))

with tf.device("/job:worker/task:7"):
  rng = np.random.RandomState(0)
  input, labels = tf.constant(rng.rand(64, 784).astype(np.float32)), tf.constant(np.eye(10, dtype=np.float32)[rng.randint(0, 10, 64)])
  layer_1 = tf.nn.relu(tf.matmul(input, weights_1) + biases_1)
  logits = tf.nn.relu(tf.matmul(layer_1, weights_2) + biases_2)
  loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=labels))
  train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)

with tf.Session("grpc://worker7:2222") as sess:
  sess.run(tf.global_variables_initializer())
  print("loss before:", sess.run(loss))
  for _ in range(10000):
    sess.run(train_op)
  print("loss after:", sess.run(loss))
