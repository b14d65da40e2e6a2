"""The size stage's speed machinery: private to ``size``.

Kept chains of growth steps (``chain``, ``chains``), the walk over them that
replaces the greedy's heap (``walk``; in numpy for thousands of jobs: ``batched``,
``flat``; where the GPUs run out: ``cut``) and base sizes kept from the last
decision (``bases``). ``growth.greedy`` and the allocators choose them; each gives
what the plain algorithm gives, to the bit (``tests/test_growth.py``,
``tests/test_bases.py`` are the contract; docs/scale.md says how it works).
"""
