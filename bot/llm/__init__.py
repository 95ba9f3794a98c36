"""LLM access: a Protocol, the OpenAI-compatible client, and a scripted in-memory fake."""
