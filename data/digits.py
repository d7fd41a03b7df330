"""scikit-learn's bundled handwritten digits, upsampled to MNIST's 28x28.

The 1,797 8x8 images ship inside scikit-learn, so this works offline and
gives a real (if small) image classification task of MNIST's shape.
"""
import numpy as np

num_classes = 10


def _bilinear_matrix(size_in: int, size_out: int) -> np.ndarray:
    """``(size_out, size_in)`` weights for 1-D linear resampling (half-pixel centers)."""
    src = (np.arange(size_out) + 0.5) * (size_in / size_out) - 0.5
    src = np.clip(src, 0, size_in - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, size_in - 1)
    frac = src - lo
    weights = np.zeros((size_out, size_in))
    np.add.at(weights, (np.arange(size_out), lo), 1 - frac)
    np.add.at(weights, (np.arange(size_out), hi), frac)
    return weights


def resize_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    """Resizes ``(n, h, w)`` images to ``(n, size, size)``.

    Matches ``jax.image.resize(..., "bilinear")`` when upsampling, without
    needing a JAX device.
    """
    rows = _bilinear_matrix(images.shape[1], size)
    cols = _bilinear_matrix(images.shape[2], size)
    return np.einsum("ih,nhw,jw->nij", rows, images, cols)


def load_digits(
    split: str = "train",
    test_fraction: float = 0.2,
    seed: int = 0,
    image_size: int = 28,
) -> tuple[np.ndarray, np.ndarray]:
    """Returns ``(images, labels)`` for one split.

    ``images`` is float32 ``(n, image_size, image_size, 1)`` in [0, 1] and
    ``labels`` int32 ``(n,)``. The split is a shuffled split, stratified by
    class and fixed by ``seed``; for the same ``seed`` and ``test_fraction``
    the train and test splits are disjoint and together hold all 1,797 images.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    import sklearn.datasets  # imported here: importing scikit-learn takes seconds, most callers never need it
    from sklearn.model_selection import train_test_split

    bunch = sklearn.datasets.load_digits()
    images = bunch.images / 16.0
    labels = bunch.target
    train_idx, test_idx = train_test_split(
        np.arange(len(labels)), test_size=test_fraction, random_state=seed,
        stratify=labels)
    idx = train_idx if split == "train" else test_idx
    images = images[idx]
    if image_size != images.shape[1]:
        images = resize_bilinear(images, image_size)
    images = np.clip(images, 0.0, 1.0).astype(np.float32)[..., None]
    return images, labels[idx].astype(np.int32)
