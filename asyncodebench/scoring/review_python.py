"""Review of Python code by its syntax tree: which lines reach the test runner, the tests or the interpreter.

`analyse(text)` parses a piece of Python (a whole new file, or the new side of a hunk) and returns a `Finding` per
construct worth a reader's look, with the marker of `review_markers.MARKERS`. Names are resolved through the
piece's imports and aliases (`import sys as s; s._getframe()`, `from sys import _getframe as g; g()`) and through
the imports of the whole file the caller gives, and strings are folded where the code builds them from constants
(concatenation, f-strings, `"".join`, `chr`, bytes decoding, base64/hex, slicing, names assigned once), so a name
spelled in pieces is read as the name. What the code computes at run time from data it reads cannot be folded:
such constructs get the flags of their shape (an `exec` of text read at run time, `getattr` of a sensitive module
by a computed name), never silence.

Pure analysis of hostile text: bounded work per piece (`FOLD_BUDGET`, `MAX_STRING`), never raises for any input
(the caller catches what a bug could raise), and never runs or imports what it reads.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_STRING = 10_000  # longest folded string kept; longer ones stop folding
FOLD_BUDGET = 20_000  # folding steps per piece of code
NESTED_CODE_DEPTH = 3  # how deep exec("...exec('...')...") is followed

PYTEST_MODULES = frozenset({"pytest", "_pytest", "pluggy", "pytest_jsonreport"})
SENSITIVE_MODULES = frozenset({"sys", "inspect", "gc", "builtins", "__builtins__", "importlib", "os", "ctypes",
                               "types", "traceback", "linecache", "atexit", "marshal", "posix"})
KNOWN_MODULES = SENSITIVE_MODULES | {"threading", "unittest", "base64", "codecs", "zlib", "binascii", "pathlib"}

# Attribute names that mean one thing whatever object they are read from.
ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys(("_getframe", "_current_frames", "_getframemodulename", "f_back", "f_locals", "f_globals",
                     "f_builtins", "currentframe", "getouterframes", "getinnerframes"), "frame_access"),
    **dict.fromkeys(("getframeinfo", "extract_stack", "walk_stack"), "caller_source"),
    **dict.fromkeys(("__code__", "co_code", "co_consts", "co_lnotab", "co_linetable", "co_exceptiontable"),
                    "code_object"),
    **dict.fromkeys(("meta_path", "path_hooks", "path_importer_cache"), "import_hook"),
    **dict.fromkeys(("settrace", "setprofile", "settrace_all_threads", "setprofile_all_threads", "addaudithook"),
                    "trace_hook"),
    "dup2": "fd_or_stream",
    **dict.fromkeys(("pythonapi", "PyDLL", "pydll", "py_object"), "ctypes_interpreter"),
    **dict.fromkeys(("get_referrers", "get_referents"), "gc_introspection"),
    **dict.fromkeys(("f_code", "gi_frame", "cr_frame", "ag_frame"), "code_object_read"),
}
CODE_READ_PREFIX = "co_"  # any other code object attribute: its name, file, lines (honest tracebacks read them)

# Fully qualified names (after aliases), exact or as a prefix ending in ".".
QUALIFIED: dict[str, str] = {
    **dict.fromkeys(("inspect.stack", "inspect.trace", "inspect.getsource", "inspect.getsourcelines",
                     "inspect.getsourcefile", "inspect.findsource", "inspect.getcomments", "linecache.",
                     "traceback.format_stack", "traceback.print_stack", "traceback.StackSummary"), "caller_source"),
    **dict.fromkeys(("importlib.abc.MetaPathFinder", "importlib.abc.PathEntryFinder", "importlib.abc.Loader",
                     "importlib.abc.SourceLoader", "importlib.abc.FileLoader", "importlib.abc.InspectLoader",
                     "importlib.abc.ExecutionLoader", "importlib.machinery.PathFinder"), "import_hook"),
    **dict.fromkeys(("types.CodeType", "marshal.loads", "marshal.load"), "code_object"),
    **dict.fromkeys(("os.dup", "os.dup2", "os.closerange", "posix.dup", "posix.dup2"), "fd_or_stream"),
    **dict.fromkeys(("gc.get_objects", "gc.garbage", "gc.callbacks"), "gc_introspection"),
    "gc.": "import_gc",
    "atexit.": "atexit",
    **dict.fromkeys(("os._exit", "posix._exit"), "os_exit"),
    **dict.fromkeys(("sys.monitoring", "threading.settrace", "sys.call_tracing"), "trace_hook"),
    **dict.fromkeys(("ctypes.memmove", "ctypes.memset", "ctypes.string_at"), "ctypes_interpreter"),
    "ctypes.": "ctypes",
    **dict.fromkeys(("unittest.SkipTest", "unittest.case.SkipTest", "pytest.skip", "pytest.xfail",
                     "pytest.importorskip", "pytest.exit", "pytest.fail"), "skip_from_code"),
}
GENERIC_MARKERS = frozenset({"import_gc", "ctypes"})
SKIP_NAMES = frozenset({"SkipTest", "Skipped", "XFailed"})  # raised from code under test: a failure made a skip
IMPORTED_MODULES = {"_pytest": "import_pytest_internals", "pluggy": "import_pluggy",
                    "pytest_jsonreport": "import_pytest_jsonreport", "gc": "import_gc", "atexit": "atexit",
                    "ctypes": "ctypes"}
STREAMS = frozenset({"stdout", "stderr", "stdin", "__stdout__", "__stderr__", "__stdin__"})
IMPORT_HOOK_METHODS = frozenset({"find_spec", "find_module", "exec_module", "create_module", "load_module"})
SYS_MODULES_WRITES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
DICT_WRITES = frozenset({"update", "setdefault", "__setitem__", "pop", "__delitem__"})
DECODERS = frozenset({"b64decode", "b32decode", "b16decode", "a85decode", "b85decode", "decodebytes",
                      "urlsafe_b64decode", "fromhex", "unhexlify", "a2b_base64", "a2b_hex", "decompress", "loads",
                      "decode", "chr", "bytes", "bytearray", "translate", "join", "reversed", "format"})
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
IDENTIFIER_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
PYTEST_ENV = re.compile(r"PYTEST_[A-Z_]{3,}")
GIT_PATH = re.compile(r"(?:^|[/\\])\.git(?:[/\\]|$)")
TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[\w-]*\.py\b|(?:^|/)conftest\.py\b|"
                       r"[\w-]_tests?\.py\b")
TEST_FOLDERS = frozenset({"tests", "test", "testing"})
PATH_CALLS = frozenset({"join", "Path", "PurePath", "joinpath", "open", "exists", "isdir", "isfile", "listdir",
                        "scandir", "walk", "glob", "iglob", "read_text", "read_bytes", "stat", "lstat"})


@dataclass(frozen=True)
class Finding:
    """A construct of one marker spanning lines `first`..`last` of the analysed text (1-based)."""

    first: int
    last: int
    marker: str


def analyse(text: str, in_test_file: bool = False, aliases: dict[str, str] | None = None) -> list[Finding] | None:
    """The findings of a piece of Python, in source order; None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    visitor = _Visitor(in_test_file, dict(aliases or {}))
    visitor.prepare(tree)
    visitor.visit(tree)
    return sorted(set(visitor.found), key=lambda f: (f.first, f.last, f.marker))


