"""`tf.image`'s box ops: `crop_and_resize`, `resize_with_pad` and non-maximum suppression.

`crop_and_resize` and `non_max_suppression_padded` (with `pad_to_max_output_size=True`) have static output
shapes and run on numpy or inside compiled code; `non_max_suppression` and `non_max_suppression_with_scores`
return as many boxes as survive, so they run on the host (inside compiled code they raise and name the padded
form). TF 2.21's rules (observed): boxes are [y1, x1, y2, x2] in [0, 1] relative to `height - 1` and `width - 1`
(`crop_and_resize` samples the box's corners exactly; a 1-pixel crop takes the centre; y1 > y2 flips; samples
outside the image are `extrapolation_value`; nearest rounds halves away from zero; the output is float32);
suppression keeps boxes in decreasing score (ties: lower index first), drops a box whose IoU with a kept one
is over `iou_threshold` and scores not over `score_threshold`, reads corners in either order; soft-NMS
(`soft_nms_sigma > 0`) decays scores by `exp(-iou^2 / (2 sigma))` instead; `resize_with_pad` scales by the
larger ratio (float32, floored) and pads the rest evenly, the odd pixel at the end.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError, OutOfRangeError
from jdist.tf_compat.image_ops import at_least_3d, pad_to_bounding_box
from jdist.tf_compat.image_resize import resize
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import Tensor, TensorLike


def _traced(*values: Any) -> bool:
    return any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(values))  # pyright: ignore[reportAttributeAccessIssue]


def _positions(first: Any, last: Any, size: int, count: int, module: Any) -> Any:
    """TF's sample positions in pixels, [boxes, count], for box edges `first`, `last` in [0, 1]."""
    span = np.float32(size - 1)
    if count > 1:
        steps = module.arange(count, dtype=np.float32)[None, :]
        return first[:, None] * span + steps * ((last - first) * span / np.float32(count - 1))[:, None]
    return (np.float32(0.5) * (first + last) * span)[:, None]


def crop_and_resize(image: TensorLike, boxes: TensorLike, box_indices: TensorLike, crop_size: Sequence[int],
                    method: str = "bilinear", extrapolation_value: float = 0.0, name: str | None = None) -> Tensor:
    """Crops of `image[box_indices[i]]` inside `boxes[i]` ([y1, x1, y2, x2], normalised), each resized to
    `crop_size`: [boxes, crop_height, crop_width, channels], float32."""
    images, box = convert_to_tensor(image), convert_to_tensor(boxes, np.float32)
    index = convert_to_tensor(box_indices)
    if images.ndim != 4:
        raise InvalidArgumentError(None, None, f"input image must be 4-D{list(images.shape)} [Op:CropAndResize]")
    if box.ndim != 2 or box.shape[1] != 4 or tuple(index.shape) != (box.shape[0],):
        raise InvalidArgumentError(None, None, f"boxes must be [num_boxes, 4] and box_indices [num_boxes]; got "
                                               f"{list(box.shape)} and {list(index.shape)}")
    if str(method) not in ("bilinear", "nearest"):
        raise InvalidArgumentError(None, None, f"Value for attr 'method' of \"{method}\" is not in the list of "
                                               "allowed values: \"bilinear\", \"nearest\"")
    if not _traced(index):
        flat = np.asarray(index)
        if flat.size and (flat.min() < 0 or flat.max() >= images.shape[0]):
            raise OutOfRangeError(None, None, "box_index has values outside [0, batch_size) [Op:CropAndResize]")
    crop_h, crop_w = (int(v) for v in np.asarray(crop_size).reshape(-1))
    module = xp(images, box, index)
    height, width = images.shape[1:3]
    in_y = _positions(box[:, 0], box[:, 2], height, crop_h, module)
    in_x = _positions(box[:, 1], box[:, 3], width, crop_w, module)
    inside = (((in_y >= 0) & (in_y <= height - 1))[:, :, None] & ((in_x >= 0) & (in_x <= width - 1))[:, None, :])
    values = images.astype(np.float32)
    picks = index[:, None, None]

    def at(ys: Any, xs: Any) -> Any:
        ys = module.clip(ys, 0, height - 1).astype(np.int32)
        xs = module.clip(xs, 0, width - 1).astype(np.int32)
        return values[picks, ys[:, :, None], xs[:, None, :]]

    if method == "nearest":
        crops = at(module.sign(in_y) * module.floor(module.abs(in_y) + 0.5),
                   module.sign(in_x) * module.floor(module.abs(in_x) + 0.5))
    else:
        top, left = module.floor(in_y), module.floor(in_x)
        bottom, right = module.ceil(in_y), module.ceil(in_x)
        y_lerp = (in_y - top)[:, :, None, None]
        x_lerp = (in_x - left)[:, None, :, None]
        upper = at(top, left) + (at(top, right) - at(top, left)) * x_lerp
        lower = at(bottom, left) + (at(bottom, right) - at(bottom, left)) * x_lerp
        crops = upper + (lower - upper) * y_lerp
    fill = module.asarray(extrapolation_value, np.float32)
    return module.where(inside[..., None], crops, fill).astype(np.float32)


