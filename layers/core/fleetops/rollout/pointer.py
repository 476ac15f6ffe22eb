"""The model-version pointer of an endpoint: what serves, and what served before (a rollback's way back).

Apart from :mod:`fleetops.rollout.plan`: the pointer store, a rollback and the alarm responder read pointers
without loading a rollout request's models.
"""

from __future__ import annotations

import json

from fleetops.rollout.versions import AdapterVersion, Release


class Pointer(Release):
    """The model-version pointer of an endpoint (an SSM parameter holding this as JSON).

    It names the release that serves (base version and sha256, each adapter's version, folder and sha256) and
    the one that served before, so a rollback puts the previous release back, adapters included. Fields added
    since the first pointers default to ``None``: an older pointer still reads, with its checksums unknown.
    """

    sagemaker_model: str
    endpoint_config_name: str
    rollout_id: str = ""
    previous_endpoint_config_name: str | None = None
    previous_version: str | None = None
    previous_sha256: str | None = None
    previous_adapters: dict[str, AdapterVersion] | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    def release(self) -> Release:
        return Release(model=self.model, version=self.version, sha256=self.sha256, adapters=self.adapters)

    def restored(self) -> Pointer | None:
        """The pointer a rollback of the last promotion puts back: the previous release on the previous config.

        It names no previous release of its own, so a second rollback finds nothing more to undo instead of
        walking the fleet back another version. ``None`` when this pointer names no previous config.
        """
        if not self.previous_endpoint_config_name:
            return None
        return Pointer(
            model=self.model,
            version=self.previous_version or "unknown",
            sha256=self.previous_sha256,
            adapters=self.previous_adapters,
            sagemaker_model="unknown",
            endpoint_config_name=self.previous_endpoint_config_name,
        )
