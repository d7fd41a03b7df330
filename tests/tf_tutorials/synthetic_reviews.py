"""Movie reviews made up from a fixed seed: the stand-in for `tfds.load('imdb_reviews', ...)` in the DTensor
tutorial (no download here). TF 2.21 ran the tutorial on these same arrays (tests/test_tf_tutorials.py).

2048 reviews of 20-60 made-up words (about 1350 distinct, so the tutorial's TextVectorization(max_tokens=1200)
fills its vocabulary), each with one to three words of its label's sentiment and, in three reviews of ten, one
of the other's.
"""
import numpy as np


def arrays() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    good = "great wonderful loved superb brilliant moving excellent fun charming beautiful".split()
    bad = "awful boring hated terrible dull waste poor bad worst annoying".split()
    syllables = "ka lo mi ne ru sa ti vo be da fe gi ho ju".split()
    common = sorted({"".join(rng.choice(syllables, size=int(rng.integers(2, 4)))) for _ in range(3000)})
    weights = 1.0 / np.arange(1, len(common) + 1)
    weights /= weights.sum()
    texts, labels = [], []
    for _ in range(2048):
        label = int(rng.integers(0, 2))
        words = list(rng.choice(common, size=int(rng.integers(20, 60)), p=weights))
        for _ in range(int(rng.integers(1, 4))):
            words.insert(int(rng.integers(0, len(words))), str(rng.choice(good if label else bad)))
        if rng.random() < 0.3:
            words.insert(int(rng.integers(0, len(words))), str(rng.choice(bad if label else good)))
        texts.append((" ".join(words).capitalize() + "!").encode())
        labels.append(label)
    return np.array(texts), np.array(labels, np.int64)


def load(tf, batch_size: int = 64):
    """What the tutorial's `tfds.load('imdb_reviews', split='train', batch_size=64)` gives: batches of
    {'text': strings, 'label': int64}."""
    text, label = arrays()
    return tf.data.Dataset.from_tensor_slices({"text": text, "label": label}).batch(batch_size)
