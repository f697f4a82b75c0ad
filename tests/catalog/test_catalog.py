"""Tests for the machine-type / accelerator catalog."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trainworks.catalog import (
    UNSPECIFIED,
    AcceleratorInfo,
    MachineType,
    accelerator,
    check_accelerator,
    hourly_price,
    machine_type,
    machine_types,
    suggest,
)

N1_GPUS = ["NVIDIA_TESLA_K80", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_T4"]


def mt(name: str) -> MachineType:
    machine = machine_type(name)
    assert machine is not None, name
    return machine


# --- data -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family", "vcpus", "memory_gib"),
    [
        ("n1-standard-1", "n1", 1, 3.75),
        ("n1-standard-4", "n1", 4, 15),
        ("n1-standard-96", "n1", 96, 360),
        ("n1-highmem-8", "n1", 8, 52),
        ("n1-highmem-96", "n1", 96, 624),
        ("n1-highcpu-16", "n1", 16, 14.4),
        ("n2-standard-128", "n2", 128, 512),
        ("n2-highmem-128", "n2", 128, 864),
        ("n2-highcpu-96", "n2", 96, 96),
        ("e2-standard-32", "e2", 32, 128),
        ("e2-highmem-16", "e2", 16, 128),
        ("e2-highcpu-2", "e2", 2, 2),
        ("c2-standard-30", "c2", 30, 120),
        ("c2-standard-60", "c2", 60, 240),
        ("g2-standard-96", "g2", 96, 384),
        ("a2-highgpu-1g", "a2", 12, 85),
        ("a2-megagpu-16g", "a2", 96, 1360),
        ("a2-ultragpu-8g", "a2", 96, 1360),
        ("a3-highgpu-8g", "a3", 208, 1872),
        ("a3-megagpu-8g", "a3", 208, 1872),
        ("a3-ultragpu-8g", "a3", 224, 2952),
    ],
)
def test_known_figures(name: str, family: str, vcpus: int, memory_gib: float) -> None:
    machine = mt(name)
    assert (machine.family, machine.vcpus, machine.memory_gib) == (family, vcpus, memory_gib)


@pytest.mark.parametrize(
    ("name", "acc", "count"),
    [
        ("g2-standard-4", "NVIDIA_L4", 1),
        ("g2-standard-24", "NVIDIA_L4", 2),
        ("g2-standard-32", "NVIDIA_L4", 1),
        ("g2-standard-48", "NVIDIA_L4", 4),
        ("g2-standard-96", "NVIDIA_L4", 8),
        ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 4),
        ("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16),
        ("a2-ultragpu-2g", "NVIDIA_A100_80GB", 2),
        ("a3-highgpu-1g", "NVIDIA_H100_80GB", 1),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
    ],
)
def test_built_in_accelerators(name: str, acc: str, count: int) -> None:
    machine = mt(name)
    assert (machine.accelerator_type, machine.accelerator_count) == (acc, count)


def test_catalog_coverage_and_consistency() -> None:
    all_types = machine_types()
    names = [m.name for m in all_types]
    assert len(names) == len(set(names)) == 93
    assert {m.family for m in all_types} == {"n1", "n2", "e2", "c2", "g2", "a2", "a3"}
    for m in all_types:
        assert m.name.startswith(m.family + "-")
        assert m.vcpus > 0 and m.memory_gib > 0 and m.hourly_usd > 0
        if m.family in ("g2", "a2", "a3"):
            assert m.accelerator_type is not None and m.accelerator_count > 0
            info = accelerator(m.accelerator_type)
            assert info is not None and m.family in info.allowed_families
        else:
            assert m.accelerator_type is None and m.accelerator_count == 0
    # machine_types() hands out a copy
    all_types.clear()
    assert machine_types()


def test_json_is_marked_approximate() -> None:
    raw = json.loads(resources.files("trainworks.catalog").joinpath("machines.json").read_text())
    assert raw["pricing"]["approximate"] is True
    assert "not billing" in raw["_about"].lower()
    for fam in raw["families"].values():
        assert 0 < fam["spot_factor"] < 1


def test_lookups() -> None:
    assert machine_type("n1-standard-3") is None
    assert accelerator("TPU_V2") is None
    t4 = accelerator("NVIDIA_TESLA_T4")
    assert isinstance(t4, AcceleratorInfo)
    assert t4.allowed_families == ("n1",)
    for name in N1_GPUS:
        info = accelerator(name)
        assert info is not None and info.allowed_families == ("n1",)
    l4 = accelerator("NVIDIA_L4")
    assert l4 is not None and (l4.name, l4.allowed_families) == ("NVIDIA_L4", ("g2",))


# --- check_accelerator: valid requests ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "acc", "count"),
    [
        ("n1-standard-4", UNSPECIFIED, 0),
        ("n1-standard-4", "", 0),
        ("n1-standard-96", UNSPECIFIED, 0),
        ("n1-standard-4", "NVIDIA_TESLA_T4", 1),
        ("n1-standard-16", "NVIDIA_TESLA_T4", 2),
        ("n1-standard-96", "NVIDIA_TESLA_T4", 4),
        ("n1-highmem-8", "NVIDIA_TESLA_V100", 1),
        ("n1-standard-8", "NVIDIA_TESLA_V100", 8),
        ("n1-highcpu-96", "NVIDIA_TESLA_V100", 8),
        ("n1-standard-8", "NVIDIA_TESLA_P100", 4),
        ("n1-standard-8", "NVIDIA_TESLA_P4", 2),
        ("n1-standard-8", "NVIDIA_TESLA_K80", 1),
        ("n1-standard-32", "NVIDIA_TESLA_K80", 8),
        ("n2-standard-8", UNSPECIFIED, 0),
        ("e2-standard-4", UNSPECIFIED, 0),
        ("c2-standard-60", UNSPECIFIED, 0),
        ("g2-standard-24", "NVIDIA_L4", 2),
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
        ("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16),
        ("a2-ultragpu-4g", "NVIDIA_A100_80GB", 4),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
    ],
)
def test_valid_requests(name: str, acc: str, count: int) -> None:
    assert check_accelerator(mt(name), acc, count) is None


def test_every_built_in_combination_is_valid() -> None:
    for m in machine_types():
        if m.accelerator_type is not None:
            assert check_accelerator(m, m.accelerator_type, m.accelerator_count) is None


# --- check_accelerator: invalid requests ----------------------------------------------------------------


def test_accelerator_optimized_requires_its_accelerator() -> None:
    msg = check_accelerator(mt("a2-highgpu-1g"), UNSPECIFIED, 0)
    assert msg is not None and "NVIDIA_TESLA_A100" in msg and "accelerator_count 1" in msg
    msg = check_accelerator(mt("g2-standard-48"), "", 0)
    assert msg is not None and "NVIDIA_L4" in msg and "4" in msg


def test_accelerator_optimized_rejects_other_type() -> None:
    msg = check_accelerator(mt("a3-highgpu-8g"), "NVIDIA_H200_141GB", 8)
    assert msg is not None and "NVIDIA_H100_80GB" in msg and "NVIDIA_H200_141GB" in msg
    msg = check_accelerator(mt("a2-ultragpu-1g"), "NVIDIA_TESLA_A100", 1)
    assert msg is not None and "NVIDIA_A100_80GB" in msg


@pytest.mark.parametrize("count", [0, 1, 4, 16])
def test_accelerator_optimized_rejects_other_count(count: int) -> None:
    msg = check_accelerator(mt("a2-highgpu-8g"), "NVIDIA_TESLA_A100", count)
    assert msg is not None and "accelerator_count 8" in msg


@pytest.mark.parametrize("name", ["n2-standard-8", "e2-highmem-4", "c2-standard-16"])
def test_no_accelerator_families_reject_accelerators(name: str) -> None:
    msg = check_accelerator(mt(name), "NVIDIA_TESLA_T4", 1)
    assert msg is not None and "does not support accelerators" in msg and UNSPECIFIED in msg
    msg = check_accelerator(mt(name), UNSPECIFIED, 2)
    assert msg is not None and "accelerator_count" in msg


def test_count_without_type() -> None:
    msg = check_accelerator(mt("n1-standard-4"), UNSPECIFIED, 1)
    assert msg is not None and "unset" in msg
    for name in N1_GPUS:
        assert name in msg


def test_type_with_zero_count() -> None:
    msg = check_accelerator(mt("n1-standard-4"), "NVIDIA_TESLA_T4", 0)
    assert msg is not None and "1, 2, 4" in msg


def test_negative_count() -> None:
    msg = check_accelerator(mt("n1-standard-4"), UNSPECIFIED, -1)
    assert msg is not None and ">= 0" in msg


@pytest.mark.parametrize(
    ("acc", "bad", "allowed"),
    [
        ("NVIDIA_TESLA_T4", 3, "1, 2, 4"),
        ("NVIDIA_TESLA_T4", 8, "1, 2, 4"),
        ("NVIDIA_TESLA_P4", 8, "1, 2, 4"),
        ("NVIDIA_TESLA_P100", 8, "1, 2, 4"),
        ("NVIDIA_TESLA_V100", 16, "1, 2, 4, 8"),
        ("NVIDIA_TESLA_K80", 3, "1, 2, 4, 8"),
    ],
)
def test_n1_count_not_allowed(acc: str, bad: int, allowed: str) -> None:
    msg = check_accelerator(mt("n1-standard-4"), acc, bad)
    assert msg is not None and f"allowed counts: {allowed}" in msg


def test_n1_rejects_non_n1_accelerators() -> None:
    msg = check_accelerator(mt("n1-standard-8"), "NVIDIA_L4", 1)
    assert msg is not None and "g2" in msg
    for name in N1_GPUS:
        assert name in msg
    msg = check_accelerator(mt("n1-standard-8"), "NVIDIA_TESLA_A100", 1)
    assert msg is not None and "a2" in msg


def test_unknown_accelerator() -> None:
    msg = check_accelerator(mt("n1-standard-8"), "TPU_V2", 1)
    assert msg is not None and "unknown" in msg and "NVIDIA_TESLA_T4" in msg


@pytest.mark.parametrize(
    ("name", "acc", "count", "expect"),
    [
        ("n1-standard-64", "NVIDIA_TESLA_T4", 1, "48 vCPUs"),
        ("n1-standard-16", "NVIDIA_TESLA_V100", 1, "12 vCPUs"),
        ("n1-standard-32", "NVIDIA_TESLA_P100", 1, "16 vCPUs"),
        ("n1-standard-32", "NVIDIA_TESLA_P4", 1, "24 vCPUs"),
        ("n1-standard-16", "NVIDIA_TESLA_K80", 1, "8 vCPUs"),
        ("n1-standard-64", "NVIDIA_TESLA_P100", 4, "208 GiB"),  # memory, not vCPU, is the limit here
    ],
)
def test_n1_vcpu_and_memory_limits(name: str, acc: str, count: int, expect: str) -> None:
    msg = check_accelerator(mt(name), acc, count)
    assert msg is not None and expect in msg and name in msg


def test_limit_message_suggests_counts_that_fit() -> None:
    msg = check_accelerator(mt("n1-standard-64"), "NVIDIA_TESLA_T4", 1)
    assert msg is not None and "accelerator_count 4" in msg


# --- prices -------------------------------------------------------------------------------------------


def test_machine_price_components() -> None:
    # n1-standard-1 lists at roughly $0.0475/h in us-central1
    assert mt("n1-standard-1").hourly_usd == pytest.approx(0.0475, rel=0.02)
    assert mt("n1-standard-8").hourly_usd == pytest.approx(8 * mt("n1-standard-1").hourly_usd, rel=1e-4)
    assert mt("e2-standard-4").hourly_usd < mt("n2-standard-4").hourly_usd


def test_price_sanity() -> None:
    for m in machine_types():
        on_demand = hourly_price(m.name, UNSPECIFIED, 0)
        assert on_demand >= m.hourly_usd > 0
        assert 0 < hourly_price(m.name, UNSPECIFIED, 0, spot=True) < on_demand


def test_gpu_adds_cost() -> None:
    base = hourly_price("n1-standard-8", UNSPECIFIED, 0)
    one = hourly_price("n1-standard-8", "NVIDIA_TESLA_T4", 1)
    four = hourly_price("n1-standard-8", "NVIDIA_TESLA_T4", 4)
    assert base < one < four
    t4 = accelerator("NVIDIA_TESLA_T4")
    assert t4 is not None
    assert four - base == pytest.approx(4 * t4.hourly_usd)
    assert hourly_price("n1-standard-8", "NVIDIA_TESLA_V100", 1) > one


def test_built_in_gpus_are_always_priced() -> None:
    a100 = accelerator("NVIDIA_TESLA_A100")
    assert a100 is not None
    machine = mt("a2-highgpu-2g")
    expected = machine.hourly_usd + 2 * a100.hourly_usd
    assert hourly_price("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2) == pytest.approx(expected)
    assert hourly_price("a2-highgpu-2g", UNSPECIFIED, 0) == pytest.approx(expected)
    assert hourly_price("a3-highgpu-8g", UNSPECIFIED, 0) > hourly_price("a2-highgpu-8g", UNSPECIFIED, 0)


def test_price_unknown_names() -> None:
    with pytest.raises(ValueError, match="n1-standard-4"):
        hourly_price("n1-standard-5", UNSPECIFIED, 0)
    with pytest.raises(ValueError, match="NVIDIA_FAKE"):
        hourly_price("n1-standard-4", "NVIDIA_FAKE", 1)


# --- suggest ------------------------------------------------------------------------------------------


def test_suggest() -> None:
    assert suggest("n1-standrd-4")[0] == "n1-standard-4"
    assert "a2-highgpu-8g" in suggest("a2-highgpu-3g")
    assert suggest("N1-STANDARD-4")[0] == "n1-standard-4"
    assert len(suggest("n1-standard")) <= 3
    assert suggest("completely-different-thing") == []
