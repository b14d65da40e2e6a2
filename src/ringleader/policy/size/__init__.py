"""The size stage: how many GPUs each job gets.

Protocol in ``stage.py``; ``allocators`` has ``FixedSize``, ``Doubling`` and
``OptimusGreedy``, each a ``base`` (a minimum in order) and a ``grow``; the elastic
ones share ``growth.greedy`` over the steps of ``steps``, and ``payback`` refuses a
resize whose restart is not won back. ``_incremental`` is the speed machinery the
greedy and the bases choose at large scale; it gives the same sizes.
"""
