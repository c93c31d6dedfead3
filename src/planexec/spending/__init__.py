"""What a run may spend (tokens, cost, time), counted as it goes (:mod:`.budget`)."""
