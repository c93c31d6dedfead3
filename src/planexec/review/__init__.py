"""The human review of a plan, as the approval node (:mod:`planexec.nodes.approval`) runs it.

* :mod:`~planexec.review.decisions`: a reviewer's answer, in any accepted format, read into
  planexec's decision type (approve, edit, reject, cancel), or refused with a reason.
* :mod:`~planexec.review.checks`: is the plan valid, and does an answer name this plan.
* :mod:`~planexec.review.policy`: whether a plan needs a human at all.
* :mod:`~planexec.review.request`: what the interrupt shows the reviewer.
* :mod:`~planexec.review.describe`: the plan in Markdown (steps, side effects, model calls),
  its own words never read as markup.
* :mod:`~planexec.review.hitl`: the same request and answers in the ecosystem's
  human-in-the-loop shapes (LangChain v1's middleware, the legacy Agent Inbox).
"""
