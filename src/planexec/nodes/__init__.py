"""The graph's nodes, one module each.

planner, approval, executor, evaluator, replanner and finalizer.
"""
