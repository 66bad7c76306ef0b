r"""Prepare one fresh task container's workspace, on the trusted side (root), before any evaluated code runs.

Runs with the task's interpreter (standard library only, Python >= 3.6). Reads `<io>/prepare.json` and writes its
record as a file (`record_path`), never through its output, whose tail alone reaches the host. The steps:

1. copy the image's own work tree (mounted read-only from the run's base volume) into the empty, size-bounded
   work tree of this container, reset it to the base revision and apply the overlays (the canonical state);
2. record the image's own pytest plugins and Python startup files, and every entry of the canonical tree with the
   git blob id of its bytes, before anything of the prediction is present;
3. write the stage marker (`stage_path`): from here on everything works on data the patch controls, so whatever
   fails is the patch's doing, never the environment's;
4. in a child process with a deadline, apply the patch AS THE SANDBOX USER (git apply or patch(1) can then only
   write where evaluated code may write: never `.git`, never outside), then judge the tree on disk, not git's
   view of it: new or changed symlinks that leave the tree or enter `.git`, `.git` components and special files
   make the patch unsafe; test targets are restored; anything pytest, Python or git would read that the patch
   added or changed (`.gitattributes`, `.gitmodules` among them) is restored or removed. Restored files are
   written by Python from the canonical bytes and checked by their hash, so no attribute, filter or eol rule of
   the tree can change them. Then the evaluated state is committed and handed to the sandbox user;
5. when that child fails, dies or runs out of time, the patch is "unusable" and the reason is recorded.

Git runs with hooks, fsmonitor, signing, attributes outside the tree, submodule recursion and the system/global
configuration disabled; no trusted git command runs on the patched tree before the judge removed every
`.gitattributes` of the patch. Paths are bytes throughout (any name git can write), recorded as UTF-8 text with
undecodable bytes shown as `\xNN`.
"""

import errno
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time

CONFIG_NAMES = {b"conftest.py", b"pytest.ini", b".pytest.ini", b"tox.ini", b"setup.cfg", b"pyproject.toml"}
GIT_NAMES = {b".gitattributes", b".gitmodules"}  # git obeys them from the tree: they must never reach trusted git
STARTUP_STEMS = {b"sitecustomize", b"usercustomize"}
METADATA_SUFFIXES = (b".pth", b".dist-info", b".egg-info", b".egg-link")
CACHE_PARTS = {b"__pycache__", b".pytest_cache"}
BYTECODE_SUFFIXES = (b".pyc", b".pyo")
MODULE_SUFFIXES = (b".py", b".so", b".pyd")
GIT_SAFETY = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false",
              "-c", "core.autocrlf=false", "-c", "core.eol=lf", "-c", "core.attributesFile=/dev/null",
              "-c", "submodule.recurse=false")
IDENTITY = {
    "GIT_AUTHOR_NAME": "asyncodebench", "GIT_AUTHOR_EMAIL": "harness@asyncodebench.invalid",
    "GIT_COMMITTER_NAME": "asyncodebench", "GIT_COMMITTER_EMAIL": "harness@asyncodebench.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
}
NOT_EVALUATED = ("failed", "unsafe_paths", "unusable")
LOG_CHARS = 20000
SYMLINK_HOPS = 40  # as the kernel: a longer chain is a loop
READ_CHUNK = 1 << 20

RECORD_IMAGE_PLUGINS = r"""
import json, sys
found = []
try:
    from importlib.metadata import entry_points
    eps = entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    found = [(ep.name, ep.value.replace(" ", "")) for ep in group]
except ImportError:
    import pkg_resources
    found = [(ep.name, ":".join([ep.module_name] + [".".join(ep.attrs)] * bool(ep.attrs)))
             for ep in pkg_resources.iter_entry_points("pytest11")]
startup = []
for name in ("sitecustomize", "usercustomize"):
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None):
        startup.append(module.__file__)
import os
names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
for entry in sys.path:
    if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry):
        names.update(n.split(".")[0].split("-")[0] for n in os.listdir(entry))
stdlib = sorted(names)
print(json.dumps({"plugins": sorted(set(found)), "startup_modules": startup, "sys_path": sys.path,
                  "importable": stdlib}))
"""