def resize_with_pad(image: TensorLike, target_height: int, target_width: int, method: str = "bilinear",
                    antialias: bool = False) -> Tensor:
    """Resized to fit the target keeping the aspect ratio, then padded with zeros to exactly the target."""
    images = at_least_3d("resize_with_pad", image)
    if int(target_height) <= 0 or int(target_width) <= 0:
        raise ValueError(f"target_height and target_width must be > 0, got {target_height}, {target_width}")
    f32 = np.float32
    height, width = f32(images.shape[-3]), f32(images.shape[-2])
    ratio = max(width / f32(target_width), height / f32(target_height))
    new_h, new_w = f32(height / ratio), f32(width / ratio)
    resized = resize(images, (int(np.floor(new_h)), int(np.floor(new_w))), method=method, antialias=antialias)
    top = max(0, int(np.floor((f32(target_height) - new_h) / f32(2))))
    left = max(0, int(np.floor((f32(target_width) - new_w) / f32(2))))
    return pad_to_bounding_box(resized, top, left, int(target_height), int(target_width))


# ------------------------------------------------------------------------------------------- suppression
def _check(boxes: Any, scores: Any, max_output_size: Any, iou_threshold: Any) -> None:
    if boxes.ndim != 2 or boxes.shape[-1] != 4:
        raise InvalidArgumentError(None, None, f"boxes must have 4 columns (shape {list(boxes.shape)})")
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        raise InvalidArgumentError(None, None, f"scores has incompatible shape (Dimensions must be equal, but are "
                                               f"{boxes.shape[0]} and {scores.shape[0] if scores.ndim else 0})")
    if not is_jax(iou_threshold) and not 0 <= float(iou_threshold) <= 1:
        raise InvalidArgumentError(None, None, "iou_threshold must be in [0, 1]")
    if not is_jax(max_output_size) and int(max_output_size) < 0:
        raise InvalidArgumentError(None, None, "output size must be non-negative")


def _iou_matrix(boxes: Any) -> Any:
    """TF's IoU of every pair, corners in either order, 0 where a box has no area."""
    module = xp(boxes)
    b = boxes.astype(np.float32)
    y1, y2 = module.minimum(b[:, 0], b[:, 2]), module.maximum(b[:, 0], b[:, 2])
    x1, x2 = module.minimum(b[:, 1], b[:, 3]), module.maximum(b[:, 1], b[:, 3])
    area = (y2 - y1) * (x2 - x1)
    height = module.maximum(module.minimum(y2[:, None], y2[None, :]) - module.maximum(y1[:, None], y1[None, :]), 0)
    width = module.maximum(module.minimum(x2[:, None], x2[None, :]) - module.maximum(x1[:, None], x1[None, :]), 0)
    inter = height * width
    union = area[:, None] + area[None, :] - inter
    empty = (area[:, None] <= 0) | (area[None, :] <= 0)
    return module.where(empty, 0, inter / module.where(empty, 1, union)).astype(np.float32)


