"""buildspec.yml's structure: ECR login from the project's variables, both flavours (every Dockerfile
target that ships) tagged with version and commit, the image tests run against each very image, every
tag pushed only after success."""
from pathlib import Path

import re

import yaml

SPEC = yaml.safe_load((Path(__file__).resolve().parent.parent.parent / "buildspec.yml").read_text())


def _commands(phase: str) -> list[str]:
    return SPEC["phases"][phase]["commands"]


def test_version_and_phases() -> None:
    assert str(SPEC["version"]) == "0.2"
    assert set(SPEC["phases"]) == {"install", "pre_build", "build", "post_build"}


def test_ecr_login_uses_the_projects_registry_and_names_none() -> None:
    login = next(c for c in _commands("pre_build") if "docker login" in c)
    assert "aws ecr get-login-password" in login and '"$ECR_REGISTRY"' in login
    text = (Path(__file__).resolve().parent.parent.parent / "buildspec.yml").read_text()
    assert ".amazonaws.com" not in text and "docker.io" not in text


def _shipped_flavours() -> set[str]:
    """The Dockerfile's final stages: those no other stage copies from."""
    dockerfile = (Path(__file__).resolve().parent.parent.parent / "Dockerfile").read_text()
    stages = set(re.findall(r"^FROM \S+ AS (\S+)$", dockerfile, re.M))
    return stages - set(re.findall(r"--from=(\S+)", dockerfile))


def test_every_flavour_is_tagged_with_version_and_commit_tested_then_pushed() -> None:
    flavours = _shipped_flavours()
    assert flavours == {"cpu", "gpu"}
    build = " ".join(_commands("build"))
    post = _commands("post_build")
    assert post[0] == 'test "$CODEBUILD_BUILD_SUCCEEDING" = 1'  # nothing is pushed after a failure
    pushes = {c for c in post if c.startswith("docker push")}
    for flavour in flavours:
        assert f"scripts/build-image.sh {flavour} " in build  # which passes --target {flavour} (scripts/build-image.sh)
        assert f'-t "$IMAGE:$TAG-{flavour}"' in build and f'-t "$IMAGE:$TAG-{flavour}-$COMMIT"' in build
        assert f'SMTRAIN_IMAGE="$IMAGE:$TAG-{flavour}-$COMMIT" python3 -m pytest' in build
        assert {f'docker push "$IMAGE:$TAG-{flavour}-$COMMIT"', f'docker push "$IMAGE:$TAG-{flavour}"'} <= pushes
    assert len(pushes) == 2 * len(flavours)
    # the tag names the package's version and TensorFlow's (requirements/tensorflow-version): 0.4.0-tf2.21.0-cpu
    assert 'TAG="$VERSION-tf$(tr -d \'[:space:]\' < requirements/tensorflow-version)"' in _commands("pre_build")
