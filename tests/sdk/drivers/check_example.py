"""Checks a README example against the SDK it is written for, without reaching AWS: runs every
statement of the example but its last (the objects are built, as the SDK validates them), then
binds the last statement's call - `trainer.train(...)`, `estimator.fit(...)` - to the signature of
the method it calls, and fails if they do not fit. Run by the SDK's own Python, with the example's
file as its argument; prints `EXAMPLE-OK <what was called>`.

One stand-in, because AWS cannot be reached here: SDK v3's ModelTrainer validates its role with IAM
when it is built (`TrainDefaults.get_role`); that call returns the role as given."""
import ast
import inspect
import sys

source = open(sys.argv[1]).read()
tree = ast.parse(source)
*body, last = tree.body
if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Attribute)):
    raise SystemExit("the example's last statement is not a method call")
try:
    from sagemaker.train.defaults import TrainDefaults

    TrainDefaults.get_role = staticmethod(lambda role=None, sagemaker_session=None: role)
except ImportError:  # SDK v2
    pass
namespace: dict = {}
exec(compile(ast.Module(body=body, type_ignores=[]), sys.argv[1], "exec"), namespace)
call = last.value
method = eval(compile(ast.Expression(call.func), sys.argv[1], "eval"), namespace)
args = [eval(compile(ast.Expression(a), sys.argv[1], "eval"), namespace) for a in call.args]
kwargs = {k.arg: eval(compile(ast.Expression(k.value), sys.argv[1], "eval"), namespace) for k in call.keywords}
inspect.signature(method).bind(*args, **kwargs)
print(f"EXAMPLE-OK {type(method.__self__).__name__}.{method.__name__}", flush=True)
