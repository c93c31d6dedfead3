"""Where runs are kept.

Checkpoint savers and stores, spilled step outputs, the health of the checkpoint store.
"""
