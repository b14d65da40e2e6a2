"""The order stage: who is served first.

Protocol in ``stage.py``; ``queues`` has FIFO, least attained service (Tiresias'
queues), shortest remaining (an oracle) and priorities; ``fairshare`` weighted
max-min between users, wrapping any of them.
"""