def _host_nms(op: str, boxes: TensorLike, scores: TensorLike, max_output_size: Any, iou_threshold: Any,
              score_threshold: Any, soft_nms_sigma: Any = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """TF's NonMaxSuppressionV5 on the host: a priority queue by score, lower index first on ties."""
    if _traced(boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma):
        raise ValueError(f"tf.image.{op} returns as many boxes as survive, a shape compiled code cannot have; "
                         "inside compiled code use tf.image.non_max_suppression_padded(..., "
                         "pad_to_max_output_size=True)")
    box, score = np.asarray(convert_to_tensor(boxes)), np.asarray(convert_to_tensor(scores))
    _check(box, score, max_output_size, iou_threshold)
    iou = np.asarray(_iou_matrix(box))
    threshold, limit = np.float32(iou_threshold), int(max_output_size)
    floor = np.float32(score_threshold)
    sigma = np.float32(soft_nms_sigma)
    soft = sigma > 0
    scale = np.float32(-0.5) / sigma if soft else np.float32(0)
    queue = [[np.float32(s), i, 0] for i, s in enumerate(score.astype(np.float32)) if s > floor]
    chosen: list[int] = []
    chosen_scores: list[np.float32] = []
    while len(chosen) < limit and queue:
        best = min(range(len(queue)), key=lambda k: (-queue[k][0], queue[k][1]))
        current, index, begin = queue.pop(best)
        original = current
        hard = False
        for j in range(len(chosen) - 1, begin - 1, -1):
            overlap = iou[index, chosen[j]]
            weight = np.float32(np.exp(np.float32(scale * overlap * overlap)))
            current = np.float32(current * (weight if soft or overlap <= threshold else np.float32(0)))
            if not soft and overlap > threshold:
                hard = True
                break
            if current <= floor:
                break
        if hard:
            continue
        if current == original:
            chosen.append(index)
            chosen_scores.append(current)
        elif current > floor:
            queue.append([current, index, len(chosen)])
    return np.asarray(chosen, np.int32), np.asarray(chosen_scores, np.float32).astype(score.dtype)


def non_max_suppression(boxes: TensorLike, scores: TensorLike, max_output_size: int, iou_threshold: float = 0.5,
                        score_threshold: float = float("-inf"), name: str | None = None) -> np.ndarray:
    """The indices (int32) of up to `max_output_size` boxes kept by greedy IoU suppression, best first."""
    return _host_nms("non_max_suppression", boxes, scores, max_output_size, iou_threshold, score_threshold)[0]


def non_max_suppression_with_scores(boxes: TensorLike, scores: TensorLike, max_output_size: int,
                                    iou_threshold: float = 0.5, score_threshold: float = float("-inf"),
                                    soft_nms_sigma: float = 0.0, name: str | None = None
                                    ) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores) kept; with `soft_nms_sigma > 0`, Soft-NMS: overlapping boxes' scores decay instead."""
    return _host_nms("non_max_suppression_with_scores", boxes, scores, max_output_size, iou_threshold,
                     score_threshold, soft_nms_sigma)


