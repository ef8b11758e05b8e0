"""Print the Python requirements of pyproject.toml (runtime + the given extras), one per
line, so the Makefile can install them before maturin builds the package itself."""

import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
reqs = list(project.get("dependencies", []))
for extra in sys.argv[1:]:
    reqs += project.get("optional-dependencies", {}).get(extra, [])
print("\n".join(reqs))
