"""Writes the frameworks' own tables that tests/test_codegen_frameworks.py checks the exports against.

Each table is read out of the framework's source at one cited commit or release, never typed by hand:

    python tests/data/frameworks/make_tables.py megatron   DIR --commit SHA   # a Megatron-LM tree
    python tests/data/frameworks/make_tables.py deepspeed  DIR --commit SHA   # a DeepSpeed tree
    python tests/data/frameworks/make_tables.py torchtitan DIR --commit SHA   # a torchtitan tree
    python tests/data/frameworks/make_tables.py mindspore  DIR --version V    # an unpacked MindSpore wheel

DIR is a checkout (or `git archive <commit> | tar -x`) of the cited repository; --commit names the commit
the tree was taken at (default: `git -C DIR rev-parse HEAD`). The files land next to this script:

* megatron_arguments.json: every option string of Megatron-LM's argument parser
  (megatron/training/arguments.py add_megatron_arguments, including the groups it builds from the
  TransformerConfig and other dataclasses), with its dest, action, type, default and choices. Megatron is
  imported to build the parser: torch must be installed; the two modules that need triton at import
  (MoE paged-stash ops and the SSM ops) are replaced by empty stand-ins, and typing.override (Python
  3.12) by the identity on older Pythons. Nothing of them is used by the parser.
* deepspeed_keys.json: the configuration keys DeepSpeed reads: the string constants of
  deepspeed/runtime/constants.py (top level), the fields and aliases of DeepSpeedZeroConfig
  (deepspeed/runtime/zero/config.py), the "pipeline" defaults of get_pipeline_config
  (deepspeed/runtime/config.py) and the activation-checkpointing keys
  (deepspeed/runtime/activation_checkpointing/config.py). Read with ast; nothing is imported.
* torchtitan_config.json: every [section] and key of torchtitan's JobConfig
  (torchtitan/config/job_config.py: the JobConfig dataclass's fields and each section dataclass's
  fields, with their Literal choices), and the llama3 flavors (torchtitan/models/llama3/__init__.py).
  Read with ast; nothing is imported.
* megatron_bridge_fields.json: the fields of the dataclass behind each ConfigContainer section a recipe sets
  (model: GPTModelProvider with Megatron-Core's TransformerConfig and ModelParallelConfig; train, ddp, optimizer,
  dataset, tokenizer, checkpoint, mixed_precision, comm_overlap), every base class followed through the
  modules' imports into the Megatron-LM tree Megatron-Bridge pins (its 3rdparty/Megatron-LM submodule), the
  mixed-precision recipe functions, AttnBackend's members and the names each imported module defines.
  Read with ast; nothing is imported:
      python tests/data/frameworks/make_tables.py megatron-bridge BRIDGE --commit SHA \
          --megatron-lm MLM --megatron-lm-commit SHA
  (BRIDGE a Megatron-Bridge tree, MLM the Megatron-LM tree at the commit of BRIDGE's submodule).
* mindspore_api.json: the keys set_auto_parallel_context accepts (_set_auto_parallel_context_func_map in
  mindspore/parallel/_auto_parallel_context.py), the parallel_optimizer_config keys and optimizer levels
  (set_parallel_optimizer_config), the pipeline schedulers, auto_mixed_precision's levels and dtypes
  (mindspore/train/amp.py), the Primitive classes of mindspore/ops and the operators with a parallel
  implementation (mindspore/include/.../frontend/parallel/ops_info/*.h). Read as text.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _commit(root: Path, given: str | None) -> str:
    if given:
        return given
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(x) for x in value]
    return repr(value)


def _write(name: str, table: dict) -> None:
    path = HERE / name
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path}")


# ---- Megatron-LM ----------------------------------------------------------------------------------

class _Stub(types.ModuleType):
    """An empty stand-in module: every attribute is another stand-in, calling one returns it (or, used as
    a decorator, the function it decorates)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")

    def __call__(self, *args, **kwargs):
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else self


