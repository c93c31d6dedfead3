"""What planexec guarantees on every path.

Secrets never leak, values are storable, budgets, one run per thread.
"""
