"""The shadow comparison's adapters: read SageMaker data capture from S3, replay it to both variants by name, and
delete the captures once compared."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from fleetops.promotion.artifact_s3 import split_s3_url
from fleetops.promotion.reply import Invoke
from fleetops.promotion.shadow import Captured, Replayed, parse_capture

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef


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


def delete_captures(s3: S3Client, capture_uri: str) -> int:
    """Delete every object under the rollout's capture prefix (all endpoints and variants); how many there were.

    Raises
    ------
    RuntimeError
        When S3 refused to delete some of them (they are named), so the rollout does not go on as if none were
        left.
    """
    bucket, key = split_s3_url(capture_uri.rstrip("/") + "/")
    deleted = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
        keys: list[ObjectIdentifierTypeDef] = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if not keys:
            continue
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        errors = answer.get("Errors", [])
        if errors:
            failed = ", ".join(f"{e.get('Key')} ({e.get('Code')})" for e in errors[:5])
            raise RuntimeError(f"could not delete {len(errors)} captures under {capture_uri}: {failed}")
        deleted += len(keys)
    return deleted


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
