"""Reference workloads: real training on synthetic data shaped like the real thing.

Nothing is downloaded. Each dataset is generated deterministically from the
step and rank, with labels from a fixed random "teacher", so the loss really
falls and a resumed job sees the same data it would have seen.

Run one under ringleader with a job spec whose command is, for example,
``python -m ringleader.workloads.resnet --depth 20 --epochs 2``.
"""
