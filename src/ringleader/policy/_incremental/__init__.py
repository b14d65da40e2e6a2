"""Speed machinery of the pipeline itself: private to ``policy``.

``assigning`` makes a decision's assignments from the last decision's where jobs
kept them; ``beside`` walks a decision's views beside the last one's (the place
and Gandiva caches use it). Same results as working everything out afresh:
``tests/test_assigning.py`` is the contract.
"""
