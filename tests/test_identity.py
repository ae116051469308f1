"""The project's identity: its version sorts above every JAXMg 1.x release (the predecessor,
published under the same distribution name `jaxmg`), and the files that name the version or the
license agree with pyproject.toml. No build or install is needed."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = Version(PYPROJECT["project"]["version"])
# JAXMg releases on the package index (1.1.1 is the newest for Python 3.11, 1.4.1 for 3.12+),
# and a 1.x that may come.
JAXMG_RELEASES = ["0.0.9", "1.0.0", "1.1.1", "1.1.1rc1", "1.4.1", "1.4.1rc1", "1.99.99.post9"]


def source_version() -> str:
    """jaxmg/__init__.py's __version__, read without importing jax."""
    tree = ast.parse((REPO / "jaxmg" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError("jaxmg/__init__.py sets no __version__")


def test_the_distribution_is_jaxmg():
    assert PYPROJECT["project"]["name"] == "jaxmg"


@pytest.mark.parametrize("release", JAXMG_RELEASES)
def test_the_version_sorts_above_every_jaxmg_1x_release(release):
    assert VERSION > Version(release), f"{VERSION} does not replace JAXMg {release}"


def test_the_version_is_2_0_0_or_later_and_a_final_release():
    """2.0.0 and up: above JAXMg 1.x. A final release, so that `jaxmg>=2` (the documented pin)
    and pip's default (no --pre) accept it."""
    assert VERSION >= Version("2.0.0")
    assert not VERSION.is_prerelease and not VERSION.is_devrelease and VERSION.local is None
    # what pip does with a `>=2` pin: 1.4.1 from the index never satisfies it
    from packaging.specifiers import SpecifierSet

    pin = SpecifierSet(">=2")
    assert VERSION in pin and Version("1.4.1") not in pin


def test_jaxmg_version_matches_pyproject():
    assert source_version() == str(VERSION)


def test_license_file_is_the_apache_2_0_text_that_pyproject_names():
    license_ = PYPROJECT["project"]["license"]
    assert (license_.get("text") if isinstance(license_, dict) else license_) == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a notice


def test_changelog_has_this_version_and_a_versioning_policy():
    text = (REPO / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in text and "Semantic Versioning" in text
    assert "## Versioning policy" in text and "## [Unreleased]" in text
    releases = re.findall(r"^## \[(\d[^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases, "no released version heading (## [X.Y.Z] - YYYY-MM-DD)"
    assert releases[0][0] == str(VERSION), f"the newest entry is {releases[0][0]}, not {VERSION}"
    versions = [Version(v) for v, _ in releases]
    assert versions == sorted(versions, reverse=True), "entries are not newest first"
    assert "JAXMg 1.x promise" in text and "docs/migrating.md" in text


def test_citation_cites_this_version_and_the_jaxmg_paper():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["type"] == "software" and cff["title"].startswith("jaxmg")
    assert str(cff["version"]) == str(VERSION)
    assert cff["license"] == "Apache-2.0"
    assert cff["authors"] and cff["message"]
    paper = next(r for r in cff["references"] if r["type"] == "article")
    assert paper["title"] == "JAXMg: A multi-GPU linear solver in JAX"
    assert [a["family-names"] for a in paper["authors"]] == ["Tutt", "Wiersema"]
    assert paper["identifiers"][0]["value"] == "arXiv:2601.14466"
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert f"## [{VERSION}] - {cff['date-released']}" in changelog, "release dates differ"