class Config(object):
    """The fields of `prepare.json` as attributes (`cfg.workdir`), plus those `main()` derives."""

    def __init__(self, raw):
        self.__dict__.update(raw)

    def __getattr__(self, name):  # only for names prepare.json lacked; tells type checkers the fields are dynamic
        raise AttributeError("prepare.json has no field " + name)

    def __setattr__(self, name, value):  # main() adds what it derives (io_dir, root, protected)
        self.__dict__[name] = value


# --- git -------------------------------------------------------------------------------------------


def run_git(cfg, args, stdin=None, as_sandbox=False):
    """One git process on the trusted side (or as the sandbox user, for applying the patch); stdout and stderr
    apart, so nothing git prints on stderr is ever read as data."""
    env = dict(os.environ, HOME=os.path.dirname(cfg.git_global_config), GIT_CONFIG_GLOBAL=cfg.git_global_config,
               **IDENTITY)
    return subprocess.run(("git",) + GIT_SAFETY + tuple(args), input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, preexec_fn=as_sandbox_user(cfg) if as_sandbox else None)


def git(cfg, *args, **kwargs):
    """Run git; returns (exit code, text): its output when it succeeded, output and errors when it failed (so a
    warning never mixes into what a caller reads, e.g. a diff). Raises on failure unless `check=False`."""
    done = run_git(cfg, args, as_sandbox=kwargs.get("as_sandbox", False))
    text = (done.stdout + (done.stderr if done.returncode else b"")).decode("utf-8", "replace")
    if kwargs.get("check", True) and done.returncode != 0:
        raise RuntimeError("git %s failed: %s" % (" ".join(args), text.strip()[-2000:]))
    return done.returncode, text


def git_bytes(cfg, args, stdin=None):
    """Run git for its output as bytes (listings with -z, blob contents). Raises on failure."""
    done = run_git(cfg, args, stdin=stdin)
    if done.returncode != 0:
        raise RuntimeError("git %s failed: %s" % (" ".join(args), done.stderr.decode("utf-8", "replace")[-2000:]))
    return done.stdout


def as_sandbox_user(cfg):
    """A `preexec_fn` that makes the child process the sandbox user (no supplementary groups)."""
    def drop():
        os.setgroups([])
        os.setgid(cfg.sandbox_gid)
        os.setuid(cfg.sandbox_uid)
    return drop


