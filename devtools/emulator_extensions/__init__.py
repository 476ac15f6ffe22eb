"""AWS APIs the emulator (moto 5.2.5) lacks or gets wrong, added by this project in ONE place.

Each submodule patches moto's backends in this process (the threaded moto server runs here), so the
additions are reached over HTTP like the rest of the emulator, and responses are serialised from
botocore's real service model. Tests that rely on one of them say so.

- ``sagemaker``: UpdateEndpoint with real status transitions, variant weight 0.
- ``bedrock``: Custom Model Import (CreateModelImportJob, GetModelImportJob, ...) and Converse.
"""

from __future__ import annotations


def install() -> None:
    """Install every extension (idempotent)."""
    from devtools.emulator_extensions import bedrock, sagemaker

    sagemaker.install()
    bedrock.install()
