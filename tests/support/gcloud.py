"""gcloud (the Google Cloud CLI, Debian's google-cloud-cli package) pointed at a test server, with a private
configuration folder: nothing touches the user's own gcloud settings.

The settings are the README's "Point gcloud at Trainworks" recipe, read from README.md and run as written
(the address and project put in), so the recipe is what the tests use."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.server import PROJECT, ServerProcess

GCLOUD = shutil.which("gcloud")
needs_gcloud = pytest.mark.skipif(
    GCLOUD is None, reason="gcloud (the google-cloud-cli package) is not installed"
)

README_SECTION = "## Point gcloud at Trainworks"
README_ADDRESS = "127.0.0.1:8080"
README_PROJECT = "my-project"


def readme_recipe() -> list[list[str]]:
    """The `gcloud config ...` commands of the README's recipe, as argument lists (comments dropped)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(README_SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None, "the README's gcloud recipe has no bash block"
    commands = [shlex.split(line, comments=True) for line in block.group(1).splitlines()]
    return [command for command in commands if command]


@dataclass
class Gcloud:
    """Runs gcloud with its own configuration folder (CLOUDSDK_CONFIG), never prompting."""

    config: Path

    def env(self) -> dict[str, str]:
        """The environment gcloud runs in: this configuration, no prompts, no reporting, no update checks."""
        return {
            **os.environ,
            "CLOUDSDK_CONFIG": str(self.config),
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
        }

    def __call__(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        assert GCLOUD is not None
        return subprocess.run(
            [GCLOUD, *args], env=self.env(), capture_output=True, text=True, timeout=timeout
        )

    def ok(self, *args: str, timeout: float = 180) -> str:
        """gcloud's standard output, after checking that it succeeded."""
        done = self(*args, timeout=timeout)
        assert done.returncode == 0, f"gcloud {' '.join(args)}: {done.stderr}"
        return done.stdout


def gcloud_for(server: ServerProcess, config: Path, project: str = PROJECT) -> Gcloud:
    """gcloud set up by the README's recipe for `server` and `project`, in the folder `config`."""
    config.mkdir(parents=True, exist_ok=True)
    gcloud = Gcloud(config)
    address = server.url.removeprefix("http://")
    for command in readme_recipe():
        assert command[:2] == ["gcloud", "config"], command
        gcloud.ok(
            *[arg.replace(README_ADDRESS, address).replace(README_PROJECT, project) for arg in command[1:]]
        )
    return gcloud
