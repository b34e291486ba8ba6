#!/usr/bin/env python3
"""Fails when a test could read files from outside the repository: ctest `repo_self_contained` (label unit).

Users' clones have nothing beside them (no `../shared`), so every fixture a test reads must be in the repository or
in the build tree. Two checks, each able to fail (`--self-test` plants a violation for both and expects them caught):
  - static: no tracked file (CMake, C++, Python, scripts, docs) names a sibling folder of the clone (`../shared`,
    `shared/testdata`), climbs out of the source root (`${PROJECT_SOURCE_DIR}/..`, `VOLTSERVE_SOURCE_DIR / ".."`,
    `ROOT, ".."`) or names this workplace's absolute paths (`/work/...`). bench/RESULTS.md is a log of past runs and
    is exempt.
  - generated: every absolute path in the build's CTestTestfile.cmake files (test commands, arguments,
    environment) lies inside the source or build tree, or outside the clone's parent folder (system tools such as
    /usr/bin/python3). A path beside the clone (the parent folder's other children) fails.
Usage: tools/check_self_contained.py --source DIR [--build DIR] [--self-test]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

EXEMPT = {"bench/RESULTS.md", "tools/check_self_contained.py"}
# Split so that this file does not match its own patterns.
SIBLING = "." + "./shared"
STATIC_PATTERNS = [
    (re.compile(re.escape(SIBLING) + r"\b"), "names ../shared beside the clone"),
    (re.compile(r"shared/test" + r"data"), "names shared/testdata (outside the repository)"),
    (re.compile(r"(PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}/\.\."), "climbs out of the source root"),
    (re.compile(r"VOLTSERVE_SOURCE_DIR\)?\s*(/|\+)\s*\"/?\.\.(/|\")"), "climbs out of the source root"),
    (re.compile(r"\bROOT,\s*\"\.\.\""), "climbs out of the source root"),
    (re.compile(r"(?<![\w./-])/wo" + r"rk/"), "names an absolute path of this workplace"),
]
ABS_PATH = re.compile(r"(?<![\w.$}-])/[\w.+@%-]+(?:/[\w.+@%-]+)*")


def tracked_files(source):
    try:
        out = subprocess.run(["git", "-C", source, "ls-files", "-z"], check=True, capture_output=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(source):
            dirnames[:] = [d for d in dirnames if d != ".git" and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(dirpath, f), source) for f in filenames]
        return files


def scan_text(name, text):
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern, why in STATIC_PATTERNS:
            if pattern.search(line):
                problems.append(f"{name}:{lineno}: {why}: {line.strip()[:160]}")
    return problems


def static_check(source):
    problems = []
    for rel in tracked_files(source):
        if rel in EXEMPT:
            continue
        path = os.path.join(source, rel)
        try:
            with open(path, "rb") as f:
                data = f.read(4 << 20)
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue  # binary fixture (safetensors, archives)
        problems += scan_text(rel, data.decode("utf-8", errors="replace"))
    return problems


def inside(path, *roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def scan_ctest_text(name, text, source, build):
    # CMake may write the tree as given or resolved: accept both spellings of source and build.
    trees = {source, build, os.path.realpath(source), os.path.realpath(build)}
    parents = {os.path.dirname(t) for t in (source, os.path.realpath(source))}
    problems = []
    for m in ABS_PATH.finditer(text):
        p = os.path.normpath(m.group(0))
        if inside(p, *trees):
            continue
        if inside(p, *parents) or "shared/test" + "data" in p:
            problems.append(f"{name}: a test uses {m.group(0)}, outside the repository and its build tree")
    return problems


def generated_check(source, build):
    problems, n_files = [], 0
    for dirpath, _, filenames in os.walk(build):
        if "CTestTestfile.cmake" in filenames:
            n_files += 1
            path = os.path.join(dirpath, "CTestTestfile.cmake")
            with open(path, encoding="utf-8", errors="replace") as f:
                problems += scan_ctest_text(os.path.relpath(path, build), f.read(), source, build)
    if n_files == 0:
        problems.append(f"{build}: no CTestTestfile.cmake found (not a configured build tree?)")
    return problems


def self_test():
    """Both checks must catch a planted violation and pass clean text."""
    ok = True
    planted = {
        "tests/x/CMakeLists.txt": 'set(D "${PROJECT_SOURCE_DIR}/' + SIBLING[3:] + '/testdata/x")',
        "tests/x/a.cpp": 'fs::path(VOLTSERVE_SOURCE_DIR) / "../other"',
        "tools/a.py": 'os.path.join(ROOT, "..", "x")',
        "README.md": "read it from `" + SIBLING + "/x`",
    }
    for name, text in planted.items():
        if not scan_text(name, text):
            print(f"self-test: FAIL: the static check missed {name}: {text}")
            ok = False
    if scan_text("tests/x/CMakeLists.txt", 'set(D "${PROJECT_SOURCE_DIR}/tests/fixtures/x")'):
        print("self-test: FAIL: the static check flags a path inside the repository")
        ok = False
    with tempfile.TemporaryDirectory() as parent:
        source, build = os.path.join(parent, "repo"), os.path.join(parent, "repo", "build")
        bad = f'add_test(t "/usr/bin/python3" "{source}/tools/x.py" "{source}/../shared/tok")'
        good = f'add_test(t "/usr/bin/python3" "{source}/tools/x.py" "--dir" "{build}/fixtures/qwen3")'
        if not scan_ctest_text("CTestTestfile.cmake", bad, source, build):
            print("self-test: FAIL: the generated-file check missed a path beside the clone")
            ok = False
        if scan_ctest_text("CTestTestfile.cmake", good, source, build):
            print("self-test: FAIL: the generated-file check flags paths inside source/build or system tools")
            ok = False
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", help="a configured build tree: also check its generated test commands")
    ap.add_argument("--self-test", action="store_true", help="first check that planted violations are caught")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    if args.self_test and not self_test():
        return 1
    problems = static_check(source)
    if args.build:
        problems += generated_check(source, os.path.abspath(args.build))
    for p in problems:
        print(p)
    if problems:
        print(f"check_self_contained: FAIL: {len(problems)} reference(s) outside the repository")
        return 1
    print("check_self_contained: OK: no test reads outside the repository and its build tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