def copy_image_tree(source, workdir, build_dir=None):
    """The image's work tree, as the image has it, into this container's own (tmpfs) work tree; its native build
    tree stays out (the state's own copy-on-write build tree is mounted there)."""
    names = [name for name in os.listdir(source) if name != build_dir]
    if not names:
        return
    done = subprocess.run(["cp", "-a", "--"] + [os.path.join(source, name) for name in names] + [workdir],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError("could not copy the image's work tree: %s" % done.stdout.decode("utf-8", "replace"))


def exclude_build_tree(cfg):
    """Keep git away from the native build tree: `.git/info/exclude` (root's, outside the patch's reach) names it, so
    no commit takes it in, whatever the tree's own ignore files say (`git clean` is told with -e)."""
    info = os.path.join(cfg.workdir, ".git", "info")
    if not os.path.isdir(info):
        os.makedirs(info)
    with open(os.path.join(info, "exclude"), "a") as handle:
        handle.write("\n/%s/\n" % cfg.build_dir)


def canonical_state(cfg):
    """Reset the work tree to the base revision and apply the overlays (committed, when there are any): the canonical
    state. Returns its commit's SHA."""
    git(cfg, "reset", "--hard", "-q", cfg.base_revision)
    git(cfg, "clean", "-ffdxq", *(["-e", "/" + cfg.build_dir] if cfg.build_dir else []))
    for path in cfg.overlays:
        git(cfg, "apply", "--whitespace=nowarn", path)
    if cfg.overlays:
        commit(cfg, "asyncodebench overlays")
    return git(cfg, "rev-parse", "HEAD")[1].strip()


def commit(cfg, message):
    """Commit the work tree as it is (no hooks, empty allowed); the build tree is excluded (`exclude_build_tree`)."""
    git(cfg, "add", "-A")
    git(cfg, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)


def record_image(cfg):
    """The image's pytest plugins and startup modules, seen by its interpreter with nothing of the patch present."""
    done = subprocess.run([cfg.interpreter, "-s", "-c", RECORD_IMAGE_PLUGINS], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, cwd=cfg.io_dir)  # the image's own environment, PYTHONPATH too
    text = done.stdout.decode("utf-8", "replace").strip()
    last = text.splitlines()[-1] if text else ""
    if done.returncode != 0 or not last.startswith("{"):  # start-up files of the image may print before it
        raise RuntimeError("could not list the image's pytest plugins: %s" % text[-2000:])
    return json.loads(last)


# --- the tree on disk ------------------------------------------------------------------------------


OUTSIDE_TREE = {b".git"}  # top-level names no walk of the tree enters; main() adds the native build tree


def entries(top=b""):
    """Every entry under `top` (relative to the work tree; the whole tree but its own `.git` and build tree by
    default) as (path, os.DirEntry). Iterative with an explicit stack, so no depth of folders can exhaust the
    interpreter's recursion; symlinks are reported, never followed."""
    stack = [top]
    while stack:
        folder = stack.pop()
        with os.scandir(folder or b".") as listing:
            items = list(listing)
        for item in items:
            path = folder + b"/" + item.name if folder else item.name
            if path in OUTSIDE_TREE:
                continue
            yield path, item
            if item.is_dir(follow_symlinks=False):
                stack.append(path)


def describe(path, info):
    """What git could record of an entry: ("d",), ("f", executable, size), ("l", target) or ("o", file type)."""
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return ("d",)
    if stat.S_ISREG(mode):
        return ("f", bool(mode & 0o100), info.st_size)
    if stat.S_ISLNK(mode):
        return ("l", os.readlink(path))
    return ("o", stat.S_IFMT(mode))


def file_blob_id(path):
    """The git blob id of a regular file's bytes as they are on disk, read in chunks, never through a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        digest = hashlib.sha1(b"blob %d\0" % os.fstat(fd).st_size)
        for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def snapshot(with_ids):
    """The tree on disk: path -> description; regular files carry their blob id when `with_ids`."""
    tree = {}
    for path, item in entries():
        entry = describe(path, item.stat(follow_symlinks=False))
        tree[path] = entry + (file_blob_id(path),) if with_ids and entry[0] == "f" else entry
    return tree


def same_entry(path, before, now):
    """Whether the entry at `path` is what it was in the canonical tree (`before`, with blob ids)."""
    if before is None or now is None:
        return before is now
    if before[0] == "f" and now[0] == "f":
        return before[1:3] == now[1:3] and file_blob_id(path) == before[3]
    return before == now


def changes(base, now):
    """Paths of files, symlinks and special files added, changed or deleted (folders are not listed, as git
    does not list them), sorted."""
    found = []
    for path in set(base) | set(now):
        before, after = base.get(path), now.get(path)
        is_leaf = (before is not None and before[0] != "d") or (after is not None and after[0] != "d")
        if is_leaf and not same_entry(path, before, after):
            found.append(path)
    return sorted(found)


def real_location(path):
    """Where an absolute path leads once every symlink on the way is followed (at most SYMLINK_HOPS), or None for
    a loop. Iterative, so a chain of links cannot exhaust the interpreter's recursion either."""
    todo = [part for part in reversed(path.split(b"/")) if part]
    resolved = []  # type: list[bytes]
    hops = 0
    while todo:
        part = todo.pop()
        if part == b".":
            continue
        if part == b"..":
            resolved = resolved[:-1]
            continue
        candidate = b"/" + b"/".join(resolved + [part])
        try:
            info = os.lstat(candidate)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise
            resolved.append(part)  # what does not exist yet stays a plain name
            continue
        if not stat.S_ISLNK(info.st_mode):
            resolved.append(part)
            continue
        hops += 1
        if hops > SYMLINK_HOPS:
            return None
        target = os.readlink(candidate)
        if target.startswith(b"/"):
            resolved = []
        todo.extend(part for part in reversed(target.split(b"/")) if part)
    return b"/" + b"/".join(resolved)


def unsafe_reason(root, path, entry):
    """Why a changed entry makes the patch unsafe, or None: a `.git` component, a special file, or a symlink that
    leaves the work tree or leads into `.git` (whatever its name)."""
    if any(part.lower() == b".git" for part in path.split(b"/")):
        return "git directory"
    if entry is None:
        return None
    if entry[0] == "o":
        return "special file (FIFO, socket or device)"
    if entry[0] == "l":
        real = real_location(root + b"/" + path)
        if real is None:
            return "symlink loop"
        if real != root and not real.startswith(root + b"/"):
            return "symlink leaving the work tree"
        if real[len(root) + 1:].split(b"/")[0].lower() == b".git":
            return "symlink into .git"
    return None


# --- judging ---------------------------------------------------------------------------------------


def under(path, prefixes):
    """Whether `path` is one of `prefixes` or inside one of them (as git's pathspecs match)."""
    return any(path == prefix or path.startswith(prefix + b"/") for prefix in prefixes)


def is_hazard(path, shadowing):
    """Whether pytest, Python or git could load this changed path at start-up, collection or commit."""
    parts = path.split(b"/")
    name = parts[-1]
    if name in CONFIG_NAMES or name.lower() in GIT_NAMES or name.endswith(BYTECODE_SUFFIXES) or path in shadowing:
        return True
    return any(part.split(b".")[0] in STARTUP_STEMS or part.endswith(METADATA_SUFFIXES) or part in CACHE_PARTS
               for part in parts)


def import_roots(cfg):
    """The work tree's import roots: the repository root, `src/`, and folders of the tree on the image's
    PYTHONPATH (some images put a source folder of the repository there)."""
    extra = [os.path.relpath(p, cfg.workdir) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p.startswith(cfg.workdir + "/")]
    return [os.fsencode(p) for p in list(cfg.import_roots) + [p for p in extra if p not in cfg.import_roots]]


def shadowing_paths(base, paths, shadowed, roots):
    """Changed paths under a NEW top-level module of an import root (the repository root, `src/`) whose name is
    one the image already imports from elsewhere (standard library, site-packages, pytest, its plugins): a module
    that would be imported in their place."""
    found = set()
    for root in roots:
        prefix = root + b"/" if root else b""
        base_tops = set(p[len(prefix):].split(b"/")[0] for p in base if p.startswith(prefix))
        for path in paths:
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):]
            top = rest.split(b"/")[0]
            is_module = b"/" in rest or top.endswith(MODULE_SUFFIXES)
            if is_module and top.split(b".")[0] in shadowed and top not in base_tops:
                found.add(path)
    return found


