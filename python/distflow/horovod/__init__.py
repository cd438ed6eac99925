"""Horovod's API over distflow's collectives: `import distflow.horovod.tensorflow
as hvd` in place of `import horovod.tensorflow as hvd` (docs/COLLECTIVES.md)."""
