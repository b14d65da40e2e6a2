"""Speed machinery of the pipeline itself: private to ``policy.pipeline``.

``assigning`` makes a decision's assignments from the last decision's where jobs
kept them. Same results as working everything out afresh:
``tests/test_assigning.py`` is the contract.
"""
