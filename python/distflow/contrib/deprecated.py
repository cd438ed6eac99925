"""tf.contrib.deprecated: TF 0.12's summary names, kept by TF1 for old
programs (the CIFAR-10 tutorial among them), as tf.summary's ops."""
from distflow import summary as _summary


def scalar_summary(tags, values, collections=None, name=None):
    return _summary.scalar(tags, values, collections=collections)


def histogram_summary(tag, values, collections=None, name=None):
    return _summary.histogram(tag, values, collections=collections)


def image_summary(tag, tensor, max_images=3, collections=None, name=None):
    return _summary.image(tag, tensor, max_outputs=max_images, collections=collections)


def merge_summary(inputs, collections=None, name=None):
    return _summary.merge(inputs, collections=collections, name=name)


def merge_all_summaries(key="summaries"):
    return _summary.merge_all(key)
