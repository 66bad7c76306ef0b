"""Prepare one fresh task container's workspace, on the trusted side (root), before any evaluated code runs.

Runs with the task's interpreter (standard library only, Python >= 3.6). Reads `<io>/prepare.json` and prints its
record as one JSON line. The steps:

1. copy the image's own work tree (mounted read-only from the run's base volume) into the empty, size-bounded
   work tree of this container, reset it to the base revision and apply the overlays (the canonical state);
2. record the image's own pytest plugins and Python startup files, before anything of the prediction is present;
3. hand the work tree to the unprivileged sandbox user and apply the patch AS THAT USER: whatever the patch says,
   git apply or patch(1) can then only write where evaluated code may write (never `.git`, never outside);
4. judge the tree, not the patch text: paths that leave the work tree through symlinks or touch a `.git`
   component make the patch unsafe; test targets are restored; anything pytest or Python would load at start or
   collection that the patch added or changed is restored to the canonical state or removed;
5. commit the evaluated state and give the work tree (never `.git`) to the sandbox user again.

Git runs with hooks, fsmonitor, signing and the system/global configuration disabled.
"""

import json
import os
import shutil
import stat
import subprocess
import sys

CONFIG_NAMES = {"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"}
STARTUP_STEMS = {"sitecustomize", "usercustomize"}
METADATA_SUFFIXES = (".pth", ".dist-info", ".egg-info", ".egg-link")
CACHE_PARTS = {"__pycache__", ".pytest_cache"}
BYTECODE_SUFFIXES = (".pyc", ".pyo")
GIT_SAFETY = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false",
              "-c", "core.autocrlf=false")
