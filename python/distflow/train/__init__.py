"""tf.train, split as TensorFlow splits it: servers and cluster specs
(server.py), optimizers (optimizer.py), synchronous replicas
(sync_replicas.py), the Supervisor (supervisor.py), checkpoints (saver.py),
the global step (training_util.py), the hook protocol (session_run_hook.py),
the hooks TensorFlow ships (basic_session_run_hooks.py), monitored sessions
(monitored_session.py), meta graphs (meta_graph.py), learning-rate schedules (learning_rate_decay.py),
moving averages (moving_averages.py) and the Coordinator (coordinator.py)."""
from distflow.train.server import (ClusterSpec, Server, replica_device_setter,  # noqa: F401
                                   _servers_by_target, _servers_by_target_of_task)
from distflow.train.optimizer import (Optimizer, GradientDescentOptimizer, MomentumOptimizer,  # noqa: F401
                                      AdagradOptimizer, RMSPropOptimizer, AdamOptimizer, FtrlOptimizer)
from distflow.train.session_run_hook import (SessionRunArgs, SessionRunContext, SessionRunHook,  # noqa: F401
                                             SessionRunValues)
from distflow.train.sync_replicas import SyncReplicasOptimizer, _SyncReplicasHook  # noqa: F401
from distflow.train.training_util import (create_global_step, get_global_step,  # noqa: F401
                                          get_or_create_global_step)
from distflow.train.supervisor import Supervisor, _MonitoredRunner  # noqa: F401
from distflow.train.saver import Saver, latest_checkpoint  # noqa: F401
from distflow.train.basic_session_run_hooks import (FinalOpsHook, LoggingTensorHook,  # noqa: F401
                                                    NanLossDuringTrainingError, NanTensorHook, StopAtStepHook)
from distflow.train.monitored_session import (MonitoredTrainingSession, _HookedSession, Scaffold,  # noqa: F401
                                              ChiefSessionCreator, WorkerSessionCreator, MonitoredSession,
                                              SingularMonitoredSession)
from distflow.train.basic_session_run_hooks import (CheckpointSaverHook, CheckpointSaverListener,  # noqa: F401
                                                    ProfilerHook)
from distflow.train.coordinator import Coordinator, LooperThread  # noqa: F401
from distflow.train.moving_averages import ExponentialMovingAverage  # noqa: F401
from distflow.train.learning_rate_decay import (exponential_decay, natural_exp_decay,  # noqa: F401
                                                inverse_time_decay, polynomial_decay, piecewise_constant,
                                                cosine_decay)
from distflow.train.training_util import global_step, assert_global_step  # noqa: F401
from distflow.train.saver import checkpoint_exists, get_checkpoint_state  # noqa: F401
from distflow.train.meta_graph import export_meta_graph, import_meta_graph  # noqa: F401

# Queue-based input pipelines (queue_runner.py, input.py) and tf.train.Example (example.py).
from distflow.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners  # noqa: F401,E402
from distflow.train import queue_runner  # noqa: F401,E402 (tf.train.queue_runner.QueueRunner)
from distflow.train.input import (batch, batch_join, input_producer, range_input_producer,  # noqa: F401,E402
                                  shuffle_batch, shuffle_batch_join, slice_input_producer, string_input_producer)
from distflow.train.example import (BytesList, Example, Feature, FeatureList, FeatureLists,  # noqa: F401,E402
                                    Features, FloatList, Int64List, SequenceExample)
