"""Node images of training clusters per machine family, and releases of the service-managed scripts.

``node_images.json`` next to this module lists image releases, each with a release time, and releases of the
service's startup, prolog and epilog scripts. An operator file of the same shape (``ImageCatalog.load``) adds
releases. Either file may give image releases two ways:

* ``imageLines``: ``[{"name", "machineFamilies": [...], "releases": [{"image", "releaseTime"}]}]``. A
  line the operator file names without ``machineFamilies`` serves the families the packaged line serves.
* ``images``: ``[{"image", "machineTypes": [...] and/or "machineFamilies": [...], "releaseTime"}]``, one
  release for the given machine types or families (``released`` is accepted for ``releaseTime``).

``serviceScripts``: ``[{"version", "releaseTime", "startup", "prolog", "epilog"}]``; a version the operator
file names replaces the packaged one.

A pool that omits ``nodeImage`` runs the newest release for its machine type whose release time has passed, so
the default advances over time as releases appear (the docs: "Esse padrão avança com o tempo").
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from trainworks.catalog import machines
from trainworks.kernel.wire import parse_timestamp

# `projects/{project}/global/images/{image}` or `.../images/family/{family}`. Project IDs may be domain-scoped
# (`example.com:proj`); image and family names are RFC 1035 labels, as Compute Engine requires.
_IMAGE_NAME = re.compile(
    r"^projects/[a-z0-9](?:[a-z0-9.:-]{0,61}[a-z0-9])?/global/images/(?:family/)?[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$"
)
SCRIPT_KINDS = ("startup", "prolog", "epilog")


def valid_image_name(image: str) -> bool:
    """Whether `image` is a syntactically valid image or image-family name."""
    return bool(_IMAGE_NAME.match(image))


def machine_family(machine_type: str) -> str:
    """The family of a machine type: the catalog's, else the text before the first '-' (a4-highgpu-8g: a4)."""
    info = machines.machine_type(machine_type)
    return info.family if info is not None else machine_type.split("-", 1)[0]


@dataclass(frozen=True)
class ImageRelease:
    image: str
    release_time: datetime
    machine_families: frozenset[str] = frozenset()
    machine_types: frozenset[str] = frozenset()
    line: str = ""

    def serves(self, machine_type: str) -> bool:
        return machine_type in self.machine_types or machine_family(machine_type) in self.machine_families


@dataclass(frozen=True)
class ServiceScripts(Mapping[str, str]):
    """One release of the service-managed scripts; also a mapping of version/startup/prolog/epilog."""

    version: str = ""
    release_time: datetime | None = None
    startup: str = ""
    prolog: str = ""
    epilog: str = ""

    def __getitem__(self, key: str) -> str:
        if key not in ("version", *SCRIPT_KINDS):
            raise KeyError(key)
        return str(getattr(self, key))

    def __iter__(self) -> Iterator[str]:
        return iter(("version", *SCRIPT_KINDS))

    def __len__(self) -> int:
        return 1 + len(SCRIPT_KINDS)


