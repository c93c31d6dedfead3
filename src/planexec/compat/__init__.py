"""Where planexec reaches past its dependencies' public APIs: one module per dependency.

:mod:`planexec.compat.langgraph` is the only module of planexec that touches LangGraph's
private names; ``tests/unit/test_langgraph_internals.py`` fails loudly when one of them is
gone or means something else.
"""
