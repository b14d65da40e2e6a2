"""The profile stage's speed machinery: candidates kept on the views they came from.

Same candidates as made afresh (``tests/test_policy_stages.py``).
"""
