from smtrain.config import hyperparameters as hps


def test_decode_keeps_non_json_strings() -> None:
    raw = {"a": "1", "b": '"x"', "c": "true", "d": "[1, 2]", "e": "not json", "f": "", "g": 5}
    assert hps.decode(raw) == {"a": 1, "b": "x", "c": True, "d": [1, 2], "e": "not json", "f": "", "g": 5}


def test_split_between_user_and_toolkit() -> None:
    decoded = {"lr": 1, "sagemaker_program": "t.py", "sagemaker_mpi_enabled": True, "_tuning_objective_metric": "m"}
    assert hps.user_hyperparameters(decoded) == {"lr": 1}
    assert hps.framework_parameters(decoded) == {"sagemaker_mpi_enabled": True}


def test_cmd_args_sorted_dashes_and_dicts() -> None:
    args = hps.to_cmd_args({"zeta": None, "x": 1.5, "opt": {"b": 2, "a": "s"}, "flag": True, "l": [1, 2]})
    assert args == ["--flag", "True", "-l", "[1, 2]", "--opt", "a=s,b=2", "-x", "1.5", "--zeta", ""]
