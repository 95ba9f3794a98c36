"""Context engine: token counting, budgets and what the model sees."""
