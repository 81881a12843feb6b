"""The two providers (provider_a: Anthropic, provider_b: OpenAI), built once from the
deployment's configuration."""

from __future__ import annotations

from controlcenter.config import Config
from controlcenter.providers.anthropic import AnthropicProvider
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, Provider
from controlcenter.providers.openai import OpenAIProvider
from controlcenter.providers.sdk import ProviderOptions


def build_providers(config: Config) -> dict[str, Provider]:
    """`provider_a` and `provider_b`, each with one connection pool shared by every chat."""

    def options(base_url: str, model: str) -> ProviderOptions:
        return ProviderOptions(
            base_url=base_url,
            model=model,
            timeout_s=config.provider_timeout_s,
            max_retries=config.provider_max_retries,
            max_tokens=config.provider_max_tokens,
        )

    return {
        PROVIDER_A: AnthropicProvider(options(config.provider_a_base_url, config.provider_a_model)),
        PROVIDER_B: OpenAIProvider(options(config.provider_b_base_url, config.provider_b_model)),
    }


async def close_providers(providers: dict[str, Provider]) -> None:
    """Close each provider's connection pool (at shutdown)."""
    for provider in providers.values():
        aclose = getattr(provider, "aclose", None)
        if aclose is not None:
            await aclose()
