"""The shadow comparison's adapters: read SageMaker data capture from S3, replay it to both variants by name."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from fleetops.promotion.artifact_s3 import split_s3_url
from fleetops.promotion.candidate_gate import Invoke
from fleetops.promotion.shadow import Captured, Replayed, parse_capture

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def captured_requests(s3: S3Client, capture_uri: str, endpoint: str, variant: str, limit: int) -> list[Captured]:
    """Up to ``limit`` captured exchanges of ``variant``, oldest first.

    SageMaker writes ``<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl``; the keys sort in time.
    """
    bucket, key = split_s3_url(capture_uri.rstrip("/") + "/")
    prefix = f"{key}{endpoint}/{variant}/"
    found: list[Captured] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in sorted(page.get("Contents", []), key=lambda i: i["Key"]):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode("utf-8", "replace")
            found += parse_capture(body)
            if len(found) >= limit:
                return found[:limit]
    return found


def replay(invoke: Invoke, captured: list[Captured], candidate: str, primary: str, workers: int = 4) -> list[Replayed]:
    """Each captured request to the candidate and to the primary (not streamed), side by side."""

    def one(exchange: Captured) -> Replayed:
        request = exchange.request | {"stream": False}
        to_candidate = invoke(candidate, request)
        to_primary = invoke(primary, request)
        return Replayed(
            event_id=exchange.event_id,
            user_answer=exchange.answer,
            candidate=to_candidate.text if to_candidate.ok else None,
            candidate_seconds=to_candidate.seconds,
            primary=to_primary.text if to_primary.ok else None,
            primary_seconds=to_primary.seconds,
        )

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, captured))