def stub_modules(prefixes) -> None:
    """Import the modules under `prefixes` as empty stand-ins (modules a framework imports but its
    configuration code never uses, e.g. Triton kernels on a machine without Triton)."""
    import importlib.abc
    import importlib.machinery

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if any(name == p or name.startswith(p + ".") for p in prefixes):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            module = _Stub(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Finder())


MEGATRON_STUBS = ("megatron.core.transformer.moe.ops", "megatron.core.ssm.ops")
TORCHTITAN_STUBS = ("torchtitan.models.moe.kernels",)


def import_megatron(root: Path):
    """megatron.training.arguments from the tree at `root` (torch needed; Triton modules stubbed)."""
    import typing
    if not hasattr(typing, "override"):
        typing.override = lambda f: f
    stub_modules(MEGATRON_STUBS)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    argv, sys.argv = sys.argv, ["megatron"]
    try:
        from megatron.training import arguments
    finally:
        sys.argv = argv
    return arguments


def megatron(root: Path, commit: str) -> dict:
    parser = import_megatron(root).add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    kinds = {argparse._StoreTrueAction: "store_true", argparse._StoreFalseAction: "store_false",
             argparse._StoreAction: "store", argparse._AppendAction: "append",
             argparse._StoreConstAction: "store_const"}
    flags = {}
    for action in parser._actions:
        for option in action.option_strings:
            flags[option] = {"dest": action.dest, "action": kinds.get(type(action), type(action).__name__),
                             "default": _jsonable(action.default),
                             "choices": _jsonable(list(action.choices)) if action.choices else None,
                             "nargs": _jsonable(action.nargs),
                             "type": action.type.__name__ if action.type in (int, float, str) else
                             (None if action.type is None else "other")}
    return {"source": {"repository": "NVIDIA/Megatron-LM", "commit": commit,
                       "path": "megatron/training/arguments.py (add_megatron_arguments)"},
            "generator": "tests/data/frameworks/make_tables.py megatron", "flags": flags}


# ---- DeepSpeed --------------------------------------------------------------------------------------

def _string_constants(text: str) -> dict:
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.endswith("_FORMAT"):
                    out[target.id] = node.value.value
    return out


