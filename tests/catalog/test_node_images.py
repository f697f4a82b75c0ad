"""Node images of training clusters: defaults that advance with time, operator releases, scripts."""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.paths import REPO
from trainworks.catalog import machines
from trainworks.catalog.node_images import ImageCatalog, ServiceScripts, machine_family, valid_image_name

IMAGES = "projects/trainworks-images/global/images"
ROOT = REPO


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_every_machine_family_of_the_catalog_has_a_default_image() -> None:
    catalog = ImageCatalog.load()
    for machine in machines.machine_types():
        image = catalog.default_image(machine.name, at("2026-12-01T00:00:00"))
        assert catalog.known(image) and catalog.is_release(image), machine.name


def test_gpu_and_cpu_lines() -> None:
    catalog = ImageCatalog.load()
    now = at("2026-12-01T00:00:00")
    assert catalog.default_image("a3-highgpu-8g", now) == f"{IMAGES}/slurm-gpu-v20261001"
    assert catalog.default_image("n2-standard-8", now) == f"{IMAGES}/slurm-cpu-v20261001"
    # a4 is not in the machine catalog: its family is read from the name
    assert machine_family("a4-highgpu-8g") == "a4"
    assert catalog.default_image("a4-highgpu-8g", now) == f"{IMAGES}/slurm-gpu-v20261001"


def test_the_default_advances_as_releases_appear() -> None:
    catalog = ImageCatalog.load()
    assert (
        catalog.default_image("n2-standard-8", at("2026-07-01T00:00:00")) == f"{IMAGES}/slurm-cpu-v20260601"
    )
    assert (
        catalog.default_image("n2-standard-8", at("2026-09-30T23:59:59")) == f"{IMAGES}/slurm-cpu-v20260601"
    )
    # a release is the default from its release time on (release time <= now)
    assert (
        catalog.default_image("n2-standard-8", at("2026-10-01T00:00:00")) == f"{IMAGES}/slurm-cpu-v20261001"
    )


def test_no_release_yet_or_no_line_is_a_lookup_error() -> None:
    catalog = ImageCatalog.load()
    with pytest.raises(LookupError, match="n2-standard-8"):
        catalog.default_image("n2-standard-8", at("2020-01-01T00:00:00"))
    with pytest.raises(LookupError, match="z9-mega-1"):
        catalog.default_image("z9-mega-1", at("2026-12-01T00:00:00"))


def test_operator_file_adds_releases(tmp_path: Path) -> None:
    override = tmp_path / "node-images.json"
    override.write_text(
        json.dumps(
            {
                # a line named again without machineFamilies serves the packaged line's families
                "imageLines": [
                    {
                        "name": "slurm-gpu",
                        "releases": [
                            {"image": f"{IMAGES}/slurm-gpu-v20270101", "releaseTime": "2027-01-01T00:00:00Z"}
                        ],
                    }
                ],
                # a release for one machine type only; "released" is accepted for "releaseTime"
                "images": [
                    {
                        "image": "projects/ops/global/images/n2-special",
                        "machineTypes": ["n2-standard-8"],
                        "released": "2026-11-15T10:00:00.5+00:00",
                    }
                ],
            }
        )
    )
    catalog = ImageCatalog.load(override)
    assert (
        catalog.default_image("a3-megagpu-8g", at("2026-12-31T00:00:00")) == f"{IMAGES}/slurm-gpu-v20261001"
    )
    assert (
        catalog.default_image("a3-megagpu-8g", at("2027-01-02T00:00:00")) == f"{IMAGES}/slurm-gpu-v20270101"
    )
    assert (
        catalog.default_image("g2-standard-4", at("2027-01-02T00:00:00")) == f"{IMAGES}/slurm-gpu-v20270101"
    )
    assert (
        catalog.default_image("n2-standard-8", at("2026-12-01T00:00:00"))
        == "projects/ops/global/images/n2-special"
    )
    assert (
        catalog.default_image("n2-standard-4", at("2026-12-01T00:00:00")) == f"{IMAGES}/slurm-cpu-v20261001"
    )
    assert (
        catalog.default_image("n2-standard-8", at("2026-11-15T09:00:00")) == f"{IMAGES}/slurm-cpu-v20261001"
    )