IDENTITY = {
    "GIT_AUTHOR_NAME": "asyncodebench", "GIT_AUTHOR_EMAIL": "harness@asyncodebench.invalid",
    "GIT_COMMITTER_NAME": "asyncodebench", "GIT_COMMITTER_EMAIL": "harness@asyncodebench.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}

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
    def __init__(self, raw):
        self.__dict__.update(raw)


def git(cfg, *args, **kwargs):
    """Run git on the trusted side; `as_sandbox` runs it as the sandbox user (for applying the patch)."""
    check = kwargs.get("check", True)
    env = dict(os.environ, HOME=os.path.dirname(cfg.git_global_config), GIT_CONFIG_GLOBAL=cfg.git_global_config,
               **IDENTITY)
    done = subprocess.run(("git",) + GIT_SAFETY + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          preexec_fn=as_sandbox_user(cfg) if kwargs.get("as_sandbox") else None)
    text = done.stdout.decode("utf-8", "replace")
    if check and done.returncode != 0:
        raise RuntimeError("git %s failed: %s" % (" ".join(args), text.strip()))
    return done.returncode, text


def as_sandbox_user(cfg):
    def drop():
        os.setgroups([])
        os.setgid(cfg.sandbox_gid)
        os.setuid(cfg.sandbox_uid)
    return drop


def lines(text):
    return [line for line in text.splitlines() if line]


def copy_image_tree(source, workdir):
    """The image's work tree, as the image has it, into this container's own (tmpfs) work tree."""
    done = subprocess.run(["cp", "-a", source + "/.", workdir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError("could not copy the image's work tree: %s" % done.stdout.decode("utf-8", "replace"))


def canonical_state(cfg):
    git(cfg, "reset", "--hard", "-q", cfg.base_revision)
    git(cfg, "clean", "-ffdxq")
    for path in cfg.overlays:
        git(cfg, "apply", "--whitespace=nowarn", path)
    if cfg.overlays:
        commit(cfg, "asyncodebench overlays")
    return git(cfg, "rev-parse", "HEAD")[1].strip()


def commit(cfg, message):
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


def give_to_sandbox(cfg):
    """The work tree belongs to the sandbox user; `.git` stays root's. The root folder is root's, world-writable
    and sticky (like /tmp), so the sandbox can create files there but cannot rename or replace `.git`."""
    uid, gid = cfg.sandbox_uid, cfg.sandbox_gid
    for top in os.listdir(cfg.workdir):
        if top == ".git":
            continue
        path = os.path.join(cfg.workdir, top)
        os.lchown(path, uid, gid)
        if os.path.isdir(path) and not os.path.islink(path):
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    os.lchown(os.path.join(root, name), uid, gid)
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


def changed_since(cfg, ref, pathspec):
    tracked = lines(git(cfg, "diff", "--name-only", "--no-renames", ref, "--", *pathspec)[1])
    untracked = lines(git(cfg, "ls-files", "--others", "--", *pathspec)[1])
    return tracked, untracked


def put_back(cfg, ref, paths):
    """Return each path to its state at `ref`: checked out if it existed there, deleted if not."""
    for path in paths:
        if git(cfg, "cat-file", "-e", "%s:%s" % (ref, path), check=False)[0] == 0:
            git(cfg, "checkout", ref, "--", path)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
            remove_empty_parents(path)


def remove_empty_parents(path):
    """Folders a removed file leaves empty would still import as namespace packages (`src/pytest/`)."""
    parent = os.path.dirname(path)
    if parent:
        try:
            os.removedirs(parent)
        except OSError:  # not empty: the first folder that is not is kept, and so is every one above it
            pass


def escapes(cfg, path):
    """Why a changed path is unsafe, or None: a `.git` component, or a symlink that resolves outside the tree."""
    parts = path.split("/")
    if any(part.lower() == ".git" for part in parts):
        return "git directory"
    full = os.path.join(cfg.workdir, path)
    if os.path.islink(full):
        inside = os.path.relpath(os.path.realpath(full), cfg.workdir).split(os.sep)
        if inside[0] == ".." or inside[0].lower() == ".git":
            return "symlink leaving the work tree"
    return None


def is_hazard(path, shadowing):
    """Whether pytest or Python could load this changed path at start-up or collection."""
    parts = path.split("/")
    if parts[-1] in CONFIG_NAMES or parts[-1].endswith(BYTECODE_SUFFIXES) or path in shadowing:
        return True
    return any(part.split(".")[0] in STARTUP_STEMS or part.endswith(METADATA_SUFFIXES) or part in CACHE_PARTS
               for part in parts)


def import_roots(cfg):
    """The work tree's import roots: the repository root, `src/`, and folders of the tree on the image's
    PYTHONPATH (some images put a source folder of the repository there)."""
    extra = [os.path.relpath(p, cfg.workdir) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p.startswith(cfg.workdir + "/")]
    return list(cfg.import_roots) + [p for p in extra if p not in cfg.import_roots]


def shadowing_paths(cfg, canonical, paths, shadowed, roots):
    """Changed paths under a NEW top-level module of an import root (the repository root, `src/`) whose name is
    one the image already imports from elsewhere (standard library, site-packages, pytest, its plugins): a module
    that would be imported in their place."""
    found = set()
    for root in roots:
        prefix = root + "/" if root else ""
        base_tops = set(lines(git(cfg, "ls-tree", "--name-only", canonical, prefix or ".")[1]))
        for path in paths:
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):]
            top = rest.split("/")[0]
            is_module = "/" in rest or top.endswith((".py", ".so", ".pyd"))
            if is_module and top.split(".")[0] in shadowed and prefix + top not in base_tops:
                found.add(path)
    return found


def main():
    cfg = Config(json.load(open(os.path.join(sys.argv[1], "prepare.json"))))
    cfg.io_dir = sys.argv[1]
    copy_image_tree(cfg.base_dir, cfg.workdir)
    os.chdir(cfg.workdir)
    record = {"base_head": cfg.base_revision}
    canonical = canonical_state(cfg)
    record["canonical_ref"] = canonical
    image = record_image(cfg)
    installed = image.pop("importable")  # the standard library's and site-packages' top-level names
    record["image"] = image
    give_to_sandbox(cfg)
    record["patch_status"], record["patch_log"] = apply_patch(cfg)

    tracked, untracked = changed_since(cfg, canonical, ["."])
    unsafe = sorted(set(p for p in tracked + untracked if escapes(cfg, p)))
    if unsafe or record["patch_status"] == "failed":
        git(cfg, "reset", "--hard", "-q", canonical)
        git(cfg, "clean", "-ffdxq")
        if unsafe:
            record["patch_status"] = "unsafe_paths"
    record["unsafe_paths"] = unsafe

    tracked, untracked = changed_since(cfg, canonical, cfg.protected_paths)
    put_back(cfg, canonical, tracked + untracked)
    record["restored_paths"], record["untracked_paths_removed"] = tracked, untracked

    tracked, untracked = changed_since(cfg, canonical, ["."])
    shadowed = set(installed) | set(cfg.shadow_names) | set(m.split(".")[0].split(":")[0] for _, m in image["plugins"])
    shadowing = shadowing_paths(cfg, canonical, tracked + untracked, shadowed, import_roots(cfg))
    hazards = [p for p in tracked + untracked if is_hazard(p, shadowing)]
    put_back(cfg, canonical, hazards)
    record["hazards_removed"] = hazards
    record["changed_paths"] = [p for p in tracked + untracked if p not in hazards]
    commit(cfg, "asyncodebench evaluated state")
    give_to_sandbox(cfg)
    for folder in (cfg.out_dir, cfg.home_dir):
        os.makedirs(folder)
        os.chown(folder, cfg.sandbox_uid, cfg.sandbox_gid)
        os.chmod(folder, stat.S_IRWXU)
    sys.stdout.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
