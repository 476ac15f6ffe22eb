"""The artifact gate's caps: entries, uncompressed bytes and JSON read per artifact, and gzip bombs.

Each refusal names the cap, and stops early: the tests read the tarball from an in-memory stream and check how
much of it the gate consumed before refusing (a bomb is refused long before it is unpacked). No bucket is
involved here; the S3 path through the same reader is in tests/integration/test_artifact_gate_s3.py.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import time
from pathlib import Path

import pytest

from fleetops.promotion.artifact_files import read_snapshot
from fleetops.promotion.artifact_s3 import ArtifactFetchError, read_tarball, unpack_tarball
from fleetops.promotion.artifact_snapshot import (
    MAX_ARTIFACT_BYTES,
    MAX_ARTIFACT_FILES,
    ArtifactLimitError,
    SnapshotLimits,
)
from fleetops.promotion.artifact_stream import HEADER_BYTES

MiB = 2**20
#: gzip of 1 MiB of zeros: about 1 KB. Concatenated, gzip members decompress to the concatenation.
ZEROS_MEMBER = gzip.compress(bytes(MiB), compresslevel=9)


def tar_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def bomb(header: bytes, mib_of_zeros: int) -> io.BytesIO:
    """``header`` then ``mib_of_zeros`` MiB of zeros, gzipped: a few KB per GiB."""
    return io.BytesIO(gzip.compress(header) + ZEROS_MEMBER * mib_of_zeros)


def refused(stream: io.BytesIO, limits: SnapshotLimits | None = None) -> str:
    started = time.monotonic()
    with pytest.raises(ArtifactFetchError) as raised:
        read_tarball(stream, "s3://models/bomb/model.tar.gz", limits)
    assert time.monotonic() - started < 5, "a refusal must not unpack the artifact first"
    return str(raised.value)


def test_a_member_declared_past_the_total_cap_is_refused_at_its_header() -> None:
    # A gzip bomb in its usual form: one member of 100 GiB of zeros, about 100 MB compressed. Only its first
    # GiB (1 MB) is here: the gate must refuse at the header, before unpacking any of it.
    info = tarfile.TarInfo("model.safetensors")
    info.size = 100 * 2**30
    stream = bomb(info.tobuf(), 1024)

    text = refused(stream)

    assert "s3://models/bomb/model.tar.gz: refused before unpacking the rest: model.safetensors: the files add " in text
    assert "above the gate's cap of 64 GiB per artifact" in text
    assert MAX_ARTIFACT_BYTES == 64 * 2**30
    assert stream.tell() <= 2 * MiB, "read a megabyte of compressed input at most"


def test_a_bomb_hidden_in_a_pax_header_stops_at_the_headers_allowance() -> None:
    # tarfile reads a pax header's payload whole into memory: 4 GiB of zeros there would exhaust the function.
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = 4 * 2**30
    stream = bomb(pax.tobuf(tarfile.USTAR_FORMAT), 4 * 1024)

    text = refused(stream)

    assert "a member's headers (a pax or long-name header) run past the gate's cap of 1 MiB per member" in text
    assert MiB == HEADER_BYTES
    assert stream.tell() <= 2 * MiB < len(stream.getvalue())


def test_files_adding_up_past_the_total_cap_are_refused_at_the_one_that_passes_it() -> None:
    files = {f"model-{i:05d}-of-00012.safetensors": bytes(MiB) for i in range(12)}

    text = refused(io.BytesIO(gzip.compress(tar_bytes(files))), SnapshotLimits(max_bytes=10 * MiB))

    assert "model-00010-of-00012.safetensors: the files add up to more than 10 MiB uncompressed" in text
    assert "(11534336 bytes with this one): above the gate's cap of 10 MiB per artifact" in text


def test_more_entries_than_the_cap_are_refused_naming_it() -> None:
    files = {f"shard-{i}.json": b"{}" for i in range(MAX_ARTIFACT_FILES + 5)}

    text = refused(io.BytesIO(gzip.compress(tar_bytes(files))))

    assert f"shard-{MAX_ARTIFACT_FILES}.json: more than 2000 entries (files, folders, links): above the gate's " in text
    assert "cap of 2000 per artifact" in text


def test_json_files_past_what_the_gate_reads_are_refused() -> None:
    files = {f"adapters/a{i}/tokenizer.json": b" " * MiB for i in range(5)}

    text = refused(io.BytesIO(gzip.compress(tar_bytes(files))), SnapshotLimits(max_read_bytes=3 * MiB))

    assert (
        "adapters/a3/tokenizer.json: the JSON files add up to more than 3 MiB: above the gate's cap of 3 MiB " in text
    )


def test_a_sparse_member_is_refused() -> None:
    # A sparse member unpacks to its holes as zeros that are in no byte of the stream: refused, not expanded.
    buffer = io.BytesIO()
    info = tarfile.TarInfo("model.safetensors")
    info.type = tarfile.GNUTYPE_SPARSE
    buffer.write(info.tobuf(tarfile.GNU_FORMAT))
    buffer.write(bytes(1024))

    assert "member 'model.safetensors' is a sparse, device or fifo file" in refused(
        io.BytesIO(gzip.compress(buffer.getvalue()))
    )


def test_a_tar_that_is_not_gzipped_is_refused() -> None:
    assert "not gzip-compressed (SageMaker unpacks a model.tar.gz)" in refused(io.BytesIO(tar_bytes({"a.json": b"{}"})))


def test_a_cut_short_gzip_stream_is_refused() -> None:
    packed = gzip.compress(tar_bytes({"config.json": b"{}" * 5000}))

    assert "the gzip stream is cut short" in refused(io.BytesIO(packed[: len(packed) // 2]))


def entry(name: str, content: bytes) -> bytes:
    """One tar entry (header, data, padding) with no end-of-archive blocks after it."""
    info = tarfile.TarInfo(name)
    info.size = len(content)
    return info.tobuf() + content + bytes(-len(content) % tarfile.BLOCKSIZE)


def test_a_tarball_in_several_gzip_members_is_read_whole_as_gzip_and_tar_unpack_it() -> None:
    # gzip -d (and so SageMaker's tar) reads concatenated members as one stream: a reader stopping after the first
    # would judge a clean artifact while the instance unpacks the pickle after it.
    first = gzip.compress(entry("config.json", b"{}"))
    second = gzip.compress(entry("adapter_model.bin", b"\x80\x04") + bytes(2 * tarfile.BLOCKSIZE))

    snapshot = read_tarball(io.BytesIO(first + second), "model.tar.gz")

    assert sorted(snapshot.files) == ["adapter_model.bin", "config.json"]


def test_within_the_caps_the_reader_returns_the_files_and_the_sha256_of_every_byte() -> None:
    # Two gzip members and trailing zeros, as concatenating tools and some uploaders leave them.
    raw = tar_bytes({"config.json": b'{"a": 1}', "adapters/x/adapter_config.json": b"{}"})
    packed = gzip.compress(raw[:700]) + gzip.compress(raw[700:]) + bytes(64)

    tarball = unpack_tarball(io.BytesIO(packed), "model.tar.gz")

    assert tarball.snapshot.files["config.json"].content == b'{"a": 1}'
    assert sorted(tarball.snapshot.files) == ["adapters/x/adapter_config.json", "config.json"]
    assert (tarball.sha256, tarball.size) == (hashlib.sha256(packed).hexdigest(), len(packed))


def test_a_folder_past_a_cap_is_refused_before_its_files_are_read(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / f"model-{i}.safetensors").write_bytes(bytes(1024))

    with pytest.raises(ArtifactLimitError, match=r"more than 3 entries .*above the gate's cap of 3 per artifact"):
        read_snapshot(tmp_path, SnapshotLimits(max_files=3))
