"""Each rank writes its environment as JSON to SM_OUTPUT_DATA_DIR/env-<rank>.json."""
import json
import os

with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"env-{os.environ['SM_RANK']}.json"), "w") as f:
    json.dump(dict(os.environ), f)
