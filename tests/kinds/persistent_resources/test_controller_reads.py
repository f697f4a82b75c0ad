"""The persistent-resource controller reads the jobs on resources, not every active job: with thousands of
jobs queued elsewhere, a server with one resource stays idle (custom_jobs.persistent_resource, indexed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.feed_looks import STOCKED_OUT, stocked_out_services
from tests.support.jobs import job, python_pool
from tests.support.server import PROJECT
from trainworks.kinds.persistent_resources.service import resource_jobs
from trainworks.store.tables import CustomJobRow
from trainworks.wiring import Services


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with stocked_out_services(tmp_path) as built:
        yield built


def test_a_pass_reads_only_the_jobs_on_resources(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    assert services.persistent_resources is not None and services.persistent_controller is not None
    pool = {"id": "one", "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}
    services.persistent_resources.create(PROJECT, STOCKED_OUT, "pool1", {"resourcePools": [pool]})
    elsewhere = [
        services.custom_jobs.create(PROJECT, STOCKED_OUT, job(python_pool("pass")))["name"] for _ in range(5)
    ]
    on_pool = services.custom_jobs.create(
        PROJECT, STOCKED_OUT, job(python_pool("pass"), persistentResourceId="pool1")
    )["name"]

    def every_active_job() -> list[CustomJobRow]:
        raise AssertionError("the pass read every active job")

    monkeypatch.setattr(services.custom_jobs.store, "active", every_active_job)
    services.persistent_controller.reconcile_once()
    found = resource_jobs(services.custom_jobs)
    assert [(row.id, row.persistent_resource) for row in found] == [(int(on_pool.rsplit("/", 1)[1]), "pool1")]
    assert all(not name.endswith(f"/{found[0].id}") for name in elsewhere)
