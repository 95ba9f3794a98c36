"""The agent: step loop, tools, finishing."""