def deepspeed(root: Path, commit: str) -> dict:
    runtime = root / "deepspeed" / "runtime"
    constants = _string_constants((runtime / "constants.py").read_text(encoding="utf-8"))
    constants.update(_string_constants((runtime / "zero" / "config.py").read_text(encoding="utf-8")))
    top = sorted({v for k, v in constants.items() if not k.endswith("_DEFAULT") and re.fullmatch(r"[a-z0-9_]+", v)})
    zero = []
    tree = ast.parse((runtime / "zero" / "config.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "DeepSpeedZeroConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    zero.append(item.target.id)
                    if isinstance(item.value, ast.Call):
                        zero += [kw.value.value for kw in item.value.keywords
                                 if kw.arg == "alias" and isinstance(kw.value, ast.Constant)]
    pipeline, section = [], None
    tree = ast.parse((runtime / "config.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_pipeline_config":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict) and sub.keys and not pipeline:
                    pipeline = [k.value for k in sub.keys if isinstance(k, ast.Constant)]
                if isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "get" and sub.args \
                        and isinstance(sub.args[0], ast.Constant):
                    section = sub.args[0].value
    act_constants = _string_constants((runtime / "activation_checkpointing" / "config.py").read_text(encoding="utf-8"))
    act = sorted(v for k, v in act_constants.items() if k != "ACT_CHKPT")
    version = (root / "version.txt").read_text(encoding="utf-8").strip() if (root / "version.txt").exists() else ""
    return {"source": {"repository": "deepspeedai/DeepSpeed", "commit": commit, "version.txt": version,
                       "paths": ["deepspeed/runtime/constants.py", "deepspeed/runtime/zero/config.py",
                                 "deepspeed/runtime/config.py",
                                 "deepspeed/runtime/activation_checkpointing/config.py"]},
            "generator": "tests/data/frameworks/make_tables.py deepspeed",
            "config_keys": sorted(set(top) | ({section} if section else set()) | {act_constants["ACT_CHKPT"]}),
            "zero_optimization": sorted(set(zero)), "pipeline": pipeline,
            "activation_checkpointing": [k for k in act if re.fullmatch(r"[a-z0-9_]+", k)]}


# ---- torchtitan -------------------------------------------------------------------------------------

def _literal_choices(annotation):
    """The values of a Literal[...] annotation, else None."""
    if isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", "") == "Literal":
        elts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        return [e.value for e in elts if isinstance(e, ast.Constant)]
    return None


def torchtitan(root: Path, commit: str) -> dict:
    tree = ast.parse((root / "torchtitan" / "config" / "job_config.py").read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def fields(cls):
        out = {}
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                default = item.value.value if isinstance(item.value, ast.Constant) else None
                out[item.target.id] = {"type": ast.unparse(item.annotation), "default": _jsonable(default),
                                       "choices": _literal_choices(item.annotation)}
        return out

    sections = {}
    for name, spec in fields(classes["JobConfig"]).items():
        if spec["type"] in classes:
            sections[name] = fields(classes[spec["type"]])
    flavors = {}
    llama3 = ast.parse((root / "torchtitan" / "models" / "llama3" / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(llama3):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Call) \
                        and getattr(value.func, "id", "") == "TransformerModelArgs":
                    flavors[key.value] = {kw.arg: kw.value.value for kw in value.keywords
                                          if isinstance(kw.value, ast.Constant)}
    args = ast.parse((root / "torchtitan" / "models" / "llama3" / "model" / "args.py").read_text(encoding="utf-8"))
    defaults = {}
    for node in ast.walk(args):
        if isinstance(node, ast.ClassDef) and node.name == "TransformerModelArgs":
            defaults = {k: v["default"] for k, v in fields(node).items()}
    models = sorted(p.name for p in (root / "torchtitan" / "models").iterdir()
                    if p.is_dir() and (p / "__init__.py").exists() and not p.name.startswith("_"))
    return {"source": {"repository": "pytorch/torchtitan", "commit": commit,
                       "paths": ["torchtitan/config/job_config.py", "torchtitan/models/llama3/__init__.py",
                                 "torchtitan/models/llama3/model/args.py"]},
            "generator": "tests/data/frameworks/make_tables.py torchtitan",
            "sections": sections, "llama3_flavors": flavors, "llama3_model_args_defaults": defaults,
            "models": models}


# ---- Megatron-Bridge --------------------------------------------------------------------------------

BRIDGE_SECTIONS = {"model": ("megatron.bridge.models.gpt_provider", "GPTModelProvider"),
                   "train": ("megatron.bridge.training.config", "TrainingConfig"),
                   "ddp": ("megatron.bridge.training.config", "DistributedDataParallelConfig"),
                   "optimizer": ("megatron.bridge.training.config", "OptimizerConfig"),
                   "dataset": ("megatron.bridge.training.config", "GPTDatasetConfig"),
                   "tokenizer": ("megatron.bridge.training.tokenizers.config", "TokenizerConfig"),
                   "checkpoint": ("megatron.bridge.training.config", "CheckpointConfig"),
                   "mixed_precision": ("megatron.bridge.training.mixed_precision", "MixedPrecisionConfig"),
                   "comm_overlap": ("megatron.bridge.training.comm_overlap", "CommOverlapConfig"),
                   "container": ("megatron.bridge.training.config", "ConfigContainer")}
"""ConfigContainer section -> the class recipes/common.py _pretrain_common() puts there (dataset: GPTDatasetConfig,
model: the GPTModelProvider the exported recipe sets)."""
BRIDGE_MODULES = ("megatron.bridge.models.gpt_provider", "megatron.bridge.recipes.common",
                  "megatron.bridge.training.comm_overlap", "megatron.bridge.training.config",
                  "megatron.bridge.training.mixed_precision", "megatron.core.transformer.enums")


class _Modules:
    """Python modules of several trees by dotted name, parsed once; classes resolved through imports."""

    def __init__(self, roots):
        self.roots, self.trees, self.packages = roots, {}, set()

    def tree(self, module: str):
        if module not in self.trees:
            self.trees[module] = None
            for root in self.roots:
                base = root / module.replace(".", "/")
                for path in (base.with_name(base.name + ".py"), base / "__init__.py"):
                    if path.exists() and self.trees[module] is None:
                        self.trees[module] = ast.parse(path.read_text(encoding="utf-8"))
                        if path.name == "__init__.py":
                            self.packages.add(module)
        return self.trees[module]

    def absolute(self, module: str, node: ast.ImportFrom) -> str:
        """The dotted module an ImportFrom in `module` names (relative imports resolved)."""
        if not node.level:
            return node.module
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if module in self.packages else 0)
        return ".".join(parts[:keep] + ([node.module] if node.module else []))

    def names(self, module: str) -> list:
        tree = self.tree(module)
        out = set()
        for node in tree.body if tree else []:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                out.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out |= {a.asname or a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.Assign):
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        return sorted(out)

    def find(self, module: str, name: str, depth: int = 0):
        """(module, ClassDef) of `name` as `module` sees it, following `from X import Y as name`."""
        tree = self.tree(module)
        if tree is None or depth > 8:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self.find(self.absolute(module, node), alias.name, depth + 1)
        return None

    def fields(self, module: str, name: str) -> tuple:
        """(dataclass fields of the class and all its bases, the classes walked as 'module.Class')."""
        found = self.find(module, name)
        if found is None:
            return set(), []
        where, cls = found
        fields = {item.target.id for item in cls.body
                  if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
        walked = [f"{where}.{cls.name}"]
        for base in cls.bases:
            base = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(base, ast.Name):
                more, seen = self.fields(where, base.id)
                fields |= more
                walked += seen
        return fields, walked


def megatron_bridge(root: Path, commit: str, mlm: Path, mlm_commit: str) -> dict:
    modules = _Modules([root / "src", mlm])
    sections = {}
    for section, (module, name) in BRIDGE_SECTIONS.items():
        fields, walked = modules.fields(module, name)
        sections[section] = {"class": f"{module}.{name}", "classes": walked, "fields": sorted(fields)}
    enums = modules.find("megatron.core.transformer.enums", "AttnBackend")[1]
    recipes = [n.name for n in modules.tree("megatron.bridge.training.mixed_precision").body
               if isinstance(n, ast.FunctionDef) and n.returns is not None and n.name.endswith("_mixed")
               and ast.unparse(n.returns).strip("'\"") == "MixedPrecisionConfig"]
    return {"source": {"repository": "NVIDIA-NeMo/Megatron-Bridge", "commit": commit,
                       "megatron_lm": {"repository": "NVIDIA/Megatron-LM", "commit": mlm_commit,
                                       "as": "Megatron-Bridge's 3rdparty/Megatron-LM submodule"},
                       "paths": ["src/megatron/bridge/training/config.py", "src/megatron/bridge/models/gpt_provider.py",
                                 "src/megatron/bridge/training/mixed_precision.py",
                                 "src/megatron/bridge/training/comm_overlap.py",
                                 "megatron/core/transformer/transformer_config.py",
                                 "megatron/core/model_parallel_config.py", "megatron/training/config/"]},
            "generator": "tests/data/frameworks/make_tables.py megatron-bridge",
            "sections": sections, "mixed_precision_recipes": sorted(recipes),
            "attn_backend": [t.targets[0].id for t in enums.body if isinstance(t, ast.Assign)],
            "module_names": {m: modules.names(m) for m in BRIDGE_MODULES}}


# ---- MindSpore --------------------------------------------------------------------------------------

def mindspore(root: Path, version: str) -> dict:
    ms = root / "mindspore"
    context = (ms / "parallel" / "_auto_parallel_context.py").read_text(encoding="utf-8")
    setters = context.split("_set_auto_parallel_context_func_map = {", 1)[1].split("}", 1)[0]
    keys = re.findall(r'"([a-z_0-9]+)":', setters)
    config_class = context.split("class _ParallelOptimizerConfig", 1)[1].split("\nclass ", 1)[0]
    optimizer_config = re.findall(r'= "([a-z_0-9]+)"', config_class)
    levels = re.findall(r'optimizer_level not in \[([^\]]*)\]', context)
    pipeline_keys = re.findall(r'PIPELINE_(?:INTERLEAVE|SCHEDULER) = "([a-z_0-9]+)"', context)
    schedulers = re.findall(r'PIPELINE_(?!INTERLEAVE|SCHEDULER)[A-Z0-9_]+ = "([a-z_0-9]+)"', context)
    amp = (ms / "train" / "amp.py").read_text(encoding="utf-8")
    amp_levels = sorted(set(re.findall(r'When `amp_level` is set to ``(\w+)``', amp)))
    prims = set()
    for path in sorted((ms / "ops").rglob("*.py")):
        prims |= set(re.findall(r"^class (\w+)\((?:Primitive|PrimitiveWithInfer|PrimitiveWithCheck)\)",
                                path.read_text(encoding="utf-8", errors="replace"), re.M))
    infos = {}
    ops_info = ms / "include" / "mindspore" / "ccsrc" / "frontend" / "parallel" / "ops_info"
    for path in sorted(ops_info.glob("*.h")):
        for name, base in re.findall(r"^class (\w+)Info : public (\w+)", path.read_text(encoding="utf-8"), re.M):
            infos[name] = base
    return {"source": {"package": "mindspore", "version": version,
                       "paths": ["mindspore/parallel/_auto_parallel_context.py", "mindspore/train/amp.py",
                                 "mindspore/ops/**/*.py", "mindspore/include/mindspore/ccsrc/frontend/parallel/"
                                 "ops_info/*.h"]},
            "generator": "tests/data/frameworks/make_tables.py mindspore",
            "set_auto_parallel_context_keys": keys, "parallel_optimizer_config_keys": optimizer_config,
            "optimizer_levels": [x.strip().strip("\"'") for x in levels[0].split(",")] if levels else [],
            "pipeline_config_keys": pipeline_keys, "pipeline_schedulers": schedulers, "amp_levels": amp_levels,
            "primitives": sorted(prims),
            "parallel_operator_info": infos}


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("framework", choices=("megatron", "megatron-bridge", "deepspeed", "torchtitan", "mindspore"))
    cli.add_argument("root", type=Path)
    cli.add_argument("--commit")
    cli.add_argument("--version")
    cli.add_argument("--megatron-lm", type=Path, help="megatron-bridge: the Megatron-LM tree it pins")
    cli.add_argument("--megatron-lm-commit")
    args = cli.parse_args()
    if args.framework == "megatron-bridge":
        _write("megatron_bridge_fields.json", megatron_bridge(args.root, _commit(args.root, args.commit),
                                                              args.megatron_lm,
                                                              _commit(args.megatron_lm, args.megatron_lm_commit)))
        return
    if args.framework == "mindspore":
        _write("mindspore_api.json", mindspore(args.root, args.version or "unknown"))
        return
    build = {"megatron": (megatron, "megatron_arguments.json"), "deepspeed": (deepspeed, "deepspeed_keys.json"),
             "torchtitan": (torchtitan, "torchtitan_config.json")}[args.framework]
    _write(build[1], build[0](args.root, _commit(args.root, args.commit)))


if __name__ == "__main__":
    main()