def keep_canonical_bytes(cfg, canonical, base):
    """Make sure the object store holds the bytes, as they are on disk, of every canonical file the judge may have
    to restore (test targets, and names that are hazards), so restoring reads them by blob id. They are the
    committed blobs unless the base's own attributes converted them at checkout (or they lie outside git's view,
    in a submodule folder): those are stored as they are, without filters."""
    listed = {}
    for item in git_bytes(cfg, ["ls-tree", "-r", "-z", canonical]).split(b"\0"):
        if item:
            meta, path = item.split(b"\t", 1)
            listed[path] = meta.split(b" ")[2].decode()
    missing = [p for p, e in base.items() if e[0] == "f" and listed.get(p) != e[3]
               and (under(p, cfg.protected) or is_hazard(p, ()))]
    plain = [p for p in missing if b"\n" not in p]
    if plain:
        git_bytes(cfg, ["hash-object", "-w", "--no-filters", "--stdin-paths"], b"".join(p + b"\n" for p in plain))
    for path in missing:
        if b"\n" in path:  # --stdin-paths reads one name a line
            git_bytes(cfg, ["hash-object", "-w", "--no-filters", "--", path])


def read_blobs(cfg, ids):
    """Blob contents by id from ONE `git cat-file --batch`: raw bytes, never through attributes or filters."""
    ids = sorted(ids)
    if not ids:
        return {}
    out = git_bytes(cfg, ["cat-file", "--batch"], "".join(i + "\n" for i in ids).encode())
    blobs, at = {}, 0
    for oid in ids:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        if len(header) != 3 or header[1] != b"blob":
            raise RuntimeError("the canonical blob %s is not in the repository" % oid)
        start = end + 1
        blobs[oid] = out[start:start + int(header[2])]
        at = start + int(header[2]) + 1
    return blobs


