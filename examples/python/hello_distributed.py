# The seeds' first program (README "Quick start"), typed at a Python prompt
# after starting a one-task server:
#   distflow-server --cluster_spec='local|localhost:2222' --job_name=local --task_index=0 &
# Only the import differs from the seed (and print(), which the prompt
# supplied).
import distflow.compat.v1 as tf
c = tf.constant("Hello, distributed TensorFlow!")
sess = tf.Session("grpc://localhost:2222")
print(sess.run(c))
