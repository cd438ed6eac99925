"""tf.estimator.RunConfig: where a model's checkpoints go and, from the
TF_CONFIG environment variable (or DISTFLOW_CONFIG, the same JSON), which
task of which cluster this process is:

    {"cluster": {"ps": ["h:2222"], "worker": ["h:2223", "h:2224"]},
     "task": {"type": "worker", "index": 0}}

The chief is task "chief" 0 if the cluster has a chief job, else worker 0.
An "evaluator" task is not in the cluster: it evaluates checkpoints on its
own."""
import json
import os

from distflow.train import server as _server


class TaskType:
    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


def _task_config():
    for var in ("TF_CONFIG", "DISTFLOW_CONFIG"):
        raw = os.environ.get(var)
        if raw:
            try:
                return json.loads(raw), var
            except ValueError as e:
                raise ValueError(f"{var} is not valid JSON: {e}: {raw!r}") from None
    return {}, None


def _empty_cluster():
    """ClusterSpec({}), which the C++ parser refuses: a local run's cluster."""
    spec = object.__new__(_server.ClusterSpec)
    spec._jobs = {}
    return spec


class RunConfig:
    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100, save_checkpoints_steps=None,
                 save_checkpoints_secs=None, session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100, train_distribute=None,
                 device_fn=None, protocol=None, eval_distribute=None, experimental_distribute=None):
        if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError("RunConfig: give at most one of save_checkpoints_steps and save_checkpoints_secs")
        if save_checkpoints_steps is None and save_checkpoints_secs is None:
            save_checkpoints_secs = 600
        self.model_dir = model_dir
        self.tf_random_seed = tf_random_seed
        self.save_summary_steps = save_summary_steps
        self.save_checkpoints_steps = save_checkpoints_steps
        self.save_checkpoints_secs = save_checkpoints_secs
        self.session_config = session_config
        self.keep_checkpoint_max = keep_checkpoint_max
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self.log_step_count_steps = log_step_count_steps
        self.device_fn = device_fn
        self.train_distribute = train_distribute
        self._read_task_config()

    def _read_task_config(self):
        conf, var = _task_config()
        cluster = conf.get("cluster") or {}
        task = conf.get("task") or {}
        self.task_type = task.get("type", TaskType.WORKER)
        self.task_id = int(task.get("index", 0))
        self.cluster_spec = _server.ClusterSpec(cluster) if cluster else _empty_cluster()
        self.num_ps_replicas = len(cluster.get(TaskType.PS, []))
        self.num_worker_replicas = len(cluster.get(TaskType.WORKER, [])) + len(cluster.get(TaskType.CHIEF, []))
        self.global_id_in_cluster = 0
        if not cluster or self.task_type == TaskType.EVALUATOR:
            self.master, self.is_chief = "", self.task_type != TaskType.EVALUATOR
            self.evaluation_master = ""
            return
        if self.task_type not in cluster:
            raise ValueError(f"{var}: task type '{self.task_type}' is not a job of the cluster {sorted(cluster)}")
        if not 0 <= self.task_id < len(cluster[self.task_type]):
            raise ValueError(f"{var}: task index {self.task_id} is out of range for job '{self.task_type}', "
                             f"which has {len(cluster[self.task_type])} tasks")
        address = cluster[self.task_type][self.task_id]
        self.master = f"grpc://{address}"
        self.evaluation_master = ""
        if TaskType.CHIEF in cluster:
            self.is_chief = self.task_type == TaskType.CHIEF
        else:
            self.is_chief = self.task_type == TaskType.WORKER and self.task_id == 0

    def replace(self, **kwargs):
        import copy
        new = copy.copy(self)
        for k, v in kwargs.items():
            if not hasattr(new, k):
                raise ValueError(f"RunConfig has no property '{k}'")
            setattr(new, k, v)
        return new