def lexists(path):
    """Whether anything (a dangling symlink too) is at `path`; a file where a folder is expected means no."""
    try:
        os.lstat(path)
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise


def clear(path):
    """Remove whatever is at `path` (a folder with everything in it), never following a symlink. Returns whether
    more than `path` itself went (a folder's content)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return False
    folders = [path]
    for inner, item in entries(path):
        if item.is_dir(follow_symlinks=False):
            folders.append(inner)
        else:
            os.unlink(inner)
    for folder in reversed(folders):  # children were listed after their parents
        os.rmdir(folder)
    return True


def make_parents(path):
    """Real folders on the way to `path`: a file or symlink where a canonical folder belongs is removed (then
    returns True)."""
    parts = path.split(b"/")[:-1]
    removed = False
    for i in range(1, len(parts) + 1):
        folder = b"/".join(parts[:i])
        try:
            info = os.lstat(folder)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
            os.mkdir(folder, 0o755)
            continue
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(folder)
            os.mkdir(folder, 0o755)
            removed = True
    return removed


def remove_empty_parents(path):
    """Folders a removed file leaves empty would still import as namespace packages (`src/pytest/`)."""
    parent = os.path.dirname(path)
    if parent:
        try:
            os.removedirs(parent)
        except OSError:  # not empty: the first folder that is not is kept, and so is every one above it
            pass


def write_entry(path, entry, blobs):
    """Write one canonical entry at `path` (cleared before), then check the bytes on disk by their hash."""
    if entry[0] == "d":
        os.mkdir(path, 0o755)
        return None
    if entry[0] == "l":
        os.symlink(entry[1], path)
        return None if os.readlink(path) == entry[1] else path
    if entry[0] != "f":
        raise RuntimeError("cannot restore the special file %s" % shown(path))
    mode = 0o755 if entry[1] else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(blobs[entry[3]])
        os.fchmod(fd, mode)
    return None if file_blob_id(path) == entry[3] else path


def put_back(cfg, base, paths):
    """Return each path to its canonical state in one batch: canonical files written from their blobs (one git
    process for all), anything else removed. Returns whether other paths went with them (a folder where a file
    belongs, a file where a folder belongs). Raises when a written file does not hash to its canonical blob."""
    wanted = [base[p] for p in paths if p in base and base[p][0] == "f"]
    blobs = read_blobs(cfg, set(entry[3] for entry in wanted))
    wrong = []
    beyond = False
    for path in paths:
        beyond = clear(path) or beyond
        entry = base.get(path)
        if entry is None:
            remove_empty_parents(path)
            continue
        beyond = make_parents(path) or beyond
        bad = write_entry(path, entry, blobs)
        if bad is not None:
            wrong.append(shown(bad))
    if wrong:
        raise RuntimeError("restored files differ from their canonical blobs: %s" % ", ".join(wrong[:20]))
    return beyond


def give_to_sandbox(cfg):
    """The work tree belongs to the sandbox user; `.git` stays root's. The root folder is root's, world-writable
    and sticky (like /tmp), so the sandbox can create files there but cannot rename or replace `.git`."""
    uid, gid = cfg.sandbox_uid, cfg.sandbox_gid
    for path, _ in entries():
        os.lchown(path, uid, gid)
    os.chown(cfg.workdir, 0, 0)
    os.chmod(cfg.workdir, 0o1777)


def apply_patch(cfg):
    """Apply as the sandbox user: git apply, then patch(1) with fuzz as other harnesses do. Returns (status, log)."""
    if os.path.getsize(cfg.patch) == 0:
        return "empty", ""
    code, log = git(cfg, "apply", "--binary", "--whitespace=nowarn", cfg.patch, check=False, as_sandbox=True)
    if code == 0:
        return "applied", log
    try:
        done = subprocess.run(["patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i", cfg.patch],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=as_sandbox_user(cfg))
    except OSError:
        return "failed", log
    log += done.stdout.decode("utf-8", "replace")
    return ("applied_with_fuzz" if done.returncode == 0 else "failed"), log


def shown(path):
    r"""A path as recorded: UTF-8 text, undecodable bytes as `\xNN`, so records are always valid JSON text."""
    return path.decode("utf-8", "backslashreplace")


def judge(cfg, base, shadowed):
    """Apply the patch and judge the tree it left; returns the record's patch fields."""
    status, log = apply_patch(cfg)
    now = snapshot(False)
    changed = changes(base, now)
    unsafe = [(p, unsafe_reason(cfg.root, p, now.get(p))) for p in changed]
    unsafe = [(p, why) for p, why in unsafe if why]
    fields = {"patch_status": status, "patch_log": log, "unsafe_paths": [shown(p) for p, _ in unsafe],
              "restored_paths": [], "untracked_paths_removed": [], "hazards_removed": [], "changed_paths": []}
    if unsafe:
        fields["patch_status"] = "unsafe_paths"
        fields["patch_log"] += "".join("unsafe: %s: %s\n" % (shown(p), why) for p, why in unsafe[:100])
    if fields["patch_status"] in NOT_EVALUATED:
        return fields  # no evaluated code will run in this container: nothing to put back
    protected = [p for p in changed if under(p, cfg.protected)]
    rest = [p for p in changed if not under(p, cfg.protected)]
    shadowing = shadowing_paths(base, rest, shadowed, import_roots(cfg))
    hazards = [p for p in rest if is_hazard(p, shadowing)]
    beyond = put_back(cfg, base, protected + hazards)  # before any trusted git command reads the tree again
    removed = set(hazards)
    left = [p for p in rest if p not in removed and (p in base or not beyond or lexists(p))]
    commit(cfg, "asyncodebench evaluated state")
    give_to_sandbox(cfg)
    for folder in (cfg.out_dir, cfg.home_dir):
        if folder is None:  # a build's container: no report folder for the sandbox user to write
            continue
        if not os.path.isdir(folder):  # the report folder is a mount of its own, there already
            os.makedirs(folder)
        os.chown(folder, cfg.sandbox_uid, cfg.sandbox_gid)
        os.chmod(folder, stat.S_IRWXU)
    fields.update(restored_paths=[shown(p) for p in protected if p in base],
                  untracked_paths_removed=[shown(p) for p in protected if p not in base],
                  hazards_removed=[shown(p) for p in hazards], changed_paths=[shown(p) for p in left])
    return fields


