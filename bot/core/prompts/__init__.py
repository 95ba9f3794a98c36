"""Prompt texts, kept as files so they can be read and changed without touching code."""

from importlib import resources


def load_prompt(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
