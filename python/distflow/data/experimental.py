"""tf.data.experimental (and tf.contrib.data): the names TF1 programs use."""
from distflow.data.dataset_ops import AUTOTUNE  # noqa: F401
from distflow.data.iterator_ops import make_initializable_iterator, make_one_shot_iterator  # noqa: F401


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    return lambda ds: ds.shuffle(buffer_size, seed=seed).repeat(count)


def batch_and_drop_remainder(batch_size):
    return lambda ds: ds.batch(batch_size, drop_remainder=True)


def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False, num_parallel_calls=None):
    return lambda ds: ds.map(map_func).batch(batch_size, drop_remainder=drop_remainder)


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False, buffer_output_elements=None,
                        prefetch_input_elements=None):
    """Dataset.interleave's order (sloppy=True may reorder in TF; here it never does)."""
    return lambda ds: ds.interleave(map_func, cycle_length=cycle_length, block_length=block_length)