# --- the patch's phase, bounded --------------------------------------------------------------------


class Expired(Exception):
    """The patch's phase ran out of time."""


def write_json(path, value):
    """Write atomically (a temporary file renamed), so a reader finds the whole record or none."""
    with open(path + ".tmp", "w") as handle:
        json.dump(value, handle)
    os.rename(path + ".tmp", path)


def unusable(stage, reason):
    """The record of a patch whose tree could not be prepared: a model outcome, scored 0."""
    record = dict(stage, patch_status="unusable", patch_log="", unsafe_paths=[], restored_paths=[],
                  untracked_paths_removed=[], hazards_removed=[], changed_paths=[])
    record["unusable_reason"] = reason
    return record


def failure_text(exc):
    """An exception in one line, with where it was raised (the judge's own code, never the patch's)."""
    where = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    place = " (prepare.py line %d)" % where.tb_lineno if where is not None else ""
    return ("%s: %s" % (type(exc).__name__, exc))[:1000] + place


def judge_in_child(cfg, stage, base, shadowed):
    """The child's whole life: judge, write the record, exit. Any exception is the patch's doing."""
    code = 1
    try:
        os.setpgid(0, 0)
        try:
            record = dict(stage, unusable_reason=None, **judge(cfg, base, shadowed))
            record["patch_log"] = record["patch_log"][-LOG_CHARS:]
        except BaseException as exc:  # RecursionError, MemoryError, OSError, git failures: all from the tree
            record = unusable(stage, "preparing the patched tree failed: " + failure_text(exc))
        write_json(cfg.record_path, record)
        code = 0
    finally:
        os._exit(code)  # never back into the parent's code