def _padded_one(box: Any, score: Any, limit: int, threshold: Any, floor: Any) -> tuple[Any, Any]:
    """Greedy hard suppression with a static output size, in jax.numpy: (indices padded with 0, count)."""
    order = jnp.argsort(-score, stable=True)
    iou = _iou_matrix(jnp.asarray(box)[order])
    ranked = jnp.asarray(score)[order]
    count = box.shape[0]

    def step(i: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        kept, out, total = state
        clear = ~jnp.any(kept & (iou[i] > threshold))
        take = clear & (ranked[i] > floor) & (total < limit)
        out = jnp.where(take, out.at[jnp.minimum(total, max(limit - 1, 0))].set(order[i].astype(jnp.int32)), out)
        return kept.at[i].set(take), out, total + take.astype(jnp.int32)

    state = (jnp.zeros((count,), bool), jnp.zeros((limit,), jnp.int32), jnp.zeros((), jnp.int32))
    _, out, total = jax.lax.fori_loop(0, count, step, state)
    return out, total


def non_max_suppression_padded(boxes: TensorLike, scores: TensorLike, max_output_size: int,
                               iou_threshold: float = 0.5, score_threshold: float = float("-inf"),
                               pad_to_max_output_size: bool = False, name: str | None = None,
                               sorted_input: bool = False, canonicalized_coordinates: bool = False,
                               tile_size: int = 512) -> tuple[Tensor, Tensor]:
    """(indices, valid count) of greedy suppression; with `pad_to_max_output_size` the indices are padded with 0
    to `max_output_size` (a static shape: runs inside compiled code too). Boxes may carry batch dimensions."""
    box, score = convert_to_tensor(boxes), convert_to_tensor(scores)
    limit = int(max_output_size)
    if box.shape[-1] != 4 or tuple(score.shape) != tuple(box.shape[:-1]):
        raise InvalidArgumentError(None, None, f"boxes must be [..., num_boxes, 4] and scores [..., num_boxes]; got "
                                               f"{list(box.shape)} and {list(score.shape)}")
    if not is_jax(iou_threshold) and not 0 <= float(iou_threshold) <= 1:
        raise InvalidArgumentError(None, None, "iou_threshold must be in [0, 1]")
    on_device = is_jax(box, score)
    if on_device and not pad_to_max_output_size and _traced(box, score):
        raise ValueError("tf.image.non_max_suppression_padded inside compiled code needs "
                         "pad_to_max_output_size=True (the unpadded result's length depends on the boxes)")
    batch = box.shape[:-2]
    flat_box = jnp.asarray(box).reshape((-1, *box.shape[-2:]))
    flat_score = jnp.asarray(score).reshape((-1, score.shape[-1]))
    threshold, floor = jnp.asarray(iou_threshold, jnp.float32), jnp.asarray(score_threshold, jnp.float32)
    out, total = jax.vmap(lambda b, s: _padded_one(b, s, limit, threshold, floor))(flat_box, flat_score)
    out, total = out.reshape((*batch, limit)), total.reshape(batch)
    if not on_device:
        out, total = np.asarray(out), np.asarray(total)
        if not pad_to_max_output_size:
            out = out[..., :int(np.max(total)) if total.size else 0]
    return out, total


def combined_non_max_suppression(boxes: TensorLike, scores: TensorLike, max_output_size_per_class: int,
                                 max_total_size: int, iou_threshold: float = 0.5,
                                 score_threshold: float = float("-inf"), pad_per_class: bool = False,
                                 clip_boxes: bool = True, name: str | None = None
                                 ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Greedy suppression per image and class (boxes [batch, boxes, 1 or classes, 4], scores [batch, boxes,
    classes]), then the best `max_total_size` of all classes: (boxes, scores, classes as float32, valid count),
    padded with 0; static shapes, so it runs inside compiled code too."""
    box, score = convert_to_tensor(boxes), convert_to_tensor(scores)
    if box.ndim != 4 or box.shape[-1] != 4 or score.ndim != 3 or score.shape[:2] != box.shape[:2]:
        raise InvalidArgumentError(None, None, f"boxes must be [batch, num_boxes, q, 4] and scores [batch, "
                                               f"num_boxes, num_classes]; got {list(box.shape)} and "
                                               f"{list(score.shape)}")
    classes, shared = score.shape[-1], box.shape[2] == 1
    if not shared and box.shape[2] != classes:
        raise InvalidArgumentError(None, None, f"third dimension of boxes must be either 1 or {classes}")
    per_class, total = int(max_output_size_per_class), int(max_total_size)
    detections = min(per_class * classes, total) if pad_per_class else total
    threshold, floor = jnp.asarray(iou_threshold, jnp.float32), jnp.asarray(score_threshold, jnp.float32)

    def one_image(b: jax.Array, s: jax.Array) -> tuple[jax.Array, ...]:
        picked_boxes, picked_scores, picked_classes = [], [], []
        for c in range(classes):
            class_boxes = b[:, 0 if shared else c]
            index, count = _padded_one(class_boxes, s[:, c], per_class, threshold, floor)
            valid = jnp.arange(per_class) < count
            picked_boxes.append(class_boxes[index])
            picked_scores.append(jnp.where(valid, s[index, c], -jnp.inf))
            picked_classes.append(jnp.full((per_class,), c, jnp.float32))
        extra = max(detections - per_class * classes, 0)
        all_boxes = jnp.concatenate([*picked_boxes, jnp.zeros((extra, 4), jnp.float32)])
        all_scores = jnp.concatenate([*picked_scores, jnp.full((extra,), -jnp.inf, jnp.float32)])
        all_classes = jnp.concatenate([*picked_classes, jnp.zeros((extra,), jnp.float32)])
        best, order = jax.lax.top_k(all_scores, detections)
        valid = best > -jnp.inf
        chosen = all_boxes[order]
        if clip_boxes:
            chosen = jnp.clip(chosen, 0.0, 1.0)
        return (jnp.where(valid[:, None], chosen, 0.0), jnp.where(valid, best, 0.0),
                jnp.where(valid, all_classes[order], 0.0), jnp.sum(valid).astype(jnp.int32))

    out = jax.vmap(one_image)(jnp.asarray(box, jnp.float32), jnp.asarray(score, jnp.float32))
    nmsed_boxes, nmsed_scores, nmsed_classes, valid = out if is_jax(box, score) else map(np.asarray, out)
    return nmsed_boxes, nmsed_scores, nmsed_classes, valid


# TF's default box colours (RGBA), used in turn
_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1],
                    [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]], np.float32)


def draw_bounding_boxes(images: TensorLike, boxes: TensorLike, colors: TensorLike | None,
                        name: str | None = None) -> Tensor:
    """Each box's 1-pixel outline drawn on its image ([batch, height, width, 1, 3 or 4] floats), box i in
    colour i modulo the colours; corners at `coordinate * (size - 1)` truncated, later boxes on top."""
    values = convert_to_tensor(images)
    if values.ndim != 4:
        raise InvalidArgumentError(None, None, "The rank of the images should be 4 [Op:DrawBoundingBoxes]")
    depth = values.shape[-1]
    if depth not in (1, 3, 4):
        raise InvalidArgumentError(None, None, "Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA) "
                                               "[Op:DrawBoundingBoxes]")
    if np.dtype(values.dtype) not in (np.dtype(np.float16), np.dtype(np.float32)):
        values = values.astype(np.float32)
    box = convert_to_tensor(boxes, np.float32)
    module = xp(values, box, colors)
    table = _COLORS if colors is None else module.asarray(colors, np.float32).reshape(-1, 4)
    height, width = values.shape[1:3]
    rows, cols = module.arange(height)[None, :, None], module.arange(width)[None, None, :]
    out = values
    for k in range(box.shape[1]):
        edges = [module.trunc(box[:, k, i] * np.float32(size - 1)).astype(np.int32)[:, None, None]
                 for i, size in enumerate((height, width, height, width))]
        top, left, bottom, right = edges
        shown = (top <= bottom) & (left <= right) & (top < height) & (bottom >= 0) & (left < width) & (right >= 0)
        across = (cols >= module.maximum(left, 0)) & (cols <= module.minimum(right, width - 1))
        down = (rows >= module.maximum(top, 0)) & (rows <= module.minimum(bottom, height - 1))
        lines = (((rows == top) & (top >= 0) | (rows == bottom) & (bottom < height)) & across
                 | ((cols == left) & (left >= 0) | (cols == right) & (right < width)) & down)
        colour = module.asarray(table[k % table.shape[0], :depth], values.dtype)
        out = module.where((shown & lines)[..., None], colour, out)
    return out


NAMES: dict[str, Any] = dict(
    crop_and_resize=crop_and_resize, resize_with_pad=resize_with_pad, non_max_suppression=non_max_suppression,
    non_max_suppression_with_scores=non_max_suppression_with_scores,
    non_max_suppression_padded=non_max_suppression_padded, combined_non_max_suppression=combined_non_max_suppression,
    draw_bounding_boxes=draw_bounding_boxes,
)
