"""The packages' layering (DESIGN.md): no module imports, at its top level, a module that imports
it back (a cycle makes one of them run half-initialised), and the scheduling layers (batching,
memplan) use no array backend and nothing of the layers above them."""
import ast
import graphlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("lazyarray", "batching", "memplan", "ops_registry")
MODULES = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
           for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def top_level_imports(name: str) -> set[str]:
    """What ``name`` imports when it loads: the modules of its top-level import statements (and
    those inside top-level ``if``/``try``), ``from p import m`` read as the module ``p.m`` where
    ``m`` is one; imports inside functions run later and cannot form a load-time cycle."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for statement in ast.parse(path.read_text()).body:
        nodes = ast.walk(statement) if isinstance(statement, (ast.If, ast.Try)) else (statement,)
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                    if node.level else node.module
                modules = {f"{base}.{alias.name}" for alias in node.names} & MODULES.keys()
                found |= modules or {base}
    return found - {name}


def test_modules_import_no_cycle():
    graph = {name: top_level_imports(name) & MODULES.keys() for name in MODULES}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"an import cycle: {' -> '.join(error.args[1])}")


@pytest.mark.parametrize("package", ["batching", "memplan"])
def test_scheduling_layers_use_no_backend_and_no_layer_above(package):
    imported = {(name, module) for name in MODULES if name.split(".")[0] == package
                for module in top_level_imports(name)
                if module.split(".")[0] in ("lazyarray", "ops_registry", "cupy")}
    assert not imported