def test_missing_operator_file_is_the_packaged_catalog(tmp_path: Path) -> None:
    catalog = ImageCatalog.load(tmp_path / "absent.json")
    assert catalog.images == ImageCatalog.load().images


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps(
            {"images": [{"image": "not-an-image", "machineTypes": ["n2-standard-8"], "releaseTime": "x"}]}
        ),
        json.dumps({"images": [{"image": f"{IMAGES}/x", "releaseTime": "2026-01-01T00:00:00Z"}]}),
        json.dumps({"imageLines": [{"name": "new-line", "releases": []}]}),
        json.dumps({"serviceScripts": [{"version": "1", "releaseTime": "yesterday"}]}),
        json.dumps([1, 2]),
    ],
)
def test_a_bad_operator_file_names_the_file(tmp_path: Path, content: str) -> None:
    override = tmp_path / "node-images.json"
    override.write_text(content)
    with pytest.raises(ValueError, match="node-images.json"):
        ImageCatalog.load(override)


@pytest.mark.parametrize(
    "image",
    [
        f"{IMAGES}/slurm-gpu-v20261001",
        "projects/my-project/global/images/family/my-family",
        "projects/example.com:proj/global/images/custom-1",
        "projects/123456789/global/images/a",
    ],
)
def test_known_images(image: str) -> None:
    assert valid_image_name(image)
    assert ImageCatalog.load().known(image)


@pytest.mark.parametrize(
    "image",
    [
        "",
        "slurm-gpu-v20261001",
        "projects/p/global/images/",
        "projects/p/global/images/Upper",
        "projects/p/global/images/family/",
        "projects/p/zones/us-central1-a/images/x",
        "https://www.googleapis.com/compute/v1/projects/p/global/images/x",
        "projects/p/global/images/x/extra",
        "projects/p/global/images/ends-with-",
    ],
)
def test_unknown_images(image: str) -> None:
    assert not valid_image_name(image)


def test_service_scripts_releases(tmp_path: Path) -> None:
    catalog = ImageCatalog.load()
    current = catalog.current_service_scripts(at("2026-12-01T00:00:00"))
    assert current.version == "2026.10.0"
    assert catalog.current_service_scripts(at("2026-07-01T00:00:00")).version == "2026.06.0"
    assert current["startup"].startswith("#!/bin/bash") and current.prolog and current.epilog
    assert dict(current).keys() == {"version", "startup", "prolog", "epilog"}
    assert catalog.service_scripts("2026.06.0").version == "2026.06.0"
    unknown = catalog.service_scripts("1999.01.0")
    assert isinstance(unknown, ServiceScripts) and unknown.get("startup", "") == ""
    with pytest.raises(LookupError):
        catalog.current_service_scripts(at("2020-01-01T00:00:00"))

    override = tmp_path / "ops.json"
    override.write_text(
        json.dumps(
            {
                "serviceScripts": [
                    {"version": "2027.01.0", "releaseTime": "2027-01-01T00:00:00Z", "startup": "echo new\n"},
                    {
                        "version": "2026.10.0",
                        "releaseTime": "2026-10-01T00:00:00Z",
                        "prolog": "echo patched\n",
                    },
                ]
            }
        )
    )
    catalog = ImageCatalog.load(override)
    assert catalog.current_service_scripts(at("2026-12-01T00:00:00")).prolog == "echo patched\n"
    assert catalog.current_service_scripts(at("2027-02-01T00:00:00")).startup == "echo new\n"


def test_catalog_json_is_package_data() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["trainworks"]
    assert "catalog/*.json" in patterns
    assert (ROOT / "src" / "trainworks" / "catalog" / "node_images.json").exists()