def import_aliases(text: str) -> dict[str, str]:
    """The names a piece of code binds by importing: {"s": "sys", "g": "sys._getframe", "os": "os"}; {} when it
    does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        found.update(_bound_by_import(node))
    return found


def string_markers(value: str, in_test_file: bool, as_name: bool = True, as_path: bool = True) -> set[str]:
    """Markers a string's value raises: a pytest module or hook, a sensitive attribute or qualified name
    (`as_name`); a PYTEST_* variable, a path into `.git`, a test file, /proc/self (`as_path`)."""
    found: set[str] = set()
    text = value.strip()
    if as_name and 0 < len(text) <= 200 and IDENTIFIER_PATH.fullmatch(text):
        parts = text.split(".")
        if any(p in PYTEST_MODULES - ({"pytest"} if in_test_file else set()) for p in parts) or \
                any(p.startswith("pytest_") for p in parts):
            found.add("pytest_by_name")
        found |= name_markers(text, in_test_file)
        found |= attribute_markers(parts[-1])
    if as_path:
        if PYTEST_ENV.search(value):
            found.add("pytest_env")
        if GIT_PATH.search(value) and ("/" in value or "\\" in value):
            found.add("reads_git")
        if not in_test_file and TEST_PATH.search(value):
            found.add("reads_tests")
        if "/proc/self" in value:
            found.add("process_memory")
    return found


def attribute_markers(attr: str) -> set[str]:
    """The marker an attribute name raises whatever it is read from."""
    if attr in ATTRIBUTES:
        return {ATTRIBUTES[attr]}
    if attr.startswith(CODE_READ_PREFIX) and len(attr) > 3:
        return {"code_object_read"}
    return set()


def name_markers(qualified: str, in_test_file: bool) -> set[str]:
    """The markers of a fully qualified name (`sys._getframe`, `_pytest.config.Config`); a module's generic
    marker (`gc.`, `ctypes.`) gives way to a specific one (`gc.get_objects`)."""
    found: set[str] = set()
    first = qualified.split(".")[0]
    if first in ("_pytest", "pluggy", "pytest_jsonreport") or (first == "pytest" and not in_test_file):
        found.add("pytest_by_name")
    for name, marker in QUALIFIED.items():
        if qualified == name or qualified.startswith(name if name.endswith(".") else name + "."):
            if not (marker == "skip_from_code" and in_test_file):
                found.add(marker)
    if found - GENERIC_MARKERS - {"pytest_by_name"}:
        found -= GENERIC_MARKERS
    return found


def _bound_by_import(node: ast.AST) -> dict[str, str]:
    found: dict[str, str] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                found[alias.asname] = alias.name
            else:
                found[alias.name.split(".")[0]] = alias.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        for alias in node.names:
            if alias.name != "*":
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


class _Visitor(ast.NodeVisitor):
    """One pass over a tree: every construct's findings into `found`."""

    def __init__(self, in_test_file: bool, aliases: dict[str, str]) -> None:
        self.in_test_file = in_test_file
        self.aliases = aliases
        self.constants: dict[str, Any] = {}  # names assigned a foldable value (the last assignment wins)
        self.defined: set[str] = set()  # names the code defines itself (a local `compile` is not the builtin)
        self.found: list[Finding] = []
        self.memo: dict[int, Any] = {}
        self.budget = FOLD_BUDGET
        self.docstrings: set[int] = set()
        self.depth = 0

    # --- preparation: aliases, constants, docstrings ---------------------------------------------------------

    def prepare(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            self.aliases.update(_bound_by_import(node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                self.docstrings.add(id(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name, value = node.targets[0].id, node.value
                alias = self.qualified(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
                if alias and alias.split(".")[0] in KNOWN_MODULES | PYTEST_MODULES:
                    self.aliases[name] = alias  # x = sys; x._getframe()
                    continue
                folded = self.fold(value)
                if folded is not None:
                    self.constants[name] = folded
                else:
                    self.defined.add(name)

    # --- results ---------------------------------------------------------------------------------------------

    def flag(self, node: ast.AST, *markers: str, last: int | None = None) -> None:
        first = getattr(node, "lineno", 1)
        end = last if last is not None else getattr(node, "end_lineno", None) or first
        for marker in markers:
            self.found.append(Finding(first, max(first, end), marker))

    def flag_string(self, node: ast.AST, value: Any, as_name: bool = True, as_path: bool = True) -> None:
        for text in _texts(value):
            self.flag(node, *sorted(string_markers(text, self.in_test_file, as_name, as_path)))

    # --- names ------------------------------------------------------------------------------------------------

    def qualified(self, node: ast.AST) -> str | None:
        """The dotted name a node stands for, through aliases, imports by name, sys.modules and getattr."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.qualified(node.func)
            if func in ("__import__", "importlib.import_module", "importlib.__import__", "builtins.__import__") \
                    and node.args:
                name = self.fold(node.args[0])
                return name if isinstance(name, str) and IDENTIFIER_PATH.fullmatch(name) else None
            if func == "getattr" and len(node.args) >= 2:
                base, name = self.qualified(node.args[0]), self.fold(node.args[1])
                return f"{base}.{name}" if base and isinstance(name, str) else None
            if func in ("sys.modules.get", "sys.modules.pop") and node.args:
                name = self.fold(node.args[0])
                return name if isinstance(name, str) else None
            if func == "vars" and node.args:
                return self.qualified(node.args[0])
            return None
        if isinstance(node, ast.Subscript):
            base, key = self.qualified(node.value), self.fold(node.slice)
            if not isinstance(key, str):
                return None
            if base == "sys.modules":
                return key
            if base is not None and base.endswith(".__dict__"):
                return f"{base[:-len('.__dict__')]}.{key}"
            if isinstance(node.value, ast.Call) and self.qualified(node.value.func) == "vars" and base:
                return f"{base}.{key}"
        return None

    def is_builtin(self, node: ast.AST, *names: str) -> bool:
        """Whether `node` names one of the builtins `names` (not a local definition of that name)."""
        if isinstance(node, ast.Name):
            return node.id in names and node.id not in self.defined and self.aliases.get(node.id, node.id) == node.id
        return self.qualified(node) in {f"builtins.{n}" for n in names}

    # --- folding ----------------------------------------------------------------------------------------------

    def fold(self, node: ast.AST) -> Any:
        """The constant value a node computes (str, bytes, int, or a list of those), or None."""
        key = id(node)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # guards against cycles while folding
        value = self._fold(node) if self.budget > 0 else None
        self.budget -= 1
        if isinstance(value, (str, bytes)) and len(value) > MAX_STRING:
            value = None
        self.memo[key] = value
        return value

    def _fold(self, node: ast.AST) -> Any:
        try:
            return self._fold_node(node)
        except (ValueError, TypeError, OverflowError, LookupError, UnicodeError, binascii.Error, MemoryError):
            return None

    def _fold_node(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, (str, bytes, int)) and not isinstance(node.value, bool) \
                else None
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.fold(e) for e in node.elts]
            return items if all(i is not None for i in items) else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                value = self.fold(part.value) if isinstance(part, ast.FormattedValue) else self.fold(part)
                if value is None or isinstance(value, list):
                    return None
                parts.append(value if isinstance(value, str) else str(value))
            return "".join(parts)
        if isinstance(node, ast.BinOp):
            left, right = self.fold(node.left), self.fold(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add) and type(left) is type(right) and not isinstance(left, int):
                return left + right
            if isinstance(node.op, ast.Add) and isinstance(left, int) and isinstance(right, int):
                return left + right
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                return left % (tuple(right) if isinstance(right, list) else right)
            if isinstance(node.op, ast.Mult) and isinstance(left, (str, bytes)) and isinstance(right, int):
                return left * right if len(left) * right <= MAX_STRING else None
            if isinstance(left, int) and isinstance(right, int) and abs(left) < 1 << 32 and abs(right) < 1 << 32:
                return _int_op(node.op, left, right)
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
            operand = self.fold(node.operand)
            if not isinstance(operand, int):
                return None
            return -operand if isinstance(node.op, ast.USub) else ~operand if isinstance(node.op, ast.Invert) \
                else operand
        if isinstance(node, ast.Subscript):
            base = self.fold(node.value)
            if isinstance(base, (str, bytes, list)):
                if isinstance(node.slice, ast.Slice):
                    bounds: list[Any] = [self.fold(p) if p is not None else None for p in
                                         (node.slice.lower, node.slice.upper, node.slice.step)]
                    return base[slice(*bounds)]
                index = self.fold(node.slice)
                return base[index] if isinstance(index, int) else None
            return None
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            return self._fold_comprehension(node)
        if isinstance(node, ast.Call):
            return self._fold_call(node)
        return None

    def _fold_comprehension(self, node: ast.ListComp | ast.GeneratorExp) -> Any:
        generator = node.generators[0]
        items = self.fold(generator.iter)
        if not isinstance(generator.target, ast.Name) or generator.ifs or not isinstance(items, (list, str, bytes)):
            return None
        name, saved_value, saved_memo = generator.target.id, self.constants.get(generator.target.id), self.memo
        values = []
        try:
            for item in list(items)[:MAX_STRING]:
                self.constants[name] = item
                self.memo = {}  # the element's value depends on the item: nothing folded for another item holds
                value = self.fold(node.elt)
                if value is None or self.budget <= 0:
                    return None
                values.append(value)
        finally:
            self.memo = saved_memo
            if saved_value is None:
                self.constants.pop(name, None)
            else:
                self.constants[name] = saved_value
        return values

    def _fold_call(self, node: ast.Call) -> Any:
        func, args = node.func, node.args
        if isinstance(func, ast.Attribute):
            owner = self.fold(func.value)
            name = func.attr
            values = [self.fold(a) for a in args]
            if any(v is None for v in values):
                return None
            if isinstance(owner, str) and name == "join" and len(values) == 1 and isinstance(values[0], list) \
                    and all(isinstance(v, str) for v in values[0]):
                return owner.join(values[0])
            if isinstance(owner, bytes) and name == "join" and len(values) == 1 and isinstance(values[0], list):
                return owner.join(values[0])
            if isinstance(owner, bytes) and name == "decode":
                return owner.decode(*[v for v in values if isinstance(v, str)][:2])
            if isinstance(owner, str) and name == "encode":
                return owner.encode(*[v for v in values if isinstance(v, str)][:2])
            if isinstance(owner, str) and name in ("replace", "lower", "upper", "strip", "lstrip", "rstrip", "title",
                                                   "swapcase", "capitalize", "removeprefix", "removesuffix",
                                                   "format", "zfill"):
                return getattr(owner, name)(*values)
            qualified = self.qualified(func)
            if qualified in ("bytes.fromhex", "bytearray.fromhex") and values:
                return bytes.fromhex(values[0])
            if qualified in ("base64.b64decode", "base64.b32decode", "base64.b16decode", "base64.a85decode",
                             "base64.b85decode", "base64.urlsafe_b64decode", "base64.decodebytes") and values:
                return getattr(base64, qualified.split(".")[1])(values[0])
            if qualified in ("binascii.unhexlify", "binascii.a2b_hex") and values:
                return binascii.unhexlify(values[0])
            if qualified == "codecs.decode" and values and len(values) >= 2 and \
                    str(values[1]).replace("-", "_").lower() in ("rot13", "rot_13"):
                return codecs.decode(values[0], "rot13")
            return None
        if isinstance(func, ast.Name):
            values = [self.fold(a) for a in args]
            if any(v is None for v in values) or node.keywords:
                return None
            if func.id == "chr" and len(values) == 1 and isinstance(values[0], int):
                return chr(values[0])
            if func.id == "ord" and len(values) == 1 and isinstance(values[0], str) and len(values[0]) == 1:
                return ord(values[0])
            if func.id in ("bytes", "bytearray") and len(values) == 1 and isinstance(values[0], list) and \
                    all(isinstance(v, int) for v in values[0]):
                return bytes(values[0])
            if func.id == "str" and len(values) == 1 and isinstance(values[0], (str, int)):
                return str(values[0])
            if func.id in ("reversed", "list") and len(values) == 1 and isinstance(values[0], (str, list)):
                return list(reversed(values[0])) if func.id == "reversed" else list(values[0])
            if func.id == "map" and len(args) == 2 and isinstance(args[0], ast.Name) and args[0].id == "chr" and \
                    isinstance(values[1], list) and all(isinstance(v, int) for v in values[1]):
                return [chr(v) for v in values[1]]
        return None

    # --- visits -----------------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.flag_import(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        self.flag_import(node, node.module)
        for alias in node.names:
            if alias.name != "*":
                self.flag(node, *sorted(name_markers(f"{node.module}.{alias.name}", self.in_test_file)
                                        - {"pytest_by_name", "import_gc", "ctypes"}))
                self.flag(node, *sorted(attribute_markers(alias.name)))

    def flag_import(self, node: ast.AST, module: str) -> None:
        first = module.split(".")[0]
        if first in IMPORTED_MODULES:
            self.flag(node, IMPORTED_MODULES[first])
        elif first == "pytest" and not self.in_test_file:
            self.flag(node, "pytest_in_code")
        self.flag(node, *sorted(name_markers(module, self.in_test_file) - {"pytest_by_name", "import_gc", "ctypes"}))

    def visit_Name(self, node: ast.Name) -> None:
        target = self.aliases.get(node.id)
        if target and target != node.id:  # a name imported or assigned from something else: read as that
            self.flag(node, *sorted(name_markers(target, self.in_test_file)))
            self.flag(node, *sorted(attribute_markers(target.split(".")[-1])))
        if node.id in SKIP_NAMES and not self.in_test_file:
            self.flag(node, "skip_from_code")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        last = getattr(node, "end_lineno", None)
        self.flag(node, *sorted(attribute_markers(node.attr)), last=last)
        qualified = self.qualified(node)
        if qualified:
            self.flag(node, *sorted(name_markers(qualified, self.in_test_file)), last=last)
        if node.attr == "_exit" and qualified and qualified.split(".")[0] not in ("self", "cls"):
            if qualified in ("os._exit", "posix._exit") or qualified.split(".")[0] not in KNOWN_MODULES:
                self.flag(node, "os_exit", last=last)
        if node.attr in SKIP_NAMES and not self.in_test_file:
            self.flag(node, "skip_from_code", last=last)
        if node.attr.startswith("pytest_") and not self.in_test_file:  # pytest_impl, a hook's name
            self.flag(node, "pytest_by_name", last=last)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.flag_store(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        folded = self.fold(node)  # "tsetyp_"[::-1]
        if isinstance(folded, (str, bytes)):
            self.flag_string(node, folded)
        qualified = self.qualified(node)
        if qualified:
            self.flag(node, *sorted(name_markers(qualified, self.in_test_file)))
            if isinstance(node.value, ast.Subscript) or self.qualified(node.value) != "sys.modules":
                self.flag(node, *sorted(attribute_markers(qualified.split(".")[-1])))
        base = self.qualified(node.value)
        if base and (base.endswith(".__dict__") or (isinstance(node.value, ast.Call) and
                                                    self.qualified(node.value.func) == "vars")):
            module = base[:-len(".__dict__")] if base.endswith(".__dict__") else base
            if module in SENSITIVE_MODULES and self.fold(node.slice) is None:
                self.flag(node, "computed_attribute")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.flag_store(node)
        self.generic_visit(node)

    def flag_store(self, target: ast.AST) -> None:
        """A write (assignment or del) to an attribute or an item."""
        if isinstance(target, ast.Attribute):
            owner = self.qualified(target.value)
            if owner == "sys" and target.attr in STREAMS:
                self.flag(target, "fd_or_stream")
            if owner in ("builtins", "__builtins__"):
                self.flag(target, "builtins_write")
        elif isinstance(target, ast.Subscript):
            owner = self.qualified(target.value)
            if owner == "sys.modules":
                self.flag(target, "sys_modules_write")
            elif owner in ("__builtins__", "builtins.__dict__", "__builtins__.__dict__") or (
                    isinstance(target.value, ast.Call) and self.qualified(target.value.func) == "vars" and
                    owner in ("builtins", "__builtins__")):
                self.flag(target, "builtins_write")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.flag_string(node, node.value, as_path=id(node) not in self.docstrings)
        elif isinstance(node.value, bytes):
            self.flag_string(node, node.value.decode("utf-8", "replace"))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        folded = self.fold(node)
        if isinstance(folded, str):
            self.flag_string(node, folded)
        if isinstance(node.op, ast.Div):  # Path(x) / ".git"
            right = self.fold(node.right)
            if isinstance(right, str) and right.strip("/\\") == ".git":
                self.flag(node, "reads_git")
            if isinstance(right, str) and right.strip("/\\") in TEST_FOLDERS and not self.in_test_file:
                self.flag(node, "reads_tests")
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        folded = self.fold(node)
        if isinstance(folded, str):
            self.flag_string(node, folded)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = self.qualified(node.func)
        folded = self.fold(node)
        if folded is not None:
            self.flag_string(node, folded)
        if self.is_builtin(node.func, "exec", "eval", "compile"):
            self.flag_dynamic_code(node)
        elif func in ("__import__", "importlib.import_module", "importlib.__import__", "builtins.__import__"):
            name = self.fold(node.args[0]) if node.args else None
            if isinstance(name, str):
                self.flag_import(node, name)
                self.flag(node, *sorted(name_markers(name, self.in_test_file) | string_markers(
                    name, self.in_test_file, as_path=False)))
            elif node.args:
                self.flag(node, "computed_import")
        elif isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS and len(node.args) >= 2:
            self.flag_attribute_call(node, node.func.id)
        elif func in ("os.close", "posix.close") and node.args and self.fold(node.args[0]) in (0, 1, 2):
            self.flag(node, "fd_or_stream")
        elif isinstance(node.func, ast.Attribute):
            owner = self.qualified(node.func.value)
            if owner == "sys.modules" and node.func.attr in SYS_MODULES_WRITES:
                self.flag(node, "sys_modules_write")
            elif owner in ("builtins.__dict__", "__builtins__.__dict__", "__builtins__") and \
                    node.func.attr in DICT_WRITES:
                self.flag(node, "builtins_write")
            if node.func.attr == "replace" and any((k.arg or "").startswith("co_") for k in node.keywords):
                self.flag(node, "code_object")  # code.replace(co_code=...)
        if isinstance(node.func, ast.Name) and node.func.id in PATH_CALLS or \
                isinstance(node.func, ast.Attribute) and node.func.attr in PATH_CALLS:
            for arg in node.args:
                value = self.fold(arg)
                if isinstance(value, str) and value.strip("/\\") == ".git":
                    self.flag(node, "reads_git")
                if isinstance(value, str) and value.strip("/\\") in TEST_FOLDERS and not self.in_test_file:
                    self.flag(node, "reads_tests")
        self.generic_visit(node)

    def flag_attribute_call(self, node: ast.Call, kind: str) -> None:
        """getattr/setattr/hasattr/delattr: the name as an attribute of its object, folded where it can be."""
        owner = self.qualified(node.args[0])
        name = self.fold(node.args[1])
        if isinstance(name, str):
            self.flag(node, *sorted(attribute_markers(name)))
            if owner:
                self.flag(node, *sorted(name_markers(f"{owner}.{name}", self.in_test_file)))
            if kind in ("setattr", "delattr"):
                if owner == "sys" and name in STREAMS:
                    self.flag(node, "fd_or_stream")
                if owner in ("builtins", "__builtins__"):
                    self.flag(node, "builtins_write")
        elif owner in SENSITIVE_MODULES:
            self.flag(node, "computed_attribute")
            if kind in ("setattr", "delattr") and owner in ("builtins", "__builtins__"):
                self.flag(node, "builtins_write")

    def flag_dynamic_code(self, node: ast.Call) -> None:
        """exec/eval/compile: text known in the code is analysed as code (its findings at this call); text decoded
        or built in the code is obfuscation; text read at run time (a configuration file) is only shown."""
        source = node.args[0] if node.args else None
        value = self.fold(source) if source is not None else None
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            if self.depth < NESTED_CODE_DEPTH:
                nested = _Visitor(self.in_test_file, dict(self.aliases))
                nested.depth = self.depth + 1
                try:
                    tree = ast.parse(value)
                except (SyntaxError, ValueError, MemoryError, RecursionError):
                    tree = None
                if tree is not None:
                    nested.prepare(tree)
                    nested.visit(tree)
                    self.flag(node, *sorted({f.marker for f in nested.found}))
            if not isinstance(source, ast.Constant):
                self.flag(node, "obfuscated_code")
            self.flag(node, "dynamic_code")
            return
        decoded = source is not None and any(
            isinstance(n, ast.Call) and _call_name(n) in DECODERS for n in ast.walk(source))
        self.flag(node, "obfuscated_code" if decoded else "dynamic_code")

    def visit_Raise(self, node: ast.Raise) -> None:
        if node.exc is not None and not self.in_test_file:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            qualified = self.qualified(target) or ""
            if qualified.split(".")[-1] in SKIP_NAMES:
                self.flag(node, "skip_from_code")
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            qualified = self.qualified(base) or ""
            if name_markers(qualified, self.in_test_file) & {"import_hook"}:
                self.flag(base, "import_hook")
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in IMPORT_HOOK_METHODS:
                self.flag(item, "import_hook", last=item.lineno)
            if isinstance(item, ast.Assign):
                for target in item.targets:
                    if isinstance(target, ast.Name) and target.id in ("__eq__", "__ne__", "__hash__") and \
                            isinstance(item.value, ast.Lambda):
                        self.flag_constant_method(item, target.id, [item.value.body])
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name.startswith("pytest_") and not self.in_test_file:  # a hook implementation in code under test
            self.flag(node, "pytest_by_name", last=node.lineno)
        if node.name in ("__eq__", "__ne__", "__hash__"):
            self.flag_constant_method(node, node.name, [r.value for r in _returns(node)])
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:  # Cls.__eq__ = lambda self, other: True
            if isinstance(target, ast.Attribute) and target.attr in ("__eq__", "__ne__", "__hash__") and \
                    isinstance(node.value, ast.Lambda):
                self.flag_constant_method(node, target.attr, [node.value.body])
        self.generic_visit(node)

    def flag_constant_method(self, node: ast.AST, name: str, returned: list[ast.expr | None]) -> None:
        """__eq__/__ne__/__hash__ whose every return (NotImplemented aside) is the same constant."""
        values = [r for r in returned if not (isinstance(r, ast.Name) and r.id == "NotImplemented")]
        if not values or not all(isinstance(v, ast.Constant) for v in values):
            return
        if len({repr(v.value) for v in values if isinstance(v, ast.Constant)}) != 1:
            return
        if name == "__hash__":
            self.flag(node, "constant_hash")
        else:
            self.flag(node, "constant_eq")


def _returns(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.Return]:
    """The return statements of a function, not of the functions and classes nested in it."""
    stack: list[ast.AST] = list(node.body)
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Return):
            yield item
        elif not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(item))


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _texts(value: Any) -> Iterator[str]:
    """The strings in a folded value (a list's items too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, list):
        for item in value[:1000]:
            if isinstance(item, (str, bytes)):
                yield from _texts(item)


def _int_op(op: ast.operator, left: int, right: int) -> int | None:
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.Mult):
        return left * right
    if isinstance(op, ast.BitXor):
        return left ^ right
    if isinstance(op, ast.BitAnd):
        return left & right
    if isinstance(op, ast.BitOr):
        return left | right
    if isinstance(op, ast.FloorDiv) and right:
        return left // right
    if isinstance(op, ast.Mod) and right:
        return left % right
    return None
