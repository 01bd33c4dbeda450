"""`python -m snode.tools.mypyc_build [--pure | --status | --require]`: compile snode's hot
modules (`common.compiled.COMPILABLE`) with mypyc, in place, beside their sources (`make compiled`).

Optional by design: on a machine without a C compiler or Python's headers it says so in one line
and exits 0, and snode runs as pure Python, as it always can. `--require` makes that exit 3
(NO_TOOLCHAIN: `make test-compiled` says it skipped, rather than pass on the pure modules). A build that
fails (mypyc refusing a module, the compiler an error) removes what it made and exits 1.
`--pure` removes the compiled modules; `--status` prints which ones run compiled.
The C sources and objects go to build/mypyc/; the extension modules to src/snode/ (git ignores both).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from snode.common.compiled import COMPILABLE, GROUP

SRC = Path(__file__).resolve().parents[2]
"""src/, where the editable install imports snode from."""
BUILD = SRC.parent / "build" / "mypyc"
NO_TOOLCHAIN = 3
"""`--require`'s exit status where nothing can be compiled (`make test-compiled` then skips)."""


def missing_toolchain() -> str | None:
    """Why nothing can be compiled here (no C compiler, no Python headers), or None."""
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}) on PATH"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        return f"no Python headers ({headers})"
    try:
        import mypyc.build  # noqa: F401  (in the dev lock, with mypy)
    except ImportError:
        return "no mypyc (pip install mypy)"
    return None


def built_files() -> list[Path]:
    """The extension modules under src/snode (ours: snode ships none of its own)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(p for p in (SRC / "snode").rglob("*") if p.name.endswith(suffixes))


def remove_built() -> int:
    files = built_files()
    for path in files:
        path.unlink()
    return len(files)


def build() -> None:
    """Compile COMPILABLE into src/snode (raises what mypyc or the compiler raised)."""
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]

    paths = [name.replace(".", "/") + ".py" for name in COMPILABLE]
    here = os.getcwd()
    os.chdir(SRC)  # mypyc names the modules by their paths from here; --inplace writes them here
    try:
        extensions = mypycify([*paths, "--cache-dir", str(BUILD / "mypy_cache")], group_name=GROUP,
                              target_dir=str(BUILD / "c"))
        setup(name="snode-compiled", ext_modules=extensions,
              script_args=["-q", "build_ext", "--inplace", "--build-temp", str(BUILD / "tmp")])
    finally:
        os.chdir(here)
    for path in built_files():
        path.touch()  # (setuptools keeps a reused build's old time: `compiled.stale` reads it)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m snode.tools.mypyc_build", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--pure", action="store_true", help="remove the compiled modules")
    mode.add_argument("--status", action="store_true", help="print which modules run compiled")
    parser.add_argument("--require", action="store_true", help="exit 1 if nothing can be compiled here")
    args = parser.parse_args(argv)
    if args.status:
        from snode.common.compiled import describe
        print(describe())
        return 0
    if args.pure:
        print(f"compiled: removed {remove_built()} compiled module files; snode runs as pure Python")
        return 0
    why = missing_toolchain()
    if why is not None:
        print(f"compiled: {why}, so nothing is compiled; snode runs as pure Python")
        return NO_TOOLCHAIN if args.require else 0
    remove_built()
    try:
        build()
    except (Exception, SystemExit) as err:  # setuptools reports a compiler's failure as SystemExit
        remove_built()
        print(f"compiled: the build failed ({err}); snode runs as pure Python", file=sys.stderr)
        return 1
    print(f"compiled: {', '.join(COMPILABLE)} (mypyc, in {SRC / 'snode'}; `make pure` removes them)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
