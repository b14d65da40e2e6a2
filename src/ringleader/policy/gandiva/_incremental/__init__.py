"""Gandiva's speed machinery: private to ``gandiva``.

``regroup`` keeps the groups from one decision to the next, changed only where jobs
changed; ``openings`` indexes the groups with room and notes what a decision
changed. Same groups as found afresh (``tests/test_regroup.py``,
``tests/test_groups.py``).
"""