@dataclass(frozen=True)
class ImageCatalog:
    images: tuple[ImageRelease, ...]  # oldest first
    scripts: Mapping[str, ServiceScripts]  # by version

    @classmethod
    def load(cls, override: Path | None = None) -> ImageCatalog:
        """The packaged catalog, plus the releases of the operator file `override` when it exists."""
        raws: list[tuple[str, Any]] = [("node_images.json", _packaged())]
        if override is not None and Path(override).exists():
            try:
                raws.append((str(override), json.loads(Path(override).read_text(encoding="utf-8"))))
            except (OSError, ValueError) as exc:
                raise ValueError(f"cannot read the node image catalog {override}: {exc}") from None
        return cls.from_dicts(*raws)

    @classmethod
    def from_dicts(cls, *raws: tuple[str, Any]) -> ImageCatalog:
        """A catalog from (source name, parsed JSON) pairs, later ones adding to earlier ones."""
        families: dict[str, frozenset[str]] = {}  # line name -> families, for lines named again later
        images: dict[tuple[str, frozenset[str], frozenset[str]], ImageRelease] = {}
        scripts: dict[str, ServiceScripts] = {}
        for source, raw in raws:
            try:
                for rel in _releases(raw, families):
                    images[(rel.image, rel.machine_families, rel.machine_types)] = rel
                scripts.update(_scripts(raw))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ValueError(f"{source}: invalid node image catalog: {exc!s}") from None
        ordered = tuple(sorted(images.values(), key=lambda r: (r.release_time, r.image)))
        return cls(ordered, scripts)

    # ------------------------------------------------------------ images
    def releases(self, machine_type: str) -> list[ImageRelease]:
        """The releases serving a machine type, oldest first."""
        return [r for r in self.images if r.serves(machine_type)]

    def default_image(self, machine_type: str, now: datetime) -> str:
        """The newest release for this machine type whose release time is not after `now`."""
        released = [r for r in self.releases(machine_type) if r.release_time <= now]
        if not released:
            when = now.isoformat()
            raise LookupError(f"no node image for machine type {machine_type!r} released by {when}")
        return released[-1].image

    def known(self, image: str) -> bool:
        """Whether `image` can be a pool's nodeImage: any syntactically valid image or family name (users may
        bring their own images), not only this catalog's releases."""
        return valid_image_name(image)

    def is_release(self, image: str) -> bool:
        return any(r.image == image for r in self.images)

    # ------------------------------------------------------------ service scripts
    def current_service_scripts(self, now: datetime) -> ServiceScripts:
        """The newest release of the service-managed scripts whose release time is not after `now`."""
        released = [s for s in self.scripts.values() if s.release_time is not None and s.release_time <= now]
        if not released:
            raise LookupError(f"no service scripts release before {now.isoformat()}")
        return max(released, key=lambda s: (s.release_time, s.version))

    def service_scripts(self, version: str) -> ServiceScripts:
        """The scripts of a release; empty scripts for a version this catalog does not have."""
        return self.scripts.get(version) or ServiceScripts(version=version)


@functools.cache
def _packaged() -> Any:
    text = resources.files("trainworks.catalog").joinpath("node_images.json").read_text(encoding="utf-8")
    return json.loads(text)


def _release_time(raw: Mapping[str, Any]) -> datetime:
    return parse_timestamp(raw["releaseTime"] if "releaseTime" in raw else raw["released"])


def _image(raw: Mapping[str, Any], where: str) -> str:
    image = str(raw["image"])
    if not valid_image_name(image):
        raise ValueError(f"{where}: {image!r} is not an image name (projects/P/global/images/NAME)")
    return image


def _names(raw: Mapping[str, Any], key: str) -> frozenset[str]:
    values = raw.get(key, [])
    if not isinstance(values, list):
        raise TypeError(f"{key} must be a list")
    return frozenset(str(v) for v in values)


def _releases(raw: Any, families: dict[str, frozenset[str]]) -> list[ImageRelease]:
    if not isinstance(raw, Mapping):
        raise TypeError("expected a JSON object")
    out: list[ImageRelease] = []
    for line in raw.get("imageLines", []):
        name = str(line["name"])
        inherited = families.get(name, frozenset())
        fams = _names(line, "machineFamilies") if "machineFamilies" in line else inherited
        if not fams:
            raise ValueError(f"image line {name!r} serves no machine family")
        families[name] = fams
        for rel in line.get("releases", []):
            out.append(ImageRelease(_image(rel, f"image line {name!r}"), _release_time(rel), fams, line=name))
    for rel in raw.get("images", []):
        fams, types = _names(rel, "machineFamilies"), _names(rel, "machineTypes")
        if not fams and not types:
            raise ValueError(f"image {rel.get('image')!r} names no machineTypes or machineFamilies")
        out.append(ImageRelease(_image(rel, "images"), _release_time(rel), fams, types))
    return out


def _scripts(raw: Mapping[str, Any]) -> dict[str, ServiceScripts]:
    out: dict[str, ServiceScripts] = {}
    for rel in raw.get("serviceScripts", []):
        version = str(rel["version"])
        if not version:
            raise ValueError("a service scripts release needs a version")
        bodies = {kind: str(rel.get(kind, "")) for kind in SCRIPT_KINDS}
        out[version] = ServiceScripts(version, _release_time(rel), **bodies)
    return out


__all__ = [
    "ImageCatalog",
    "ImageRelease",
    "SCRIPT_KINDS",
    "ServiceScripts",
    "machine_family",
    "valid_image_name",
]
