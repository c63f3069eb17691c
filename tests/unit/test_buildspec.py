"""buildspec.yml's structure: ECR login from the project's variables, the image tagged with version
and commit, the image tests run against that very image, both tags pushed only after success."""
from pathlib import Path

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


def test_image_is_tagged_with_version_and_commit_tested_then_pushed() -> None:
    build = " ".join(_commands("build"))
    assert '-t "$IMAGE:$VERSION-cpu"' in build and '-t "$IMAGE:$VERSION-cpu-$COMMIT"' in build
    assert 'SMTRAIN_IMAGE="$IMAGE:$VERSION-cpu-$COMMIT"' in build and "tests/image" in build
    post = _commands("post_build")
    assert post[0] == 'test "$CODEBUILD_BUILD_SUCCEEDING" = 1'  # nothing is pushed after a failure
    assert {c for c in post if c.startswith("docker push")} == {'docker push "$IMAGE:$VERSION-cpu-$COMMIT"',
                                                              'docker push "$IMAGE:$VERSION-cpu"'}
