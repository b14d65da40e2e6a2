"""The place stage: which GPUs each sized job gets.

Protocol in ``stage.py``; ``fewest_nodes`` (SPEC A6: as few nodes per job as
possible) and ``type_aware`` (mixed GPU types: by what a job gets done).
``_incremental`` has the free-GPU index and the outcomes kept across decisions.
"""
