"""tf.image: the image ops TF1's input pipelines call (the CIFAR-10
tutorial's distortions among them), built from distflow's array, math and
random ops. Images are [height, width, channels] (or batches of them,
where noted), as in TensorFlow."""
from distflow import array_ops as _array_ops
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import math_ops as _math_ops
from distflow import random_ops as _random_ops


def _image(image, name):
    image = _fw.convert_to_tensor(image)
    if image.shape.ndims is not None and image.shape.ndims not in (3, 4):
        raise ValueError(f"{name}: an image is [height, width, channels] (or a batch of them); got shape "
                         f"{image.shape}")
    return image


def _static_hw(image, name):
    dims = image.shape.as_list() if image.shape.ndims is not None else None
    if dims is None or dims[-3] is None or dims[-2] is None:
        raise ValueError(f"{name} needs the image's height and width known when the graph is built; got shape "
                         f"{image.shape}. Call set_shape first.")
    return dims[-3], dims[-2]


def random_crop(value, size, seed=None, name=None):
    """A [size] slice of `value` at a uniformly random offset."""
    value = _fw.convert_to_tensor(value)
    with _fw.name_scope(name or "random_crop"):
        size = [int(s) for s in size]
        shape = _array_ops.shape(value)
        limit = shape - _fw.constant(size, dtype=_dtypes.int32) + 1
        u = _random_ops.random_uniform([len(size)], dtype=_dtypes.float32, seed=seed)
        offset = _math_ops.cast(_math_ops.floor(u * _math_ops.cast(limit, _dtypes.float32)), _dtypes.int32)
        offset = _math_ops.minimum(offset, limit - 1)
        return _array_ops.slice(value, offset, size)


def _random_flip(image, axis, seed, name):
    image = _image(image, name)
    with _fw.name_scope(name):
        flip = _math_ops.cast(_random_ops.random_uniform([], seed=seed) < 0.5, image.dtype
                              if image.dtype != _dtypes.uint8 else _dtypes.float32)
        rank = image.shape.ndims or 3
        flipped = _array_ops.reverse(image, [rank - 3 + axis])
        if image.dtype == _dtypes.uint8:
            f = _math_ops.cast(image, _dtypes.float32)
            out = flip * _math_ops.cast(flipped, _dtypes.float32) + (1 - flip) * f
            return _math_ops.cast(out, _dtypes.uint8)
        return flip * flipped + (1 - flip) * image


def random_flip_left_right(image, seed=None):
    """The image mirrored left to right with probability 1/2."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    return _random_flip(image, 0, seed, "random_flip_up_down")


def flip_left_right(image):
    image = _image(image, "flip_left_right")
    return _array_ops.reverse(image, [(image.shape.ndims or 3) - 2])


def flip_up_down(image):
    image = _image(image, "flip_up_down")
    return _array_ops.reverse(image, [(image.shape.ndims or 3) - 3])


def adjust_brightness(image, delta):
    image = _image(image, "adjust_brightness")
    return image + _math_ops.cast(delta, image.dtype)


def random_brightness(image, max_delta, seed=None):
    """image + delta, delta uniform in [-max_delta, max_delta)."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    image = _image(image, "random_brightness")
    delta = _random_ops.random_uniform([], -max_delta, max_delta, seed=seed)
    return image + _math_ops.cast(delta, image.dtype)


def adjust_contrast(images, contrast_factor):
    """(x - mean) * factor + mean, the mean of each channel over height and width."""
    images = _image(images, "adjust_contrast")
    x = _math_ops.cast(images, _dtypes.float32)
    rank = images.shape.ndims or 3
    mean = _math_ops.reduce_mean(x, axis=[rank - 3, rank - 2], keepdims=True)
    out = (x - mean) * _math_ops.cast(contrast_factor, _dtypes.float32) + mean
    return _math_ops.cast(out, images.dtype)


def random_contrast(image, lower, upper, seed=None):
    """adjust_contrast by a factor uniform in [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = _random_ops.random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1 / sqrt(N)) over each image's N values."""
    image = _image(image, "per_image_standardization")
    with _fw.name_scope("per_image_standardization"):
        x = _math_ops.cast(image, _dtypes.float32)
        rank = image.shape.ndims or 3
        axes = [rank - 3, rank - 2, rank - 1]
        n = _math_ops.cast(_math_ops.reduce_prod(_array_ops.shape(x)[rank - 3:]), _dtypes.float32)
        mean = _math_ops.reduce_mean(x, axis=axes, keepdims=True)
        var = _math_ops.reduce_mean(_math_ops.square(x - mean), axis=axes, keepdims=True)
        adjusted = _math_ops.maximum(_math_ops.sqrt(var), _math_ops.rsqrt(n))
        return (x - mean) / adjusted


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """The image centred in target_height x target_width: cropped where it
    is larger, padded with zeros where smaller."""
    image = _image(image, "resize_image_with_crop_or_pad")
    h, w = _static_hw(image, "resize_image_with_crop_or_pad")
    th, tw = int(target_height), int(target_width)
    rank = image.shape.ndims
    lead = [0] * (rank - 3)
    # Crop first (centred), then pad (centred).
    ch, cw = min(h, th), min(w, tw)
    top, left = (h - ch) // 2, (w - cw) // 2
    if (ch, cw) != (h, w):
        image = _array_ops.slice(image, lead + [top, left, 0], [-1] * (rank - 3) + [ch, cw, -1])
    if (ch, cw) != (th, tw):
        pt, pl = (th - ch) // 2, (tw - cw) // 2
        paddings = [[0, 0]] * (rank - 3) + [[pt, th - ch - pt], [pl, tw - cw - pl], [0, 0]]
        image = _array_ops.pad(image, paddings)
    return image


def convert_image_dtype(image, dtype, saturate=False, name=None):
    """uint8 [0, 255] <-> float [0, 1)."""
    image = _fw.convert_to_tensor(image)
    dt = _dtypes.as_dtype(dtype)
    if image.dtype == dt:
        return image
    if image.dtype == _dtypes.uint8 and dt.is_floating:
        return _math_ops.cast(image, dt) * (1.0 / 255.0)
    if image.dtype.is_floating and dt == _dtypes.uint8:
        return _math_ops.cast(_math_ops.clip_by_value(image * 255.0 + 0.5, 0.0, 255.0), dt)
    return _math_ops.cast(image, dt)