def wait_until(pid, seconds):
    """The child's wait status, or None when it was still running after `seconds` (it is then killed, with
    every process it started)."""
    def expire(signum, frame):
        raise Expired()

    status = None
    previous = signal.signal(signal.SIGALRM, expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        status = os.waitpid(pid, 0)[1]
    except Expired:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if status is None:
        for action in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.waitpid(pid, 0)):
            try:
                action()
            except OSError:  # it ended meanwhile
                pass
    return status


def judged(cfg, stage, base, shadowed, seconds):
    """Run the patch's phase in a child process bounded by `seconds`; whatever becomes of it, a record results."""
    seconds = max(seconds, 0.01)
    pid = os.fork()
    if pid == 0:
        judge_in_child(cfg, stage, base, shadowed)
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child did it first
        pass
    status = wait_until(pid, seconds)
    if os.path.exists(cfg.record_path):
        return
    if status is None:
        reason = "preparing the patched tree did not finish within %.0f s" % seconds
    elif os.WIFSIGNALED(status):
        reason = "preparing the patched tree was killed by signal %d (9: out of memory, most likely)" % (
            os.WTERMSIG(status))
    else:
        reason = "preparing the patched tree ended without a record (exit status %d)" % os.WEXITSTATUS(status)
    write_json(cfg.record_path, unusable(stage, reason))


def main():
    """Prepare the work tree as `<io>/prepare.json` says (`<io>` is argument 1) and write the record; the steps are
    the module's."""
    started = time.monotonic()
    cfg = Config(json.load(open(os.path.join(sys.argv[1], "prepare.json"))))
    cfg.io_dir = sys.argv[1]
    if cfg.build_dir:
        OUTSIDE_TREE.add(os.fsencode(cfg.build_dir))
    copy_image_tree(cfg.base_dir, cfg.workdir, cfg.build_dir)
    if cfg.build_dir:
        exclude_build_tree(cfg)
    os.chdir(cfg.workdir)
    cfg.root = os.fsencode(os.path.realpath(cfg.workdir))
    cfg.protected = [os.fsencode(p).rstrip(b"/") for p in cfg.protected_paths]
    stage = {"base_head": cfg.base_revision}
    stage["canonical_ref"] = canonical_state(cfg)
    image = record_image(cfg)
    installed = image.pop("importable")  # the standard library's and site-packages' top-level names
    stage["image"] = image
    base = snapshot(True)
    keep_canonical_bytes(cfg, stage["canonical_ref"], base)
    give_to_sandbox(cfg)
    shadowed = set(installed) | set(cfg.shadow_names) | set(m.split(".")[0].split(":")[0] for _, m in image["plugins"])
    write_json(cfg.stage_path, dict(stage, stage="patch"))  # from here on, a failure is the patch's doing
    judged(cfg, stage, base, set(os.fsencode(n) for n in shadowed),
           cfg.judge_deadline_seconds - (time.monotonic() - started))


if __name__ == "__main__":
    main()
