"""Build the configured LLM client."""

from __future__ import annotations

import threading

from bot.core.config import LLMSettings
from bot.llm.openai_client import OpenAIClient


def build_llm(settings: LLMSettings, stop: threading.Event | None = None) -> OpenAIClient:
    return OpenAIClient(
        settings.base_url,
        settings.model,
        settings.api_key.get_secret_value() if settings.api_key else None,
        timeout=settings.timeout_seconds,
        max_retries=settings.max_retries,
        tool_calling=settings.tool_calling,
        max_output_tokens=settings.reserve_output_tokens,
        stop=stop,
    )
