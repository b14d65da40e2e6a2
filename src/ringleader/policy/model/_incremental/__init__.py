"""Speed machinery every stage's cache may use: private to ``policy``.

``beside`` walks a decision's views beside the last one's (the place and
Gandiva caches use it). Not a cache itself: the model keeps nothing.
"""
