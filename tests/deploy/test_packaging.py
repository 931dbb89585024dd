"""The Dockerfile (hadolint, what it copies), skaffold.yaml, and the plain-manifest bundle's drift."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from tests.deploy.conftest import CHART, ROOT, render_text, run, tool

pytestmark = pytest.mark.deploy

SERVICES = {p.parent.name: p for p in (ROOT / "services").glob("*/pyproject.toml")}
LIBS = sorted(p.parent.name for p in (ROOT / "libs").glob("*/pyproject.toml"))


def test_hadolint_passes():
    run([tool("hadolint"), "--failure-threshold", "info", str(ROOT / "Dockerfile")])


def test_dockerfile_copies_every_workspace_member_and_what_it_needs():
    text = (ROOT / "Dockerfile").read_text()
    assert "common" in LIBS
    # Every member of the workspace (services, libraries, the client): uv checks the lock against them all.
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    members = sorted(
        str(p.parent.relative_to(ROOT))
        for pattern in patterns
        for p in ROOT.glob(f"{pattern}/pyproject.toml")
    )
    assert {"libs/common", "services/api", "clients/python"} <= set(members)
    for member in members:
        assert f"COPY {member}/pyproject.toml" in text, member
    assert re.search(r"FROM ghcr.io/astral-sh/uv:\d+\.\d+\.\d+ ", text), "uv must be pinned"
    assert "--no-install-workspace" in text and "USER 10001" in text
    ignore = (ROOT / ".dockerignore").read_text()
    for needed in (
        "pyproject.toml",
        "uv.lock",
        "specialists.yaml",
        "libs/",
        "services/",
        "clients/python/pyproject.toml",
    ):
        assert f"!{needed}" in ignore


def test_no_service_depends_on_the_dev_launcher():
    """libs/devkit starts processes for make up, the tests and the benchmark: it must never reach an image."""
    for name, path in SERVICES.items():
        dependencies = tomllib.loads(path.read_text())["project"]["dependencies"]
        assert not [d for d in dependencies if d.startswith("taskyard-devkit")], name
    common = tomllib.loads((ROOT / "libs" / "common" / "pyproject.toml").read_text())
    assert not [d for d in common["project"]["dependencies"] if d.startswith("taskyard-devkit")]


def _skaffold():
    return yaml.safe_load((ROOT / "skaffold.yaml").read_text())


def test_skaffold_builds_one_image_per_service_from_the_root_dockerfile():
    artifacts = _skaffold()["build"]["artifacts"]
    packages = {a["docker"]["buildArgs"]["PACKAGE"] for a in artifacts}
    expected = {tomllib.loads(p.read_text())["project"]["name"] for p in SERVICES.values()}
    assert packages == expected
    for a in artifacts:
        assert (ROOT / a["context"] / a["docker"]["dockerfile"]).is_file()
        assert a["image"] == a["docker"]["buildArgs"]["PACKAGE"]


def test_skaffold_helm_release_sets_chart_image_values_from_its_artifacts():
    config = _skaffold()
    (release,) = config["deploy"]["helm"]["releases"]
    assert (ROOT / release["chartPath"]) == CHART
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    images = {a["image"].replace("-", "_") for a in config["build"]["artifacts"]}
    for key, template in release["setValueTemplates"].items():
        node = values
        for part in key.split("."):
            assert part in node, f"{key} is not a chart value"
            node = node[part]
        (artifact,) = set(re.findall(r"IMAGE_(?:REPO|TAG|DIGEST)_([a-z_]+)", template))
        assert artifact in images
    for profile in config["profiles"]:
        for patch in profile.get("patches", []):
            for file in patch["value"] if isinstance(patch["value"], list) else []:
                assert (ROOT / file).is_file(), file
                run([tool("helm"), "template", "t", str(CHART), "-f", str(ROOT / file)])
    assert {p["name"] for p in config["profiles"]} == {"dev", "prod"}


def test_manifest_bundle_matches_the_chart():
    bundle = (ROOT / "deploy" / "manifests" / "taskyard.yaml").read_text()
    body = "\n".join(
        line
        for line in bundle.splitlines()
        if not line.startswith("# Generated") and not line.startswith("# kubectl")
    )
    assert body.strip() == render_text(namespace="taskyard", include_crds=True).strip(), (
        "deploy/manifests is stale: run `make manifests`"
    )
