"""lambdify's numpy namespace (explorer.cost.compile._numpy_namespace): the names sympy's `from numpy import *`
binds, bound to the same objects, without importing numpy's lazily loaded subpackages (f2py, testing, ma, ...:
0.23 s CPU of a cold evaluation). Run in a fresh interpreter: a test session has imported them already."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import importlib, json, sys
import numpy, sympy
from explorer.cost.compile import lambdify
x = sympy.Symbol("x")
f = lambdify([x], [sympy.Max(x, 1) + sympy.Abs(x)])
lazy = sorted(m for m in getattr(numpy, "__numpy_submodules__", ()) if f"numpy.{m}" in sys.modules
              and m not in ("linalg", "lib", "core", "dtypes", "exceptions"))
module = importlib.import_module("sympy.utilities.lambdify")
namespace, default, translations, commands = module.MODULES["numpy"]
reference = dict(default)
exec(commands[0], {}, reference)          # sympy's own command: `from numpy import *` (imports the subpackages)
for name, target in translations.items():
    reference[name] = reference[target]
reference.setdefault("Abs", abs)
subpackages = set(getattr(numpy, "__numpy_submodules__", ()))
missing = sorted(set(reference) - set(namespace) - subpackages)
differ = sorted(k for k in namespace if k in reference and namespace[k] is not reference[k])
print(json.dumps({"lazy": lazy, "missing": missing, "differ": differ, "value": float(f(-2.0)[0])}))
"""


def test_the_namespace_is_sympys_without_numpys_subpackages():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, check=True, capture_output=True, text=True,
                         env={"BRIDGING_DL_CACHE": "off", "PATH": "/usr/bin:/bin"})
    got = json.loads(out.stdout)
    assert got["lazy"] == [], got          # no subpackage imported by compiling
    assert got["missing"] == [] and got["differ"] == [], got
    assert got["value"] == 3.0             # max(-2, 1) + |-2|
