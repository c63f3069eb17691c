"""Which names look secret, and masking their values in toolkit text (smtrain.config.secrets)."""
from smtrain.config.secrets import MASK, Redactor, looks_secret


def test_secret_looking_names_any_case() -> None:
    for name in ("db_password", "SM_HP_DB_PASSWORD", "api-token", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "my_credentials", "PASSWD", "hf_Token"):
        assert looks_secret(name), name
    for name in ("epochs", "learning_rate", "SM_HOSTS", "batch-size", "PATH"):
        assert not looks_secret(name), name


def test_values_are_masked_wherever_they_appear_longest_first() -> None:
    redact = Redactor.of({"db_password": "hunter22", "token": "hunter22-long", "epochs": 3, "key": "no"})
    text = "--db_password hunter22 --token hunter22-long --epochs 3 no"
    assert redact(text) == f"--db_password {MASK} --token {MASK} --epochs 3 no"  # 'no' is too short to mask
    assert not Redactor.of({"epochs": 3})
    assert Redactor()("unchanged") == "unchanged"


def test_merged_redactors_mask_both() -> None:
    both = Redactor.of({"A_TOKEN": "abc123"}).merged(Redactor.of({"password": "xyz789"}))
    assert both("abc123 xyz789") == f"{MASK} {MASK}"
