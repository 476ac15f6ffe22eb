"""Optional Bedrock fallback: when the engine cannot answer, ask a Bedrock model instead of the canned message.

Only for a model with network (``rollout_policy`` with ``network_isolation: false``): an isolated container reaches
no Bedrock and has no credentials. Both shipped environments isolate their models; there the caller falls back
(``clients.fallback_client``) on the canned answer's ``finish_reason: "fallback"``, and skips answers whose
``backend.version`` is ``"bedrock"``: this fallback already answered them.
"""

from __future__ import annotations

import asyncio
from typing import Any


class BedrockFallback:
    """Answers with Bedrock's Converse API (``BEDROCK_FALLBACK_MODEL_ID``).

    Parameters
    ----------
    model_id
        A Bedrock model or inference-profile id.
    client
        A ``bedrock-runtime`` client; ``None`` builds one (boto3 is then required in the image).
    """

    def __init__(self, model_id: str, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("bedrock-runtime")
        self.model_id = model_id
        self.client = client

    async def __call__(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        system = [{"text": m["content"]} for m in messages if m["role"] == "system"]
        turns = [{"role": m["role"], "content": [{"text": m["content"]}]} for m in messages if m["role"] != "system"]
        response = await asyncio.to_thread(
            self.client.converse,
            modelId=self.model_id,
            system=system,
            messages=turns,
            inferenceConfig={"maxTokens": max_tokens},
        )
        return str(response["output"]["message"]["content"][0]["text"])
